"""The explorer's method pages against what they are built from: the debate transcripts against their ledger and
score_debate's results, the critiques against the ledger, the normalized steps and score_critiques' results, the
grading items against the grade stage's lines, the predictions and the critic's ledger, the study and compare tables
against their stages' JSON; a hostile reply stays text; a method that was not run gives no section."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.explorer.methods_project import HOSTILE, POOL_RUN, RUN, hostile_debate, methods_params, methods_project
from tracevote.cli.demo import write_params
from tracevote.core.config import load_params
from tracevote.critique import build as critique_build
from tracevote.debate import build as debate_build
from tracevote.explorer import critique_pages, debate_pages, grading_pages, pool_pages, table_pages
from tracevote.explorer.sitefiles import SiteWriter, read_data
from tracevote.grading.critic import parse_score

pytestmark = pytest.mark.slow

Data = Callable[[str], Any]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return methods_project(tmp_path_factory)


def built(module: ModuleType, root: Path, out: Path) -> tuple[list[dict[str, Any]], Data]:
    """`module`'s sections of the project at `root`, written by a SiteWriter into `out`, and a reader of its data."""
    writer = SiteWriter(out)
    entries = module.sections(writer, load_params(root / "params.yaml"), root)
    writer.finish()
    return entries, lambda path: read_data(out, path)


def json_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_a_debate_page_is_its_ledgers_transcript_as_score_debate_counts_it(project: Path, tmp_path: Path) -> None:
    entries, data = built(debate_pages, project, tmp_path / "site")
    assert [(e["view"], e["index"], e["simulated"]) for e in entries] == [("debate", 0, True)]
    results = json.loads((project / "metrics" / "debate_results.json").read_text())["problems"]
    index = data("debate0/index")
    assert index["simulated"] is True and len(index["problems"]) == len(results) == 12
    fields = ("gold", "final_answer", "correct", "stop", "calls", "completion_tokens", "usd")
    for row, result in zip(index["problems"], results, strict=True):
        assert row["id"] == result["problem_id"] and {f: row[f] for f in fields} == {f: result[f] for f in fields}
    _, ledger = debate_build.load_ledger(project / "debates" / "toy.json")
    for i, result in enumerate(results):
        page = data(f"debate0/p{i}")
        stored = ledger.records(result["problem_id"])
        assert [reply["text"] for reply in page["replies"]] == [stored[reply["key"]].text for reply in page["replies"]]
        assert len(page["replies"]) + (page["judge"] is not None) == result["calls"]
        assert page["importance"] == result["importance"] and page["picks"] == result["picks"]
        assert sum(r["completion_tokens"] for r in page["replies"]) + (
            page["judge"]["completion_tokens"] if page["judge"] else 0) == result["completion_tokens"]
        if page["judge"] is not None:
            assert page["judge"]["text"] == stored["rank"].text and page["judge"]["picks"] == result["picks"]
        ratings = [reply for reply in page["replies"] if reply["round"] >= 1]
        assert all(len(reply["rated"]) == len(reply["weights"]) > 0 for reply in ratings)
    assert any(data(f"debate0/p{i}")["judge"] is not None for i in range(12)), "no debate reached the judge"


def test_a_critique_page_shows_the_paragraphs_the_label_and_each_vote(project: Path, tmp_path: Path) -> None:
    entries, data = built(critique_pages, project, tmp_path / "site")
    assert [(e["view"], e["index"], e["simulated"]) for e in entries] == [("critique", 0, True)]
    results = json_lines(project / "metrics" / "critique_results.jsonl")
    steps = {row["id"]: row for row in json_lines(project / "data" / "toy_steps.jsonl")}
    _, ledger = critique_build.load_ledger(project / "critiques" / "toy_steps.json")
    index = data("critique0/index")
    assert index["n_votes"] == 3 and len(index["solutions"]) == len(results) == 12
    for i, (row, result) in enumerate(zip(index["solutions"], results, strict=True)):
        fields = ("id", "task", "label", "prediction", "match", "unanimous", "unparsable")
        assert {f: row[f] for f in fields} == {f: result[f] for f in fields}
        page = data(f"critique0/s{i}")
        assert page["paragraphs"] == steps[result["id"]]["steps"] and page["problem"] == steps[result["id"]]["problem"]
        assert [c["vote"] for c in page["critiques"]] == result["votes"]
        assert [c["boxed"] for c in page["critiques"]] == result["boxed"]
        assert [c["text"] for c in page["critiques"]] == [ledger.records(result["id"])[v].text for v in range(3)]
    metrics = json.loads((project / "metrics" / "critique.json").read_text())
    assert index["scores"]["f1_pct"] == metrics["f1_pct"]


