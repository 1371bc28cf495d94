"""The README stays a short first hour: at most 400 lines, a contents list whose anchors resolve, and every
relative link pointing at a file of the repository or a page of the docs site. (`make test` builds the site
itself with `mkdocs build --strict`, which checks the site's own links.)

Every shell command and YAML snippet of README.md and docs/ is checked (tests/docsnippets.py says how), and the
checker is shown to fail on stale ones; the blocks marked to run are run in tests/test_docs_commands.py."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from tests.conftest import committed_params_text
from tests.docsnippets import (
    DOC_FILES,
    Checker,
    Snippet,
    every_snippet,
    params_snippets,
    shell_text,
    snippets,
    yaml_problems,
)
from tracevote.cli.main import build_parser

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
MAX_README_LINES = 400
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
EXTERNAL = ("http://", "https://", "mailto:")


def prose_lines(path: Path) -> list[str]:
    """The file's lines outside fenced code blocks (a `# comment` in a bash block is no heading)."""
    lines, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def github_anchor(heading: str) -> str:
    """GitHub's anchor for a heading: "Real models: DeepSeek, OpenAI" -> "real-models-deepseek-openai"."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor, a repeated one numbered as GitHub numbers it (-1, -2, ...)."""
    seen: dict[str, int] = {}
    found = set()
    for line in prose_lines(path):
        match = re.match(r"#{1,6} (.+)", line)
        if match:
            anchor = github_anchor(match.group(1))
            found.add(anchor if anchor not in seen else f"{anchor}-{seen[anchor]}")
            seen[anchor] = seen.get(anchor, 0) + 1
    return found


def links(path: Path) -> list[str]:
    return [target for line in prose_lines(path) for target in LINK.findall(line)]


def contents_anchors() -> list[str]:
    """The targets of the bullets under the README's "## Contents" heading."""
    lines = prose_lines(README)
    start = lines.index("## Contents") + 1
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("## "))
    return [target for line in lines[start:end] for target in LINK.findall(line)]


def test_the_readme_is_at_most_400_lines() -> None:
    count = len(README.read_text(encoding="utf-8").splitlines())
    assert count <= MAX_README_LINES, f"README.md has {count} lines; move detail to a page under docs/"


def test_the_contents_list_every_section_and_each_anchor_resolves() -> None:
    listed = contents_anchors()
    sections = [github_anchor(line[3:]) for line in prose_lines(README)
                if line.startswith("## ") and line != "## Contents"]
    assert listed == [f"#{anchor}" for anchor in sections]
    assert {anchor.removeprefix("#") for anchor in listed} <= anchors(README)


@pytest.mark.parametrize("target", sorted({t for t in links(README) if not t.startswith(EXTERNAL)}))
def test_each_relative_link_of_the_readme_points_at_a_file_or_docs_page(target: str) -> None:
    path, _, anchor = target.partition("#")
    if not path:
        assert anchor in anchors(README), f"README.md links #{anchor}, which no heading makes"
        return
    file = REPO / path
    assert file.resolve().is_relative_to(REPO), f"README.md links {target}, outside the repository"
    assert file.exists(), f"README.md links {target}, which does not exist"
    if anchor:
        assert anchor in anchors(file), f"README.md links {target}: {path} has no heading making #{anchor}"


COMMANDS = [snippet for snippet in every_snippet() if shell_text(snippet) is not None]
PARAMS_SNIPPETS = [snippet for path in DOC_FILES for snippet in params_snippets(path)]


@pytest.fixture(scope="module")
def checker(tmp_path_factory: pytest.TempPathFactory) -> Checker:
    return Checker(committed_params_text(), tmp_path_factory.mktemp("docs"))


def command_problems(snippet: Snippet, checker: Checker) -> list[str]:
    return checker.problems(shell_text(snippet) or "", whole=snippet.lang != "inline")


@pytest.mark.parametrize("snippet", COMMANDS, ids=lambda snippet: snippet.where)
def test_each_documented_command_names_what_exists(snippet: Snippet, checker: Checker) -> None:
    assert command_problems(snippet, checker) == [], snippet.text


@pytest.mark.parametrize("snippet", PARAMS_SNIPPETS, ids=lambda snippet: snippet.where)
def test_each_yaml_snippet_passes_check_params(snippet: Snippet, checker: Checker) -> None:
    assert yaml_problems(snippet, checker) == [], snippet.text


