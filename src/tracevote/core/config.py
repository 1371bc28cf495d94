"""Typed, frozen views of params.yaml, validated once where the file is read.

Every section is a frozen dataclass, so anything derived from a config can be cached on it.
A missing key, an unknown key or a value of the wrong type is an error naming the key and value.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import yaml

from tracevote.core.errors import ConfigError
from tracevote.core.limits import (
    MAX_COUNT_BOUND,
    MAX_TOKENS_BOUND,
    check_extra_body,
    require_count,
    require_critique_template,
    require_env_name,
    require_tokens,
)
from tracevote.core.profiles import DEFAULT_TEMPERATURE, PROFILES, Profile, ProfileName, infer_profile
from tracevote.core.typedconfig import build, require

Backend = Literal["openai", "sim"]
IntegerFormat = Literal["aime", "integer"]
AnswerFormat = Literal["aime", "integer", "math"]
DatasetKind = Literal["problems", "steps"]
StepsFormat = Literal["processbench", "deltabench"]
INTEGER_FORMATS: tuple[IntegerFormat, ...] = ("aime", "integer")
# The keys of datasets:, grading.runs: and endpoints: name files (data/<name>.jsonl, pools/<name>/), DVC stages and
# params paths: `.match` needs the whole name to fit (\Z, not $, which would let a trailing newline through), and
# 64 characters keep every path short. subtle: no '.': dvc.yaml declares datasets.${key}, grading.runs.${key} and
# endpoints.<key>.name, and DVC reads every '.' of a params path as a level, so `gpt-4.1` would make every stage
# of a method on it fail with "missing from params.yaml"
KEY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}\Z")
DATASET_NAME = KEY_NAME  # the name its importers know it by
KEY_NAME_RULE = "1-64 letters, digits, '_', '-' (no '.', which DVC reads as a level of params.yaml)"
Fallback = Literal["last_integer", "none"]
TieBreak = Literal["smallest", "first", "fractional"]
MEASURES: tuple[str, ...] = ("avg", "bottom10", "lowest", "tail")
# debate.examples' built-in sets (tracevote.debate.examples holds their files); any other text is used as it is
BUILTIN_EXAMPLES: tuple[str, ...] = ("builtin_aime",)


@dataclass(frozen=True)
class SourceConfig:
    hf_dataset: str | None
    hf_config: str
    hf_split: str
    api_url: str
    path: str | None

    def validate(self, where: str) -> None:
        if not self.hf_dataset and not self.path:
            raise ConfigError(f"{where}: set hf_dataset or path (both are empty)")


@dataclass(frozen=True)
class DatasetConfig:
    """One entry of `datasets:`; its key is its name, which names its files (data/<name>.jsonl) and ids."""

    name: str
    source: SourceConfig
    kind: DatasetKind  # problems: a problem and its gold answer; steps: a solution's steps and its first error
    problem_key: str
    answer_key: str
    id_key: str | None
    answer_format: AnswerFormat
    # kind steps only: the rows' layout (deltabench rows are converted: tracevote.datasets.deltabench), and
    # the task every record belongs to (null: the row's own task, else the hub split, else the dataset name)
    steps_format: StepsFormat = "processbench"
    task: str | None = None

    def validate(self, where: str) -> None:
        if not DATASET_NAME.match(self.name):
            raise ConfigError(f"{where}: the dataset name {self.name!r} must be {KEY_NAME_RULE}; it names files "
                              f"and DVC stages")


def require_dataset_names(where: str, datasets: tuple[str, ...]) -> None:
    """A method's `datasets`: a non-empty list without repeats (that each is a known dataset, Params checks)."""
    require(len(datasets) > 0, where, "datasets", list(datasets), "a non-empty list of dataset names")
    require(len(set(datasets)) == len(datasets), where, "datasets", list(datasets), "without repeats")


