"""The explorer's grading sections: each run of grading.runs that the grade stage graded.

Per run N: `grading<N>/index` (the run's record and one row per graded prediction: gold, answer, Math-Verify's
verdict and how it was reached, the reasoning's word count, the critic's score) and `grading<N>/i<j>` for the j-th
graded prediction (the problem, the prediction's reasoning and final part, and the critic's reply: its reasoning
behind the score). The rows are grading/runs/<run>.jsonl as the grade stage wrote them; the texts are the run's
inputs read again (its predictions file or pool) and the critic's ledger. A pool's traces have their pages in the
pool's section: a pool run's rows link there, and only the predictions the critic read get a page here, so a
paper-scale pool is not written twice. A run without its grade files gives no section.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from tracevote.core.config import Params
from tracevote.core.config_methods import GradingRunConfig
from tracevote.core.errors import DataError
from tracevote.core.names import recorded_path
from tracevote.explorer.pool_inputs import pool_sources
from tracevote.grading.critic import critic_items
from tracevote.grading.gold import GoldItem
from tracevote.grading.predictions import Prediction
from tracevote.grading.runs import MANIFEST, RunInputs, read_critic_manifest, run_inputs
from tracevote.store.calls import CallLedger, decode

if TYPE_CHECKING:
    from tracevote.explorer.sitefiles import SiteWriter

VIEW = "grading"


def sections(writer: SiteWriter, params: Params, root: Path) -> list[dict[str, Any]]:
    """One section per graded run, in grading.runs' order."""
    entries: list[dict[str, Any]] = []
    for name, run in params.grading.runs.items():
        record_path = root / "grading" / "runs" / f"{name}.json"  # a checked name: core.config KEY_NAME_PATTERN
        details_path = record_path.with_suffix(".jsonl")
        if record_path.is_file() and details_path.is_file():
            entries.append(run_section(writer, params, root, run, len(entries)))
    return entries


def run_section(writer: SiteWriter, params: Params, root: Path, run: GradingRunConfig, number: int) -> dict[str, Any]:
    """Write `grading<number>/...` for one run and return its index entry."""
    record_path = root / "grading" / "runs" / f"{run.name}.json"
    details_path = record_path.with_suffix(".jsonl")
    record = orjson.loads(record_path.read_bytes())
    lines = [orjson.loads(line) for line in details_path.read_bytes().splitlines() if line.strip()]
    located = dataclasses.replace(run, predictions=str(root / run.predictions))
    inputs = run_inputs(located, root / "data" / f"{run.dataset}.jsonl", params.answers)
    pairs = matched_pairs(inputs, lines, details_path)
    replies = critic_replies(root / "grading" / "critic" / run.name, inputs)
    simulated = bool(record["simulated"])
    pool = pool_section(params, root, run) if inputs.source == "pool" else None
    rows = []
    for j, (line, (gold, prediction)) in enumerate(zip(lines, pairs, strict=True)):
        first = j == 0 or pairs[j - 1][0].id != gold.id  # the critic reads a gold item's first prediction only
        reply = replies.get(gold.id) if first else None
        # a pool's trace has its own page in the pool section: a page here only for what the critic read of it
        page = inputs.source != "pool" or reply is not None
        if page:
            writer.put(f"{VIEW}{number}/i{j}", item_page(line, gold, prediction, reply, simulated=simulated))
        rows.append({"j": j, **line, "page": page})
    writer.put(f"{VIEW}{number}/index", {"run": run.name, "simulated": simulated, "record": record, "pool": pool,
                                         "items": rows})
    accuracy = record["accuracy"]
    return {"view": VIEW, "index": number, "label": f"Grading: {run.name}", "simulated": simulated,
            "summary": f"{len(rows)} predictions of {run.dataset} ({record['source']}); accuracy "
                       f"{100 * accuracy:.2f}%"}


def pool_section(params: Params, root: Path, run: GradingRunConfig) -> int | None:
    """The number of the pool section whose traces a pool run grades (its predictions name that pool's manifest);
    None when the site shows no such pool."""
    for number, source in enumerate(pool_sources(params, root)):
        if source.paths.manifest == Path(run.predictions):
            return number
    return None


def matched_pairs(inputs: RunInputs, lines: Sequence[dict[str, Any]],
                  details_path: Path) -> list[tuple[GoldItem, Prediction]]:
    """The (gold, prediction) pair behind each line: the grade stage wrote one line per pair, in pairing order.
    Lines that no longer match the inputs (edited since) are a DataError naming the stage to run."""
    pairs = inputs.pairing().pairs
    same = len(pairs) == len(lines) and all(line["id"] == gold.id and line["line"] == prediction.line
                                            for line, (gold, prediction) in zip(lines, pairs, strict=True))
    if not same:
        raise DataError(f"{details_path}: its lines are not the run's predictions as they are now (changed since "
                        f"it was graded?); run the grade stage (`dvc repro`)")
    return pairs


def critic_replies(critic_dir: Path, inputs: RunInputs) -> dict[str, str]:
    """The critic's reply text per gold id, as its ledger holds it (the items it was asked about when it ran);
    {} when the critic did not run."""
    if not (critic_dir / MANIFEST).is_file():
        return {}
    manifest = read_critic_manifest(critic_dir)
    if not manifest.enabled or manifest.ledger is None:
        return {}
    ledger = CallLedger(recorded_path(critic_dir, manifest.ledger, source=critic_dir / MANIFEST))
    replies = {}
    for item in critic_items(inputs.pairing(), manifest.max_samples):
        stored = [payload for key, payload in ledger.iter_payloads(item.item_id) if key == 0]
        if stored:
            replies[item.gold_id] = decode(stored[0]).text
    return replies


def item_page(line: dict[str, Any], gold: GoldItem, prediction: Prediction, critic_reply: str | None, *,
              simulated: bool) -> dict[str, Any]:
    return {"simulated": simulated, **line, "problem": gold.problem, "reference": gold.reference,
            "thinking": prediction.thinking, "content": prediction.content, "critic_reply": critic_reply}
