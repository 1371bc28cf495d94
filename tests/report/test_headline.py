"""One unit per quantity, and the short headline files `dvc metrics show` reads: the printed online rows line up,
online.md gives tokens per problem, the comparison holds online DeepConf, the headline keys name their unit."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import orjson
import pytest

from tests.debate.test_results import four_results
from tests.deepconf.test_online import small_online_aggregate
from tracevote.critique.results import CritiqueResult
from tracevote.deepconf.results import AggregateResult
from tracevote.report import compare, headline, tables
from tracevote.report.compare import DebatePoint


@pytest.fixture(scope="module")
def online_result() -> AggregateResult:
    return small_online_aggregate()[0]


def online_block(text: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Online DeepConf replayed"))
    return lines[start + 1:start + 4]


def test_the_printed_online_rows_line_up_and_print_savings_as_a_plain_percentage(online_result) -> None:
    cons, low, high = online_block(tables.render(online_result, 12, simulated=False))
    assert cons.strip().startswith("Cons@12") and "DeepConf-low online@12 (p90)" in low
    for column in ("%", "tokens"):  # the accuracy's % sign and the tokens column at one place on every row
        assert cons.index(column) == low.index(column) == high.index(column)
    assert re.search(r"tokens +[\d,]+ +\d+\.\d% saved, ", low)
    assert "+" not in low.split("saved")[0]  # no sign on a saving (nor anywhere before it)


def test_online_markdown_gives_tokens_per_problem_like_every_other_table(online_result) -> None:
    records = tables.online_rows(online_result)
    markdown = tables.online_markdown(records, online_result, simulated=False)
    assert "tokens: completion tokens per problem" in markdown
    at_12 = next(line for line in markdown.splitlines() if line.startswith("| 12 |")).split(" | ")
    row = tables.online_rows(online_result)[-2]  # online_low at K=12
    assert row["method"] == "online_low" and at_12[2] == f"{row['cons_tokens_per_problem']:,.0f}"
    assert at_12[4] == f"{row['tokens_per_problem']:,.0f}" and at_12[5] == f"{row['saved_pct']:.1f}"
    assert row["accuracy_pct"] == 100 * online_result.online_at("online_low", 12).mean


def test_deepconf_headlines_are_rows_of_one_short_table_of_methods(online_result) -> None:
    headlines = headline.deepconf_headlines(online_result, 12, 7.0, simulated=True)
    low = online_result.online_at("online_low", 12)
    # every method the report ranks, in its order, then the online methods, then pass@K and avg@K
    assert list(headlines) == [*online_result.methods, "online_low", "online_high", "pass_at_k", "avg_at_k"]
    assert {"avg", "avg_top10", "tail", "tail_top10"} <= set(headlines)
    pass1 = online_result.accuracy_at("pass1", 12)
    assert headlines["pass1"] == {"simulated": True, "problems": 4, "k": 1, "tokens_per_problem": 7.0,
                                  "accuracy_pct": round(100 * pass1.mean, 2),
                                  "ci_low_pct": round(100 * pass1.ci_low, 2),
                                  "ci_high_pct": round(100 * pass1.ci_high, 2)}
    tail_top10 = online_result.accuracy_at("tail_top10", 12)
    assert headlines["tail_top10"] == {"simulated": True, "problems": 4, "k": 12, "tokens_per_problem": 84.0,
                                       "accuracy_pct": round(100 * tail_top10.mean, 2),
                                       "ci_low_pct": round(100 * tail_top10.ci_low, 2),
                                       "ci_high_pct": round(100 * tail_top10.ci_high, 2)}
    assert headlines["cons"]["tokens_per_problem"] == 84.0  # K traces, as every vote at K
    assert headlines["online_low"] == {"simulated": True, "problems": 4, "k": 12,
                                       "accuracy_pct": round(100 * low.mean, 2),
                                       "ci_low_pct": round(100 * low.ci_low, 2),
                                       "ci_high_pct": round(100 * low.ci_high, 2),
                                       "tokens_per_problem": round(low.tokens, 1),
                                       "saved_pct": round(100 * low.savings, 2)}
    exact = online_result.pass_at_k_at(12)
    assert headlines["pass_at_k"] == {"simulated": True, "problems": 4, "k": 12, "tokens_per_problem": 84.0,
                                      "accuracy_pct": round(100 * exact.pass_at_k, 2),
                                      "ci_low_pct": round(100 * exact.pass_at_k_ci_low, 2),
                                      "ci_high_pct": round(100 * exact.pass_at_k_ci_high, 2)}
    assert headlines["avg_at_k"]["accuracy_pct"] == round(100 * exact.avg_at_k, 2)
    keys = set().union(*headlines.values())  # the columns of `dvc metrics show`: a handful
    assert keys == {"simulated", "problems", "k", "accuracy_pct", "ci_low_pct", "ci_high_pct", "tokens_per_problem",
                    "saved_pct"}
    below_warmup = headline.deepconf_headlines(online_result, 2, 7.0, simulated=False)
    assert list(below_warmup) == [*online_result.methods, "pass_at_k", "avg_at_k"]


def test_without_a_bootstrap_the_headlines_have_no_interval(online_result) -> None:
    plain = replace(online_result, accuracy=tuple(replace(row, ci_low=None, ci_high=None)
                                                  for row in online_result.accuracy), online=(),
                    pass_at_k=tuple(replace(row, pass_at_k_ci_low=None, pass_at_k_ci_high=None, avg_at_k_ci_low=None,
                                            avg_at_k_ci_high=None) for row in online_result.pass_at_k))
    headlines = headline.deepconf_headlines(plain, 12, 7.0, simulated=False)
    assert set().union(*headlines.values()) == {"simulated", "problems", "k", "accuracy_pct", "tokens_per_problem"}


def test_the_comparison_holds_online_deepconf_at_k_in_percent_and_tokens_per_problem(online_result) -> None:
    scores = compare.TraceTokens(["p0", "p1"], np.array([10.0, 30.0]))
    curve = compare.voting_curve([(online_result, scores)])
    rows = compare.comparison_rows(curve, DebatePoint(0.5, 1000.0, 5.0, 4), 12, agents=4)
    online = {row["method"]: row for row in rows if row["method"].startswith("online_")}
    low = online_result.online_at("online_low", 12)
    assert online["online_low"] == {"method": "online_low", "label": "DeepConf-low online@12", "k": 12,
                                    "accuracy_pct": round(100 * low.mean, 2),
                                    "completion_tokens_per_problem": round(low.tokens, 1), "problems": 4}
    assert set(online) == {"online_low", "online_high"}
    markdown = compare.render_markdown(rows, ["toy"], simulated=False)
    assert "| DeepConf-low online@12 | 12 | 4 |" in markdown
    assert "on toy: every row 4 problems." in markdown
    assert "accuracy_pct" in compare.curve_table(curve, DebatePoint(0.5, 1000.0, 5.0, 4))


def test_the_debate_headline_pools_every_debated_problem() -> None:
    results = four_results()
    summary = headline.debate_headline(results, simulated=False)
    assert summary == {"simulated": False, "problems": 4,
                       "accuracy_pct": round(100 * sum(r.correct for r in results) / 4, 2),
                       "tokens_per_problem": round(sum(r.completion_tokens for r in results) / 4, 1)}


def critique(dataset: str, label: int, prediction: int | None) -> CritiqueResult:
    return CritiqueResult(dataset=dataset, id=f"{dataset}-{label}-{prediction}", task=dataset, label=label, n_steps=4,
                          boxed=[str(prediction)], votes=[prediction], prediction=prediction,
                          match=prediction == label, unanimous=True, unparsable=0, truncated=0, prompt_tokens=10,
                          completion_tokens=20, usd=0.0)


def test_each_critique_dataset_gets_its_own_headline_with_an_empty_subset_as_null() -> None:
    results = [critique("a", 2, 2), critique("a", -1, 1), critique("a", 1, 3), critique("a", -1, -1),
               critique("b", 1, 1)]
    headlines = headline.critique_headlines(results, simulated=True)
    assert headlines == {"a": {"simulated": True, "solutions": 4, "f1_pct": 50.0},  # error and correct acc 50%
                         "b": {"simulated": True, "solutions": 1, "f1_pct": None}}  # no solution without an error


def test_each_grading_run_gets_its_own_headline() -> None:
    record = {"run": "pool_toy", "simulated": True, "total": 192, "accuracy": 0.65625, "avg_word_count": 143.1198,
              "critic_score": None}
    assert headline.grading_headlines([record]) == {"pool_toy": {
        "simulated": True, "predictions": 192, "accuracy_pct": 65.62, "words_per_prediction": 143.1,
        "critic_score": None}}


def test_a_folder_of_headlines_keeps_only_the_current_names(tmp_path: Path) -> None:
    headline.write_headlines(tmp_path, {"a": {"f1_pct": 1.0}, "b": {"f1_pct": 2.0}})
    headline.write_headlines(tmp_path, {"b": {"f1_pct": 3.0}})  # a left critique.datasets
    assert sorted(path.name for path in tmp_path.iterdir()) == ["b.json"]
    assert orjson.loads((tmp_path / "b.json").read_bytes()) == {"f1_pct": 3.0}


def test_the_comparison_header_counts_what_each_row_covers(online_result) -> None:
    # the pool votes on all 4 problems; debate.problems [0, 1] debated only 2
    scores = compare.TraceTokens(["p0", "p1"], np.array([10.0, 30.0]))
    rows = compare.comparison_rows(compare.voting_curve([(online_result, scores)]),
                                   DebatePoint(0.5, 1000.0, 5.0, 2), 12, agents=4)
    markdown = compare.render_markdown(rows, ["toy"], simulated=False)
    assert ("on toy: voting rows 4 problems, the debate 2 problems (debate.problems): the debate row is not on the "
            "same problems.") in markdown
    table = [line.split(" | ") for line in markdown.splitlines() if line.startswith("| ") and "---" not in line]
    assert table[0][2] == "problems"
    assert {cells[2] for cells in table[1:] if not cells[0].startswith("| Debate")} == {"4"}
    assert next(cells for cells in table if cells[0].startswith("| Debate"))[2] == "2"
    alone = compare.comparison_rows(None, DebatePoint(0.5, 1000.0, 5.0, 1), 12, agents=4)
    assert "on aime_2024: the debate 1 problem." in compare.render_markdown(alone, ["aime_2024"], simulated=False)