@dataclass(frozen=True)
class DeepConfConfig:
    datasets: tuple[str, ...]  # the datasets DeepConf runs on: each gets its own pool, scores and report
    endpoint: str  # the key in `endpoints:` that samples the pool (it must return logprobs)

    def validate(self, where: str) -> None:
        require_dataset_names(where, self.datasets)


@dataclass(frozen=True)
class DebateConfig:
    """DyLAN-style multi-agent debate (tracevote.debate): who debates, how, and on which datasets."""

    datasets: tuple[str, ...]  # each gets its own ledger of debate calls; metrics pool them all
    agents: int
    rounds: int  # 1: round 0 only; 2: rounds 0-1; 3: rounds 0-1, the ranking and round 2 (DyLAN)
    temperature: float
    max_tokens: int
    system: str | None
    examples: str | None  # worked examples placed before the problem: a BUILTIN_EXAMPLES name, the text, or None
    question: str  # the problem as the agents read it; {problem} is replaced
    importance: bool  # agents also rate the previous round's solutions: per-agent importance scores
    contest_halves: tuple[str, ...]  # datasets whose problems 1-15 and 16-30 are contests I and II
    concurrency: int
    max_cost_usd: float
    endpoint: str  # the key in `endpoints:` the agents call
    judge_endpoint: str  # the key in `endpoints:` the judge (the ranking call) calls
    # [start, end]: each dataset's problems start..end, 0-based, end included (the write-up's script takes the
    # files start.json..end.json); None: every problem
    problems: tuple[int, int] | None = None

    def validate(self, where: str) -> None:
        require_dataset_names(where, self.datasets)
        span = None if self.problems is None else list(self.problems)
        require(span is None or (len(span) == 2 and 0 <= span[0] <= span[1]), where, "problems", span,
                "null or [start, end]: 0-based positions with 0 <= start <= end (end included)")
        # the judge names solutions by one digit, as DyLAN's [1,2] pattern does
        require(3 <= self.agents <= 9, where, "agents", self.agents, "3-9 (the judge picks 2 of them)")
        require(1 <= self.rounds <= 3, where, "rounds", self.rounds, "1, 2 or 3")
        require(0.0 <= self.temperature <= 2.0, where, "temperature", self.temperature, "in [0, 2]")
        require_tokens(where, "max_tokens", self.max_tokens)
        require("{problem}" in self.question, where, "question", self.question, "text containing {problem}")
        self._validate_examples(where)
        require(1 <= self.concurrency <= 256, where, "concurrency", self.concurrency, "1-256")
        require(self.max_cost_usd >= 0, where, "max_cost_usd", self.max_cost_usd, ">= 0")
        unknown = [name for name in self.contest_halves if name not in self.datasets]
        require(not unknown, where, "contest_halves", unknown, "names from debate.datasets")

    def _validate_examples(self, where: str) -> None:
        if self.examples is None:
            return
        require(bool(self.examples.strip()), where, "examples", self.examples, "null, a built-in set or text")
        # subtle: a misspelt set name would otherwise be sent to the model as the examples' text
        builtin = self.examples.startswith("builtin_")
        require(not builtin or self.examples in BUILTIN_EXAMPLES, where, "examples", self.examples,
                f"one of the built-in sets {', '.join(BUILTIN_EXAMPLES)} (or null, or the examples' text)")


@dataclass(frozen=True)
class CritiqueConfig:
    """ProcessBench-style first-error identification (tracevote.critique): on which step datasets, and how
    many critiques are sampled per solution to vote over."""

    datasets: tuple[str, ...]
    n_votes: int  # critiques per solution; raising it tops the ledger up
    temperature: float
    max_tokens: int
    template: str | None  # a template's text with {problem} and {tagged_response}; null: each dataset's built-in one
    concurrency: int
    max_cost_usd: float
    endpoint: str  # the key in `endpoints:` the critiques call

    def validate(self, where: str) -> None:
        require_dataset_names(where, self.datasets)
        require_count(where, "n_votes", self.n_votes)
        require(0.0 <= self.temperature <= 2.0, where, "temperature", self.temperature, "in [0, 2]")
        require_tokens(where, "max_tokens", self.max_tokens)
        if self.template is not None:
            require_critique_template(where, self.template)
        require(1 <= self.concurrency <= 256, where, "concurrency", self.concurrency, "1-256")
        require(self.max_cost_usd >= 0, where, "max_cost_usd", self.max_cost_usd, ">= 0")


