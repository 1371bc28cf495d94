"""params.yaml's DeepConf sections, in the order the pipeline uses them: `deepconf:` (its datasets and endpoints),
`prompt:`, `decoding:` and `pool:` (sampling the pool), `confidence:` (scoring), `eval:` and `online:`
(voting at each K) and `report:`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, get_args

from tracevote.core.limits import MAX_COUNT_BOUND, MAX_TOKENS_BOUND
from tracevote.core.typedconfig import param, require

TieBreak = Literal["smallest", "first", "fractional"]
TokenSignal = Literal["deepconf", "chosen", "entropy"]
TOKEN_SIGNALS: tuple[str, ...] = get_args(TokenSignal)
DEFAULT_SIGNAL = "deepconf"  # confidence.token's default, and what tables and runs from before the setting hold
MEASURES: tuple[str, ...] = ("avg", "bottom10", "lowest", "tail")
TOKENS = {"ge": 1, "le": MAX_TOKENS_BOUND}  # any max_tokens and any per-trace token window
COUNT = {"ge": 1, "le": MAX_COUNT_BOUND}  # per-problem samples, votes, resamples, repeats
TEMPERATURE = {"ge": 0, "le": 2}
CONCURRENCY = {"ge": 1, "le": 256}
IDENTIFIER = "^[A-Za-z_][A-Za-z0-9_]*$"  # a method's name part: online_<name>


@dataclass(frozen=True)
class DeepConfConfig:
    datasets: tuple[str, ...] = param("the datasets DeepConf runs on: each gets its own pool, scores and report "
                                      "(kind problems, integer answers)", min_items=1, unique=True)
    endpoint: str = param("the key of endpoints: that samples the pool (its profile must return logprobs)")
    endpoints: tuple[str, ...] = param("the other models DeepConf also runs on, keys of endpoints: (each profile must "
                                       "return logprobs, each entry has a sim: key): each gets its own pool, scores "
                                       "and aggregate under study/<endpoint>/; deepconf.endpoint is not listed; []: "
                                       "none", (), unique=True)


@dataclass(frozen=True)
class PromptConfig:
    system: str | None = param("the system message; null: none")
    template: str = param("the user message; {problem} is replaced by the problem")

    def validate(self, where: str) -> None:
        require("{problem}" in self.template, where, "template", self.template, "text containing {problem}")


@dataclass(frozen=True)
class DecodingConfig:
    temperature: float = param("the sampling temperature of the pool's traces", **TEMPERATURE)
    top_p: float | None = param("nucleus sampling, sent only when set (DeepSeek advises temperature or top_p, not "
                                "both)", gt=0, le=1)
    max_tokens: int = param("the most tokens a trace may have; longer ones are cut off", **TOKENS)
    top_logprobs: int = param("alternatives per token whose log-probabilities are kept (at most what the endpoint's "
                              "profile returns)", ge=0, le=20)
    seed: int | None = param("each request's `seed`: this number mixed with the trace's problem and sample id, so a "
                             "server that honours it (llama.cpp, vLLM, SGLang) gives the same trace again; null: none "
                             "sent", None, ge=0, le=2**31 - 1)


@dataclass(frozen=True)
class PoolConfig:
    n_pool: int = param("traces per problem; raising it tops the pool up", **COUNT)
    concurrency: int = param("requests in flight per server", **CONCURRENCY)
    request_timeout_s: float = param("seconds one request may take before it is retried", gt=0)
    max_retries: int = param("retries of a failed request before the build stops", ge=0)
    max_cost_usd: float = param("refuse builds estimated above this many dollars", ge=0)
    keep_top_logprobs: bool = param("false keeps only the per-token confidence (at most 12 bytes a token)")
    keep_raw: bool = param("true also stores the compressed raw responses")
    allow_uninformative_logprobs: bool = param("true builds even when the probe finds no logprob signal")
    samples_per_request: int = param("traces asked for in one request (`n`, sharing one prefill) where the endpoint "
                                     "honours n (vLLM, SGLang, OpenAI); 1: one request per trace", 1, ge=1, le=128)
    keep_top_tokens: bool = param("true also keeps the alternatives' token strings beside the top-k logprobs, where "
                                  "the engine sends them, for the explorer's token view (at top-20 ~9 more bytes a "
                                  "token on long traces, up to ~36 on short ones: docs/pool-store.md); needs "
                                  "keep_top_logprobs", False)

    def validate(self, where: str) -> None:
        require(self.keep_top_logprobs or not self.keep_top_tokens, where, "keep_top_tokens", self.keep_top_tokens,
                "false when keep_top_logprobs is false: the token strings are kept beside the top-k logprobs")


@dataclass(frozen=True)
class ConfidenceConfig:
    group_size: int = param("tokens in each sliding window of the group confidence", **TOKENS)
    bottom_fraction: float = param("the share of lowest windows the bottom10 measure averages", gt=0, le=1)
    tail_tokens: int = param("the last tokens of a trace the tail measure averages", **TOKENS)
    token: TokenSignal = param("the per-token signal the four measures average (higher = surer): deepconf, DeepConf's "
                               "token confidence C_i (minus the mean of the top-k logprobs); chosen, the chosen "
                               "token's logprob; entropy, minus the entropy of the token's top-k (not renormalized)",
                               DEFAULT_SIGNAL)
    top_k: int | None = param("how many of each token's kept top-k entries (the first k, by rank) deepconf and entropy "
                              "use, at most decoding.top_logprobs; null: every entry the pool kept", None, ge=1)
    compare_signals: bool = param("true also scores every other token signal the pool supports (columns "
                                  "<signal>_<measure>) for the report's AUROC table, reading every trace's logprobs "
                                  "(~14x the score stage's time with top-20 kept); false: only `token` (deepconf at "
                                  "the pool's k then reads C_i alone)", False)


# subtle: a rounded name would hide the real eta, e.g. report 0.125 as `avg_top12`
WHOLE_PERCENT = "a whole percentage (0.1, 0.05, ...) to name a method"


@dataclass(frozen=True)
class EvalConfig:
    k: tuple[int, ...] = param("the working-set sizes K the methods vote over (each at most pool.n_pool)", ge=1,
                               min_items=1, unique=True)
    repeat: int = param("working sets drawn per K and problem", **COUNT)
    seed: int = param("seeds the working sets and the bootstrap")
    etas: tuple[float, ...] = param("DeepConf's kept shares: each filters to the most confident eta of a working "
                                    "set (methods <measure>_top<percent>)", gt=0, le=1)
    tie_break: TieBreak = param("smallest: the smallest answer wins; first: the first met in the working set (the "
                                "official code's rule); fractional: a t-way tie scores 1/t", "smallest")
    bootstrap: int = param("resamples of the problems behind every interval and paired test", 1000, ge=100,
                           le=MAX_COUNT_BOUND)
    ci_level: float = param("the coverage of the confidence intervals", 0.95, ge=0.5, lt=1)

    def validate(self, where: str) -> None:
        wholes = [require(eta_percent(eta) is not None, where, "etas", eta, WHOLE_PERCENT) for eta in self.etas]
        percents = [eta_percent(eta) for eta in self.etas]
        require(not all(wholes) or len(set(percents)) == len(percents), where, "etas", list(self.etas),
                f"distinct percentages: they name the methods <measure>_top<percent> (here {percents})")


def eta_percent(eta: float) -> int | None:
    """The percentage in the names of eta's methods (0.1 -> 10: `avg_top10`), or None when eta is not a
    whole percentage (0.125). 0.1 + 1e-12 is 10 too; EvalConfig.validate refuses both in one list."""
    percent = round(eta * 100)
    return percent if math.isclose(eta * 100, percent, abs_tol=1e-9) else None


@dataclass(frozen=True)
class LiveConfig:
    """Online DeepConf run live (stage build_online): traces streamed and closed as their confidence falls."""

    datasets: tuple[str, ...] = param("the datasets run live, each with its own build_online stage (kind problems); "
                                      "[]: none", unique=True)
    methods: tuple[str, ...] = param("which online.percentiles run live (low, high, ...); the warmup traces are "
                                     "shared by them", unique=True)
    budget: int = param("traces per problem and method at most, the warmup included", **COUNT)
    concurrency: int = param("streams in flight at once (the stop rule stays the sequential one)", **CONCURRENCY)
    max_cost_usd: float = param("refuse a run whose worst case (every missing trace runs to decoding.max_tokens) "
                                "is estimated above this many dollars", ge=0)


NO_LIVE_RUN = LiveConfig(datasets=(), methods=(), budget=1, concurrency=1, max_cost_usd=0.0)


@dataclass(frozen=True)
class OnlineConfig:
    """Online DeepConf replayed on the pool (tracevote.deepconf.online), and run live (`live:`)."""

    warmup: int = param("traces per working set that run in full and set the threshold", **COUNT)
    percentiles: dict[str, float] = param("method online_<name> -> the percentile of the warmup's lowest group "
                                          "confidences that sets its threshold (low: 90 keeps the top 10%)",
                                          ge=0, le=100, keys=IDENTIFIER)
    consensus: float | None = param("stop sampling once the leading answer holds this share of the vote weight "
                                    "(the paper's tau, e.g. 0.95); null: never stop early", gt=0.5, le=1)

    live: LiveConfig = param("online DeepConf run live against the endpoint: stage build_online", NO_LIVE_RUN)

    def validate(self, where: str) -> None:
        require(len(self.percentiles) > 0, where, "percentiles", self.percentiles, "at least one method")
        for name, value in self.percentiles.items():
            require(isinstance(name, str) and name.isidentifier(), f"{where}.percentiles", str(name), name,
                    "a name of letters, digits and _ (it names the method online_<name>)")
            require(isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 100,
                    f"{where}.percentiles", str(name), value, "a percentile in [0, 100]")
        if not self.live.datasets:
            return
        require(len(self.live.methods) > 0, f"{where}.live", "methods", list(self.live.methods),
                "at least one key of online.percentiles when live.datasets names any")
        for method in self.live.methods:
            require(method in self.percentiles, f"{where}.live", "methods", method,
                    f"a key of online.percentiles ({', '.join(map(str, self.percentiles)) or 'none'})")
        require(self.live.budget >= self.warmup, f"{where}.live", "budget", self.live.budget,
                f"at least online.warmup ({self.warmup}): the warmup traces are part of the budget")

    def method_names(self) -> tuple[str, ...]:
        return tuple(f"online_{name}" for name in self.percentiles)


@dataclass(frozen=True)
class ReportConfig:
    k: int = param("the K the report's tables and headline figures use (one of eval.k)", ge=1)
