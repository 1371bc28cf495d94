"""params.yaml is written in the style DVC's writer keeps (block mappings and lists, empty nulls, block
scalars for text), so `dvc exp run -S key=value` changes that key's line and leaves the rest of the file,
comments included, byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import committed_params_text
from tests.dvcproject import dvc, init_repos, run

pytestmark = pytest.mark.slow
# one cheap stage reading the keys the tests set, so that `dvc exp run` has something to run
PIPELINE = """stages:
  echo:
    cmd: python -c "print('ran')" > out.txt
    params:
      - confidence.group_size
      - eval.k
      - debate.problems
      - datasets.aime_2025.source.path
    outs:
      - out.txt
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("params_style")
    (root / "params.yaml").write_text(committed_params_text(), encoding="utf-8")
    (root / "dvc.yaml").write_text(PIPELINE, encoding="utf-8")
    init_repos(root)
    (root / ".gitignore").write_text("/out.txt\n", encoding="utf-8")
    run(root, "git", "add", "-A")
    run(root, "git", "commit", "-qm", "baseline")
    return root


def changed_lines(before: str, after: str) -> tuple[list[str], list[str]]:
    """The lines only `before` has and the lines only `after` has, when the rest is the same."""
    old, new = before.splitlines(), after.splitlines()
    head = 0
    while head < min(len(old), len(new)) and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    return old[head:len(old) - tail], new[head:len(new) - tail]


@pytest.mark.parametrize(("setting", "removed", "added"), [
    ("confidence.group_size=1024", ["  group_size: 2048"], ["  group_size: 1024"]),
    ("eval.k=[1,2,4]", ["  - 8", "  - 16", "  - 32", "  - 64", "  - 128", "  - 256", "  - 512"], []),
    ("datasets.aime_2025.source.path=data/aime.jsonl", ["      path:"], ["      path: data/aime.jsonl"]),
    ("debate.problems=[0,14]", [], ["  - 0", "  - 14"]),
])
def test_exp_run_set_param_changes_only_its_lines(project: Path, setting: str, removed: list[str],
                                                  added: list[str]) -> None:
    before = (project / "params.yaml").read_text(encoding="utf-8")
    try:
        dvc(project, "exp", "run", "-S", setting)
        after = (project / "params.yaml").read_text(encoding="utf-8")
    finally:
        run(project, "git", "checkout", "--", "params.yaml")
    assert changed_lines(before, after) == (removed, added)
    assert after.splitlines()[0] == "# yaml-language-server: $schema=params.schema.json"
