"""`python -m tracevote estimate` as a process in scratch projects on the simulated model: one short row per paid
stage and dataset, only the work still missing priced (a partly built pool for its missing samples, a finished
one at $0), the grading critic included, a total, each endpoint's prices once. Expected figures are worked out
here from the prompts and the prices, never read back from the program."""

from __future__ import annotations

import math
import re
import shutil
from pathlib import Path

import pytest
import yaml

from tests.dvcproject import run_stage
from tests.sampling.test_connection_errors import tracevote, workdir
from tests.sampling.test_run_control import build_pool
from tracevote.cli.demo import BUILTIN_GSM8K, BUILTIN_PREDICTIONS, BUILTIN_STEPS, local_dataset
from tracevote.cli.estimate import tokens
from tracevote.core.config import load_params
from tracevote.core.costs import money, prompt_bytes
from tracevote.datasets.problems import load_problems
from tracevote.sampling.prompts import setting_messages
from tracevote.store.pool import Setting

PRICE_IN, PRICE_OUT = 0.14, 0.28  # the fixture's deepseek endpoint, USD per 1M tokens; every token in at cache miss
MAX_TOKENS = 64  # workdir's decoding.max_tokens
HANDWRITTEN = "handwritten"


def table(stdout: str) -> dict[str, list[str]]:
    """stage -> its cells (requests, tokens in, tokens out, dollars, note if any), the total row as "total"."""
    lines = stdout.splitlines()
    rules = [index for index, line in enumerate(lines) if line.startswith("-----")]
    body = [*lines[rules[0] + 1:rules[1]], lines[rules[1] + 1]]
    return {cells[0]: cells[1:] for cells in (re.split(r"\s{2,}", line.strip()) for line in body)}


def estimate(project: Path, *args: str) -> tuple[dict[str, list[str]], str]:
    result = tracevote(project, "estimate", *args)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return table(result.stdout), result.stdout


def pool_cost_by_hand(project: Path, samples_per_problem: int) -> tuple[int, float]:
    """(tokens in, dollars) of `samples_per_problem` more samples of each toy problem: a prompt's tokens are 16
    (the chat template) + its UTF-8 bytes / 3, rounded up; every token out reaches max_tokens."""
    setting = Setting.from_params(load_params(project / "params.yaml"))
    problems = load_problems(project / "data" / "toy.jsonl")
    prompts = setting_messages(problems, setting).values()
    tokens_in = samples_per_problem * sum(16 + math.ceil(prompt_bytes(messages) / 3) for messages in prompts)
    tokens_out = samples_per_problem * len(problems) * MAX_TOKENS
    return tokens_in, (tokens_in * PRICE_IN + tokens_out * PRICE_OUT) / 1e6


def dollars(cell: str) -> float:
    return float(cell.lstrip("$").replace(",", ""))


def toy_project(root: Path) -> Path:
    """Two toy problems, DeepConf and the debate on them (n_pool 2), the critique on a dataset not normalized."""
    return workdir(root, backend="sim", name="deepseek-v4-flash")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return toy_project(tmp_path)


@pytest.fixture(scope="module")
def fresh_estimate(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, list[str]], str]:
    """`estimate` on a toy project with nothing built yet, run once for the tests that read it (its rows, and all
    it printed); each test's `project` is the same project, to change."""
    return estimate(toy_project(tmp_path_factory.mktemp("fresh-estimate")))


def test_a_partly_built_pool_is_priced_for_its_missing_samples_only(
        project: Path, fresh_estimate: tuple[dict[str, list[str]], str]) -> None:
    before, _ = fresh_estimate
    tokens_in, usd = pool_cost_by_hand(project, 2)
    assert before["build_pool@toy"][:2] == ["4", str(tokens_in)]
    assert before["build_pool@toy"][3] == money(usd)  # "$0.000097": two significant digits

    built = build_pool(project)
    assert built.returncode == 0, built.stderr
    finished, _ = estimate(project)
    assert finished["build_pool@toy"] == ["0", "0", "0", "$0", "nothing missing"]

    # the same pool at n_pool 5 lacks samples 2, 3 and 4 of each problem: only those are priced
    partly, _ = estimate(project, "--n-pool", "5")
    tokens_in, usd = pool_cost_by_hand(project, 3)
    assert partly["build_pool@toy"][:3] == ["6", str(tokens_in), str(6 * MAX_TOKENS)]
    assert partly["build_pool@toy"][3] == money(usd)


