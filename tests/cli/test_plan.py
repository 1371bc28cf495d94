"""`python -m tracevote plan` as a process on a real pilot: a pool built by stages/build_pool.py on the simulator,
scored by stages/score.py. The dollars are worked out here from the pool's own usage counts and the fixture's
prices; bad flags and missing files are one line and a non-zero exit."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from tests.conftest import REPO_ROOT, hang_guard_s
from tests.core.test_config_study import QWEN
from tests.dvcproject import project_env
from tests.sampling.test_connection_errors import tracevote, workdir
from tests.sampling.test_run_control import build_pool
from tracevote.cli.main import main
from tracevote.cli.plan import Option, Targets, options, predicted_difference, supported
from tracevote.core.config_deepconf import MEASURES, EvalConfig
from tracevote.core.costs import money
from tracevote.deepconf.evaluate import split_problems
from tracevote.deepconf.plan import project
from tracevote.deepconf.plan_validation import cross_validate
from tracevote.store.pool import Pool

PRICE_IN, PRICE_OUT = 0.14, 0.28  # the fixture's deepseek endpoint, USD per 1M tokens; every token in at cache miss
PILOT = 8


@pytest.fixture(scope="module")
def pilot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two toy problems x 8 simulated traces, scored."""
    root = workdir(tmp_path_factory.mktemp("plan"), backend="sim")
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["model"]["sim"]["mean_tokens"] = 24  # under decoding.max_tokens 64: answers are boxed
    params["pool"]["n_pool"] = PILOT
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert build_pool(root).returncode == 0
    score = subprocess.run([sys.executable, str(REPO_ROOT / "stages" / "score.py"), "--params", "params.yaml",
                            "--problems", "data/toy.jsonl", "--manifest", "pools/toy.json",
                            "--out", "data/scores/toy.parquet", "--stops", "data/scores/toy.stops.parquet"],
                           cwd=root, env=project_env(), capture_output=True, text=True, timeout=hang_guard_s())
    assert score.returncode == 0, score.stderr
    return root


def usage_by_hand(root: Path) -> tuple[float, float]:
    """Mean prompt and completion tokens a trace, from the pool's samples."""
    pool = Pool(next((root / "pools" / "toy").rglob(Pool.META)).parent)
    samples = [s for problem_id in ("toy-01", "toy-02") for s in pool.iter_samples(problem_id)]
    return (float(np.mean([s.prompt_tokens for s in samples])), float(np.mean([s.completion_tokens for s in samples])))


def priced_rows(out: str, column: int = 1) -> list[tuple[int, int, int, str]]:
    """(K, problems, traces, dollars on the `column`-th endpoint) of each row of the plan's price table, where the
    problems are the larger of the two counts a K needs (for the width, for the difference: "?" where the pilot
    predicts no difference to find)."""
    rows = []
    for line in out.splitlines():
        cells = [cell.replace(",", "") for cell in line.split()]
        if len(cells) >= 4 + 2 * column and all(cell.isdigit() for cell in cells[:4] if cell != "?"):
            k, width, difference, traces = (int(cell) if cell != "?" else 0 for cell in cells[:4])
            rows.append((k, max(width, difference), traces, line.split()[4 + 2 * (column - 1)]))
    return rows


def test_the_plan_prints_each_k_and_prices_each_option(pilot: Path) -> None:
    result = tracevote(pilot, "plan", "--draws", "8", "--max-k", "32", "--methods", "cons,tail_top10",
                       "--endpoint", "gpt-4o-mini")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "toy from its pilot data/scores/toy.parquet: 2 problems x 8 traces (SIMULATED model)" in out
    assert re.search(r"method +error +K=8 +K=16 +K=32\n", out)
    for row in re.findall(r"^(?:cons|tail_top10) .*$", out, flags=re.MULTILINE)[:2]:  # each K: a mean in its interval
        for mean, low, high in re.findall(r"([\d.]+) \[ *([\d.]+), +([\d.]+)\]", row):
            assert float(low) <= float(mean) <= float(high), row
    # recommended or not (a 2-problem pilot rarely supports one), the difference is printed with its error
    assert re.search(r"tail_top10 - cons predicted [+-][\d.]+ at K=8, .*; its error on held-out problems ±[\d.]+",
                     out)
    rows = priced_rows(out)
    assert [row[0] for row in rows] == [8, 16, 32]
    prompt, completion = usage_by_hand(pilot)
    for k, problems, traces, dollars in rows:  # each option: K traces on the problems it needs, at the pilot's usage
        assert traces == k * problems
        assert dollars == money((round(traces * prompt) * PRICE_IN + round(traces * completion) * PRICE_OUT) / 1e6)
    assert "SIMULATED" in out.splitlines()[-1]
    # another endpoint: priced at the pilot's tokens, its hours unknown (the pilot did not run on it)
    assert re.search(r"gpt-4o-mini\* \$ +gpt-4o-mini\* hours\n", out) and " unknown\n" in out


