"""Building debates on the ledger: one CallLedger per (dataset, debate setting), what is missing, the cost
estimate, the run, and the manifest score_debate reads.

A debate is one conversation of up to agents x 2 + 3 calls (round 0, round 1, the judge, round 2). A rerun
replays each debate's stored replies to rebuild its state and pays from its first missing call on.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tracevote.core.config import Params
from tracevote.core.config_deepconf import DecodingConfig
from tracevote.core.config_endpoints import ModelConfig, PricingConfig, with_effort
from tracevote.core.config_methods import DebateConfig
from tracevote.core.costs import BYTES_PER_PROMPT_TOKEN, CostEstimate, estimate
from tracevote.core.errors import ConfigError
from tracevote.core.fileio import write_json
from tracevote.datasets.problems import Problem
from tracevote.debate.examples import examples_text
from tracevote.debate.prompts import RANK
from tracevote.debate.protocol import Debate, Transcript, advance, replay
from tracevote.store.calls import CallLedger, ledger_fields, load_finished_ledger
from tracevote.store.ledger import fingerprint_of, folder_name

METHOD = "dylan-debate"


def debate_setting(params: Params) -> dict[str, Any]:
    """Everything that decides a debate's requests and their order: its hash names the ledger. The
    `answers:` rules are in it because they decide consensus, so which calls come next. The judge's model is
    in it whichever endpoint serves it, so changing either model starts a new ledger. The examples are in it as
    the text sent, so editing a built-in set's file makes a new setting (null and text hash as before)."""
    cfg, model, judge = params.debate, params.debate_model, params.judge_model
    return {"method": METHOD, "backend": model.backend, "model": model.name, "extra_body": model.extra_body,
            "judge_model": judge.name, "judge_extra_body": judge.extra_body,
            "sim": asdict(model.sim) if model.backend == "sim" else None, "agents": cfg.agents,
            "rounds": cfg.rounds, "temperature": cfg.temperature, "max_tokens": cfg.max_tokens,
            "system": cfg.system, "examples": examples_text(cfg.examples), "question": cfg.question,
            "importance": cfg.importance, "answers": asdict(params.answers),
            **with_effort({}, model), **with_effort({}, judge, key="judge_reasoning_effort")}


def judge_routes(params: Params) -> dict[str, ModelConfig]:
    """The ranking call goes to the judge's endpoint when it is not the agents'."""
    judge = params.judge_model
    return {} if judge.endpoint == params.debate.endpoint else {RANK: judge}


def debate_decoding(cfg: DebateConfig) -> DecodingConfig:
    """The debate's sampling settings for the shared client; text-only calls ask for no logprobs."""
    return DecodingConfig(temperature=cfg.temperature, top_p=None, max_tokens=cfg.max_tokens, top_logprobs=0)


def ledger_root(debates_dir: Path, params: Params) -> Path:
    fingerprint = fingerprint_of(debate_setting(params))
    return debates_dir / folder_name(params.debate_model.name, fingerprint, simulated=params.model.backend == "sim")


def open_ledger(debates_dir: Path, params: Params, problems: list[Problem]) -> CallLedger:
    """The dataset's debate ledger for this setting (created when absent), its problems registered."""
    ledger = CallLedger.open_at(ledger_root(debates_dir, params), debate_setting(params),
                                simulated=params.model.backend == "sim")
    ledger.register_digests({p.id: hashlib.sha256(p.problem.encode()).hexdigest() for p in problems},
                            what="problem text")
    return ledger


@dataclass(frozen=True)
class Selection:
    """Which of a dataset's problems are debated: debate.problems as built, and their places in the dataset
    (contests by halves are counted on the whole dataset, not on the slice)."""

    span: tuple[int, int] | None
    positions: tuple[int, ...]  # 0-based, in dataset order
    dataset_problems: int


def select_problems(problems: list[Problem], span: tuple[int, int] | None, dataset: str) -> Selection:
    """The problems `span` ([start, end], end included) selects; an end past the last problem stops there, as
    the write-up's script takes only the files that exist. A start past the last problem is a ConfigError.

    >>> select_problems([Problem(f"p{i}", "?", i) for i in range(5)], (3, 14), "toy").positions
    (3, 4)
    """
    if span is None:
        return Selection(None, tuple(range(len(problems))), len(problems))
    start, end = span
    if start >= len(problems):
        raise ConfigError(f"debate.problems: {list(span)} starts past the last problem of {dataset}, which has "
                          f"{len(problems)} (positions 0-{len(problems) - 1})")
    return Selection(span, tuple(range(start, min(end, len(problems) - 1) + 1)), len(problems))


def debates_for(problems: list[Problem], params: Params) -> list[Debate]:
    return [Debate(problem, params.debate, params.answers) for problem in problems]


@dataclass(frozen=True)
class DebatePlan:
    unfinished: list[Debate]
    stored_calls: int  # replies already in the ledger along the debates' paths
    cost: CostEstimate  # for every call an unfinished debate may still make (an upper bound)