def test_one_short_row_per_paid_stage_a_total_and_the_prices_once(
        fresh_estimate: tuple[dict[str, list[str]], str]) -> None:
    rows, stdout = fresh_estimate
    assert list(rows) == ["build_pool@toy", "build_debate@toy", "build_critiques@toy_steps",
                          "build_grading_critic@pool_toy", "total"]
    assert rows["build_debate@toy"][4] == "at most (no early consensus)"  # 2 debates of up to 11 calls
    assert rows["build_debate@toy"][0] == "22"
    assert rows["build_critiques@toy_steps"] == ["?", "?", "?", "?", "needs dvc repro normalize@toy_steps"]
    assert rows["build_grading_critic@pool_toy"] == ["0", "0", "0", "$0", "grading.critic.enabled: false"]
    assert rows["total"][0] == "26" and rows["total"][4] == "without the rows marked ?"
    assert dollars(rows["total"][3]) == pytest.approx(  # each figure shown to two significant digits
        dollars(rows["build_pool@toy"][3]) + dollars(rows["build_debate@toy"][3]), rel=0.05)
    lines = stdout.splitlines()
    prices = lines[lines.index("prices per 1M tokens (every token in at the cache-miss price, a worst case):") + 1:]
    assert prices[0] == "  deepseek-v4-flash (endpoint deepseek): $0.14 in, $0.28 out, checked 2026-07; out at 100% " \
                        "of max_tokens"  # one endpoint priced every row: its prices once
    assert not prices[1].startswith("  ")
    assert "SIMULATED (model.backend: sim)" in stdout and "nothing will be spent" in stdout
    assert max(len(line) for line in stdout.splitlines()) <= 120


def critic_project(project: Path) -> Path:
    """The project with the critic on, grading the hand-written GSM8K predictions (7 of 8 items, each with a
    reference solution) as the only run, its gold normalized."""
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["datasets"]["demo_gsm8k"] = local_dataset(BUILTIN_GSM8K, problem_key="question", answer_format="integer")
    params["grading"]["runs"] = {HANDWRITTEN: {"dataset": "demo_gsm8k", "predictions": "predictions.jsonl",
                                               "id_key": None}}
    params["grading"]["critic"]["enabled"] = True
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    shutil.copy(BUILTIN_PREDICTIONS, project / "predictions.jsonl")
    run_stage(project, "normalize.py", "--params", "params.yaml", "--dataset", "demo_gsm8k", "--raw",
              str(BUILTIN_GSM8K), "--out", "data/demo_gsm8k.jsonl")
    return project


def test_the_grading_critic_is_priced_until_its_ledger_holds_every_reply(project: Path) -> None:
    project = critic_project(project)
    stage = f"build_grading_critic@{HANDWRITTEN}"
    before, _ = estimate(project)
    assert before[stage][0] == "7" and dollars(before[stage][3]) > 0
    run_stage(project, "build_grading_critic.py", "--params", "params.yaml", "--run", HANDWRITTEN,
              "--gold", "data/demo_gsm8k.jsonl", "--critic", f"grading/critic/{HANDWRITTEN}")
    after, _ = estimate(project)
    assert after[stage] == ["0", "0", "0", "$0", "nothing missing"]


def test_a_critic_on_a_pool_not_built_yet_is_priced_at_expected_trace_lengths(project: Path) -> None:
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["grading"]["critic"]["enabled"] = True
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    rows, _ = estimate(project)
    # the toy problems have no reference solution: the critic has nothing to ask about, and the row says so
    assert rows["build_grading_critic@pool_toy"] == ["0", "0", "0", "$0",
                                                     "toy has no reference solutions: nothing for the critic to ask"]


def test_a_critique_dataset_once_normalized_is_priced_for_every_critique(project: Path) -> None:
    run_stage(project, "normalize.py", "--params", "params.yaml", "--dataset", "toy_steps", "--raw",
              str(BUILTIN_STEPS), "--out", "data/toy_steps.jsonl")
    rows, _ = estimate(project)
    solutions = len(BUILTIN_STEPS.read_text().splitlines())
    n_votes = yaml.safe_load((project / "params.yaml").read_text())["critique"]["n_votes"]
    assert rows["build_critiques@toy_steps"][0] == str(solutions * n_votes)  # 12 solutions x 8 critiques
    assert rows["total"][4:] == []  # every row priced


