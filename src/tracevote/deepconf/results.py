"""The aggregate stage's result: typed records of accuracies and what explains them, and their JSON form.

`aggregate` (tracevote.deepconf.evaluate) builds an AggregateResult; the report stage reads it back with
`AggregateResult.from_json`. A per-item record (ProblemResult) and the aggregate are different types.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from tracevote.core.config_deepconf import DEFAULT_SIGNAL


@dataclass(frozen=True)
class MethodAccuracy:
    method: str
    k: int
    mean: float  # over repeats of (mean correctness over problems), ties broken by eval.tie_break
    std: float  # over repeats, ddof 0
    fractional: float  # mean accuracy when a t-way tie holding the gold scores 1/t (= mean for pass1)
    ci_low: float | None = None  # bootstrap interval of `mean` at eval.ci_level (tracevote.deepconf.uncertainty)
    ci_high: float | None = None

    @property
    def tie_rule_gain(self) -> float:
        """What the tie rule adds over a uniform random tie-break (its fractional expectation)."""
        return self.mean - self.fractional


@dataclass(frozen=True)
class OnlineAccuracy:
    """Online DeepConf replayed at budget K (tracevote.deepconf.online); per-problem figures are means over
    problems and working sets."""

    method: str  # online_<name> of online.percentiles
    k: int
    percentile: float
    mean: float
    std: float
    fractional: float
    ci_low: float
    ci_high: float
    tokens: float  # completion tokens spent per problem
    cons_tokens: float  # what Cons@K spends on the same working sets (all K traces in full)
    savings: float  # 1 - tokens / cons_tokens, totals over problems and working sets
    generated: float  # traces started per problem (< K only with the consensus stop)
    stopped: float  # traces stopped early per problem
    answered: float  # share of working sets with a vote


@dataclass(frozen=True)
class PairedComparison:
    """A method minus Cons@K at the same K on the same working sets (tracevote.deepconf.uncertainty)."""

    method: str
    k: int
    difference: float  # mean accuracy difference (a fraction, not points)
    ci_low: float
    ci_high: float
    p_value: float  # two-sided paired bootstrap


@dataclass(frozen=True)
class TieRate:
    k: int
    rate: float  # share of working sets (repeats x problems) whose Cons@K top count was shared


@dataclass(frozen=True)
class WorkingSets:
    """How many distinct working sets stand behind the figures at K, per problem: its eval.repeat draws are
    independent, so two can be the same set of samples; at most min(eval.repeat, C(pool, K)), and 1 when K is
    the whole pool. Counted as drawn (tracevote.deepconf.working_sets.distinct_sets), fewest and most over problems."""

    k: int
    fewest: int
    most: int

    @property
    def no_trace_spread(self) -> bool:
        """Every problem was voted on one set: the std is 0 and the bootstrap interval resamples only problems."""
        return self.most == 1


@dataclass(frozen=True)
class PassAtK:
    """lm-evaluation-harness's pass@k and avg@k at k = K over the problems (tracevote.deepconf.passk): exact means
    over every working set of K samples of each problem's pool, not over the eval.repeat drawn ones."""

    k: int
    pass_at_k: float  # mean over problems of 1 - C(n-c, K)/C(n, K)
    pass_at_k_std: float  # over working sets, one drawn per problem independently, of the mean over problems
    avg_at_k: float  # mean over problems of c/n: Pass@1 over the whole pool, whatever K
    avg_at_k_std: float  # what one working set per problem scatters avg@K by around it (0 when K is every pool)
    pass_at_k_ci_low: float | None = None  # bootstrap interval over problems at eval.ci_level, as MethodAccuracy's
    pass_at_k_ci_high: float | None = None
    avg_at_k_ci_low: float | None = None
    avg_at_k_ci_high: float | None = None


@dataclass(frozen=True)
class ProblemPassAtK:
    """One problem's pass@K and avg@K from its pool of n samples, c of them correct (invalid samples are wrong)."""

    problem_id: str
    k: int
    samples: int  # n
    correct: int  # c
    pass_at_k: float  # 1 - C(n-c, K)/C(n, K)
    avg_at_k: float  # c/n
    avg_at_k_std: float  # over its C(n, K) working sets: sqrt(c/n (1 - c/n) / K * (n-K)/(n-1))


@dataclass(frozen=True)
class ProblemResult:
    problem_id: str
    method: str
    k: int
    accuracy: float  # mean correctness over repeats
    prediction: int | None  # most frequent answered prediction over repeats (smallest on ties); None for pass1
    answered: float  # share of repeats with an answer; for pass1 the mean share of valid samples


@dataclass(frozen=True)
class Validity:
    """Sample counts over the full pool; no_tokens, no_answer and truncated are disjoint reasons.

    by_source counts every sample by answer_source (boxed, fallback, none); by_finish_reason by the
    API's finish_reason (stop, length, ...). fallback_votes are valid samples whose answer came from
    the fallback rather than a box: they vote, so a user should know how many and how many were right.
    """

    n_problems: int
    n_samples: int
    n_valid: int
    valid_per_problem_mean: float
    valid_per_problem_min: int
    fewest_valid_problem: str  # the problem with valid_per_problem_min valid samples (first by id on ties)
    no_tokens: int  # no tokens at all
    no_answer: int  # tokens but no integer answer 0-999, finished normally
    truncated: int  # tokens but no answer, finish_reason 'length'
    finish_length: int  # all samples with finish_reason 'length', valid or not
    unweighted: int  # valid samples with a NaN measure: they vote in Cons@K only
    by_source: dict[str, int]
    by_finish_reason: dict[str, int]
    fallback_votes: int  # valid samples with answer_source 'fallback'
    fallback_votes_correct: int  # of which correct


