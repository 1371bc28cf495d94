"""Every benchmark still runs at its quick scale and reports real figures; the guard's logic on made-up
numbers (timings are never asserted)."""

from __future__ import annotations

import concurrent.futures as cf
import itertools
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from bench import bench_online_live, official_offline
from bench.bench_paper import drop_page_cache
from bench.figures import Figure, number, table_lines
from bench.goals import GOALS, Goal, verdicts
from bench.measure import Spread, fit_rate
from bench.run import BENCHMARKS, LIVE, PAPER, run_together
from tracevote.core.config_deepconf import ConfidenceConfig
from tracevote.deepconf.confidence import trace_measures
from tracevote.deepconf.online import spent_tokens
from tracevote.deepconf.voting import row_percentile
from tracevote.sampling.live_rules import LiveRules
from tracevote.store.live import LiveTrace
from tracevote.store.records import ProblemTraces

# Every benchmark's quick run in two processes (bench.run.run_together), side by side: a fresh process per benchmark
# would spend more CPU on start-up and imports than most quick runs. Those writing their pool in worker processes
# (synthetic_pool forks them) go first, before any benchmark has started a server thread; the paced ones spend most
# of their time waiting on their server, and no figure here is judged by its speed.
QUICK_GROUPS = ((PAPER, "bench_score", "bench_aggregate", "bench_ingest", "bench_pool", "bench_n", LIVE),
                ("bench_stage", "bench_grade", "bench_stream", "bench_endpoints"))


@pytest.fixture(scope="module")
def quick_rows() -> dict[str, list[dict]]:
    with cf.ThreadPoolExecutor(len(QUICK_GROUPS)) as pool:
        groups = list(pool.map(lambda names: run_together(names, "quick"), QUICK_GROUPS))
    return {name: rows for group in groups for name, rows in group.items()}


def test_the_quick_groups_hold_every_benchmark_once() -> None:
    names = [name for group in QUICK_GROUPS for name in group]
    assert sorted(names) == sorted((*BENCHMARKS, PAPER, LIVE))


def figures_of(rows: list[dict]) -> list[Figure]:
    return [Figure.from_json(row) for row in rows if "skipped" not in row]


@pytest.mark.parametrize("name", (*BENCHMARKS, PAPER, LIVE))
def test_benchmark_runs_and_reports_figures(quick_rows: dict[str, list[dict]], name: str) -> None:
    rows = quick_rows[name]
    assert rows, f"{name} reported nothing"
    figures = figures_of(rows)
    lines = "\n".join(table_lines(figures))
    for figure in figures:
        values = figure.ours + (figure.baseline or []) + (figure.cpu or []) + (figure.baseline_cpu or [])
        assert all(not math.isnan(v) and v >= 0 for v in values), figure  # a fitted rate may be inf at quick scale
        assert figure.baseline is None or len(figure.baseline) == len(figure.ours), "same number of runs each side"
        assert figure.name in lines


def test_every_goal_names_a_figure_a_benchmark_reports(quick_rows: dict[str, list[dict]]) -> None:
    names = {figure.name for rows in quick_rows.values() for figure in figures_of(rows)}
    grade_skipped = any("skipped" in row for row in quick_rows["bench_grade"])
    for goal in GOALS:
        if not (grade_skipped and goal.figure.startswith("grade")):
            assert goal.figure in names, goal


def test_stage_and_official_baseline_give_the_same_measures(quick_rows: dict[str, list[dict]]) -> None:
    figures = {figure.name: figure for figure in figures_of(quick_rows["bench_stage"])}
    assert figures["official vs score stage: max relative difference of the 4 measures"].ours[0] <= 1e-9


def test_arithmetic_figures_are_labelled_as_such(quick_rows: dict[str, list[dict]]) -> None:
    assert all(f.name.startswith("arithmetic only, in memory") for f in figures_of(quick_rows["bench_score"]))


def figure(ours: list[float], baseline: list[float] | None = None, higher: bool = True) -> Figure:
    return Figure("f", "x", ours, baseline, higher_is_better=higher)


