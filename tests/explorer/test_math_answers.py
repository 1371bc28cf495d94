"""A math pool's pages show the answers its traces wrote, not the score table's class numbers: each class as the box
of its first trace (Math-Verify-equal answers as one string), in the data files and, in headless Chromium, on the
index, the problem page and a trace's page, as text; without the pool's samples the class numbers stay."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pandas as pd
import pytest

from tests.explorer.browser import open_page
from tests.explorer.math_project import DATASET, HOSTILE_ANSWER, TRACES, MathProject, build_math_project
from tracevote.deepconf.results import AggregateResult
from tracevote.explorer.build import build_site
from tracevote.explorer.sitefiles import read_data

HALF = r"\frac{1}{2}"
# problem -> each class code's text: its first trace's box ("0.5", "\dfrac12", "2/5" and "7.0" join an earlier class)
CLASS_TEXTS = {"half": {0: HALF, 1: "0.4"}, "seven": {0: "7", 1: HOSTILE_ANSWER, 2: "8", 3: "9"}}
NOT_SHOWN = ("0.5", r"\dfrac12", "2/5", "7.0")
# problem -> the answers of the valid traces, most frequent first: (text, count, right)
DISTRIBUTION = {"half": [(HALF, 4, True), ("0.4", 3, False)],
                "seven": [("7", 2, True), (HOSTILE_ANSWER, 2, False), ("8", 2, False), ("9", 1, False)]}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> MathProject:
    return build_math_project(tmp_path_factory.mktemp("math"))


@pytest.fixture(scope="module")
def site(project: MathProject) -> Path:
    return build_site(project.params, project.root, project.root / "explorer").out


def _codes(project: MathProject) -> dict[str, list[int | None]]:
    scores = pd.read_parquet(project.root / "data" / "scores" / f"{DATASET}.parquet").sort_values("sample_id")
    return {problem_id: [None if pd.isna(code) else int(code) for code in rows["answer"]]
            for problem_id, rows in scores.groupby("problem_id")}


def test_the_score_table_holds_the_classes_the_texts_are_of(project: MathProject) -> None:
    """The hand-made CLASS_TEXTS name the score table's own codes (so the tests below compare like with like)."""
    for problem_id, codes in _codes(project).items():
        boxes = TRACES[problem_id][1]
        firsts = {code: boxes[codes.index(code)] for code in codes if code is not None}
        assert firsts == CLASS_TEXTS[problem_id]


def test_the_index_shows_each_methods_answer_and_the_distribution_as_text(project: MathProject, site: Path) -> None:
    pool = read_data(site, "pool0/index")
    stored = pool_predictions(project)
    for row in pool["problems"]:
        texts = CLASS_TEXTS[row["id"]]
        assert row["gold"] == TRACES[row["id"]][0]
        assert row["answers"] == "  ".join(f"{text}×{count}" for text, count, _ in DISTRIBUTION[row["id"]])
        for method in (m["name"] for m in pool["methods"] if m["name"] != "pass1"):
            assert row[f"a_{method}"] == texts[stored[row["id"], method]]
    assert pool["problems"][0]["a_cons"] == HALF


def pool_predictions(project: MathProject) -> dict[tuple[str, str], int]:
    """(problem, method) -> the class the aggregate says the method gave most often at report.k."""
    stored = orjson.loads((project.root / "data" / "aggregate" / f"{DATASET}.json").read_bytes())
    result = AggregateResult.from_json(stored["result"])
    return {(r.problem_id, r.method): r.prediction for r in result.problems
            if r.k == project.params.report.k and r.method != "pass1"}


