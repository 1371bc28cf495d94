"""The pool pages' data equal their inputs: the aggregate's per-problem results at report.k, the score table's rows
and the problems file; bad inputs stop the build with one line and keep the last site."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import orjson
import pandas as pd
import pytest
import yaml

from bench.explorer_project import HOSTILE, ToyProject, write_project
from tracevote.core.config import load_params
from tracevote.core.config_deepconf import MEASURES
from tracevote.core.errors import ConfigError, DataError
from tracevote.deepconf.results import AggregateResult
from tracevote.explorer.build import build_site
from tracevote.explorer.sitefiles import read_data


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> ToyProject:
    return write_project(tmp_path_factory.mktemp("toy"))


@pytest.fixture(scope="module")
def site(project: ToyProject) -> Path:
    summary = build_site(load_params(project.params), project.root, project.root / "explorer")
    assert summary.sections == 1 and summary.simulated
    return summary.out


def _aggregate(project: ToyProject) -> tuple[AggregateResult, int]:
    stored = orjson.loads(project.aggregate.read_bytes())
    return AggregateResult.from_json(stored["result"]), load_params(project.params).report.k


def test_the_index_lists_the_pool_as_simulated(site: Path) -> None:
    index = read_data(site, "index")
    assert index["simulated"] is True
    assert [(s["view"], s["index"], s["simulated"]) for s in index["sections"]] == [("pool", 0, True)]
    assert index["sections"][0]["label"] == "DeepConf pool: bench (deepseek)"


def test_each_problem_row_is_the_aggregate_at_report_k(project: ToyProject, site: Path) -> None:
    result, k = _aggregate(project)
    pool = read_data(site, "pool0/index")
    assert pool["k"] == k and pool["simulated"] is True
    assert [row["id"] for row in pool["problems"]] == list(project.golds)
    assert [row["gold"] for row in pool["problems"]] == [str(gold) for gold in project.golds.values()]
    expected = {(r.problem_id, r.method): r for r in result.problems if r.k == k}
    for row in pool["problems"]:
        for method in result.methods:
            truth = expected[row["id"], method]
            assert row[f"m_{method}"] == pytest.approx(100 * truth.accuracy, abs=0.005)
            assert row[f"a_{method}"] == truth.prediction
        assert row["cons_right"] == (expected[row["id"], "cons"].accuracy > 0.5)
        filters = [m for m in result.methods if "_top" in m]
        assert row["wrong_filter"] == any(expected[row["id"], m].accuracy <= 0.5 for m in filters)
        voted = {expected[row["id"], m].prediction for m in result.methods if m != "pass1"}
        assert row["disagree"] == (len(voted) > 1)


def test_pass_at_k_and_avg_at_k_are_the_aggregates_at_report_k(project: ToyProject, site: Path) -> None:
    result, k = _aggregate(project)
    pool = read_data(site, "pool0/index")
    over = result.pass_at_k_at(k)
    assert pool["pass_at_k"] == {"pass_at_k": pytest.approx(100 * over.pass_at_k, abs=0.005),
                                 "avg_at_k": pytest.approx(100 * over.avg_at_k, abs=0.005)}
    expected = {row.problem_id: row for row in result.pass_at_k_problems if row.k == k}
    for i, row in enumerate(pool["problems"]):
        truth = expected[row["id"]]
        page = read_data(site, f"pool0/p{i}")["pass_at_k"]
        for shown in (row, page):
            assert shown["pass_at_k"] == pytest.approx(100 * truth.pass_at_k, abs=0.005)
            assert shown["avg_at_k"] == pytest.approx(100 * truth.avg_at_k, abs=0.005)
            assert (shown["samples"], shown["correct"]) == (truth.samples, truth.correct)


def test_each_problem_page_holds_its_score_rows(project: ToyProject, site: Path) -> None:
    scores = pd.read_parquet(project.scores)
    pool = read_data(site, "pool0/index")
    for row in pool["problems"]:
        page = read_data(site, f"pool0/p{row['i']}")
        rows = scores[scores["problem_id"] == row["id"]]
        traces = page["traces"]
        assert traces["sample_id"] == rows["sample_id"].tolist()
        assert traces["answer"] == [None if pd.isna(a) else int(a) for a in rows["answer"]]
        assert traces["correct"] == rows["correct"].tolist()
        assert traces["n_tokens"] == rows["n_tokens"].tolist()
        for measure in MEASURES:
            for got, value in zip(traces[measure], rows[measure], strict=True):
                assert got == (None if pd.isna(value) else pytest.approx(value, abs=5e-5))
        valid = rows[rows["valid"]]
        counts = Counter(int(a) for a in valid["answer"])
        assert {d["answer"]: d["count"] for d in page["distribution"]} == counts
        assert [d["count"] for d in page["distribution"]] == sorted(counts.values(), reverse=True)
        assert {d["answer"] for d in page["distribution"] if d["right"]} <= {project.golds[row["id"]]}
        assert row["traces"] == len(rows) and row["valid"] == len(valid)


def test_the_problem_text_is_kept_as_written(project: ToyProject, site: Path) -> None:
    page = read_data(site, "pool0/p0")
    assert page["problem"] == HOSTILE
    assert "<" not in (site / "data" / "pool0" / "p0.js").read_text()


def test_a_real_pool_has_no_banner(tmp_path: Path) -> None:
    project = write_project(tmp_path, problems=2, traces=8, simulated=False, ks=(1, 4))
    stored = orjson.loads(project.aggregate.read_bytes())
    project.aggregate.write_bytes(orjson.dumps({**stored, "simulated": False}))  # as a real pool's aggregate says
    out = build_site(load_params(project.params), project.root, tmp_path / "explorer").out
    assert read_data(out, "index")["simulated"] is False
    assert read_data(out, "pool0/index")["simulated"] is False


def test_report_k_the_aggregate_lacks_is_refused(project: ToyProject, tmp_path: Path) -> None:
    data = yaml.safe_load(project.params.read_text())
    data["eval"]["k"] = [1, 2, 4, 16]  # eval.k changed since the aggregate ran
    data["report"]["k"] = 2
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"report.k 2: data/aggregate/bench.json has results at K = 1, 4, 16"):
        build_site(load_params(params), project.root, tmp_path / "explorer")
    assert not (tmp_path / "explorer").exists()


def test_a_missing_aggregate_stops_the_command_and_keeps_the_site(project: ToyProject, tmp_path: Path) -> None:
    root = tmp_path / "project"
    shutil.copytree(project.root, root, ignore=shutil.ignore_patterns("explorer"))
    command = [sys.executable, "-m", "tracevote", "view"]
    subprocess.run(command, cwd=root, check=True, capture_output=True)
    (root / "data" / "aggregate" / "bench.json").unlink()
    failed = subprocess.run(command, cwd=root, capture_output=True, text=True)
    assert failed.returncode != 0
    assert failed.stderr.strip().splitlines() == [
        "error: data/aggregate/bench.json: no aggregate of the deepseek pool of bench yet; run "
        "`dvc repro aggregate@bench` first"]
    assert read_data(root / "explorer", "pool0/index")["problems"]
    assert sorted(p.name for p in root.iterdir()) == ["data", "explorer", "params.yaml"]


def test_a_study_model_is_shown_where_its_aggregate_exists(project: ToyProject, tmp_path: Path) -> None:
    root = tmp_path / "project"
    shutil.copytree(project.root, root, ignore=shutil.ignore_patterns("explorer"))
    data = yaml.safe_load(project.params.read_text())
    data["deepconf"]["endpoints"] = ["other"]
    data["endpoints"]["other"] = {**data["endpoints"]["deepseek"], "sim": {}}
    (root / "params.yaml").write_text(yaml.safe_dump(data))
    params = load_params(root / "params.yaml")
    assert read_data(build_site(params, root, root / "explorer").out, "index")["sections"][-1]["index"] == 0
    for name in ("scores", "aggregate"):
        (root / "study" / "other" / name).mkdir(parents=True)
    for source, target in ((root / "data" / "scores" / "bench.parquet", "scores/bench.parquet"),
                           (root / "data" / "aggregate" / "bench.json", "aggregate/bench.json")):
        shutil.copy(source, root / "study" / "other" / target)
    sections = read_data(build_site(params, root, root / "explorer").out, "index")["sections"]
    assert [s["label"] for s in sections] == ["DeepConf pool: bench (deepseek)", "DeepConf pool: bench (other)"]


def test_an_unknown_aggregate_shape_is_a_data_error(project: ToyProject, tmp_path: Path) -> None:
    root = tmp_path / "project"
    shutil.copytree(project.root, root, ignore=shutil.ignore_patterns("explorer"))
    (root / "data" / "aggregate" / "bench.json").write_text("[1, 2]")
    with pytest.raises(DataError, match=r"data/aggregate/bench\.json: not an aggregate stage's output"):
        build_site(load_params(project.params), root, root / "explorer")