@dataclass(frozen=True)
class SimConfig:
    seed: int
    signal: float
    accuracy: float
    mean_tokens: int
    critique_noise: float = 0.3  # 0: critiques find the first error as often as the step count allows; 1: ~never

    def validate(self, where: str) -> None:
        require(0.0 <= self.accuracy <= 1.0, where, "accuracy", self.accuracy, "a fraction in [0, 1]")
        require(0.0 <= self.critique_noise <= 1.0, where, "critique_noise", self.critique_noise, "in [0, 1]")
        require(self.signal >= 0.0, where, "signal", self.signal, ">= 0")
        require(8 <= self.mean_tokens <= MAX_TOKENS_BOUND, where, "mean_tokens", self.mean_tokens,
                f"an integer in 8..{MAX_TOKENS_BOUND:,}")


BaseUrl = str | tuple[str, ...]  # one server, or several serving the same model (vLLM replicas)


def base_urls(base_url: BaseUrl) -> tuple[str, ...]:
    """Every server of a `base_url` setting, as a tuple."""
    return (base_url,) if isinstance(base_url, str) else base_url


@dataclass(frozen=True)
class BackendConfig:
    """`model:`: who answers every endpoint's calls. openai: the endpoints' own servers; sim: the built-in
    simulated model, on a loopback server enforcing each endpoint's provider profile."""

    backend: Backend
    sim: SimConfig


@dataclass(frozen=True)
class EndpointConfig:
    """One entry of `endpoints:`, named by its key: a model on one or more servers of one provider."""

    KEY_FIELD: ClassVar[str] = "key"  # `name` is the model's name
    key: str
    profile: ProfileName | None  # null: inferred from base_url and name (tracevote.core.profiles.infer_profile)
    base_url: BaseUrl
    name: str  # the model name sent in every request
    extra_body: dict[str, Any]
    api_key_env: str
    needs_key: bool
    pricing: PricingConfig

    def validate(self, where: str) -> None:
        require(bool(KEY_NAME.match(self.key)), where, "key", self.key,
                f"{KEY_NAME_RULE}; methods name it")
        require_endpoint(where, self.name, self.base_url)
        check_extra_body(where, self.extra_body)
        require_env_name(where, self.api_key_env)
        profile = self.resolved_profile()
        unknown = sorted(set(self.extra_body) - profile.known_fields) if profile.known_fields is not None else []
        require(not unknown, where, "extra_body", unknown[0] if unknown else None,
                f"a field {profile.name} accepts ({profile.name} answers an unknown request field with HTTP 400; "
                f"'thinking' is DeepSeek's own)")

    def resolved_profile(self) -> Profile:
        return PROFILES[self.profile or infer_profile(base_urls(self.base_url)[0], self.name)]


@dataclass(frozen=True)
class ModelConfig:
    """An endpoint as a method calls it: its servers, model, key, profile and prices, and who answers."""

    backend: Backend
    base_url: BaseUrl
    name: str
    extra_body: dict[str, Any]
    api_key_env: str
    needs_key: bool
    sim: SimConfig
    profile: Profile = PROFILES["deepseek"]
    pricing: PricingConfig | None = None  # None: not priced (a bare client in a test)
    endpoint: str = "deepseek"  # its key in `endpoints:`, for messages and reports (the default endpoint's)

    def validate(self, where: str) -> None:
        require_endpoint(where, self.name, self.base_url)
        check_extra_body(where, self.extra_body)
        require_env_name(where, self.api_key_env)

    def priced(self) -> PricingConfig:
        if self.pricing is None:
            raise ConfigError(f"endpoint {self.endpoint}: no pricing")
        return self.pricing

    def describe(self) -> str:
        """"gpt-4o-mini (endpoint gpt-4o-mini, profile openai-chat, simulated)"."""
        sim = ", simulated" if self.backend == "sim" else ""
        return f"{self.name} (endpoint {self.endpoint}, profile {self.profile.name}{sim})"