def plan_debates(ledger: CallLedger, debates: list[Debate], pricing: PricingConfig, *,
                 judge_pricing: PricingConfig | None = None, simulated_as: str | None = None) -> DebatePlan:
    made = {debate.problem.id: progress(ledger, debate) for debate in debates}
    unfinished = [debate for debate in debates if not made[debate.problem.id][1]]
    stored = sum(calls for calls, _ in made.values())
    cost = remaining_cost([(d, made[d.problem.id][0]) for d in unfinished], pricing, judge_pricing=judge_pricing,
                          simulated_as=simulated_as)
    return DebatePlan(unfinished, stored, cost)


def worst_case_cost(debates: list[Debate], pricing: PricingConfig, *, judge_pricing: PricingConfig | None = None,
                    simulated_as: str | None = None) -> CostEstimate:
    """What the debates cost if none reaches consensus: every call of every debate, none stored yet."""
    return remaining_cost([(debate, 0) for debate in debates], pricing, judge_pricing=judge_pricing,
                          simulated_as=simulated_as)


def remaining_cost(progressed: list[tuple[Debate, int]], pricing: PricingConfig, *,
                   judge_pricing: PricingConfig | None = None, simulated_as: str | None = None) -> CostEstimate:
    """The estimate for every call each debate may still make after its first `made` calls (an upper bound);
    the judge's calls at `judge_pricing` when the judge has its own endpoint."""
    judge_pricing = judge_pricing or pricing
    agents: list[int] = []
    judges: list[int] = []
    for debate, made in progressed:
        judge_at = 2 * debate.cfg.agents if debate.cfg.rounds >= 3 else -1
        sizes = longest_path_prompt_bytes(debate, pricing.expected_output_fraction)
        for index in range(made, len(sizes)):
            (judges if index == judge_at else agents).append(sizes[index])
    max_tokens = progressed[0][0].cfg.max_tokens if progressed else 1
    return (estimate(agents, max_tokens, pricing, simulated_as=simulated_as)
            .plus(estimate(judges, max_tokens, judge_pricing, simulated_as=simulated_as)))


def progress(ledger: CallLedger, debate: Debate) -> tuple[int, bool]:
    """How many of the debate's calls are stored (in order), and whether the debate is finished."""
    stored = ledger.records(debate.problem.id)
    reached, made = advance(debate, lambda call: ledger.load(call) if call.key in stored else None)
    return made, isinstance(reached, Transcript)


def longest_path_prompt_bytes(debate: Debate, output_fraction: float) -> list[int]:
    """Prompt sizes of every call of a debate that never reaches consensus, in call order; each shown
    solution is estimated at max_tokens x `output_fraction` tokens."""
    cfg = debate.cfg
    question = len(debate.asked.encode()) + len((cfg.system or "").encode())
    solution = math.ceil(cfg.max_tokens * output_fraction * BYTES_PER_PROMPT_TOKEN)
    sizes = [question] * cfg.agents
    if cfg.rounds >= 2:
        sizes += [question + cfg.agents * solution] * cfg.agents
    if cfg.rounds >= 3:
        sizes += [question + cfg.agents * solution] + [question + 2 * solution] * 2
    return sizes


def transcripts(ledger: CallLedger, debates: list[Debate]) -> list[Transcript]:
    """Every debate replayed from the ledger, offline; DataError names the first incomplete one."""
    return [replay(debate, ledger.load) for debate in debates]


@dataclass(frozen=True)
class DebateManifest:
    """debates/<dataset>.json: which ledger holds the dataset's debates, how complete it is, and the problems
    debated (so score_debate needs nothing but debates/)."""

    dataset: str
    ledger: str  # relative to the manifest's folder
    fingerprint: str
    finished: int
    simulated: bool
    setting: dict[str, Any]
    problems: list[dict[str, Any]]  # Problem.to_record() of each, in dataset order
    # debate.problems when built, each problem's 0-based place in the dataset, and the dataset's size; manifests
    # written before ranges existed lack them: every problem, in order
    span: list[int] | None = None
    positions: list[int] | None = None
    dataset_problems: int | None = None

    def problem_list(self) -> list[Problem]:
        return [Problem(**record) for record in self.problems]

    def selection(self) -> Selection:
        span = (self.span[0], self.span[1]) if self.span is not None else None
        positions = tuple(self.positions) if self.positions is not None else tuple(range(len(self.problems)))
        size = self.dataset_problems if self.dataset_problems is not None else len(self.problems)
        return Selection(span, positions, size)


def write_manifest(path: Path, ledger: CallLedger, dataset: str, debates: list[Debate],
                   selection: Selection) -> DebateManifest:
    stored = CallLedger(ledger.root)  # read afresh: a ledger object caches the records it has read
    fields = ledger_fields(path, stored)
    finished = sum(progress(stored, debate)[1] for debate in debates)
    manifest = DebateManifest(dataset=dataset, finished=finished, problems=[d.problem.to_record() for d in debates],
                              span=list(selection.span) if selection.span is not None else None,
                              positions=list(selection.positions), dataset_problems=selection.dataset_problems,
                              **fields)
    write_json(path, asdict(manifest))
    return manifest


def load_ledger(manifest_path: Path) -> tuple[DebateManifest, CallLedger]:
    """The manifest and the ledger it names; an unfinished build is an error naming what to run."""
    return load_finished_ledger(manifest_path, DebateManifest, what="debate", total=lambda m: len(m.problems),
                                unfinished=lambda m: "debates are finished; run build_debate (it requests only "
                                                     "the missing calls)")