def test_the_docs_hold_commands_and_params_snippets_to_check() -> None:
    blocks = [snippet for snippet in COMMANDS if snippet.lang != "inline"]
    assert len(blocks) >= 20 and len(COMMANDS) > len(blocks) and len(PARAMS_SNIPPETS) >= 5
    assert any(snippet.marker == "run" for snippet in blocks), "no block is marked <!-- docs-check: run -->"


STALE_PAGE = """# A stale page

<!-- docs-check: run -->
```bash
.venv/bin/python -m tracevote estimate --n-pools 8
make repro ARGS=normalise@aime_2025
make tri DATA=../shared/data
make try DATAS=../shared/data
dvc exp run -S confidence.windw=16 report
dvc exp show --keeep 'pass1'
pip-audit --strict
nice -n 15 .venv/bin/python stages/score.py --problem data/x.jsonl
python -m piip install pyyaml
```

```yaml
model:
  base_url: http://gpu-node-1:8000/v1
```

Run `dvc repro normalise@aime_2025`, then `python -m tracevote pool imprt samples.jsonl`.
"""

STALE_PROBLEMS = [
    ["python -m tracevote estimate --n-pools 8: python -m tracevote: error: unrecognized arguments: --n-pools 8",
     "dvc repro: no stage 'normalise@aime_2025' in dvc.yaml"],
    ["make: no target 'tri' in the Makefile", "make: the Makefile reads no variable DATAS",
     "-S confidence.windw=16: confidence.windw: unknown key (known: bottom_fraction, compare_signals, group_size, "
     "tail_tokens, token, top_k)",
     "dvc exp show --keeep pass1: unrecognized arguments: --keeep pass1",
     "pip-audit: not a command the checker knows",
     "python stages/score.py: the script has no option --problem", "python -m piip: not a module the checker knows"],
]


def test_the_checker_fails_on_stale_snippets(tmp_path: Path, checker: Checker) -> None:
    page = tmp_path / "stale.md"
    page.write_text(STALE_PAGE, encoding="utf-8")
    found = snippets(page)
    block, fragment, *inline = found
    assert block.marker == "run" and fragment.lang == "yaml" and [s.lang for s in inline] == ["inline"] * 2
    problems = command_problems(block, checker)
    for expected in [*STALE_PROBLEMS[0][:1], *STALE_PROBLEMS[1]]:
        assert any(problem.startswith(expected) for problem in problems), (expected, problems)
    assert "make repro ARGS=normalise@aime_2025" not in problems  # make passes ARGS on: dvc judges the stage
    assert yaml_problems(fragment, checker) == ["model.base_url: unknown key (known: backend, sim)"]
    assert command_problems(inline[0], checker) == ["dvc repro: no stage 'normalise@aime_2025' in dvc.yaml"]
    assert "invalid choice: 'imprt'" in command_problems(inline[1], checker)[0]
    assert checker.problems("make repro ARGS='a\n") != []  # not even shell
    assert checker.problems("make repro ARGS='a", whole=False) == ["not valid shell: No closing quotation"]


def help_texts(parser: argparse.ArgumentParser) -> list[str]:
    """Every help text and description of a parser and its subcommands."""
    texts = [parser.description or ""]
    for action in parser._actions:
        texts.append(action.help or "")
        for sub in getattr(action, "choices", None) or {}:
            if isinstance(action.choices, dict):
                texts += help_texts(action.choices[sub])
    return texts


def test_the_command_line_help_points_at_docs_pages_that_exist() -> None:
    pointers = [pointer for text in help_texts(build_parser()) for pointer in re.findall(r"docs/[\w/.-]+\.md\S*", text)]
    assert pointers, "no help text points at a docs page"
    for pointer in pointers:
        page, _, anchor = pointer.rstrip(").,;").partition("#")
        assert (REPO / page).is_file(), f"--help points at {pointer}, which does not exist"
        assert not anchor or anchor in anchors(REPO / page), f"--help points at {pointer}: no such heading"
    readme = [text for text in help_texts(build_parser()) if "README" in text]
    assert readme == [], f"help texts point at README sections, which move: {readme}"
