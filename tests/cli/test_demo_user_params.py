"""`make demo` and `make try` from a params.yaml a user has edited as the docs say (the live-online and study pages):
every list of dataset names in it is mapped to the demo's datasets or set aside, so check_params passes in the
scratch project, and the run says what it set aside in one line."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO_ROOT, committed_params_text
from tracevote.cli import demo
from tracevote.cli.demo_params import MAPPED_LISTS, SET_ASIDE_LISTS, deep_merge, set_aside_line
from tracevote.core.config import Params, check_params
from tracevote.core.typedconfig import spec_of

# What the live-online page (docs/live-online.md) and the study page (docs/study-report.md) have a user add
LIVE_ONLINE = {"online": {"warmup": 16, "percentiles": {"low": 90, "high": 10}, "consensus": None,
                          "live": {"datasets": ["aime_2025"], "methods": ["low"], "budget": 64, "concurrency": 8,
                                   "max_cost_usd": 5.0}}}
STUDY = {"endpoints": {"qwen-local": {
    "profile": "local", "base_url": "http://127.0.0.1:8000/v1", "name": "Qwen/Qwen3-8B", "extra_body": {},
    "api_key_env": "VLLM_API_KEY", "needs_key": False, "reasoning_effort": None, "sim": {"accuracy": 0.3},
    "pricing": {"checked": "2026-07", "input_cache_miss": 0.0, "input_cache_hit": 0.0, "output": 0.0}}},
    "deepconf": {"endpoints": ["qwen-local"]},
    "study": {"datasets": ["aime_2025"], "k": [64, 512], "reference": "deepseek"}}


def user_repo(root: Path, *, pages: bool = True) -> Path:
    """A repository whose params.yaml is the shipped one, after following both pages with `pages` (its pipeline:
    this one's)."""
    root.mkdir()
    for name in (*demo.PIPELINE_FILES, "stages", "src"):
        (root / name).symlink_to(REPO_ROOT / name)
    params = yaml.safe_load(committed_params_text())
    if pages:
        params = deep_merge(deep_merge(params, LIVE_ONLINE), STUDY)
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    check_params(root / "params.yaml", root=root)  # the user's own file passes as it is
    return root


def shared_like_folder(folder: Path) -> Path:
    """aime_2025 and aime_2024 as files (the built-in demo problems), as `make try DATA=...` reads them."""
    folder.mkdir()
    for name in ("aime_2025", "aime_2024"):
        (folder / f"{name}.jsonl").write_bytes(demo.BUILTIN_PROBLEMS.read_bytes())
    return folder


@pytest.mark.parametrize("local", [False, True], ids=["make demo", "make try"])
def test_the_scratch_params_pass_check_params_after_the_live_and_study_pages(tmp_path: Path, local: bool) -> None:
    repo = user_repo(tmp_path / "repo")
    scratch = repo / "demo"
    data = shared_like_folder(tmp_path / "data") if local else None
    plan = demo.prepare(repo, scratch, demo.BUILTIN_PROBLEMS, data=data)
    params = check_params(scratch / "params.yaml", root=scratch)  # what the check_params stage runs
    assert params.online.live.datasets == () and params.study.datasets == () and params.deepconf.endpoints == ()
    assert plan.set_aside == ["online.live.datasets [aime_2025]", "study.datasets [aime_2025]",
                              "deepconf.endpoints [qwen-local]"]
    assert set_aside_line(plan.set_aside) == (
        "demo: set aside online.live.datasets [aime_2025], study.datasets [aime_2025], deepconf.endpoints "
        "[qwen-local] of your params.yaml: the demo runs every method on one simulated model, with no live run and "
        "no study")


def dataset_lists(cls: type, prefix: str = "") -> set[str]:
    """Every key of the config classes that holds a list of dataset names: a tuple of strings whose explanation
    speaks of datasets (deepconf.datasets, debate.contest_halves, online.live.datasets, ...)."""
    found = set()
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        hint = hints[field.name]
        if dataclasses.is_dataclass(hint):
            found |= dataset_lists(hint, f"{prefix}{field.name}.")
        elif hint == tuple[str, ...] and "dataset" in spec_of(field).doc:
            found.add(prefix + field.name)
    return found


def test_every_list_of_dataset_names_is_mapped_or_set_aside() -> None:
    known = {".".join(keys) for keys in (*MAPPED_LISTS, *SET_ASIDE_LISTS)}
    assert dataset_lists(Params) == known


def test_the_demo_command_says_what_it_set_aside(tmp_path: Path) -> None:
    """The line printed before `dvc repro` starts (the run itself is tests/test_workflow.py's)."""
    repo = user_repo(tmp_path / "repo")
    plan = demo.prepare(repo, repo / "demo", demo.BUILTIN_PROBLEMS)
    assert "online.live.datasets [aime_2025]" in set_aside_line(plan.set_aside)
    shipped = user_repo(tmp_path / "shipped", pages=False)
    untouched = demo.prepare(shipped, shipped / "demo", demo.BUILTIN_PROBLEMS)
    assert untouched.set_aside == [] and set_aside_line(untouched.set_aside) == ""