def test_a_study_model_with_its_own_pool_is_priced_and_timed_on_it(pilot: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    project = tmp_path / "project"
    shutil.copytree(pilot, project)
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["endpoints"]["qwen-local"] = {**QWEN, "pricing": {**QWEN["pricing"], "input_cache_miss": 1.0, "output": 2.0}}
    params["deepconf"]["endpoints"] = ["qwen-local"]
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    study = project / "study" / "qwen-local" / "pools"  # its pool: here the pilot's own traces, copied
    shutil.copytree(project / "pools", study)
    monkeypatch.chdir(project)
    assert main(["plan", "--params", "params.yaml", "--draws", "4", "--max-k", "8"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"deepseek \$ +deepseek hours +qwen-local \$ +qwen-local hours\n", out), out
    prompt, completion = usage_by_hand(pilot)
    rows = priced_rows(out, column=2)  # the qwen-local column: its own prices, the pilot's usage
    assert rows, out
    for _, _, traces, dollars in rows:
        assert dollars == money((round(traces * prompt) * 1.0 + round(traces * completion) * 2.0) / 1e6)


@pytest.mark.parametrize(("args", "message"), [
    (["--scores", "data/scores/none.parquet"], "data/scores/none.parquet: no score table; run a pilot first"),
    (["--methods", "cons"], "--methods: 'cons' must name two methods"),
    (["--methods", "cons,best"], "method 'best': not one the aggregate reports"),
    (["--endpoint", "nowhere"], "--endpoint: no endpoint 'nowhere' in endpoints:"),
    (["--max-k", "4"], "--max-k: 4 is below the pilot's 8 traces a problem"),
    (["--dataset", "elsewhere"], "--dataset: 'elsewhere' is not one of deepconf.datasets (toy)"),
    (["--target-width", "0"], "0 is not an interval width"),
    (["--power", "1.5"], "'1.5' is not a power"),
    (["--draws", "1"], "1 is not a number of draws"),
    (["--pilot-traces", "9"], "--pilot-traces: 9 is more than the 8 traces a problem of data/scores/toy.parquet has"),
    (["--pilot-traces", "1"], "1 is not a number of pilot traces"),
])
def test_bad_input_is_one_line_naming_it(pilot: Path, args: list[str], message: str, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(pilot)  # in-process: the same entry point as `python -m tracevote`, without a start-up each
    with pytest.raises(SystemExit) as exited:
        main(["plan", "--params", "params.yaml", *args])
    out, err = capsys.readouterr()
    assert exited.value.code == 2 and out == "" and "Traceback" not in err
    assert message in err.strip().splitlines()[-1]


def test_a_difference_within_the_plan_s_error_gets_no_recommendation(pilot: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    # on the simulator's toy pilot the weighted vote and the majority agree on every pool: a predicted difference
    # of 0, which no held-out error can be smaller than
    monkeypatch.chdir(pilot)
    assert main(["plan", "--params", "params.yaml", "--draws", "8", "--max-k", "16", "--methods", "cons,avg"]) == 0
    out = capsys.readouterr().out
    assert "recommended:" not in out
    line = next(line for line in out.splitlines() if line.startswith("no recommendation"))
    assert re.fullmatch(r"no recommendation: the pilot cannot support one: avg - cons predicted \+0\.0 at K=8, \+0\.0 "
                        r"at K=16 points; its error on held-out problems ±[\d.]+, as large as the difference or "
                        r"larger at every K, so it cannot say which way a study would go", line), line


def test_a_pilot_of_the_first_traces_is_checked_against_the_rest(pilot: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(pilot)
    assert main(["plan", "--params", "params.yaml", "--draws", "8", "--max-k", "16", "--pilot-traces", "4"]) == 0
    out = capsys.readouterr().out
    assert "2 problems x 4 traces (SIMULATED model)" in out
    head = re.search(r"against the score table's own vote on each problem's first K traces \(2 problems, K=4, 8\): "
                     r"(\d+) of 28 inside their interval\n", out)
    assert head, out
    rows = re.findall(r"^(\w+) +(4|8) +([\d.]+) +\[([\d.]+), ([\d.]+)\] +([\d.]+) +[+-][\d.]+ +(yes|NO)$", out,
                      flags=re.MULTILINE)
    assert len(rows) == 28 and sum(row[-1] == "yes" for row in rows) == int(head[1])
    for _, _, _, low, high, measured, inside in rows:
        assert (float(low) <= float(measured) <= float(high)) == (inside == "yes")
    table = pd.read_parquet(pilot / "data" / "scores" / "toy.parquet")  # cons at K=8: the whole table's majority
    cons = {k: float(m) for name, k, _, _, _, m, _ in rows if name == "cons"}
    assert cons["8"] == pytest.approx(100 * majority_right(table), abs=0.05)


def majority_right(table: pd.DataFrame) -> float:
    """The share of problems whose most common valid answer (smallest on a tie) is right, by hand."""
    right = []
    for _, rows in table[table["valid"]].groupby("problem_id"):
        counts = rows["answer"].value_counts()
        top = counts[counts == counts.max()].index.min()
        right.append(bool(rows.loc[rows["answer"] == top, "correct"].iloc[0]))
    return float(np.mean(right))


def test_on_the_real_models_pilot_a_loss_larger_than_its_error_is_supported_and_a_small_gain_is_not() -> None:
    """The real model's 16-trace pilot (tests/fixtures/real_scores): avg_top10 loses to cons by more than the
    difference's held-out error at every K, so the plan can recommend a size; tail_top90's small gain is within it,
    so it says it cannot (docs/planning.md)."""
    table = pd.read_parquet(REPO_ROOT / "tests" / "fixtures" / "real_scores" / "tinymath.parquet")
    pilot = split_problems(table[table["sample_id"] < 16])
    evaluation = EvalConfig(k=(64,), repeat=64, seed=0, etas=(0.1, 0.9))
    projections = [project(pilot, k, evaluation, 100, MEASURES) for k in (16, 32, 64)]
    validation = cross_validate(pilot, evaluation, 100, MEASURES)
    targets = Targets(width=0.10, difference=0.05, power=0.8, methods=(), max_k=64, draws=100)
    for pair, supported_ks in ((("cons", "avg_top10"), [16, 32, 64]), (("cons", "tail_top90"), [])):
        rows = options(projections, pair, targets, 0.05)
        assert [row.k for row in supported(projections, validation, pair, rows)] == supported_ks, pair
    assert all(predicted_difference(p, ("cons", "avg_top10")) < 0 for p in projections)  # a loss, as measured
    rows = options(projections, ("cons", "avg_top10"), targets, 0.05)
    assert any(row.for_width != row.for_difference for row in rows)  # else max and min would agree
    for row, projection in zip(rows, projections, strict=True):  # the width target holds for both methods
        widths = [projection.problems_for_width(method, targets.width) for method in ("cons", "avg_top10")]
        assert widths[0] != widths[1] and row.for_width == max(widths)
    for row in rows:  # an option meets both targets: the larger of its two counts, K traces on each
        assert row.problems == max(row.for_width, row.for_difference) and row.traces == row.k * row.problems


@pytest.mark.parametrize(("for_width", "for_difference", "problems"), [
    (120, 480, 480),  # the difference needs more problems than the width: the study takes that many
    (480, 120, 480),  # and the other way round
    (None, 300, 300),  # the two never disagree: only the width decides
    (300, None, 300),  # the interval never varies: only the difference decides
    (None, None, None),  # neither can be met from the pilot: no option
])
def test_an_option_takes_the_larger_of_its_two_problem_counts(for_width: int | None, for_difference: int | None,
                                                               problems: int | None) -> None:
    option = Option(16, for_width, for_difference)
    assert option.problems == problems
    assert option.traces == (None if problems is None else 16 * problems)
