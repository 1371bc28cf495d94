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
import pytest
import yaml

from tests.conftest import REPO_ROOT
from tests.core.test_config_study import QWEN
from tests.dvcproject import project_env
from tests.sampling.test_connection_errors import tracevote, workdir
from tests.sampling.test_run_control import build_pool
from tracevote.cli.main import main
from tracevote.core.costs import money
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
                           cwd=root, env=project_env(), capture_output=True, text=True, timeout=300)
    assert score.returncode == 0, score.stderr
    return root


def usage_by_hand(root: Path) -> tuple[float, float]:
    """Mean prompt and completion tokens a trace, from the pool's samples."""
    pool = Pool(next((root / "pools" / "toy").rglob(Pool.META)).parent)
    samples = [s for problem_id in ("toy-01", "toy-02") for s in pool.iter_samples(problem_id)]
    return (float(np.mean([s.prompt_tokens for s in samples])), float(np.mean([s.completion_tokens for s in samples])))


def test_the_plan_prints_each_k_and_prices_the_cheapest_option(pilot: Path) -> None:
    result = tracevote(pilot, "plan", "--draws", "8", "--max-k", "32", "--methods", "cons,tail_top10",
                       "--endpoint", "gpt-4o-mini")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "toy from its pilot data/scores/toy.parquet: 2 problems x 8 traces (SIMULATED model)" in out
    assert re.search(r"method +K=8 +K=16 +K=32\n", out)
    found = re.search(r"recommended: pool.n_pool=(\d+) on ([\d,]+) problems .*?, ([\d,]+) traces: (\S+) on deepseek, "
                      r"~\S+ h", out)
    assert found, out
    k, problems, traces = int(found[1]), int(found[2].replace(",", "")), int(found[3].replace(",", ""))
    assert traces == k * problems
    prompt, completion = usage_by_hand(pilot)
    assert found[4] == money((round(traces * prompt) * PRICE_IN + round(traces * completion) * PRICE_OUT) / 1e6)
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
    found = re.search(r"recommended: .*?([\d,]+) traces: \S+ on deepseek, ~\S+ h; (\S+) on qwen-local, ~\S+ h", out)
    assert found, out
    traces = int(found[1].replace(",", ""))
    prompt, completion = usage_by_hand(pilot)
    assert found[2] == money((round(traces * prompt) * 1.0 + round(traces * completion) * 2.0) / 1e6)


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
])
def test_bad_input_is_one_line_naming_it(pilot: Path, args: list[str], message: str, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(pilot)  # in-process: the same entry point as `python -m tracevote`, without a start-up each
    with pytest.raises(SystemExit) as exited:
        main(["plan", "--params", "params.yaml", *args])
    out, err = capsys.readouterr()
    assert exited.value.code == 2 and out == "" and "Traceback" not in err
    assert message in err.strip().splitlines()[-1]