def grading_sections(entries: list[dict[str, Any]], data: Data) -> dict[str, int]:
    """run name -> its grading section's number."""
    return {data(f"grading{entry['index']}/index")["run"]: entry["index"] for entry in entries}


def test_a_grading_item_shows_the_verdict_the_word_count_and_the_critics_reasoning(project: Path,
                                                                                  tmp_path: Path) -> None:
    entries, data = built(grading_pages, project, tmp_path / "site")
    assert {(e["view"], e["simulated"]) for e in entries} == {("grading", True)}
    n = grading_sections(entries, data)[RUN]
    lines = json_lines(project / "grading" / "runs" / f"{RUN}.jsonl")
    predictions = {row["id"]: row for row in json_lines(project / "predictions.jsonl")}
    index = data(f"grading{n}/index")
    assert index["record"] == json.loads((project / "grading" / "runs" / f"{RUN}.json").read_text())
    assert index["pool"] is None and all(row["page"] for row in index["items"])
    assert [{k: v for k, v in row.items() if k not in ("j", "page")} for row in index["items"]] == lines
    scored = 0
    for j, line in enumerate(lines):
        page = data(f"grading{n}/i{j}")
        assert {k: page[k] for k in line} == line
        assert page["thinking"] == predictions[line["id"]]["thinking"]
        if line["critic_score"] is not None:
            assert parse_score(page["critic_reply"]) == line["critic_score"]
            scored += 1
    assert scored > 0


def test_a_pool_runs_rows_lead_to_the_pools_traces_not_to_copies(project: Path, tmp_path: Path) -> None:
    entries, data = built(grading_pages, project, tmp_path / "site")
    n = grading_sections(entries, data)[POOL_RUN]
    index = data(f"grading{n}/index")
    lines = json_lines(project / "grading" / "runs" / f"{POOL_RUN}.jsonl")
    assert index["pool"] == 0 and len(index["items"]) == len(lines) == 12 * 8
    _, pool = built(pool_pages, project, tmp_path / "pools")
    traces = {row["id"]: set(pool(f"pool0/p{row['i']}")["traces"]["sample_id"])
              for row in pool("pool0/index")["problems"]}
    assert all(row["line"] in traces[row["id"]] for row in index["items"])  # each row's trace is in the pool's pages
    for row in index["items"]:  # the toy problems have no reference solution: the critic read none, no copy here
        assert row["page"] is False and not (tmp_path / "site" / "data" / f"grading{n}" / f"i{row['j']}.js").exists()


def test_the_study_and_compare_rows_are_their_stages_rows_each_linking_to_its_problems(project: Path,
                                                                                      tmp_path: Path) -> None:
    entries, data = built(table_pages, project, tmp_path / "site")
    assert [(e["view"], e["index"]) for e in entries] == [("study", 0), ("compare", 0)]
    study = json.loads((project / "metrics" / "study" / "toy" / "study.json").read_text())
    shown = data("study0/index")
    assert [{k: v for k, v in row.items() if k != "link"} for row in shown["points"]] == study["points"]
    links = {(row["model"], row["method"]): row["link"] for row in shown["points"]}
    assert links[("deepseek", "debate")] == "#/debate/0"  # the judge on the agents' endpoint: one model
    assert all(link is not None and link.startswith("#/pool/") for (_, method), link in links.items()
               if method != "debate")
    compare = json.loads((project / "metrics" / "compare" / "compare.json").read_text())
    rows = data("compare0/index")["rows"]
    assert [{k: v for k, v in row.items() if k != "link"} for row in rows] == compare["rows"]
    assert [row["link"] for row in rows if row["method"] == "debate"] == ["#/debate/0"]


def test_an_agents_hostile_reply_is_data_in_the_site_never_markup(tmp_path: Path) -> None:
    root = hostile_debate(tmp_path / "project")
    _, data = built(debate_pages, root, tmp_path / "site")
    raw = (tmp_path / "site" / "data" / "debate0" / "p0.js").read_text()
    assert "</script" not in raw and "<img" not in raw
    page = data("debate0/p0")
    assert page["stop"] == "round2" and all(reply["text"].startswith(HOSTILE) for reply in page["replies"])


@pytest.mark.parametrize("module", [debate_pages, critique_pages, grading_pages, table_pages],
                         ids=lambda module: module.__name__.rsplit(".", 1)[-1])
def test_a_method_that_was_not_run_gives_no_section(module: ModuleType, tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    write_params(root / "params.yaml", methods_params())
    entries, _ = built(module, root, tmp_path / "site")
    assert entries == [] and not (tmp_path / "site" / "data").exists()
