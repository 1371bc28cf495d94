"""A stage pays start-up only for what its path uses: a paid stage that sends nothing (its pool already whole, its
key missing, its critic disabled) loads no HTTP client, simulator or pyarrow; the grade stage no HTTP client;
report_grading, which draws from arrays, and score and aggregate, which read and write tables with pyarrow, no
pandas; check_params, fetch and normalize not even the socket module, tenacity or tqdm. Each stage runs as DVC runs
it, in a fresh interpreter that then lists the modules it loaded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FIXTURE_PARAMS, REPO_ROOT, hang_guard_s
from tests.dvcproject import copy_project, model_overrides, one_dataset, project_env, run_stage, update_params
from tests.stage_here import TRACEVOTE_MAIN
from tracevote.cli.demo import BUILTIN_PROBLEMS, copy_pipeline

HEAVY = ("numpy", "pandas", "pyarrow", "requests", "urllib3", "tqdm", "matplotlib", "tracevote.sampling.client",
         "tracevote.sim.server")
SENDING = {"requests", "urllib3", "tracevote.sampling.client", "tracevote.sim.server"}
# What a stage that resolves no host, retries nothing and draws no bar never needs: the socket module (the endpoints'
# config checks hosts with it only when asked), tenacity and email's date parser (the retry policy's), tqdm, and
# python-dotenv where there is no .env file to read a key from
LIGHT_UNUSED = (*HEAVY, "socket", "tenacity", "email.utils", "dotenv")

# Runs stages/<script> as `python stages/<script> ...` would, then writes its exit code, the heavy modules it
# loaded and how many times it opened params.yaml (an audit hook sees every open) to the file named first.
RUN_AND_LIST = """
import json, runpy, sys
out, script, *args = sys.argv[1:]
sys.argv = [script, *args]
params_opens = []
sys.addaudithook(lambda event, hook_args: params_opens.append(1) if event == "open"
                 and str(hook_args[0]).endswith("params.yaml") else None)
try:
    runpy.run_path(script, run_name="__main__")
    code = 0
except SystemExit as stopped:
    code = stopped.code or 0
with open(out, "w") as f:
    json.dump({{"code": code, "loaded": sorted(name for name in {heavy!r} if name in sys.modules),
               "params_opens": len(params_opens)}}, f)
"""


def small_params() -> dict[str, Any]:
    """One dataset of the built-in problems, 4 simulated traces each."""
    return {**one_dataset("toy", BUILTIN_PROBLEMS),
            **model_overrides(backend="sim", name="tracevote-sim", needs_key=False, extra_body={},
                              sim={"mean_tokens": 150}),
            "decoding": {"max_tokens": 400, "top_logprobs": 5}, "pool": {"n_pool": 4, "concurrency": 4},
            "eval": {"k": [1, 2, 4], "repeat": 2}, "report": {"k": 4}}


def stage_loads(root: Path, script: str, *args: str, watched: tuple[str, ...] = HEAVY) -> tuple[int, list[str], str]:
    """The exit code of stages/<script> run in `root`, the `watched` modules it loaded, and its stderr."""
    out = root / f"loaded-{script}.json"
    completed = subprocess.run([sys.executable, "-c", RUN_AND_LIST.format(heavy=watched), str(out),
                                str(REPO_ROOT / "stages" / script), *args], cwd=root, env=project_env(),
                               capture_output=True, text=True, timeout=hang_guard_s())
    assert out.is_file(), completed.stdout + completed.stderr
    listed = json.loads(out.read_text())
    return listed["code"], listed["loaded"], completed.stderr


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pipeline's files and small params (no git or DVC: no stage here reads them), the dataset fetched and
    normalized, its pool built once."""
    root = tmp_path_factory.mktemp("stage-imports")
    copy_pipeline(REPO_ROOT, root, FIXTURE_PARAMS, small_params())
    run_stage(root, "fetch.py", "--dataset", "toy", "--out", "data/raw/toy.jsonl")
    run_stage(root, "normalize.py", "--dataset", "toy", "--raw", "data/raw/toy.jsonl", "--out", "data/toy.jsonl")
    run_stage(root, "build_pool.py", *POOL_ARGS)
    return root


POOL_ARGS = ("--dataset", "toy", "--problems", "data/toy.jsonl", "--pools", "pools/toy", "--manifest", "pools/toy.json")
CRITIC_ARGS = ("--run", "pool_toy", "--gold", "data/toy.jsonl", "--critic", "grading/critic/pool_toy")


def test_a_whole_pool_loads_no_client_or_simulator(project: Path) -> None:
    code, loaded, _ = stage_loads(project, "build_pool.py", *POOL_ARGS, watched=LIGHT_UNUSED)
    assert code == 0
    assert SENDING.isdisjoint(loaded) and {"tqdm", "tenacity", "socket", "dotenv"}.isdisjoint(loaded), loaded