@dataclass(frozen=True)
class ConfidenceSummary:
    measure: str
    correct: bool
    count: int
    mean: float | None  # None when count is 0
    p10: float | None
    p50: float | None
    p90: float | None


@dataclass(frozen=True)
class Auroc:
    measure: str
    pooled: float | None  # None unless both classes are present
    per_problem_mean: float | None
    n_problems: int  # problems with both classes, averaged in per_problem_mean
    signal: str = DEFAULT_SIGNAL  # the token signal the measure averages (confidence.token, or a compared one)


@dataclass(frozen=True)
class AggregateResult:
    k: tuple[int, ...]
    repeat: int
    seed: int
    tie_break: str  # eval.tie_break: smallest, first or fractional
    etas: tuple[float, ...]
    measures: tuple[str, ...]
    methods: tuple[str, ...]
    accuracy: tuple[MethodAccuracy, ...]  # every (K, method), K-major
    ties: tuple[TieRate, ...]
    validity: Validity
    confidence: tuple[ConfidenceSummary, ...]
    auroc: tuple[Auroc, ...]
    problems: tuple[ProblemResult, ...]  # every (K, problem, method)
    working_sets: tuple[WorkingSets, ...]  # every K, in k's order
    bootstrap: int = 0  # resamples behind ci_low/ci_high and the paired comparisons
    ci_level: float = 0.95
    online: tuple[OnlineAccuracy, ...] = ()  # every (K >= online.warmup, online method), K-major
    online_methods: tuple[str, ...] = ()
    online_warmup: int | None = None
    online_consensus: float | None = None
    paired: tuple[PairedComparison, ...] = ()  # every (K, method other than pass1 and cons)
    token_signal: str = DEFAULT_SIGNAL  # confidence.token: what the votes' measures average (auroc also has the others)
    top_k: int | None = None  # confidence.top_k it was scored at; None: every entry the pool kept
    pass_at_k: tuple[PassAtK, ...] = ()  # every K, in k's order
    pass_at_k_problems: tuple[ProblemPassAtK, ...] = ()  # every (K, problem)

    def tie_rate_at(self, k: int) -> float:
        for row in self.ties:
            if row.k == k:
                return row.rate
        raise KeyError(f"no Cons@K tie rate at K={k} (K: {list(self.k)})")

    def accuracy_at(self, method: str, k: int) -> MethodAccuracy:
        for row in self.accuracy:
            if row.method == method and row.k == k:
                return row
        raise KeyError(f"no accuracy for method {method!r} at K={k} (methods: {', '.join(self.methods)}; "
                       f"K: {list(self.k)})")

    def online_at(self, method: str, k: int) -> OnlineAccuracy | None:
        """The online method at K, or None below the warmup."""
        return next((row for row in self.online if row.method == method and row.k == k), None)

    def working_sets_at(self, k: int) -> WorkingSets:
        for row in self.working_sets:
            if row.k == k:
                return row
        raise KeyError(f"no working-set count at K={k} (K: {list(self.k)})")

    def pass_at_k_at(self, k: int) -> PassAtK | None:
        """pass@K and avg@K, or None in an aggregate written before they were."""
        return next((row for row in self.pass_at_k if row.k == k), None)

    def paired_at(self, method: str, k: int) -> PairedComparison | None:
        return next((row for row in self.paired if row.method == method and row.k == k), None)

    def to_json(self) -> dict[str, Any]:
        """Plain dicts, lists, str, int, float, bool and None; `from_json` reads it back."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AggregateResult:
        rows = {"accuracy": MethodAccuracy, "ties": TieRate, "confidence": ConfidenceSummary,
                "auroc": Auroc, "problems": ProblemResult, "online": OnlineAccuracy, "paired": PairedComparison,
                "pass_at_k": PassAtK, "pass_at_k_problems": ProblemPassAtK}
        values = {name: tuple(kind(**row) for row in data.get(name, ())) for name, kind in rows.items()}
        values["working_sets"] = tuple(WorkingSets(**row) for row in data["working_sets"])  # no default: required
        return cls(k=tuple(data["k"]), repeat=data["repeat"], seed=data["seed"], tie_break=data["tie_break"],
                   etas=tuple(data["etas"]),
                   measures=tuple(data["measures"]), methods=tuple(data["methods"]),
                   validity=Validity(**data["validity"]), bootstrap=data.get("bootstrap", 0),
                   ci_level=data.get("ci_level", 0.95), online_methods=tuple(data.get("online_methods", ())),
                   online_warmup=data.get("online_warmup"), online_consensus=data.get("online_consensus"),
                   token_signal=data.get("token_signal", DEFAULT_SIGNAL), top_k=data.get("top_k"), **values)


def _plain(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    if hasattr(value, "__dataclass_fields__"):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    return value
