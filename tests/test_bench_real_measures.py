"""bench.real_measures, the independent check the real-model page quotes: its measures, AUROC, votes and counts on
inputs small enough to work out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench.real_measures import (
    HELDOUT,
    Trace,
    Window,
    accuracy,
    auroc,
    deepconf,
    main,
    measure_table,
    minus_entropy,
    off_best_picks,
    read_heldout,
    read_pool,
    stored_or_top,
    trace_measures,
    vote,
)


def test_the_four_measures_follow_deepconfs_windows() -> None:
    # windows of 2: [2, 2.5, 4]; the lowest half of 3 windows is int(1.5) = 1 window
    measures = trace_measures(np.array([1.0, 3.0, np.nan, 2.0, 6.0]), Window(2, 0.5, 2))
    assert measures == {"avg": 3.0, "bottom10": 2.0, "lowest": 2.0, "tail": 4.0}


def test_a_trace_shorter_than_a_window_has_one_group_of_all_its_tokens() -> None:
    assert trace_measures(np.array([1.0, 2.0]), Window(16, 0.1, 16))["lowest"] == 1.5


@pytest.mark.parametrize(("scores", "positive", "expected"), [
    ([0.1, 0.4, 0.4, 0.9], [False, True, False, True], 0.875),
    ([1.0, 2.0], [True, False], 0.0),
    ([1.0, 2.0], [True, True], None),
])
def test_auroc_counts_ties_as_half(scores: list[float], positive: list[bool], expected: float | None) -> None:
    assert auroc(np.array(scores), np.array(positive)) == expected


def test_a_tied_vote_goes_to_the_smallest_answer_and_unanswered_traces_do_not_vote() -> None:
    assert vote(np.array([9, 4, -1, 9, 4]), np.array([1.0, 1.0, 5.0, 0.5, 0.5])) == 4
    assert vote(np.array([-1, 3]), np.array([1.0, np.nan])) == -1


def test_deepconf_at_k_and_the_entropy_read_only_their_entries() -> None:
    top = np.array([[np.log(0.5), np.log(0.5), -20.0], [-0.1, np.nan, np.nan]])
    trace = Trace("p", 1, np.array([-0.7, -0.1]), np.pad(top, ((0, 0), (0, 17)), constant_values=np.nan), None)
    assert deepconf(1)(trace).tolist() == pytest.approx([np.log(2), 0.1])
    assert deepconf(20)(trace)[0] == pytest.approx((2 * np.log(2) + 20) / 3)
    assert minus_entropy(trace).tolist() == pytest.approx([-np.log(2), -0.1 * np.exp(-0.1)], abs=1e-6)


def test_the_heldout_problems_have_one_to_three_distractors() -> None:
    counts = read_heldout(HELDOUT)["distractors"].value_counts().to_dict()
    assert counts == {1: 41, 2: 29, 3: 30}


def export_line(problem: str, answer: int | None, chosen: list[float], best: list[float]) -> str:
    """A pool export row whose top-20 is the best entry and 19 entries at -14."""
    top = [[b, *[-14.0] * 19] for b in best]
    return json.dumps({"problem_id": problem, "sample_id": 0, "answer": answer, "token_logprobs": chosen,
                       "top_logprobs": top})


def test_on_a_small_pool_the_chosen_logprob_separates_where_the_top_mean_does_not(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Right traces pick their best token; wrong ones pick a worse one. DeepConf's C_i sees the same best entry."""
    heldout = tmp_path / "heldout.jsonl"
    heldout.write_text(json.dumps({"id": "p", "answer": 7, "problem": "A has 7 pens. How many pens does A have?",
                                   "steps": [{"text": "A starts with 7 pens.", "value": 7}]}) + "\n")
    pool = tmp_path / "pool.jsonl"
    pool.write_text("\n".join([export_line("p", 7, [-0.1, -0.1], [-0.1, -0.1]),
                               export_line("p", 7, [-0.2, -0.2], [-0.2, -0.2]),
                               export_line("p", 5, [-2.0, -0.2], [-0.1, -0.2]),
                               export_line("p", None, [-0.1], [-0.1])]) + "\n")
    table = measure_table(read_pool(pool), read_heldout(heldout), Window(2, 0.1, 2))
    assert table["correct"].tolist() == [True, True, False, False]
    assert accuracy(table, read_heldout(heldout), None, None) == 100.0
    assert accuracy(table, read_heldout(heldout), "chosen|avg", 0.1) == 100.0
    assert main(["--pool", str(pool), "--heldout", str(heldout), "--group-size", "2", "--tail-tokens", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    chosen_row = next(line for line in lines if line.strip().startswith("chosen") and "|" in line)
    assert chosen_row.split()[1:3] == ["1.000", "(1)"]
    assert "Pass@1 50.00, Cons@4 100.00" in "\n".join(lines)
    assert any(line.split()[:2] == ["0", "1"] for line in lines)  # no distractor: one problem



def test_deepconf_at_20_is_the_pools_own_c_i_when_exported(tmp_path: Path) -> None:
    pool = tmp_path / "pool.jsonl"
    row = json.loads(export_line("p", 7, [-0.1], [-0.1]))
    pool.write_text(json.dumps(row) + "\n" + json.dumps({**row, "token_confidence": [13.0]}) + "\n")
    recomputed, stored = read_pool(pool)
    assert stored_or_top(recomputed).tolist() == pytest.approx([(0.1 + 19 * 14) / 20])
    assert stored_or_top(stored).tolist() == [13.0]
    assert off_best_picks(recomputed) == 0
