"""Every method on every provider profile it supports, through `dvc repro` in real DVC projects, the simulated
model playing each endpoint's profile (model.backend: sim): DeepConf's pool on deepseek, openai-chat and local (a
reasoning model has no logprobs); the debate's agents and judge, the critique and the grading critic on all four.
Then what an endpoint change re-runs: a new judge re-runs only the debate's branch, servers and prices nothing."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.dvcproject import built_once, copy_project, dvc, make_project, run, update_params
from tests.images import assert_not_blank
from tests.test_pipeline import changed_stages, ran_stages, small_sim_params
from tracevote.cli.demo import BUILTIN_GSM8K, BUILTIN_PREDICTIONS, local_dataset
from tracevote.core.config import load_params
from tracevote.debate.prompts import RANK
from tracevote.store.calls import CallLedger, CallRecord

pytestmark = pytest.mark.slow

RUN = "handwritten"  # hand-written predictions with reference solutions: what the critic scores
PREDICTIONS = Path("predictions") / "demo_gsm8k.jsonl"
THINKING = {"thinking": {"type": "disabled"}}  # DeepSeek's own field, as params.yaml sends it
LOCAL_ENDPOINT = {  # a vLLM server: profile inferred from the host (local), a field only such servers know
    "profile": None, "base_url": "http://gpu1:8000/v1", "name": "Qwen/Qwen3-8B",
    "extra_body": {"chat_template_kwargs": {"enable_thinking": False}}, "reasoning_effort": None,
    "api_key_env": "VLLM_API_KEY",
    "needs_key": False,
    "pricing": {"checked": "2026-07", "input_cache_miss": 0.0, "input_cache_hit": 0.0, "output": 0.0}}
DEBATE_BRANCH = {"build_debate", "score_debate", "compare"}


@dataclass(frozen=True)
class Endpoints:
    """Which endpoint each method calls in one project; `pool` None: DeepConf does not run there."""

    pool: str | None
    agents: str
    judge: str
    critique: str
    critic: str

    def params(self) -> dict[str, Any]:
        return {"deepconf": {"endpoint": self.pool or "deepseek"},
                "debate": {"endpoint": self.agents, "judge_endpoint": self.judge},
                "critique": {"endpoint": self.critique}, "grading": {"critic": {"endpoint": self.critic}}}


# (profile, the endpoints of its project, its models' names, extra params): all four methods on one profile
PROFILE_PROJECTS = {
    "deepseek": (Endpoints("deepseek", "deepseek", "deepseek", "deepseek", "deepseek"), {}),
    # the judge on an endpoint of its own; gpt-4-1 (model gpt-4.1) is also the endpoint key DVC once read as
    # endpoints -> gpt-4 -> 1, failing the stage
    "openai-chat": (Endpoints("gpt-4o-mini", "gpt-4-1", "gpt-4o-mini", "gpt-4o-mini", "gpt-4o-mini"), {}),
    # only the default temperature; DeepConf cannot run here (no logprobs: tests/test_profile_refusals.py)
    # and the least reasoning: the debate's and the critique's small budgets must hold its hidden reasoning too
    "openai-reasoning": (Endpoints(None, "gpt-5-nano", "gpt-5-nano", "gpt-5-nano", "gpt-5-nano"),
                         {"debate": {"temperature": 1}, "critique": {"temperature": 1},
                          "grading": {"critic": {"temperature": 1}},
                          "endpoints": {"gpt-5-nano": {"reasoning_effort": "minimal"}}}),
    "local": (Endpoints("qwen-local", "qwen-local", "qwen-local", "qwen-local", "qwen-local"), {}),
}


def build_base(root: Path) -> Path:
    """A committed project whose datasets are normalized and whose grading run is the hand-written predictions
    (tracked by `dvc add`), with every endpoint a project below uses; each profile's project is a copy of it."""
    params = small_sim_params()
    params["datasets"]["demo_gsm8k"] = local_dataset(BUILTIN_GSM8K, problem_key="question", answer_format="integer")
    params["grading"] = {"runs": {RUN: {"dataset": "demo_gsm8k", "predictions": str(PREDICTIONS)}},
                         "critic": {"enabled": True}, "workers": 1}
    params["debate"] = {**params["debate"], "max_tokens": 400, "concurrency": 4}
    # agents that often disagree, so on every profile's model names some debates reach the judge (each name draws
    # its own replies: at 0.45, gpt-4.1's agents agreed early on all 12 problems)
    params["model"]["sim"] = {**params["model"]["sim"], "accuracy": 0.3}
    params["endpoints"] = {**params["endpoints"], "qwen-local": LOCAL_ENDPOINT}
    params["endpoints"]["deepseek"]["extra_body"] = THINKING
    project = make_project(root, params)
    return with_predictions_and_datasets(project, "datasets")


