"""The demo's closing lines: its main outputs, one relative path a line, grouped by method; every path one that
dvc.yaml makes for the demo's dataset (so a renamed output cannot leave the listing pointing at nothing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO_ROOT
from tracevote.cli.demo import BUILTIN_PROBLEMS, demo_name, results_by_method, results_listing


def pipeline_outputs(name: str) -> set[Path]:
    """Every out, metric and plot of dvc.yaml's stages, a foreach stage's as it is for the item `name`."""
    stages: dict[str, Any] = yaml.safe_load((REPO_ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    outputs = set()
    for stage in stages.values():
        body = stage.get("do", stage)
        for kind in ("outs", "metrics", "plots"):
            for entry in body.get(kind, []):
                path = entry if isinstance(entry, str) else next(iter(entry))
                outputs.add(Path(path.replace("${item}", name)))
    return outputs


@pytest.mark.parametrize("problems", [BUILTIN_PROBLEMS, Path("my problems.jsonl")])
def test_every_listed_result_is_an_output_dvc_yaml_makes(problems: Path) -> None:
    name = demo_name(problems)
    listed = [path for paths in results_by_method(name).values() for path in paths]
    assert set(listed) <= pipeline_outputs(name), set(listed) - pipeline_outputs(name)


def test_the_listing_is_short_relative_and_grouped_by_method(tmp_path: Path) -> None:
    here = tmp_path / "repo"
    lines = results_listing(here / "demo", "demo", here).splitlines()
    assert lines[0] == "demo: done. Its results, by method:"
    headings = [line.strip() for line in lines if line.startswith("  ") and not line.startswith("    ")]
    assert headings == ["DeepConf", "Debate, and voting beside it", "Critique", "Grading"]
    paths = [line.strip() for line in lines if line.startswith("    ")]
    assert len(lines) == 1 + len(headings) + len(paths) <= 20
    assert all(path.startswith("demo/") and len(path) <= 60 for path in paths)
    grading = lines[lines.index("  Grading") + 1:]
    assert grading == ["    demo/metrics/grading.md", "    demo/plots/grading/word_counts.png"]
    assert str(tmp_path) not in "\n".join(lines)