def require_endpoint(where: str, name: str, base_url: BaseUrl) -> None:
    """A model name and one or more distinct http(s) base URLs (`model:` and the grading critic's own endpoint)."""
    require(bool(name), where, "name", name, "a model name")
    urls = base_urls(base_url)
    require(len(urls) > 0, where, "base_url", list(urls), "an http(s) URL or a non-empty list of them")
    for i, url in enumerate(urls):
        key = "base_url" if isinstance(base_url, str) else f"base_url[{i}]"
        require(url.startswith(("http://", "https://")), where, key, url, "an http(s) URL")
    stripped = [url.rstrip("/") for url in urls]
    repeated = sorted({url for url in stripped if stripped.count(url) > 1})
    require(not repeated, where, "base_url", repeated[0] if repeated else None, "listed only once")


@dataclass(frozen=True)
class PromptConfig:
    system: str | None
    template: str

    def validate(self, where: str) -> None:
        require("{problem}" in self.template, where, "template", self.template, "text containing {problem}")


@dataclass(frozen=True)
class DecodingConfig:
    temperature: float
    top_p: float | None
    max_tokens: int
    top_logprobs: int

    def validate(self, where: str) -> None:
        require(0.0 <= self.temperature <= 2.0, where, "temperature", self.temperature, "in [0, 2]")
        require(self.top_p is None or 0.0 < self.top_p <= 1.0, where, "top_p", self.top_p, "in (0, 1]")
        require_tokens(where, "max_tokens", self.max_tokens)
        require(0 <= self.top_logprobs <= 20, where, "top_logprobs", self.top_logprobs, "0-20")


@dataclass(frozen=True)
class PricingConfig:
    checked: str
    input_cache_miss: float
    input_cache_hit: float
    output: float
    expected_output_fraction: float = 1.0  # estimate output as this fraction of max_tokens

    def validate(self, where: str) -> None:
        for key in ("input_cache_miss", "input_cache_hit", "output"):
            require(getattr(self, key) >= 0, where, key, getattr(self, key), ">= 0")
        fraction = self.expected_output_fraction
        require(0 < fraction <= 1, where, "expected_output_fraction", fraction, "in (0, 1]")


@dataclass(frozen=True)
class PoolConfig:
    n_pool: int
    concurrency: int
    request_timeout_s: float
    max_retries: int
    max_cost_usd: float
    keep_top_logprobs: bool
    keep_raw: bool
    allow_uninformative_logprobs: bool

    def validate(self, where: str) -> None:
        require_count(where, "n_pool", self.n_pool)
        require(1 <= self.concurrency <= 256, where, "concurrency", self.concurrency, "1-256")
        require(self.request_timeout_s > 0, where, "request_timeout_s", self.request_timeout_s, "> 0")
        require(self.max_retries >= 0, where, "max_retries", self.max_retries, ">= 0")
        require(self.max_cost_usd >= 0, where, "max_cost_usd", self.max_cost_usd, ">= 0")


@dataclass(frozen=True)
class ConfidenceConfig:
    group_size: int
    bottom_fraction: float
    tail_tokens: int

    def validate(self, where: str) -> None:
        require_tokens(where, "group_size", self.group_size)
        require(0 < self.bottom_fraction <= 1, where, "bottom_fraction", self.bottom_fraction, "in (0, 1]")
        require_tokens(where, "tail_tokens", self.tail_tokens)


@dataclass(frozen=True)
class AnswersConfig:
    """Where a trace without a boxed answer may still get one (see tracevote.answers.extract.resolve_answer)."""

    fallback: Fallback  # last_integer: the last number in the text; none: the official code's rule
    truncated_fallback: bool  # false: a trace cut off at max_tokens never takes the fallback