def with_predictions_and_datasets(project: Path, message: str) -> Path:
    """`project` with the hand-written GSM8K predictions tracked by DVC and its three datasets normalized,
    committed with `message`."""
    (project / "predictions").mkdir()
    shutil.copy(BUILTIN_PREDICTIONS, project / PREDICTIONS)
    dvc(project, "add", str(PREDICTIONS))
    dvc(project, "repro", "normalize@toy", "normalize@toy_steps", "normalize@demo_gsm8k")
    run(project, "git", "add", "-A")
    run(project, "git", "commit", "-qm", message)
    return project


@dataclass(frozen=True)
class Built:
    project: Path
    output: str  # what `dvc repro` printed


def build_profile(profile: str, base: Path, folder: Path) -> None:
    """In folder/project, a copy of `base` set up for `profile`, then every method's paid stage and what turns its
    replies into metrics and figures, in one `dvc repro` (compare, DeepConf's stages and the explorer, which needs a
    pool's scores, only where DeepConf runs), whose output is kept in folder/repro.txt."""
    endpoints, extra = PROFILE_PROJECTS[profile]
    project = copy_project(base, folder / "project")
    update_params(project, endpoints.params())
    update_params(project, extra)
    pool_stages = ["report@toy", "compare", "view"] if endpoints.pool else []
    result = dvc(project, "repro", *pool_stages, "score_debate", "report_critiques", "report_grading")
    (folder / "repro.txt").write_text(result.stdout)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Built]:
    """The project of one profile: built once per run, whichever xdist worker first asks (tests/dvcproject.py's
    built_once, so a file that splits these tests off shares the builds), and shared: read it, or copy it
    (copy_project) to change it."""
    projects: dict[str, Built] = {}

    def build(profile: str) -> Built:
        if profile not in projects:
            base = built_once(tmp_path_factory, "profiles-base", lambda folder: build_base(folder / "project"))
            template = built_once(tmp_path_factory, f"profiles-{profile}",
                                  lambda folder: build_profile(profile, base / "project", folder))
            projects[profile] = Built(template / "project", (template / "repro.txt").read_text())
        return projects[profile]

    return build