def test_the_dataset_stages_and_check_params_load_only_what_reading_params_and_files_needs(project: Path) -> None:
    normalize = ("--dataset", "toy", "--raw", "data/raw/toy.jsonl", "--out", "data/toy.jsonl")
    for script, *args in (("check_params.py",), ("fetch.py", "--dataset", "toy", "--out", "data/raw/toy.jsonl"),
                          ("normalize.py", *normalize)):
        code, loaded, stderr = stage_loads(project, script, *args, watched=LIGHT_UNUSED)
        assert code == 0, stderr
        assert loaded == [], (script, loaded)
        # parsed once (~8 ms each, ~250 runs a suite): the local sources and the validated params from one read
        assert json.loads((project / f"loaded-{script}.json").read_text())["params_opens"] == 1, script


def test_a_missing_key_is_refused_before_the_client_loads(project: Path, tmp_path: Path) -> None:
    root = copy_project(project, tmp_path / "project")
    update_params(root, model_overrides(backend="openai", name="deepseek-chat", needs_key=True))
    code, loaded, stderr = stage_loads(root, "build_pool.py", *POOL_ARGS)
    assert code == 2 and "no API key is set for endpoint deepseek" in stderr
    assert SENDING.isdisjoint(loaded) and "tqdm" not in loaded, loaded


def test_a_disabled_critic_loads_no_client_pool_or_pyarrow_and_grading_no_client(project: Path) -> None:
    code, loaded, _ = stage_loads(project, "build_grading_critic.py", *CRITIC_ARGS,
                                  watched=(*LIGHT_UNUSED, "multiprocessing", "concurrent.futures"))
    assert code == 0 and loaded == []  # nor the Math-Verify judge's worker pool, which it never starts
    code, loaded, stderr = stage_loads(project, "grade.py", *CRITIC_ARGS, "--out", "grading/runs/pool_toy.json",
                                       "--details", "grading/runs/pool_toy.jsonl")
    assert code == 0, stderr
    assert SENDING.isdisjoint(loaded) and "tqdm" not in loaded and "pandas" not in loaded, loaded
    code, loaded, stderr = stage_loads(project, "report_grading.py", "--runs", "grading/runs", "--metrics",
                                       "metrics/grading.json", "--headline", "metrics/headline/grading", "--table",
                                       "metrics/grading.md", "--plots", "plots/grading")
    assert code == 0, stderr
    assert (project / "plots" / "grading").is_dir() and "pandas" not in loaded, loaded


def test_score_and_aggregate_load_no_pandas(project: Path, tmp_path: Path) -> None:
    """Run for real, as `dvc exp run` of a confidence setting runs them: aggregate reads the score table through
    pyarrow alone (deepconf.score_columns), so pandas' ~0.4 CPU s of start-up is not the user's to wait for."""
    scores, stops = tmp_path / "toy.parquet", tmp_path / "toy.stops.parquet"
    code, loaded, stderr = stage_loads(project, "score.py", "--problems", "data/toy.jsonl", "--manifest",
                                       "pools/toy.json", "--out", str(scores), "--stops", str(stops))
    assert code == 0, stderr
    assert "pandas" not in loaded, loaded
    code, loaded, stderr = stage_loads(project, "aggregate.py", "--scores", str(scores), "--stops", str(stops),
                                       "--out", str(tmp_path / "toy.json"))
    assert code == 0, stderr
    assert (tmp_path / "toy.json").is_file() and "pandas" not in loaded, loaded


def loaded_by_import(module: str, watched: tuple[str, ...]) -> list[str]:
    """The `watched` modules a fresh interpreter has loaded once it has imported `module`."""
    script = f"import sys, {module}; print(sorted(name for name in {watched!r} if name in sys.modules))"
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                               timeout=hang_guard_s())
    return json.loads(completed.stdout.replace("'", '"'))


def test_the_score_tables_readers_import_its_module_without_a_process_pool_or_a_version_scan() -> None:
    # aggregate and the explorer import tracevote.deepconf.score for its columns; its schemas (pandas' version,
    # looked up by importlib.metadata) are made when a table is written, its pools started when one is used
    assert loaded_by_import("tracevote.deepconf.score", ("importlib.metadata", "multiprocessing",
                                                         "concurrent.futures.process")) == []


# what report_critiques never reads: the DeepConf report's tables and results (~0.04 CPU s of imports)
DEEPCONF_REPORT = ("tracevote.report.tables", "tracevote.deepconf.results")


@pytest.mark.parametrize(("script", "unused"), [("report.py", ()), ("compare.py", ()),
                                                ("report_critiques.py", DEEPCONF_REPORT)])
