"""check_params, the first stage: every key of params.yaml is validated, including keys no stage declares."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.dvcproject import dvc, make_project, run, run_stage, update_params
from tests.test_pipeline import small_sim_params
from tracevote.cli.demo import BUILTIN_PROBLEMS

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_project(tmp_path_factory.mktemp("check_params") / "project", small_sim_params())


# check_params's refusal table: each (change to params.yaml, the line it fails with). Every paid stage run alone
# refuses the same rows with the same line (tests/test_paid_stage_refusals.py).
REFUSALS: list[tuple[dict, str]] = [
    ({"pool": {"concurency": 4}}, "pool.concurency: unknown key (did you mean concurrency? known: "
                                  "allow_uninformative_logprobs, concurrency, keep_raw,"),
    ({"evall": {"k": [1]}}, "evall: unknown key (did you mean eval? known: answers, confidence, critique, "
                            "datasets, debate, decoding, deepconf,"),
    ({"decoding": {"temperature": "hot"}}, "decoding.temperature: expected a number, got 'hot'"),
    # issue 22 item 10: refused by check_params, not later by the client or the critique stage
    ({"decoding": {"max_tokens": 10**12}},
     "decoding.max_tokens: 1000000000000 must be an integer in 1..1,000,000"),
    ({"endpoints": {"deepseek": {"extra_body": {"temperature": 0.1}}}},
     "endpoints.deepseek.extra_body: 'temperature' is set by the client"),
    # issue 43: a context window no model has
    ({"endpoints": {"deepseek": {"context_window": 0}}},
     "endpoints.deepseek.context_window: 0 must be an integer in 1..100,000,000"),
    ({"endpoints": {"deepseek": {"api_key_env": ""}}},
     "endpoints.deepseek.api_key_env: '' must be an environment variable name"),
    # issue 23: what a method needs of its endpoint's provider, before any request
    ({"critique": {"endpoint": "gpt-5-nano"}},
     "critique.temperature: 0.7 must be 1: endpoint gpt-5-nano (gpt-5-nano, profile openai-reasoning) accepts "
     "only the default temperature; set critique.temperature: 1"),
    # issue 43: a reasoning effort where the endpoint's profile takes none
    ({"endpoints": {"deepseek": {"reasoning_effort": "high"}}},
     "endpoints.deepseek.reasoning_effort: 'high' must be null: profile deepseek takes no reasoning_effort"),
    ({"critique": {"template": "{problem} {tagged_response} {solution}"}},
     "critique.template: unknown placeholder {solution}"),
    # issue 29: fetch depends on source.watch, which must be the local source itself
    ({"datasets": {"toy": {"source": {"watch": "stages/fetch.py"}}}},
     f"datasets.toy.source.watch: 'stages/fetch.py' must be '{BUILTIN_PROBLEMS.resolve()}' (so that editing "
     f"that file marks fetch stale); set watch: {BUILTIN_PROBLEMS.resolve()}"),
]


@pytest.mark.parametrize(("change", "message"), REFUSALS)
def test_a_bad_key_fails_with_the_known_keys(project: Path, change: dict, message: str) -> None:
    """The stage's own command, as dvc.yaml runs it (DVC's part, running it and failing with it, is proved by the
    test below and tests/test_stage_failures.py's unknown keys), so each row costs no DVC start-up."""
    update_params(project, change)
    try:
        failed = run_stage(project, "check_params.py", "--params", "params.yaml", check=False)
    finally:
        run(project, "git", "checkout", "--", "params.yaml")
    output = failed.stdout + failed.stderr
    assert failed.returncode != 0
    assert f"error: params.yaml: {message}" in output
    assert "Traceback" not in output


def test_valid_params_pass_and_nothing_depends_on_the_stage(project: Path) -> None:
    result = dvc(project, "repro", "check_params")
    assert "check_params: params.yaml is valid" in result.stdout
    downstream = dvc(project, "dag", "--dot").stdout
    assert "check_params\" ->" not in downstream and "-> \"check_params" not in downstream


def test_each_problem_fails_the_stage_that_owns_its_key(project: Path) -> None:
    """Issue 25: shrinking pool.n_pool failed fetch@<dataset>, one problem per run. check_params lists every
    problem in one run; an offline stage fails only on the keys it declares, listing the others after its own, and
    one whose keys are fine runs. Issue 30: a paid stage is not one of them: it refuses every problem, as
    check_params does, before any request."""
    dvc(project, "repro", "score@toy")
    update_params(project, {"eval": {"k": [1, 2, 4, 8, 32]}, "report": {"k": 3}})
    eval_k = "params.yaml: eval.k: [32] must be at most pool.n_pool (16)"
    report_k = "report.k: 3 must be one of eval.k [1, 2, 4, 8, 32]"
    try:
        # the stage's own command, as dvc.yaml runs it: DVC failing with it is proved by tests/test_stage_failures.py
        checked = run_stage(project, "check_params.py", "--params", "params.yaml", check=False)
        assert checked.returncode != 0
        assert f"error: {eval_k}\nparams.yaml: {report_k}\n" in checked.stderr
        fetched = dvc(project, "repro", "-f", "fetch@toy", check=False)
        assert fetched.returncode == 0, fetched.stdout + fetched.stderr
        failed = dvc(project, "repro", "aggregate@toy", check=False)
        output = failed.stdout + failed.stderr
        assert failed.returncode != 0
        assert "Stage 'build_pool@toy' didn't change" in output and "Running stage 'aggregate@toy'" in output
        assert f"error: {eval_k}\nparams.yaml also has problems in keys this stage does not read" in output
        assert f"\n  {report_k}" in output
        assert "failed to reproduce 'aggregate@toy'" in output
        assert "Traceback" not in output
        paid = dvc(project, "repro", "-s", "-f", "build_pool@toy", check=False)
        assert paid.returncode != 0
        assert f"error: {eval_k}\nparams.yaml: {report_k}\n" in paid.stderr
    finally:
        run(project, "git", "checkout", "--", "params.yaml")