@dataclass(frozen=True)
class EvalConfig:
    k: tuple[int, ...]
    repeat: int
    seed: int
    etas: tuple[float, ...]
    tie_break: TieBreak = "smallest"  # smallest answer wins; first met in the working set wins; t-way tie scores 1/t
    bootstrap: int = 1000  # resamples for the confidence intervals and paired tests (seeded by seed)
    ci_level: float = 0.95  # coverage of the intervals

    def validate(self, where: str) -> None:
        require(100 <= self.bootstrap <= MAX_COUNT_BOUND, where, "bootstrap", self.bootstrap,
                f"in 100..{MAX_COUNT_BOUND:,} (fewer give coarse intervals)")
        require(0.5 <= self.ci_level < 1, where, "ci_level", self.ci_level, "in [0.5, 1)")
        require(len(self.k) > 0 and all(k >= 1 for k in self.k), where, "k", list(self.k),
                "a non-empty list of integers >= 1")
        require(len(set(self.k)) == len(self.k), where, "k", list(self.k), "without repeats")
        require_count(where, "repeat", self.repeat)
        require(all(0 < eta <= 1 for eta in self.etas), where, "etas", list(self.etas), "fractions in (0, 1]")
        for eta in self.etas:
            require(eta_percent(eta) is not None, where, "etas", eta, WHOLE_PERCENT)
        percents = [eta_percent(eta) for eta in self.etas]
        require(len(set(percents)) == len(percents), where, "etas", list(self.etas),
                f"distinct percentages: they name the methods <measure>_top<percent> (here {percents})")


# subtle: a rounded name would hide the real eta, e.g. report 0.125 as `avg_top12`
WHOLE_PERCENT = "a whole percentage (0.1, 0.05, ...) to name a method"


def eta_percent(eta: float) -> int | None:
    """The percentage in the names of eta's methods (0.1 -> 10: `avg_top10`), or None when eta is not a
    whole percentage (0.125). 0.1 + 1e-12 is 10 too; EvalConfig.validate refuses both in one list."""
    percent = round(eta * 100)
    return percent if math.isclose(eta * 100, percent, abs_tol=1e-9) else None


@dataclass(frozen=True)
class OnlineConfig:
    """Online DeepConf replayed on the pool (tracevote.deepconf.online)."""

    warmup: int  # traces per working set that run in full and set the threshold
    percentiles: dict[str, float]  # method name -> percentile of the warmup's lowest-group confidences
    consensus: float | None  # stop sampling once the leading answer holds this share of the vote weight

    def validate(self, where: str) -> None:
        require_count(where, "warmup", self.warmup)
        require(len(self.percentiles) > 0, where, "percentiles", self.percentiles, "at least one method")
        for name, value in self.percentiles.items():
            require(isinstance(name, str) and name.isidentifier(), f"{where}.percentiles", str(name), name,
                    "a name of letters, digits and _ (it names the method online_<name>)")
            require(isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 100,
                    f"{where}.percentiles", name, value, "a percentile in [0, 100]")
        require(self.consensus is None or 0.5 < self.consensus <= 1, where, "consensus", self.consensus,
                "null or a share in (0.5, 1]")

    def method_names(self) -> tuple[str, ...]:
        return tuple(f"online_{name}" for name in self.percentiles)


@dataclass(frozen=True)
class ReportConfig:
    k: int

    def validate(self, where: str) -> None:
        require(self.k >= 1, where, "k", self.k, ">= 1")


@dataclass(frozen=True)
class GradingRunConfig:
    """One entry of `grading.runs:`, named by its key: predictions graded against a project dataset."""

    name: str
    dataset: str  # a dataset of kind problems: its normalized file data/<dataset>.jsonl is the gold
    predictions: str  # a predictions file (.jsonl, tracked by DVC) or a pool manifest (pools/<dataset>.json)
    id_key: str | None = None  # gold field the ids match; null: id, else unique_id, else <dataset>_test_<row>

    def validate(self, where: str) -> None:
        require(bool(DATASET_NAME.match(self.name)), where, "name", self.name,
                f"{KEY_NAME_RULE}; it names files, DVC stages and metrics")
        require(self.predictions.endswith((".jsonl", ".json")), where, "predictions", self.predictions,
                "a .jsonl predictions file or a .json pool manifest")