@pytest.mark.parametrize(("goal", "fig", "missed"), [
    (Goal("f", "ratio", True, 10.0, ""), figure([50, 60, 70], [10, 10, 10]), True),  # best round 7x < 10x
    (Goal("f", "ratio", True, 10.0, ""), figure([50, 60, 110], [10, 10, 10]), False),  # one round reaches 11x: noise
    (Goal("f", "ratio", True, 1.0, ""), figure([2.0, 2.2], [1.5, 1.6], higher=False), True),  # seconds: 0.75x
    (Goal("f", "ratio", True, 1.0, ""), figure([1.4, 1.6], [1.5, 1.5], higher=False), False),
    (Goal("f", "value", False, 8.0, ""), figure([9.0, 8.5, 12.0]), True),  # even the fastest run is over 8 s
    (Goal("f", "value", False, 8.0, ""), figure([9.0, 7.9, 12.0]), False),
    # judged by the median: one fast round (1.5 / 1.4 = 1.07x) does not meet it when the median is 0.94x
    (Goal("f", "ratio", True, 1.0, "", "median"), figure([1.4, 1.6, 1.6], [1.5, 1.5, 1.5], higher=False), True),
    (Goal("f", "ratio", True, 1.0, "", "median"), figure([1.4, 1.6, 1.4], [1.5, 1.5, 1.5], higher=False), False),
])
def test_guard_misses_a_goal_only_beyond_the_noise(goal: Goal, fig: Figure, missed: bool) -> None:
    (verdict,) = verdicts([fig], (goal,))
    assert verdict.missed is missed
    assert ("MISSED" in verdict.line()) is missed and "goal" in verdict.line()


def test_guard_reports_a_figure_the_run_did_not_measure() -> None:
    (verdict,) = verdicts([], (Goal("absent", "value", False, 8.0, ""),))
    assert not verdict.missed and "not measured" in verdict.line()


@pytest.mark.parametrize(("ours", "baseline", "higher", "ratio", "low", "high"), [
    ([20, 30, 40], [10, 10, 10], True, 3.0, 2.0, 4.0),  # rates: ours / baseline, per round and of medians
    ([1, 2, 4], [4, 4, 4], False, 2.0, 1.0, 4.0),  # seconds: baseline / ours
])
def test_ratio_of_medians_and_per_round_spread(ours: list[float], baseline: list[float], higher: bool, ratio: float,
                                               low: float, high: float) -> None:
    fig = figure(ours, baseline, higher)
    assert fig.speedup == pytest.approx(ratio)
    assert (fig.speedup_spread.low, fig.speedup_spread.high) == pytest.approx((low, high))


@pytest.mark.parametrize(("sizes", "seconds", "rate"), [
    ([1, 2, 3], [1.5, 2.5, 3.5], 1.0),  # intercept (start-up) 0.5 s drops out
    ([1e6, 2e6, 4e6], [1.1, 1.2, 1.4], 1e7),
    ([1, 2], [2.0, 1.0], math.inf),  # no measurable cost per unit
])
def test_fit_rate(sizes: list[float], seconds: list[float], rate: float) -> None:
    assert fit_rate(sizes, seconds) == pytest.approx(rate)


@pytest.mark.parametrize(("value", "text"), [(27_100_000, "27.1M"), (0.4567, "0.457"), (1500, "1.5k"), (3.0, "3")])
def test_number_format(value: float, text: str) -> None:
    assert number(value) == text


def test_spread_of_repetitions() -> None:
    assert Spread.of([3.0, 1.0, 2.0]) == Spread(2.0, 1.0, 3.0, 3)


def test_drop_page_cache_needs_no_root(tmp_path: Path) -> None:
    path = tmp_path / "log.tvf"
    path.write_bytes(b"x" * 65536)
    drop_page_cache([path])
    assert path.read_bytes() == b"x" * 65536


