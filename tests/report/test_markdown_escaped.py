"""Every Markdown table a report writes reads as the table it means whatever the names in it (issue 45 item 3): a
DeltaBench task, a dataset, problem, model, endpoint or run name holding `<script>`, `|` or a line break forges no
row or cell and passes no HTML. The writers are found in the source (every function that writes a table's `|---|`
line), so a new one fails here until it has a case."""

from __future__ import annotations

import ast
import dataclasses
import io
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from markdown_it import MarkdownIt

import tracevote
from tests.critique.test_results import results as critique_results
from tests.debate.test_results import CFG, four_results
from tests.deepconf.test_live_results import ANSWERS, trace
from tests.grading.test_summary import record as grading_record
from tests.report.test_report_tables import result as aggregate_result
from tracevote.critique.results import by_task_rows, critique_metrics, write_by_task_csv
from tracevote.debate.results import debate_metrics, debate_totals
from tracevote.debate.table import debate_markdown
from tracevote.deepconf.live_results import score_problem
from tracevote.report import compare, critique, grading, live, study, tables
from tracevote.report.figures import plot_csv

HOSTILE = "<script>alert(1)</script> a|b\nc\\"
PLAIN = "plain"
SOURCE = Path(tracevote.__file__).parent


def critique_table(name: str) -> str:
    rows = [{**row, "dataset": name, "task": name} for row in by_task_rows(critique_results())]
    return critique.render_markdown(rows, critique_metrics(critique_results(), simulated=True), simulated=True,
                                    models=[name])


def compare_table(name: str) -> str:
    rows = [{"method": "cons", "label": name, "k": 4, "problems": 3, "accuracy_pct": 50.0,
             "completion_tokens_per_problem": 100.0},
            {"method": "debate", "label": name, "k": None, "problems": 3, "accuracy_pct": 25.0,
             "completion_tokens_per_problem": 300.0}]
    return compare.render_markdown(rows, [name, name], simulated=True, note=name)


def live_table(name: str) -> str:
    traces = [trace(0, [5, 5, 5], 7), trace(1, [1, 1, 1], 3), trace(2, [6, 6, 6], 7)]
    scored = score_problem("p", "low", 90.0, traces, warmup=2, group_size=2, consensus=None, answers=ANSWERS,
                           tie_break="smallest")
    methods = live.summarize([scored], ["low"], bootstrap=50, seed=0, level=0.95, budget=5)
    return live.table_markdown({name: methods["low"]}, None, name, budget=5, simulated=True)


def study_table(name: str) -> str:
    table = pd.DataFrame([{"model": name, "method": "cons", "label": name, "k": 4, "problems": 3,
                           "accuracy_pct": 50.0, "ci_low_pct": 40.0, "ci_high_pct": 60.0,
                           "tokens_per_problem": 100.0, "usd_per_problem": 0.01, "on_frontier": True}])
    differences = pd.DataFrame([{"model": name, "reference": name, "method": "cons", "label": name, "k": 4,
                                 "problems": 3, "difference_pts": 1.0, "ci_low_pts": -1.0, "ci_high_pts": 2.0,
                                 "p_value": 0.5}])
    return study.render_markdown(table, differences, dataset=name, level=0.95, simulated=True, notes=[name])


def grading_table(name: str) -> str:
    return grading.render_table([grading_record(run=name, dataset=name, predictions_path=name, simulated=True),
                                 grading_record(run="other", dataset=name)])


def results_table(name: str) -> str:
    records = [{**record, "method": name, "label": name}
               for record in tables.results_table(aggregate_result("first"), 4)]
    return tables.table_markdown(records, 4, "first", 0.95, simulated=True)


def debate_table(name: str) -> str:
    results = [dataclasses.replace(r, dataset=name, problem_id=name) for r in four_results()]
    return debate_markdown(results, debate_metrics(results, CFG, simulated=True), debate_totals(results),
                           models={"model": name, "judge_model": name}, banner="SIMULATED")


# writer (module.function as found in the source) -> a table it writes with `name` in every field taken from input
WRITERS: dict[str, Callable[[str], str]] = {
    "tracevote.report.critique.render_markdown": critique_table,
    "tracevote.report.compare.render_markdown": compare_table,
    "tracevote.report.live.table_markdown": live_table,
    "tracevote.report.study.render_markdown": study_table,
    "tracevote.report.grading.render_table": grading_table,
    "tracevote.report.tables.table_markdown": results_table,
    "tracevote.debate.table._table": debate_table,  # debate_markdown's table
}
# writers whose every cell is the code's own text, none from input
OWN_TEXT = {"tracevote.report.tables.online_markdown": "K, figures and the online methods' labels (method_label)"}


def table_writers() -> set[str]:
    """Every function in the package with a Markdown table's delimiter row in its text."""
    found = set()
    for path in sorted(SOURCE.rglob("*.py")):
        module = ".".join(path.relative_to(SOURCE.parent).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and any(
                    isinstance(c, ast.Constant) and isinstance(c.value, str)
                    and ("---|" in c.value or "|---" in c.value or "---:|" in c.value) for c in ast.walk(node)):
                found.add(f"{module}.{node.name}")
    return found


def test_every_markdown_table_writer_has_a_case() -> None:
    assert table_writers() == set(WRITERS) | set(OWN_TEXT)


def shape(markdown: str) -> list[tuple[str, int]]:
    """The tables as a renderer that allows raw HTML reads them: per row, the tag of its cells and how many."""
    tokens = MarkdownIt("commonmark", {"html": True}).enable("table").parse(markdown)
    rows: list[tuple[str, int]] = []
    for token in tokens:
        if token.type == "tr_open":
            rows.append(("", 0))
        elif token.type in ("th_open", "td_open"):
            rows[-1] = (token.tag, rows[-1][1] + 1)
    return rows


@pytest.mark.parametrize("writer", list(WRITERS))
def test_names_from_input_forge_no_row_cell_or_html(writer: str) -> None:
    plain, hostile = WRITERS[writer](PLAIN), WRITERS[writer](HOSTILE)
    assert shape(hostile) == shape(plain) and len(shape(plain)) >= 2
    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(hostile)
    assert "<script" not in html and "<script" not in hostile
    assert "&lt;script&gt;alert(1)&lt;/script&gt; a|b c\\" in html  # shown as written, on one line
    assert len(hostile.splitlines()) == len(plain.splitlines())


def test_the_critiques_csvs_keep_a_hostile_task_as_one_cell_and_the_markdown_read_back_escapes_it(
        tmp_path: Path) -> None:
    """The same task names through the CSV files the critique writes (core.csvtext), read back as the report stage
    reads them, then into its table: one row each, the name exactly as it was."""
    rows = [{**row, "task": HOSTILE} for row in by_task_rows(critique_results())]
    write_by_task_csv(tmp_path / "by_task.csv", rows)
    back = critique.read_by_task_csv(tmp_path / "by_task.csv")
    assert [row["task"] for row in back] == [HOSTILE] * len(rows)
    plotted = pd.read_csv(io.StringIO(plot_csv(critique.f1_table(back), simulated=True, float_format="%.2f")))
    assert len(plotted) == len(rows) and all(HOSTILE in subset for subset in plotted["subset"])
    metrics = critique_metrics(critique_results(), simulated=True)
    assert shape(critique.render_markdown(back, metrics, simulated=True)) == shape(critique_table(PLAIN))