def test_the_live_run_is_priced_at_its_worst_case_until_its_ledgers_hold_every_trace(project: Path) -> None:
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["online"]["warmup"] = 1
    params["online"]["live"] = {"datasets": ["toy"], "methods": ["low"], "budget": 3, "concurrency": 2,
                                "max_cost_usd": 1.0}
    (project / "params.yaml").write_text(yaml.safe_dump(params))
    before, _ = estimate(project)
    setting = Setting.from_params(load_params(project / "params.yaml"))
    prompts = setting_messages(load_problems(project / "data" / "toy.jsonl"), setting).values()
    longest = max(16 + math.ceil(prompt_bytes(messages) / 3) for messages in prompts)
    traces = 2 * 3  # two problems: the warmup trace, then two streamed ones
    usd = traces * (longest * PRICE_IN + MAX_TOKENS * PRICE_OUT) / 1e6
    assert before["build_online@toy"] == [str(traces), str(traces * longest), str(traces * MAX_TOKENS), money(usd),
                                          "at most (no trace stopping early)"]
    built = run_stage(project, "build_online.py", "--dataset", "toy", "--problems", "data/toy.jsonl", "--online",
                      "online/toy", "--manifest", "online/toy.json")
    assert built.returncode == 0, built.stderr
    after, _ = estimate(project)
    assert after["build_online@toy"] == ["0", "0", "0", "$0", "nothing missing"]


def test_each_model_of_the_study_has_its_row_at_its_own_prices(project: Path) -> None:
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["deepconf"]["endpoints"] = ["qwen"]
    params["endpoints"]["qwen"] = {**params["endpoints"]["deepseek"], "name": "qwen-sim", "sim": {"accuracy": 0.2},
                                   "pricing": {"checked": "2026-07", "input_cache_miss": 0.5, "input_cache_hit": 0.1,
                                               "output": 2.0}}
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    rows, stdout = estimate(project)
    assert list(rows)[:2] == ["build_pool@toy", "build_pool_model@toy-qwen"]
    tokens_in, main_usd = pool_cost_by_hand(project, 2)
    assert rows["build_pool@toy"][3] == money(main_usd)  # the main model's row as without the other
    qwen_usd = (tokens_in * 0.5 + 4 * MAX_TOKENS * 2.0) / 1e6
    assert rows["build_pool_model@toy-qwen"][:4] == ["4", str(tokens_in), str(4 * MAX_TOKENS), money(qwen_usd)]
    assert "  qwen-sim (endpoint qwen): $0.5 in, $2 out, checked 2026-07" in stdout


@pytest.mark.parametrize(("count", "shown"), [
    (950, "950"), (12_345, "12.3k"), (2_963_000, "2.96M"), (999_994_999, "999.99M"),
    (1_996_800_000, "2.00B"),  # the paper's gpt-oss pool: 30 problems x 512 traces x 130,000 tokens
])
def test_a_token_count_reads_at_a_glance(count: int, shown: str) -> None:
    assert tokens(count) == shown


def windows_table(stdout: str) -> list[list[str]]:
    """The context-window table's rows (stage, endpoint, largest prompt, prompt + max_tokens, window, fits)."""
    lines = stdout.splitlines()
    start = lines.index("Each paid stage's largest request against its endpoint's context window (checked before "
                        "paying):")
    return [re.split(r"\s{2,}", line.strip()) for line in lines[start + 4:] if line.strip()]


def test_each_paid_stage_shows_its_largest_request_against_its_window(
        project: Path, fresh_estimate: tuple[dict[str, list[str]], str]) -> None:
    """Issue 43 item 3: the rounds of the debate quote the other agents' replies, so its largest prompt is round 1's;
    with a window that cannot hold it, the row says which max_tokens would (and the table still prints)."""
    _, stdout = fresh_estimate
    rows = {(cells[0], cells[2].split(" (")[1]): cells for cells in windows_table(stdout)}
    assert set(rows) == {("build_pool@toy", "solve prompt)"), ("build_debate@toy", "debate round 1)"),
                         ("build_debate@toy", "debate ranking)")}
    pool = rows["build_pool@toy", "solve prompt)"]
    assert pool[1] == "deepseek" and pool[3].endswith(f" + {MAX_TOKENS}") and pool[4:] == ["1,048,576", "yes"]
    assert pool[3].startswith("at most ")  # deepseek-v4-flash's tokenizer is not bundled: the byte bound
    round1 = rows["build_debate@toy", "debate round 1)"]
    round1_tokens = int(round1[3].removeprefix("at most ").split(" + ")[0].replace(",", ""))
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["endpoints"]["deepseek"]["context_window"] = round1_tokens  # the prompt fits, its max_tokens do not
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    _, stdout = estimate(project)
    refused = {cells[0] + cells[2]: cells for cells in windows_table(stdout)}["build_debate@toytoy-01 (debate round 1)"]
    fitting = int(refused[5].removeprefix("no: max_tokens <= ").replace(",", ""))
    agents = params["debate"]["agents"]
    assert 0 < fitting < params["debate"]["max_tokens"]
    # each of the agents' quoted replies shrinks with max_tokens as the reply asked for does
    assert fitting == pytest.approx(params["debate"]["max_tokens"] * agents / (agents + 1), abs=agents + 2)