@dataclass(frozen=True)
class CriticConfig:
    """The grading critic: an LLM scores a prediction's reasoning against the reference solution, 1-5."""

    enabled: bool
    max_samples: int  # the first gold items with a reference solution and a prediction
    endpoint: str  # the key in `endpoints:` the critic calls
    temperature: float
    max_tokens: int
    concurrency: int
    max_cost_usd: float  # per run

    def validate(self, where: str) -> None:
        require_count(where, "max_samples", self.max_samples)
        require(0.0 <= self.temperature <= 2.0, where, "temperature", self.temperature, "in [0, 2]")
        require_tokens(where, "max_tokens", self.max_tokens)
        require(1 <= self.concurrency <= 256, where, "concurrency", self.concurrency, "1-256")
        require(self.max_cost_usd >= 0, where, "max_cost_usd", self.max_cost_usd, ">= 0")


@dataclass(frozen=True)
class GradingConfig:
    """Grading prediction files (and pools): Math-Verify accuracy, word counts and the critic."""

    runs: dict[str, GradingRunConfig]
    verify_timeout_s: float  # wall clock per Math-Verify comparison; one that overruns is wrong
    workers: int  # Math-Verify worker processes
    critic: CriticConfig

    def validate(self, where: str) -> None:
        # report_grading depends on the grade stages' folder, which only a run creates
        require(len(self.runs) > 0, where, "runs", self.runs, "at least one run")
        require(self.verify_timeout_s > 0, where, "verify_timeout_s", self.verify_timeout_s, "> 0")
        require(1 <= self.workers <= 64, where, "workers", self.workers, "1-64")


