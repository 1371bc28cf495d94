"""params.yaml's sections of the methods beside DeepConf: `debate:` (DyLAN-style multi-agent debate), `critique:`
(ProcessBench-style first-error identification) and `grading:` (prediction files graded with Math-Verify and an
optional LLM critic)."""

from __future__ import annotations

from dataclasses import dataclass

from tracevote.core.config_datasets import DATASET_NAME, KEY_NAME_PATTERN, KEY_NAME_RULE
from tracevote.core.config_deepconf import CONCURRENCY, COUNT, TEMPERATURE, TOKENS
from tracevote.core.limits import require_count, require_critique_template
from tracevote.core.typedconfig import param, require

# debate.examples' built-in sets (tracevote.debate.examples holds their files); any other text is used as it is
BUILTIN_EXAMPLES: tuple[str, ...] = ("builtin_aime",)
MAX_COST = "refuse builds estimated above this many dollars"


@dataclass(frozen=True)
class DebateConfig:
    """DyLAN-style multi-agent debate (tracevote.debate): who debates, how, and on which datasets."""

    datasets: tuple[str, ...] = param("the datasets debated (kind problems, integer answers); each gets its own "
                                      "ledger under debates/, and the metrics pool them", min_items=1, unique=True)
    # the judge names solutions by one digit, as DyLAN's [1,2] pattern does
    agents: int = param("agents per debate (the judge picks 2 of them)", ge=3, le=9)
    rounds: int = param("1: round 0 only; 2: rounds 0-1; 3: rounds 0-1, the judge's ranking and round 2 (DyLAN)",
                        ge=1, le=3)
    temperature: float = param("the agents' and the judge's sampling temperature", **TEMPERATURE)
    max_tokens: int = param("the most tokens one agent's reply may have", **TOKENS)
    system: str | None = param("the agents' system message; null: none")
    examples: str | None = param("worked examples before the problem: a built-in set (builtin_aime: 3 real AIME "
                                 "problems from 2010-2022), the examples' text, or null: none")
    question: str = param("the problem as the agents read it; {problem} is replaced")
    importance: bool = param("true: agents also rate the previous round's solutions 1-5 (changes the prompts)")
    contest_halves: tuple[str, ...] = param("datasets whose problems 1-15 and 16-30 are contests I and II "
                                            "(reported as <dataset>_I and _II)")
    concurrency: int = param("debates in flight per server (each makes one call at a time)", **CONCURRENCY)
    max_cost_usd: float = param(MAX_COST, ge=0)
    endpoint: str = param("the key of endpoints: the agents call")
    judge_endpoint: str = param("the key of endpoints: the judge (the ranking call) calls")
    problems: tuple[int, int] | None = param("[start, end]: each dataset's problems start..end, 0-based, end "
                                             "included; null: all. A change requests only the new debates", None)

    def validate(self, where: str) -> None:
        span = None if self.problems is None else list(self.problems)
        require(span is None or (len(span) == 2 and 0 <= span[0] <= span[1]), where, "problems", span,
                "null or [start, end]: 0-based positions with 0 <= start <= end (end included)")
        require("{problem}" in self.question, where, "question", self.question, "text containing {problem}")
        self._validate_examples(where)
        unknown = [name for name in self.contest_halves if name not in self.datasets]
        require(not unknown, where, "contest_halves", unknown, "names from debate.datasets")

    def _validate_examples(self, where: str) -> None:
        if self.examples is None:
            return
        if not require(bool(self.examples.strip()), where, "examples", self.examples,
                       "null, a built-in set or text"):
            return
        # subtle: a misspelt set name would otherwise be sent to the model as the examples' text
        builtin = self.examples.startswith("builtin_")
        require(not builtin or self.examples in BUILTIN_EXAMPLES, where, "examples", self.examples,
                f"one of the built-in sets {', '.join(BUILTIN_EXAMPLES)} (or null, or the examples' text)")


@dataclass(frozen=True)
class CritiqueConfig:
    """ProcessBench-style first-error identification (tracevote.critique): on which step datasets, and how
    many critiques are sampled per solution to vote over."""

    datasets: tuple[str, ...] = param("the step datasets critiqued (kind steps); each gets its own ledger under "
                                      "critiques/", min_items=1, unique=True)
    n_votes: int = param("critiques per solution, voting on the first wrong step; raising it requests only the new "
                         "ones", **COUNT)
    temperature: float = param("the critiques' sampling temperature", **TEMPERATURE)
    max_tokens: int = param("the most tokens one critique may have", **TOKENS)
    template: str | None = param("a template's text with {problem} and {tagged_response}, for every dataset; "
                                 "null: each dataset's own (ProcessBench's, or DeltaBench's for deltabench rows)")
    concurrency: int = param("critiques in flight per server", **CONCURRENCY)
    max_cost_usd: float = param(f"per dataset: {MAX_COST}", ge=0)
    endpoint: str = param("the key of endpoints: the critiques call")

    def validate(self, where: str) -> None:
        if self.template is not None:
            require_critique_template(where, self.template)


@dataclass(frozen=True)
class GradingRunConfig:
    """One entry of `grading.runs:`, named by its key: predictions graded against a project dataset."""

    name: str = param("the entry's key in grading.runs: (names its stages, files and metrics)")
    dataset: str = param("a dataset of kind problems: its normalized file data/<dataset>.jsonl is the gold")
    predictions: str = param("a predictions file (.jsonl, tracked by DVC) or a pool manifest (pools/<dataset>.json)")
    id_key: str | None = param("the gold field the predictions' ids match; null: id, else unique_id, else "
                               "<dataset>_test_<row>", None)

    def validate(self, where: str) -> None:
        require(bool(DATASET_NAME.match(self.name)), where, "name", self.name,
                f"{KEY_NAME_RULE}; it names files, DVC stages and metrics")
        require(self.predictions.endswith((".jsonl", ".json")), where, "predictions", self.predictions,
                "a .jsonl predictions file or a .json pool manifest")


@dataclass(frozen=True)
class CriticConfig:
    """The grading critic: an LLM scores a prediction's reasoning against the reference solution, 1-5."""

    enabled: bool = param("true: an LLM scores each reasoning 1-5 against the reference solution")
    max_samples: int = param("the first gold items with a reference solution and a prediction that are scored",
                             **COUNT)
    endpoint: str = param("the key of endpoints: the critic calls")
    temperature: float = param("the critic's sampling temperature", **TEMPERATURE)
    max_tokens: int = param("the most tokens one critic reply may have", **TOKENS)
    concurrency: int = param("critic calls in flight per server", **CONCURRENCY)
    max_cost_usd: float = param(f"per run: {MAX_COST}", ge=0)

    def validate(self, where: str) -> None:
        # the field's bound again, for a critic whose max_samples a flag replaced after reading (`grade`)
        require_count(where, "max_samples", self.max_samples)


@dataclass(frozen=True)
class GradingConfig:
    """Grading prediction files (and pools): Math-Verify accuracy, word counts and the critic."""

    runs: dict[str, GradingRunConfig] = param("run name -> the predictions it grades (at least one: the report "
                                              "stage reads the grade stages' folder)", keys=KEY_NAME_PATTERN)
    verify_timeout_s: float = param("wall clock seconds per Math-Verify comparison; one that overruns is wrong",
                                    gt=0)
    workers: int = param("Math-Verify worker processes", ge=1, le=64)
    critic: CriticConfig = param("the optional LLM critic")

    def validate(self, where: str) -> None:
        # report_grading depends on the grade stages' folder, which only a run creates
        require(len(self.runs) > 0, where, "runs", self.runs, "at least one run")
