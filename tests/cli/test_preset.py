"""`python -m tracevote preset small`: the few keys of a first real `dvc repro` on the simulated model, written into
params.yaml with its comments kept, checked before anything is written; and the README's offline block, run exactly
as written in a fresh clone, on files named as the shared folder names them."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO_ROOT, committed_params_text, hang_guard_s
from tests.dvcproject import project_env
from tests.fresh_clone import VENV, make, set_up_clone, venv_stamp  # noqa: F401 (a fixture)
from tracevote.cli import demo
from tracevote.cli.main import main
from tracevote.cli.preset import PRESETS, apply_preset
from tracevote.core.config import check_params
from tracevote.core.errors import ConfigError

README = REPO_ROOT / "README.md"


def test_small_writes_its_keys_keeps_the_comments_and_passes_check_params(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "params.yaml"
    path.write_text(committed_params_text(), encoding="utf-8")
    assert main(["preset", "small", "--params", str(path)]) == 0
    params = check_params(path, root=tmp_path)
    assert params.model.backend == "sim" and params.pool.n_pool == 16 and params.eval.k == (1, 2, 4, 8, 16)
    assert (params.report.k, params.confidence.group_size, params.model.sim.mean_tokens) == (16, 32, 150)
    text = path.read_text(encoding="utf-8")
    assert "# traces per problem; raising it tops the pool up" in text  # comments stay
    printed = capsys.readouterr().out.splitlines()
    assert "preset small: model.backend: sim (was openai)" in printed and len(printed) == len(PRESETS["small"]) + 1


def test_a_study_k_outside_the_small_ladder_becomes_every_k(tmp_path: Path) -> None:
    params = yaml.safe_load(committed_params_text())
    params["study"] = {**(params.get("study") or {}), "k": [64, 512]}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    main(["preset", "small", "--params", str(path)])
    assert check_params(path, root=tmp_path).study.k == ()


def test_a_file_the_preset_cannot_mend_is_left_as_it_was(tmp_path: Path) -> None:
    text = committed_params_text().replace("pool:\n", "pool:\n  n_poll: 3\n", 1)  # a typo the preset does not touch
    path = tmp_path / "params.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=r"would not pass check_params; nothing written:\n.*n_poll"):
        apply_preset(path, "small")
    assert path.read_text(encoding="utf-8") == text


def readme_offline_block() -> list[str]:
    """The commands of the README's block that runs the real project offline."""
    text = README.read_text(encoding="utf-8")
    block = re.search(r"To run the real project offline.*?```bash\n(.*?)```", text, re.S)
    assert block, "README.md: no block after 'To run the real project offline'"
    return [line.split("#")[0].strip() for line in block.group(1).splitlines() if line.strip()]


def test_the_readme_block_sets_the_simulated_model() -> None:
    assert readme_offline_block() == [
        ".venv/bin/python -m tracevote datasets local ../shared/data",
        ".venv/bin/python -m tracevote preset small",
        "make repro"]


@pytest.mark.slow
def test_the_readme_offline_block_runs_as_written_in_a_fresh_clone(
        tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, venv_stamp: None) -> None:  # noqa: F811
    """`../shared/data` beside the clone holds the built-in demo files under the shared folder's names."""
    clone = set_up_clone(tmp_path_factory, tmp_path / "work" / "tracevote")
    shared = tmp_path / "work" / "shared" / "data"
    shared.mkdir(parents=True)
    for name in ("aime_2025.jsonl", "aime_2024.jsonl"):
        shutil.copy(demo.BUILTIN_PROBLEMS, shared / name)
    shutil.copy(demo.BUILTIN_STEPS, shared / "processbench_gsm8k.jsonl")
    (clone / ".venv").symlink_to(VENV)  # `make setup` made it
    *commands, repro = readme_offline_block()
    for command in commands:
        done = subprocess.run(command, shell=True, cwd=clone,
                              env=project_env(), capture_output=True, text=True, timeout=hang_guard_s())
        assert done.returncode == 0, done.stdout + done.stderr
    assert repro == "make repro"
    result = make(clone, "repro")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = json.loads((clone / "metrics" / "deepconf" / "aime_2025" / "summary.json").read_text(encoding="utf-8"))
    assert summary["simulated"] is True
    assert (clone / "metrics" / "debate.md").is_file() and (clone / "metrics" / "critique.md").is_file()