@pytest.mark.parametrize(("confs", "window", "bottom", "tail", "expected"), [
    ([1.0, 3.0, 2.0, 6.0], 2, 0.5, 2, (3.0, 2.0, 2.0, 4.0)),  # the trace_measures docstring example
    ([1.0, 3.0, 2.0, 6.0], 8, 0.1, 8, (3.0, 3.0, 3.0, 3.0)),  # shorter than the window: one group
    ([4.0, 1.0, 1.0, 4.0, 2.0, 2.0], 2, 0.5, 3, (14 / 6, 1.5, 1.0, 8 / 3)),  # groups 2.5 1 2.5 3 2: bottom 2
])
def test_official_baseline_table(confs: list[float], window: int, bottom: float, tail: int,
                                 expected: tuple[float, ...]) -> None:
    assert official_offline.trace_measures(confs, window, bottom, tail) == pytest.approx(expected, rel=1e-12)


def test_official_baseline_matches_trace_measures_on_random_traces() -> None:
    rng = np.random.default_rng(5)
    lengths = rng.integers(1, 400, 40)
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    confidence = rng.gamma(4.0, 3.0, int(offsets[-1]))
    traces = ProblemTraces("t", np.arange(40), [], [], offsets, confidence)
    ours = trace_measures(traces, ConfidenceConfig(group_size=64, bottom_fraction=0.1, tail_tokens=96))
    theirs = np.array([official_offline.trace_measures(confidence[a:b].tolist(), 64, 0.1, 96)
                       for a, b in itertools.pairwise(offsets)])
    np.testing.assert_allclose(np.stack([ours.avg, ours.bottom10, ours.lowest, ours.tail], axis=1), theirs,
                               rtol=1e-9)


def test_the_grade_stress_keeps_every_runs_output_and_counts_failures(tmp_path: Path, shared_data: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """bench/stress_grade.py at two runs (the 200-run stress stays out of the suite: docs/benchmarks.md)."""
    from bench import stress_grade

    assert stress_grade.main(["--runs", "2", "--items", "3", "--out", str(tmp_path / "stress")]) == 0
    outputs = sorted(path.name for path in (tmp_path / "stress").glob("run-*.txt"))
    assert outputs == ["run-001.txt", "run-002.txt"]
    assert all((tmp_path / "stress" / name).read_text().startswith("exit 0\n--- stdout\nLoaded 3 gold samples!")
               for name in outputs)
    assert "stress_grade: 2 runs in " in capsys.readouterr().out


def test_the_live_bench_names_a_trace_that_kept_other_tokens_than_the_replay_spends() -> None:
    rows = bench_online_live.problems(1)
    samples = bench_online_live.pool_samples(bench_online_live.sim_model(rows, 200), rows[0], 8, 800)
    trace = bench_online_live.online_trace(samples, rows[0]["answer"], 32)
    rules = LiveRules(warmup=4, budget=8, percentiles={"low": 90.0}, group_size=32, consensus=None, max_tokens=800)
    threshold = row_percentile(trace.lowest[None, :4], 90.0)
    spent, stopped = spent_tokens(trace, np.arange(8)[None, :], threshold)
    stopped[:, :4], spent[:, :4] = False, trace.n_tokens[:4]
    assert stopped.any(), "the replay stops some trace of this problem"

    def live(kept: np.ndarray) -> dict[int, LiveTrace]:
        return {i: LiveTrace(sample=replace(s, tokens=s.tokens[:k], token_logprobs=s.token_logprobs[:k],
                                            token_confidence=s.token_confidence[:k]),
                             stop_reason="finished", received=k, prompt_tokens=None, completion_tokens=k,
                             usage_source="client", threshold=None)
                for i, (s, k) in enumerate(zip(samples, kept, strict=True))}

    bench_online_live.check_against_replay(live(spent[0]), trace, rules, 90.0, "p00")  # the replay's own cut passes
    first = int(np.flatnonzero(stopped[0])[0])
    with pytest.raises(AssertionError, match=rf"^p00 trace {first}: live kept {trace.n_tokens[first]} tokens, the "
                                             rf"replay spends {spent[0, first]}$"):
        bench_online_live.check_against_replay(live(trace.n_tokens), trace, rules, 90.0, "p00")