@dataclass(frozen=True)
class Params:
    datasets: dict[str, DatasetConfig]
    deepconf: DeepConfConfig
    debate: DebateConfig
    critique: CritiqueConfig
    grading: GradingConfig
    model: BackendConfig
    endpoints: dict[str, EndpointConfig]
    prompt: PromptConfig
    decoding: DecodingConfig
    pool: PoolConfig
    confidence: ConfidenceConfig
    answers: AnswersConfig
    eval: EvalConfig
    online: OnlineConfig
    report: ReportConfig

    def dataset(self, name: str) -> DatasetConfig:
        """The `datasets:` entry `name`, or a ConfigError listing the names there are."""
        if name not in self.datasets:
            raise ConfigError(f"datasets: no dataset {name!r} (there are: {', '.join(self.datasets) or 'none'})")
        return self.datasets[name]

    def endpoint_model(self, key: str) -> ModelConfig:
        """Endpoint `key` of `endpoints:` as a method calls it, answered as `model.backend` says."""
        endpoint = self.endpoints[key]
        return ModelConfig(backend=self.model.backend, base_url=endpoint.base_url, name=endpoint.name,
                           extra_body=endpoint.extra_body, api_key_env=endpoint.api_key_env,
                           needs_key=endpoint.needs_key, sim=self.model.sim, profile=endpoint.resolved_profile(),
                           pricing=endpoint.pricing, endpoint=key)

    @property
    def deepconf_model(self) -> ModelConfig:
        return self.endpoint_model(self.deepconf.endpoint)

    @property
    def debate_model(self) -> ModelConfig:
        return self.endpoint_model(self.debate.endpoint)

    @property
    def judge_model(self) -> ModelConfig:
        return self.endpoint_model(self.debate.judge_endpoint)

    @property
    def critique_model(self) -> ModelConfig:
        return self.endpoint_model(self.critique.endpoint)

    @property
    def critic_model(self) -> ModelConfig:
        return self.endpoint_model(self.grading.critic.endpoint)

    def validate(self, where: str) -> None:
        require(len(self.datasets) > 0, "", "datasets", self.datasets, "at least one dataset")
        self._check_endpoint_names()
        self._check_profiles()
        for method, names, why in (("deepconf", self.deepconf.datasets, "DeepConf votes over integers"),
                                   ("debate", self.debate.datasets, "agents agree on integers")):
            for name in names:
                dataset = self.dataset(name)
                require(dataset.kind == "problems" and dataset.answer_format in INTEGER_FORMATS, method,
                        "datasets", name, f"a dataset of problems with integer answers ({why}; "
                        f"{name} is kind {dataset.kind}, answer_format {dataset.answer_format})")
        for name in self.critique.datasets:
            kind = self.dataset(name).kind
            require(kind == "steps", "critique", "datasets", name,
                    f"a dataset of kind steps (solutions with a labelled first error; {name} is kind {kind})")
        for run in self.grading.runs.values():
            kind = self.dataset(run.dataset).kind
            require(kind == "problems", f"grading.runs.{run.name}", "dataset", run.dataset,
                    f"a dataset of kind problems (its normalized file is the gold; {run.dataset} is kind {kind})")
        too_large = [k for k in self.eval.k if k > self.pool.n_pool]
        require(not too_large, "eval", "k", too_large, f"at most pool.n_pool ({self.pool.n_pool})")
        require(self.report.k in self.eval.k, "report", "k", self.report.k,
                f"one of eval.k {list(self.eval.k)}")


    def _endpoint_uses(self) -> list[tuple[str, str, str]]:
        """(section, key, endpoint) for every endpoint a method names."""
        return [("deepconf", "endpoint", self.deepconf.endpoint), ("debate", "endpoint", self.debate.endpoint),
                ("debate", "judge_endpoint", self.debate.judge_endpoint),
                ("critique", "endpoint", self.critique.endpoint),
                ("grading.critic", "endpoint", self.grading.critic.endpoint)]

    def _check_endpoint_names(self) -> None:
        for section, key, endpoint in self._endpoint_uses():
            require(endpoint in self.endpoints, section, key, endpoint,
                    f"a key of endpoints: ({', '.join(self.endpoints) or 'none defined'})")

    def _check_profiles(self) -> None:
        """What a method needs of its endpoint's provider, refused here, before any request."""
        pool = self.endpoints[self.deepconf.endpoint]
        profile = pool.resolved_profile()
        require(profile.logprobs, "deepconf", "endpoint", self.deepconf.endpoint,
                f"an endpoint that returns logprobs: DeepConf's confidence is made of them, and "
                f"{pool.name} (profile {profile.name}) returns none")
        limit = profile.max_top_logprobs or 0
        require(self.decoding.top_logprobs <= limit, "decoding", "top_logprobs", self.decoding.top_logprobs,
                f"at most {limit}, the most {pool.name} (profile {profile.name}) returns")
        temperatures = [("decoding", self.decoding.temperature, self.deepconf.endpoint),
                        ("debate", self.debate.temperature, self.debate.endpoint),
                        ("debate", self.debate.temperature, self.debate.judge_endpoint),
                        ("critique", self.critique.temperature, self.critique.endpoint)]
        if self.grading.critic.enabled:
            temperatures.append(("grading.critic", self.grading.critic.temperature, self.grading.critic.endpoint))
        for section, temperature, key in temperatures:
            endpoint = self.endpoints[key]
            profile = endpoint.resolved_profile()
            require(profile.sampling_parameters or temperature == DEFAULT_TEMPERATURE, section, "temperature",
                    temperature, f"{DEFAULT_TEMPERATURE:g}: endpoint {key} ({endpoint.name}, profile "
                    f"{profile.name}) accepts only the default temperature; set "
                    f"{section}.temperature: {DEFAULT_TEMPERATURE:g}")


def load_params(path: str | Path = "params.yaml") -> Params:
    """Read and validate params.yaml; errors name the file, the key and the bad value."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: not found") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    try:
        params = build(Params, raw or {}, "")
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return params
