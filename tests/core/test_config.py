"""load_params on the tests' params (the repository's defaults) with one change: each bad value is refused
with a message naming the key and the value. The fixture keeps the keys of the committed params.yaml."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import FIXTURE_PARAMS, committed_params_text
from tracevote.core.config import load_params
from tracevote.core.config_deepconf import EvalConfig, eta_percent
from tracevote.core.errors import ConfigError

# Sections whose keys are the user's, sent as they are: their content is a value, not part of the schema.
FREE_FORM = "extra_body"  # an endpoint's free-form request fields
DELETE = object()  # as a change's value: remove the key
POOL_ENDPOINT = "endpoints.deepseek"  # the endpoint every method names by default


def params_with(tmp_path: Path, key: str, value: Any) -> Path:
    """params.yaml with the dotted `key` set to `value` (or removed, for DELETE), written to tmp_path."""
    params = yaml.safe_load(FIXTURE_PARAMS.read_text(encoding="utf-8"))
    *parents, last = key.split(".")
    section = params
    for name in parents:
        section = section[name]
    if value is DELETE:
        del section[last]
    else:
        section[last] = value
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    return path


def test_fixture_params_load() -> None:
    params = load_params(FIXTURE_PARAMS)
    assert params.eval.etas == (0.1, 0.9)
    assert params.report.k in params.eval.k


def key_tree(section: object, path: tuple[str, ...] = ()) -> object:
    """{"a": {"b": 1}, "c": [2]} -> {"a": {"b": None}, "c": None}: the keys, with every value left out."""
    if not isinstance(section, dict) or path[-1:] == (FREE_FORM,):
        return None
    return {key: key_tree(value, (*path, key)) for key, value in section.items()}


def test_fixture_params_have_the_repository_keys() -> None:
    # values may differ (the fixture keeps the defaults the tests rely on); keys may not, or tests would
    # run a pipeline whose params.yaml misses a key the stages now read
    committed = key_tree(yaml.safe_load(committed_params_text()))
    assert key_tree(yaml.safe_load(FIXTURE_PARAMS.read_text(encoding="utf-8"))) == committed


@pytest.mark.parametrize(("params", "tree"), [
    ({"a": {"b": 1, "c": [2, 3]}, "d": None}, {"a": {"b": None, "c": None}, "d": None}),
    ({"endpoints": {"x": {"extra_body": {"thinking": {"type": "disabled"}}}}},
     {"endpoints": {"x": {"extra_body": None}}}),
    ({"endpoints": {"x": {"extra_body": {}}}}, {"endpoints": {"x": {"extra_body": None}}}),
])
def test_key_tree(params: dict, tree: dict) -> None:
    assert key_tree(params) == tree


REFUSED = [
    # (key, value, the message says)
    ("eval.etas", [0.125], "eval.etas: 0.125 must be a whole percentage"),
    ("eval.etas", [0.1, 0.1000001], "eval.etas: 0.1000001 must be a whole percentage"),
    ("eval.etas", [0.1, 0.1], "eval.etas: [0.1, 0.1] must be distinct percentages"),
    ("eval.etas", [0.9, 0.1, 0.100000000001], "eval.etas: [0.9, 0.1, 0.100000000001] must be distinct"),
    ("eval.etas", [0.1, 1.5], "eval.etas: [0.1, 1.5] must be a list of numbers in (0, 1]"),
    ("eval.etas", [0.0], "eval.etas: [0.0] must be a list of numbers in (0, 1]"),
    ("eval.etas", 0.1, "eval.etas: expected a list, got 0.1"),
    ("eval.repeat", "64", "eval.repeat: expected an integer, got '64'"),
    ("eval.repeat", 2.5, "eval.repeat: expected an integer, got 2.5"),
    ("eval.seed", True, "eval.seed: expected an integer, got True"),
    ("eval.k", [1, 2, 2], "eval.k: [1, 2, 2] must be without repeats"),
    ("eval.k", [1, 1024], "eval.k: [1024] must be at most pool.n_pool (512)"),
    ("eval.speed", 3, "eval.speed: unknown key"),
    ("eval.seed", DELETE, "eval.seed: missing"),
    ("report.k", 3, "report.k: 3 must be one of eval.k [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]"),
    ("confidence.group_size", 0, "confidence.group_size: 0 must be an integer in 1..1,000,000"),
    # sizes are bounded, so an extra three zeros is refused here, not by an allocation or the server (issue 22)
    ("decoding.max_tokens", 10**12, "decoding.max_tokens: 1000000000000 must be an integer in 1..1,000,000"),
    ("decoding.max_tokens", "1e12", "decoding.max_tokens: expected an integer, got '1e12'"),  # YAML 1.1: text
    ("decoding.max_tokens", 1.0e12, "decoding.max_tokens: expected an integer, got 1000000000000.0"),
    ("debate.max_tokens", 2_000_000, "debate.max_tokens: 2000000 must be an integer in 1..1,000,000"),
    *[("debate.problems", span, f"debate.problems: {span!r} must be null or [start, end]")
      for span in ([3], [5, 2], [-1, 4], [0, 1, 2])],
    ("debate.problems", "0-14", "debate.problems: expected a list, got '0-14'"),
    ("debate.problems", [0, 1.5], "debate.problems[1]: expected an integer, got 1.5"),
    # a misspelt built-in set would reach the model as the examples' text
    ("debate.examples", "builtin_aim", "debate.examples: 'builtin_aim' must be one of the built-in sets builtin_aime"),
    ("debate.examples", " ", "debate.examples: ' ' must be null, a built-in set or text"),
    ("critique.max_tokens", 0, "critique.max_tokens: 0 must be an integer in 1..1,000,000"),
    ("grading.critic.max_tokens", 10**9, "grading.critic.max_tokens: 1000000000 must be an integer in 1..1,000,000"),
    ("confidence.tail_tokens", 10**7, "confidence.tail_tokens: 10000000 must be an integer in 1..1,000,000"),
    ("model.sim.mean_tokens", 10**8, "model.sim.mean_tokens: 100000000 must be an integer in 8..1,000,000"),
    ("pool.n_pool", 10**10, "pool.n_pool: 10000000000 must be an integer in 1..1,000,000"),
    ("critique.n_votes", 10**9, "critique.n_votes: 1000000000 must be an integer in 1..1,000,000"),
    ("eval.bootstrap", 10**9, "eval.bootstrap: 1000000000 must be an integer in 100..1,000,000"),
    # a field the client sets itself may not be overridden by extra_body
    *[(f"{POOL_ENDPOINT}.extra_body", {field: 1}, f"{POOL_ENDPOINT}.extra_body: {field!r} is set by the client")
      for field in ("temperature", "max_tokens", "model", "messages", "logprobs", "top_logprobs", "top_p", "stream",
                    "n")],
    ("endpoints.gpt-4o-mini.extra_body", {"stream": True},
     "endpoints.gpt-4o-mini.extra_body: 'stream' is set by the client"),
    # the key's variable must be nameable: `export =...` helps nobody
    (f"{POOL_ENDPOINT}.api_key_env", "", f"{POOL_ENDPOINT}.api_key_env: '' must be an environment variable name"),
    (f"{POOL_ENDPOINT}.api_key_env", "MY KEY",
     f"{POOL_ENDPOINT}.api_key_env: 'MY KEY' must be an environment variable name"),
    (f"{POOL_ENDPOINT}.api_key_env", "1KEY",
     f"{POOL_ENDPOINT}.api_key_env: '1KEY' must be an environment variable name"),
    ("endpoints.gpt-5-nano.api_key_env", "",
     "endpoints.gpt-5-nano.api_key_env: '' must be an environment variable name"),
    # a critique template fills exactly {problem} and {tagged_response}
    ("critique.template", "Check {tagged_response}.", "critique.template: lacks the placeholder {problem}"),
    ("critique.template", "Solve {problem}.", "critique.template: lacks the placeholder {tagged_response}"),
    ("critique.template", "{problem} {tagged_response} {solution}",
     "critique.template: unknown placeholder {solution}"),
    ("critique.template", "{problem} {tagged_response} {}", "critique.template: unknown placeholder {}"),
    ("critique.template", "{problem} {tagged_response} \\boxed{}", "critique.template: unknown placeholder {}"),
    ("critique.template", "{problem} {tagged_response} {", "critique.template: does not fill with str.format"),
    ("critique.template", "{problem.x} {tagged_response}", "critique.template: unknown placeholder {problem.x}"),
    ("critique.template", "{problem} {tagged_response:d}", "critique.template: does not fill with str.format"),
    ("decoding.temperature", "hot", "decoding.temperature: expected a number, got 'hot'"),
    ("model.backend", "vllm", "model.backend: 'vllm' is not one of 'openai', 'sim'"),
    ("pool.keep_raw", "no", "pool.keep_raw: expected true or false, got 'no'"),
    ("endpoints.deepseek.pricing", DELETE, "endpoints.deepseek.pricing: missing"),
    # issue 23: endpoints named by methods, and what each method needs of its endpoint's provider profile
    ("debate.judge_endpoint", "gpt-5", "debate.judge_endpoint: 'gpt-5' must be a key of endpoints: (deepseek, "
                                       "gpt-4-1, gpt-4o-mini, gpt-5-nano)"),
    ("deepconf.endpoint", "gpt-5-nano", "deepconf.endpoint: 'gpt-5-nano' must be an endpoint that returns logprobs: "
                                        "DeepConf's confidence is made of them, and gpt-5-nano (profile "
                                        "openai-reasoning) returns none"),
    ("endpoints.deepseek.profile", "openai-reasoning", "endpoints.deepseek.extra_body: 'thinking' must be a field "
                                                       "openai-reasoning accepts"),
    ("endpoints.deepseek.profile", "anthropic", "endpoints.deepseek.profile: 'anthropic' is not one of 'deepseek', "
                                                "'openai-chat', 'openai-reasoning', 'local'"),
    ("endpoints.gpt-4o-mini.extra_body", {"thinking": {"type": "disabled"}},
     "endpoints.gpt-4o-mini.extra_body: 'thinking' must be a field openai-chat accepts (openai-chat answers an "
     "unknown request field with HTTP 400; 'thinking' is DeepSeek's own)"),
    ("debate.endpoint", "gpt-5-nano", "debate.temperature: 0.3 must be 1: endpoint gpt-5-nano (gpt-5-nano, profile "
                                      "openai-reasoning) accepts only the default temperature; set "
                                      "debate.temperature: 1"),
    # issue 43: reasoning_effort only where the profile takes it, and only the values it takes
    ("endpoints.deepseek.reasoning_effort", "high", "endpoints.deepseek.reasoning_effort: 'high' must be null: "
                                                    "profile deepseek takes no reasoning_effort (openai-reasoning "
                                                    "does, and local for gpt-oss on vLLM)"),
    ("endpoints.gpt-4o-mini.reasoning_effort", "low", "endpoints.gpt-4o-mini.reasoning_effort: 'low' must be null: "
                                                      "profile openai-chat takes no reasoning_effort"),
    ("endpoints.gpt-5-nano.reasoning_effort", "extreme", "endpoints.gpt-5-nano.reasoning_effort: 'extreme' is not "
                                                         "one of 'minimal', 'low', 'medium', 'high'"),
    ("endpoints.gpt-5-nano.extra_body", {"reasoning_effort": "high"},
     "endpoints.gpt-5-nano.extra_body: 'reasoning_effort' is set by the client; set "
     "endpoints.gpt-5-nano.reasoning_effort instead"),
]


@pytest.mark.parametrize(("key", "value", "says"), REFUSED)
def test_load_params_refuses(tmp_path: Path, key: str, value: Any, says: str) -> None:
    path = params_with(tmp_path, key, value)
    with pytest.raises(ConfigError, match=re.escape(f"{path}: {says}")):
        load_params(path)


RULE = "must be 1-64 letters, digits, '_', '-' (no '.', which DVC reads as a level of params.yaml)"


@pytest.mark.parametrize(("section", "old", "key", "says"), [
    ("endpoints", "gpt-4-1", "gpt-4.1", "endpoints.gpt-4.1.key: 'gpt-4.1' " + RULE),
    ("endpoints", "gpt-4-1", "gpt-4.", "endpoints.gpt-4..key: 'gpt-4.' " + RULE),
    ("endpoints", "gpt-4-1", ".env", "endpoints..env.key: '.env' " + RULE),
    ("datasets", "amc23", "amc.23", "datasets.amc.23: the dataset name 'amc.23' " + RULE),
    ("grading.runs", "pool_aime_2025", "pool.aime", "grading.runs.pool.aime.name: 'pool.aime' " + RULE),
])
def test_a_key_with_a_dot_is_refused(tmp_path: Path, section: str, old: str, key: str, says: str) -> None:
    """dvc.yaml declares endpoints.<key>.name, datasets.${key} and grading.runs.${key}: DVC would read `gpt-4.1` as
    endpoints -> gpt-4 -> 1, and every stage naming it would fail with "missing from params.yaml"."""
    params = yaml.safe_load(FIXTURE_PARAMS.read_text(encoding="utf-8"))
    entries = params
    for name in section.split("."):
        entries = entries[name]
    entries[key] = entries.pop(old)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    with pytest.raises(ConfigError, match=re.escape(f"{path}: {says}")):
        load_params(path)


@pytest.mark.parametrize(("etas", "expected"), [
    ([0.05, 0.1, 0.9], (0.05, 0.1, 0.9)),
    ([1], (1.0,)),  # an integer in YAML is a number too
    ([], ()),
])
def test_load_params_accepts_etas(tmp_path: Path, etas: list[float], expected: tuple[float, ...]) -> None:
    assert load_params(params_with(tmp_path, "eval.etas", etas)).eval.etas == expected


@pytest.mark.parametrize(("eta", "percent"), [
    (0.1, 10),
    (0.9, 90),
    (0.05, 5),
    (0.07, 7),  # 0.07 * 100 is 7.000000000000001
    (0.29, 29),  # 0.29 * 100 is 28.999999999999996
    (1.0, 100),
    (0.1 + 1e-12, 10),
    (0.125, None),
    (0.1000001, None),
    (0.001, None),
])
def test_eta_percent(eta: float, percent: int | None) -> None:
    assert eta_percent(eta) == percent


@pytest.mark.parametrize(("key", "value"), [
    ("critique.template", "{problem}\n\n{tagged_response}\n\nPut the index in \\boxed{{}}."),
    ("endpoints.deepseek.api_key_env", "_KEY_2"),
    ("endpoints.deepseek.extra_body", {"thinking": {"type": "disabled"}, "seed": 1}),
    ("decoding.max_tokens", 1_000_000),
    ("debate.examples", None),
    ("debate.problems", [0, 14]),
    ("debate.problems", [3, 3]),
    ("debate.examples", "builtin_aime"),
    ("debate.examples", "Problem: 1+1?\nAnswer: \\boxed{2}"),
])
def test_load_params_accepts_values_at_the_bounds(tmp_path: Path, key: str, value: Any) -> None:
    load_params(params_with(tmp_path, key, value))


def test_eval_config_validate_names_the_section() -> None:
    with pytest.raises(ConfigError, match=re.escape("eval.etas: 0.125 must be a whole percentage")):
        EvalConfig(k=(1,), repeat=1, seed=0, etas=(0.125,)).validate("eval")


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nowhere.yaml"
    with pytest.raises(ConfigError, match=re.escape(f"{path}: not found")):
        load_params(path)


@pytest.mark.parametrize("steps_format", ["processbench", "deltabench"])
def test_the_builtin_templates_pass_the_config_rule(steps_format: str) -> None:
    # the rule check_params applies to critique.template agrees with the templates the critique uses by default
    from tracevote.core.limits import CRITIQUE_FIELDS, require_critique_template
    from tracevote.critique.prompts import BUILTIN_TEMPLATES, FIELDS

    assert CRITIQUE_FIELDS == FIELDS
    require_critique_template("critique", BUILTIN_TEMPLATES[steps_format].read_text(encoding="utf-8"))


def test_every_problem_is_reported_in_one_error_one_line_each(tmp_path: Path) -> None:
    """Issue 25: shrinking pool.n_pool took a run per problem; now one error lists them all, in file order."""
    params = yaml.safe_load(FIXTURE_PARAMS.read_text(encoding="utf-8"))
    params["decoding"]["temperature"] = 5
    params["pool"].update(n_pool=4, concurency=2)
    params["eval"]["repeat"] = 0
    params["report"]["k"] = 3
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_params(path)
    assert str(caught.value).splitlines() == [
        f"{path}: decoding.temperature: 5.0 must be in [0, 2]",
        f"{path}: pool.concurency: unknown key (did you mean concurrency? known: allow_uninformative_logprobs, "
        f"concurrency, keep_raw, "
        f"keep_top_logprobs, keep_top_tokens, max_cost_usd, max_retries, n_pool, request_timeout_s, "
        f"samples_per_request)",
        f"{path}: eval.repeat: 0 must be an integer in 1..1,000,000",
        f"{path}: eval.k: [8, 16, 32, 64, 128, 256, 512] must be at most pool.n_pool (4)",
        f"{path}: report.k: 3 must be one of eval.k [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]",
    ]


def test_a_shrunken_pool_lists_every_k_it_invalidates_in_one_run(tmp_path: Path) -> None:
    # issue 29: pool.n_pool 64 under the shipped eval.k and report.k 512 took two check runs, eval.k then report.k
    params = yaml.safe_load(FIXTURE_PARAMS.read_text(encoding="utf-8"))
    params["pool"]["n_pool"] = 64
    params["report"]["k"] = 512
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_params(path)
    assert str(caught.value).splitlines() == [
        f"{path}: eval.k: [128, 256, 512] must be at most pool.n_pool (64)",
        f"{path}: report.k: 512 must be at most pool.n_pool (64) and one of eval.k ([1, 2, 4, 8, 16, 32, 64])"]
    params["eval"]["k"] = [1, 2, 4, 8, 16, 32, 64]  # the one edit each line names
    params["report"]["k"] = 64
    path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    assert load_params(path).report.k == 64


def test_a_value_that_cannot_be_read_skips_the_checks_that_need_it(tmp_path: Path) -> None:
    # the cross-section checks need every section: with one unreadable they wait, the other problems are listed
    params = yaml.safe_load(FIXTURE_PARAMS.read_text(encoding="utf-8"))
    params["eval"]["k"] = "all"
    params["pool"]["concurrency"] = 0
    params["online"]["percentiles"] = {"low": 120, "high": -1}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_params(path)
    assert [line.removeprefix(f"{path}: ") for line in str(caught.value).splitlines()] == [
        "pool.concurrency: 0 must be an integer in 1..256",
        "eval.k: expected a list, got 'all'",
        "online.percentiles.low: 120 must be a percentile in [0, 100]",
        "online.percentiles.high: -1 must be a percentile in [0, 100]",
    ]


@pytest.mark.parametrize(("declared", "key", "owned"), [
    (["eval"], "eval.k", True),
    (["eval"], "eval.k[0]", True),
    (["eval"], "report.k", False),
    (["eval"], "evaluation", False),
    (["datasets.toy.source"], "datasets", True),
    (["datasets.toy.source"], "datasets.toy.source.path", True),
    (["datasets.toy.source"], "datasets.toy.kind", False),
    (["endpoints.deepseek.name", "pool.n_pool"], "pool.n_pool", True),
    (["endpoints.deepseek.name", "pool.n_pool"], "pool.concurrency", False),
])
def test_a_stage_owns_the_problems_of_the_keys_it_declares(declared: list[str], key: str, owned: bool) -> None:
    from tracevote.core.config import owns

    assert owns(declared, key) is owned


def test_a_stage_fails_only_on_the_keys_it_declares(tmp_path: Path) -> None:
    from tracevote.core.config import stage_declaring

    path = params_with(tmp_path, "report.k", 3)
    with stage_declaring(lambda: ["datasets.aime_2025.source"]):
        assert load_params(path).report.k == 3  # fetch reads on; the report stage fails on it
    with stage_declaring(lambda: ["report"]), pytest.raises(ConfigError) as caught:
        load_params(path)
    assert str(caught.value) == f"{path}: report.k: 3 must be one of eval.k [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]"
    unreadable = params_with(tmp_path, "eval.k", "all")  # no Params can be made: every stage stops, saying why
    with stage_declaring(lambda: ["datasets.aime_2025.source"]), pytest.raises(ConfigError) as caught:
        load_params(unreadable)
    assert str(caught.value) == f"{unreadable}: eval.k: expected a list, got 'all'"


@pytest.mark.parametrize("debate_datasets", [["aime_2025"], ["aime_2024", "aime_2025"]])
def test_deepconf_takes_a_math_dataset_and_debate_does_not(tmp_path: Path, debate_datasets: list[str]) -> None:
    params = yaml.safe_load(FIXTURE_PARAMS.read_text(encoding="utf-8"))
    params["datasets"]["aime_2024"]["answer_format"] = "math"
    params["deepconf"]["datasets"] = ["aime_2024"]
    params["debate"]["datasets"] = debate_datasets
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    if "aime_2024" not in debate_datasets:
        assert load_params(path).deepconf.datasets == ("aime_2024",)
        return
    with pytest.raises(ConfigError, match=re.escape("debate.datasets: 'aime_2024'")) as caught:
        load_params(path)
    assert "integer answers (agents agree on integers; aime_2024 is kind problems, answer_format math)" in str(
        caught.value)


def test_a_live_run_names_methods_of_percentiles_a_budget_holding_the_warmup_and_datasets_of_problems(
        tmp_path: Path) -> None:
    params = yaml.safe_load(FIXTURE_PARAMS.read_text(encoding="utf-8"))
    params["datasets"]["steps"] = {**params["datasets"]["aime_2025"], "kind": "steps", "steps_format": "processbench",
                                   "answer_format": "integer"}
    params["online"]["live"] = {"datasets": ["aime_2025", "steps", "nowhere"], "methods": ["low", "medium"],
                                "budget": 8, "concurrency": 2, "max_cost_usd": 1.0}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_params(path)
    lines = [line.removeprefix(f"{path}: ") for line in str(caught.value).splitlines()]
    assert "online.live.methods: 'medium' must be a key of online.percentiles (low, high)" in lines
    assert "online.live.budget: 8 must be at least online.warmup (16): the warmup traces are part of the budget" \
        in lines
    assert any(line.startswith("online.live.datasets: 'steps' must be a dataset of problems") for line in lines)
    assert any(line.startswith("online.live.datasets: 'nowhere' must be a key of datasets:") for line in lines)
    params["online"]["live"] = {"datasets": [], "methods": [], "budget": 1, "concurrency": 1, "max_cost_usd": 0}
    path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    assert load_params(path).online.live.datasets == ()  # no live run: nothing else is asked of it