@pytest.fixture(scope="module")
def deepseek_copy(built: Callable[[str], Built], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The deepseek profile's project copied once for this module's tests that change it and restore it."""
    return copy_project(built("deepseek").project, tmp_path_factory.mktemp("deepseek") / "project")


def ledger(folder: Path, **setting: Any) -> CallLedger:
    """The one ledger under `folder` whose setting holds `setting`."""
    found = [CallLedger(meta.parent) for meta in sorted(folder.glob(f"*/{CallLedger.META}"))]
    matching = [each for each in found if setting.items() <= each.meta["setting"].items()]
    assert len(matching) == 1, f"{folder}: {len(matching)} ledgers match {setting}"
    return matching[0]


def records(of: CallLedger) -> list[CallRecord]:
    """Every record stored, one log per item (the critic's ledger registers no items)."""
    return [record for log in sorted((of.root / of.LOGS).glob("*.tvf")) for record in of.records(log.stem).values()]


def described(endpoint: str, profile: str, name: str, why: str) -> str:
    """How a stage names the model it calls (ModelConfig.describe), with why it has its profile."""
    return f"{name} (endpoint {endpoint}, profile {profile} {why}, simulated)"


def profile_whys(project: Path) -> dict[str, str]:
    """Each endpoint's reason for its profile ("as set", "by its model name", ...), by its key."""
    return {key: entry.profile_why() for key, entry in load_params(project / "params.yaml").endpoints.items()}


def names(project: Path) -> dict[str, str]:
    """Each endpoint's model name, by its key."""
    endpoints = yaml.safe_load((project / "params.yaml").read_text())["endpoints"]
    return {key: entry["name"] for key, entry in endpoints.items()}


def check_replies(stored: list[CallRecord], reasoning: bool, least: int) -> None:
    """At least `least` replies, each simulated; hidden reasoning tokens (inside completion_tokens) exactly on
    a reasoning model."""
    assert len(stored) >= least and all(record.simulated for record in stored)
    assert all(0 <= record.reasoning_tokens <= record.completion_tokens for record in stored)
    assert (sum(record.reasoning_tokens for record in stored) > 0) == reasoning


@pytest.mark.parametrize("profile", list(PROFILE_PROJECTS))
def test_every_method_runs_on_the_profile(built: Callable[[str], Built], profile: str) -> None:
    project, output = built(profile).project, built(profile).output
    endpoints, _ = PROFILE_PROJECTS[profile]
    model, why = names(project), profile_whys(project)
    reasoning = profile == "openai-reasoning"

    def says(stage: str, endpoint: str) -> None:
        assert f"{stage}: model {described(endpoint, profile, model[endpoint], why[endpoint])}" in output, stage

    # DeepConf: a full pool, scored, aggregated and plotted, and compared with the debate
    if endpoints.pool:
        says("build_pool", endpoints.pool)
        manifest = json.loads((project / "pools" / "toy.json").read_text())
        assert manifest["simulated"] is True and manifest["samples"] == 12 * 16
        summary = json.loads((project / "metrics" / "deepconf" / "toy" / "summary.json").read_text())
        assert summary["simulated"] is True and 0.0 <= summary["cons_pct"] <= 100.0
        assert_not_blank(project / "plots" / "deepconf" / "toy" / "accuracy_vs_k.png")
        assert_not_blank(project / "plots" / "accuracy_vs_tokens.png")
        assert "Debate (DyLAN, 4 agents" in (project / "metrics" / "compare" / "compare.md").read_text()
    else:
        assert "Running stage 'build_pool@" not in output

    # the debate: the agents on theirs, the judge on its own endpoint (the ranking calls in the same ledger)
    agents, judge = endpoints.agents, endpoints.judge
    assert (f"build_debate: agents on {described(agents, profile, model[agents], why[agents])}; judge on "
            f"{described(judge, profile, model[judge], why[judge])}") in output
    debate = ledger(project / "debates" / "toy", model=model[endpoints.agents], judge_model=model[endpoints.judge])
    turns = records(debate)
    check_replies(turns, reasoning, least=12 * 3)  # round 0 may end at 3 of 4 agreeing
    assert any(record.kind == RANK for record in turns), "no debate reached the judge"
    metrics = json.loads((project / "metrics" / "debate.json").read_text())
    assert metrics["simulated"] is True and metrics["problems"] == 12
    assert (project / "metrics" / "debate.md").read_text().count("\n| toy | toy-") == 12

    # the critique: 8 votes on each of the 12 solutions, scored and plotted
    says("build_critiques", endpoints.critique)
    check_replies(records(ledger(project / "critiques" / "toy_steps", model=model[endpoints.critique])), reasoning,
                  least=12 * 8)
    critique = json.loads((project / "metrics" / "critique.json").read_text())
    assert (critique["simulated"], critique["solutions"], critique["calls"]) == (True, 12, 12 * 8)
    assert_not_blank(project / "plots" / "critique" / "critique.png")

    # the grading critic: one call per predicted item with a reference; a bare {"score": x} where the profile
    # has json_schema replies (never unparsable), free text on DeepSeek's
    says(f"build_grading_critic@{RUN}", endpoints.critic)
    structured = profile != "deepseek"
    critic = records(ledger(project / "grading" / "critic" / RUN, model=model[endpoints.critic]))
    check_replies(critic, reasoning, least=7)
    assert all(json.loads(record.text).keys() == {"score"} for record in critic) if structured else all(
        record.text.startswith("I compared the reasoning") for record in critic)
    grading = json.loads((project / "metrics" / "grading.json").read_text())
    scored, unparsable = grading[f"{RUN}.demo_gsm8k.critic_scored"], grading[f"{RUN}.demo_gsm8k.critic_unparsable"]
    assert scored + unparsable == 7 and (unparsable == 0 or not structured)
    assert 1.0 <= grading[f"{RUN}.demo_gsm8k.critic"] <= 5.0
    assert_not_blank(project / "plots" / "grading" / "word_counts.png")


def tree(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def test_a_new_judge_reruns_only_the_debates_branch_and_leaves_the_pool_alone(built: Callable[[str], Built],
                                                                              tmp_path: Path) -> None:
    project = copy_project(built("deepseek").project, tmp_path / "project")
    pool, manifest = tree(project / "pools"), (project / "pools" / "toy.json").read_bytes()
    agents_model = names(project)["deepseek"]
    update_params(project, {"debate": {"judge_endpoint": "gpt-4o-mini"}})
    # score_debate and view (the explorer shows the debates) declare debate.judge_endpoint; compare waits for it.
    # What `dvc status` would flag now is within what this repro runs: it runs every flagged stage among the targets'
    # and their ancestors, and `dvc status` after it (at the end) finds none flagged elsewhere; build_debate ran with
    # no stage before it running, so the change itself flagged it
    result = dvc(project, "repro", "compare", "view")
    assert ran_stages(result.stdout) == DEBATE_BRANCH | {"view"}
    assert ("judge on gpt-4o-mini (endpoint gpt-4o-mini, profile openai-chat by its model name, simulated)"
            in result.stdout)
    assert tree(project / "pools") == pool and (project / "pools" / "toy.json").read_bytes() == manifest
    # a new ledger under the new judge model: rounds 0 and 1 are the same agents' same replies, so the same debates
    # reach the judge; the judge is another model (the simulator answers by name), so its picks, and the round 2
    # they lead to, are its own
    old = ledger(project / "debates" / "toy", judge_model=agents_model)
    new = ledger(project / "debates" / "toy", judge_model="gpt-4o-mini")
    assert old.root != new.root and new.meta["setting"]["model"] == agents_model

    def before_judge(of: CallLedger) -> list[tuple[str, str]]:
        return sorted((record.key, record.text) for record in records(of) if record.key.startswith(("r0/", "r1/")))

    def judged(of: CallLedger) -> list[str]:
        return [record.text for record in records(of) if record.kind == RANK]

    assert before_judge(new) == before_judge(old)
    assert len(judged(new)) == len(judged(old)) > 0 and judged(new) != judged(old)
    assert json.loads((project / "debates" / "toy.json").read_text())["ledger"].endswith(new.root.name)
    assert changed_stages(project) == set()


# the servers, key and prices of the endpoint every method calls decide no reply: nothing re-runs
SERVERS_KEYS_AND_PRICES = {"deepseek": {"base_url": ["http://gpu1:8000/v1", "http://gpu2:8000/v1"],
                                        "api_key_env": "DEEPSEEK_KEY_2", "needs_key": True,
                                        "pricing": {"checked": "2027-01", "input_cache_miss": 0.5, "output": 2.0}}}
# the judge's new endpoint's servers and prices, before any method names it; an endpoint no method names
UNNAMED_ENDPOINTS = {"gpt-4o-mini": {"base_url": "http://127.0.0.1:8000/v1", "pricing": {"output": 0.9}},
                     "gpt-4-1": {"name": "gpt-4.1-2025-04-14", "extra_body": {"seed": 7}}}


def test_servers_keys_and_prices_rerun_nothing(deepseek_copy: Path) -> None:
    # both changes (disjoint keys) in one `dvc status`: a stage is flagged when any key it declares changed, so
    # what each change alone flags is within what both flag together: nothing
    project = deepseek_copy
    original = (project / "params.yaml").read_text()
    try:
        update_params(project, {"endpoints": {**SERVERS_KEYS_AND_PRICES, **UNNAMED_ENDPOINTS}})
        assert changed_stages(project) == set()
    finally:
        (project / "params.yaml").write_text(original)
