"""Building critiques on the ledger: one CallLedger per (dataset, critique setting), what is missing, the cost
estimate, the run, and the manifest score_critiques reads.

Every solution gets `critique.n_votes` one-call conversations, keyed 0, 1, ... in its ledger item: raising
n_votes requests only the new keys, lowering it scores the first ones. The setting (which names the ledger)
is everything that shapes a request but n_votes: the model, the template's text, temperature and max_tokens. The
template is the dataset's own (by its steps_format) unless critique.template overrides it, so each dataset's
setting holds the text its requests were built from, and a changed template starts a new ledger.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tracevote.core.config import Params
from tracevote.core.config_deepconf import DecodingConfig
from tracevote.core.config_endpoints import PricingConfig, with_effort
from tracevote.core.config_methods import CritiqueConfig
from tracevote.core.costs import CostEstimate, estimate, prompt_bytes
from tracevote.core.fileio import write_json
from tracevote.critique.prompts import CRITIQUE, critique_messages, critique_template
from tracevote.datasets.steps import StepRecord
from tracevote.store.calls import Call, CallLedger, ledger_fields, load_finished_ledger
from tracevote.store.framing import Key
from tracevote.store.ledger import fingerprint_of, folder_name

METHOD = "processbench-critique"


def dataset_template(params: Params, dataset: str) -> str:
    """The template `dataset`'s critiques are built from: critique.template, else its rows' built-in one."""
    return critique_template(params.critique.template, params.dataset(dataset).steps_format)


def critique_setting(params: Params, dataset: str) -> dict[str, Any]:
    """Everything that decides a critique of `dataset` but how many are sampled: its hash names the ledger."""
    cfg, model = params.critique, params.critique_model
    setting = {"method": METHOD, "backend": model.backend, "model": model.name, "extra_body": model.extra_body,
               "sim": asdict(model.sim) if model.backend == "sim" else None,
               "template": dataset_template(params, dataset), "temperature": cfg.temperature,
               "max_tokens": cfg.max_tokens}
    return with_effort(setting, model)


def critique_decoding(cfg: CritiqueConfig) -> DecodingConfig:
    """The critiques' sampling settings for the shared client; they ask for no logprobs."""
    return DecodingConfig(temperature=cfg.temperature, top_p=None, max_tokens=cfg.max_tokens, top_logprobs=0)


def ledger_root(critiques_dir: Path, params: Params, dataset: str) -> Path:
    fingerprint = fingerprint_of(critique_setting(params, dataset))
    return critiques_dir / folder_name(params.critique_model.name, fingerprint, simulated=params.model.backend == "sim")


def open_ledger(critiques_dir: Path, params: Params, dataset: str, records: list[StepRecord]) -> CallLedger:
    """The dataset's critique ledger for this setting (created when absent), its solutions registered."""
    ledger = CallLedger.open_at(ledger_root(critiques_dir, params, dataset), critique_setting(params, dataset),
                                simulated=params.model.backend == "sim")
    ledger.register_digests({record.id: solution_digest(record) for record in records}, what="problem and steps")
    return ledger


def solution_digest(record: StepRecord) -> str:
    return hashlib.sha256("\x00".join((record.problem, *record.steps)).encode()).hexdigest()


def critique_calls(records: list[StepRecord], template: str, n_votes: int) -> list[Call]:
    """Every critique the setting asks for, solution by solution, votes 0..n_votes-1."""
    calls = []
    for record in records:
        messages = critique_messages(template, record.problem, record.steps)
        calls += [Call(record.id, vote, CRITIQUE, messages) for vote in range(n_votes)]
    return calls


@dataclass(frozen=True)
class CritiquePlan:
    missing: list[Call]
    stored: int
    cost: CostEstimate


def plan_critiques(ledger: CallLedger, calls: list[Call], pricing: PricingConfig, max_tokens: int, *,
                   simulated_as: str | None = None) -> CritiquePlan:
    wanted: dict[str, list[Key]] = {}
    for call in calls:
        wanted.setdefault(call.item_id, []).append(call.key)
    unstored = {item: set(keys) for item, keys in ledger.missing(wanted).items()}
    missing = [call for call in calls if call.key in unstored.get(call.item_id, ())]
    sizes = [prompt_bytes(call.messages) for call in missing]
    return CritiquePlan(missing, len(calls) - len(missing), estimate(sizes, max_tokens, pricing,
                                                                     simulated_as=simulated_as))


def critiques_cost(records: list[StepRecord], template: str, cfg: CritiqueConfig, pricing: PricingConfig, *,
                   simulated_as: str | None = None) -> CostEstimate:
    """What every critique of `records` costs, none stored yet (the estimate command's figure)."""
    sizes = [prompt_bytes(call.messages) for call in critique_calls(records, template, cfg.n_votes)]
    return estimate(sizes, cfg.max_tokens, pricing, simulated_as=simulated_as)


@dataclass(frozen=True)
class CritiqueItem:
    """What scoring needs of one solution, kept in the manifest (not its text)."""

    id: str
    task: str
    label: int
    n_steps: int


@dataclass(frozen=True)
class CritiqueManifest:
    """critiques/<dataset>.json: which ledger holds the dataset's critiques, how many votes each solution
    has, and the solutions' labels and tasks (so score_critiques needs nothing but critiques/)."""

    dataset: str
    ledger: str  # relative to the manifest's folder
    fingerprint: str
    n_votes: int
    finished: int  # solutions with all n_votes critiques stored
    simulated: bool
    setting: dict[str, Any]
    items: list[dict[str, Any]]  # CritiqueItem of each solution, in dataset order

    def item_list(self) -> list[CritiqueItem]:
        return [CritiqueItem(**item) for item in self.items]


def write_manifest(path: Path, ledger: CallLedger, dataset: str, records: list[StepRecord],
                   n_votes: int) -> CritiqueManifest:
    stored = CallLedger(ledger.root)  # read afresh: a ledger object caches what it has read
    fields = ledger_fields(path, stored)
    wanted = set(range(n_votes))
    finished = sum(wanted <= stored.stored_keys(record.id) for record in records)
    items = [asdict(CritiqueItem(r.id, r.task, r.label, len(r.steps))) for r in records]
    manifest = CritiqueManifest(dataset=dataset, n_votes=n_votes, finished=finished, items=items, **fields)
    write_json(path, asdict(manifest))
    return manifest


def load_ledger(manifest_path: Path) -> tuple[CritiqueManifest, CallLedger]:
    """The manifest and the ledger it names; an unfinished build is an error naming what to run."""
    return load_finished_ledger(manifest_path, CritiqueManifest, what="critique", total=lambda m: len(m.items),
                                unfinished=lambda m: f"solutions have all {m.n_votes} critiques; run "
                                                     f"build_critiques (it requests only the missing ones)")