def test_the_stages_that_read_scores_or_draw_without_frames_load_no_pandas(script: str, unused: tuple[str, ...],
                                                                            tmp_path: Path) -> None:
    """Their imports, as `--help` stops after them: each reads its score table through pyarrow alone and writes its
    plot CSV from plain columns (report.figures.plot_csv), so pandas' ~0.4 CPU s of start-up is not theirs; nor is
    the DeepConf report's code report_critiques'."""
    code, loaded, stderr = stage_loads(tmp_path, script, "--help", watched=(*HEAVY, *DEEPCONF_REPORT))
    assert code == 0, stderr
    assert "pandas" not in loaded and not set(unused) & set(loaded), loaded


# ---- Math-Verify (with sympy and its LaTeX grammar, ~0.45 CPU s) loads only when a comparison is made ----

MATH_VERIFY = ("math_verify", "sympy", "latex2sympy2_extended")
GOLD_ROW = '{"question": "Two plus two?", "answer": "2 + 2 = 4\\n#### 4"}\n'
PREDICTION_ROW = '{"id": "gsm8k_test_0", "content": "#### 4"}\n'


def command_loads(root: Path, *args: str) -> tuple[int, list[str], str]:
    """The exit code of `python -m tracevote <args>` run in `root`, the Math-Verify modules it loaded, its stderr."""
    out = root / "loaded-command.json"
    completed = subprocess.run([sys.executable, "-c", RUN_AND_LIST.format(heavy=MATH_VERIFY), str(out),
                                str(TRACEVOTE_MAIN), *args], cwd=root, env=project_env(), capture_output=True,
                               text=True, timeout=hang_guard_s())
    assert out.is_file(), completed.stdout + completed.stderr
    listed = json.loads(out.read_text())
    return listed["code"], listed["loaded"], completed.stderr


GOLD_ARGS = ("--gold", "gold.jsonl")
# (gold file, predictions file, the arguments after --pred-path, what the one error line says)
GRADE_REFUSALS = [
    ("", PREDICTION_ROW, GOLD_ARGS, "gold.jsonl: 1 problem(s) in the gold file:\n  no rows"),
    (GOLD_ROW, "", GOLD_ARGS, "preds.jsonl: no predictions, nothing graded"),
    (GOLD_ROW, '{"id": "math500_test_0", "content": "#### 4"}\n', GOLD_ARGS,
     "preds.jsonl: none of its 1 prediction ids (first 'math500_test_0') is the id of a gold item"),
    (GOLD_ROW, PREDICTION_ROW, ("--gold", "missing.jsonl"), "missing.jsonl: dataset file not found"),
    (GOLD_ROW, PREDICTION_ROW, (*GOLD_ARGS, "--enable-critic", "--critic-structured"),
     "--critic-structured: the critic's endpoint deepseek"),
]


@pytest.mark.parametrize(("gold", "predictions", "args", "says"), GRADE_REFUSALS,
                         ids=["empty-gold", "empty-predictions", "no-id-matches", "missing-gold", "critic-structured"])
def test_grade_refuses_bad_input_before_math_verify_loads(tmp_path: Path, gold: str, predictions: str,
                                                          args: tuple[str, ...], says: str) -> None:
    """A typo fails fast: every refusal of `grade` comes before its judge loads Math-Verify (the critic's
    --critic-structured, on an endpoint without JSON-schema replies, too: before anything is graded)."""
    (tmp_path / "gold.jsonl").write_text(gold, encoding="utf-8")
    (tmp_path / "preds.jsonl").write_text(predictions, encoding="utf-8")
    (tmp_path / "params.yaml").write_text(FIXTURE_PARAMS.read_text())  # its critic's endpoint: deepseek
    code, loaded, stderr = command_loads(tmp_path, "grade", "--dataset", "gsm8k", "--pred-path", "preds.jsonl", *args)
    assert code == 2 and stderr.startswith("error: ") and says in stderr, stderr
    assert loaded == [], loaded
    assert not (tmp_path / "grading").exists()  # nothing written: no critic folder either


def test_grade_loads_math_verify_once_it_has_a_pair_to_compare(tmp_path: Path) -> None:
    """The counterpart of the refusals: the same files, good, are graded through Math-Verify."""
    (tmp_path / "gold.jsonl").write_text(GOLD_ROW, encoding="utf-8")
    (tmp_path / "preds.jsonl").write_text(PREDICTION_ROW, encoding="utf-8")
    code, loaded, stderr = command_loads(tmp_path, "grade", "--dataset", "gsm8k", "--pred-path", "preds.jsonl",
                                         "--gold", "gold.jsonl", "--json")
    assert code == 0, stderr
    assert loaded == sorted(MATH_VERIFY)


def test_the_grade_stage_refuses_an_unknown_run_before_math_verify_loads(project: Path) -> None:
    code, loaded, stderr = stage_loads(project, "grade.py", "--run", "no_such_run", "--gold", "data/toy.jsonl",
                                       "--critic", "grading/critic/pool_toy", "--out", "grading/runs/x.json",
                                       "--details", "grading/runs/x.jsonl", watched=MATH_VERIFY)
    assert code == 2 and "grading.runs: no run 'no_such_run'" in stderr, stderr
    assert loaded == [], loaded