def test_a_problem_page_shows_every_traces_answer_as_its_classs_text(project: MathProject, site: Path) -> None:
    stored = pool_predictions(project)
    for i, (problem_id, codes) in enumerate(_codes(project).items()):
        page = read_data(site, f"pool0/p{i}")
        texts = CLASS_TEXTS[problem_id]
        assert page["id"] == problem_id
        assert page["traces"]["answer"] == [None if code is None else texts[code] for code in codes]
        assert [(d["answer"], d["count"], d["right"]) for d in page["distribution"]] == DISTRIBUTION[problem_id]
        assert {r["method"]: r["answer"] for r in page["results"] if r["method"] != "pass1"} == {
            method: texts[code] for (pid, method), code in stored.items() if pid == problem_id}
        written = (site / "data" / "pool0" / f"p{i}.js").read_text(encoding="utf-8")
        assert "<" not in written  # the hostile answer is escaped in the script, shown as text by the page
        for hidden in NOT_SHOWN:
            assert hidden not in page["traces"]["answer"] and hidden not in str(page["distribution"])


def test_a_trace_page_shows_the_box_the_trace_wrote(site: Path) -> None:
    half = {trace["id"]: trace["answer"] for trace in read_data(site, "pool0/p0/c0")["traces"]}
    assert half == dict(enumerate(TRACES["half"][1]))  # "0.5" on its own page, though its class shows \frac{1}{2}
    seven = {trace["id"]: trace["answer"] for trace in read_data(site, "pool0/p1/c0")["traces"]}
    assert seven[5] == "9"  # boxed in the reasoning a reasoning parser split out


def test_without_the_pools_samples_the_pages_keep_the_class_numbers(project: MathProject, tmp_path: Path) -> None:
    root = tmp_path / "project"
    shutil.copytree(project.root, root, ignore=shutil.ignore_patterns("explorer", "pools"))
    out = build_site(project.params, root, root / "explorer").out
    codes = _codes(project)
    assert read_data(out, "pool0/index")["problems"][0]["a_cons"] == 0
    assert read_data(out, "pool0/p0")["traces"]["answer"] == codes["half"]
    assert [d["answer"] for d in read_data(out, "pool0/p1")["distribution"]] == [0, 1, 2, 3]


def _column(table: object, key: str, read: str = "cell.textContent") -> list[str]:
    """What `read` (a JavaScript expression of `cell`) gives for each row's cell of column `key`."""
    keys = [th.get_attribute("data-key") for th in table.locator("th").all()]
    return table.locator("tbody tr").evaluate_all(
        f"rows => rows.map(row => {{ const cell = row.children[{keys.index(key)}]; return {read}; }})")


@pytest.mark.slow
def test_the_browser_shows_the_answers_on_the_index(browser: object, site: Path) -> None:
    opened = open_page(browser, site, "#/pool/0")
    table = opened.page.locator(".tv-table-box").first
    assert _column(table, "id") == list(TRACES)
    assert _column(table, "answers") == ["  ".join(f"{text}×{count}" for text, count, _ in DISTRIBUTION[problem])
                                         for problem in TRACES]
    assert _column(table, "m_cons")[0].startswith(f"{HALF} ✓")
    assert opened.page.locator("#tv-main b, #tv-main script").count() == 0
    assert opened.clean() == []


@pytest.mark.slow
def test_the_browser_shows_the_answers_on_a_problem_page_and_a_trace_page(browser: object, site: Path) -> None:
    opened = open_page(browser, site, "#/pool/0/p/1")
    page = opened.page
    assert page.locator(".tv-dist span").all_text_contents() == [
        f"{text} {'✓' if right else '✗'} ×{count}" for text, count, right in DISTRIBUTION["seven"]]
    traces = page.locator(".tv-table-box").last
    shown = dict(zip(map(int, _column(traces, "sample_id")), _column(traces, "answer"), strict=True))
    texts = CLASS_TEXTS["seven"]
    expected = {i: "—" if box is None else texts[0] if box == "7.0" else box
                for i, box in enumerate(TRACES["seven"][1])}
    assert shown == expected
    # texts, aligned as text; the numbers beside them still to the right
    assert set(_column(traces, "answer", "getComputedStyle(cell).textAlign")) == {"left"}
    assert set(_column(traces, "n_tokens", "getComputedStyle(cell).textAlign")) == {"right"}
    assert page.locator("#tv-main b, #tv-main script").count() == 0
    opened.goto("#/pool/0/p/0/t/1")
    assert opened.page.locator(".tv-summary", has_text="answer 0.5,").count() == 1
    assert opened.clean() == []
