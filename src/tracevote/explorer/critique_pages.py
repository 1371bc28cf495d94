"""The explorer's critique sections: each dataset of critique.datasets whose critiques were built.

Per dataset N: `critique<N>/index` (one row per solution: task, the label's first wrong paragraph, the vote's,
whether they match, unanimity) and `critique<N>/s<i>` for the i-th solution (its problem and paragraphs, the
label's paragraph and the critics' majority marked, and each critique's reply, boxed answer and parsed vote). The
votes are read from the ledger as score_critiques reads them (the first critique.n_votes of each solution); the
paragraphs come from the normalized dataset. A dataset without its manifest or its normalized file gives no section.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracevote.core.config import Params
from tracevote.core.errors import DataError
from tracevote.critique import build
from tracevote.critique.metrics import scores
from tracevote.critique.results import CritiqueResult, in_percent, item_result
from tracevote.datasets.steps import StepRecord, load_step_records
from tracevote.store.calls import CallRecord
from tracevote.store.ledger import fingerprint_of

if TYPE_CHECKING:
    from tracevote.explorer.sitefiles import SiteWriter

VIEW = "critique"


def sections(writer: SiteWriter, params: Params, root: Path) -> list[dict[str, Any]]:
    """One section per critiqued dataset with its manifest and normalized file, in critique.datasets' order."""
    entries: list[dict[str, Any]] = []
    for dataset in params.critique.datasets:
        manifest_path = root / "critiques" / f"{dataset}.json"  # a checked name: core.config.DATASET_NAME
        steps_path = root / "data" / f"{dataset}.jsonl"
        if manifest_path.is_file() and steps_path.is_file():
            entries.append(dataset_section(writer, params, manifest_path, steps_path, dataset, len(entries)))
    return entries


def dataset_section(writer: SiteWriter, params: Params, manifest_path: Path, steps_path: Path, dataset: str,
                    number: int) -> dict[str, Any]:
    """Write `critique<number>/...` for one dataset's critiques and return its index entry."""
    manifest, ledger = build.load_ledger(manifest_path)
    n_votes = params.critique.n_votes
    if manifest.fingerprint != fingerprint_of(build.critique_setting(params, dataset)) or manifest.n_votes < n_votes:
        raise DataError(f"{manifest_path}: its ledger was built under another critique setting than params.yaml's "
                        f"(or with fewer than {n_votes} votes); run build_critiques@{dataset} (`dvc repro`)")
    records = {record.id: record for record in load_step_records(steps_path)}
    rows, results = [], []
    for i, item in enumerate(manifest.item_list()):
        if item.id not in records:
            raise DataError(f"{steps_path}: no solution {item.id!r}, which {manifest_path} critiqued; run "
                            f"normalize@{dataset} and build_critiques@{dataset} (`dvc repro`)")
        stored = ledger.records(item.id)
        replies = [stored[vote] for vote in range(n_votes)]
        result = item_result(dataset, item, replies)
        writer.put(f"{VIEW}{number}/s{i}", solution_page(result, records[item.id], replies,
                                                         simulated=manifest.simulated))
        rows.append(solution_row(i, result))
        results.append(result)
    summary = in_percent(scores([result.scored() for result in results]))
    writer.put(f"{VIEW}{number}/index", {"dataset": dataset, "simulated": manifest.simulated,
                                         "model": params.critique_model.name, "n_votes": n_votes,
                                         "scores": summary, "solutions": rows})
    f1 = summary["f1_pct"]
    return {"view": VIEW, "index": number, "label": f"Critique: {dataset}", "simulated": manifest.simulated,
            "summary": f"{len(rows)} solutions, {n_votes} critiques each; F1 "
                       f"{'—' if f1 is None else f'{f1:.2f}%'} ({params.critique_model.name})"}


def solution_row(i: int, result: CritiqueResult) -> dict[str, Any]:
    return {"i": i, "id": result.id, "task": result.task, "n_steps": result.n_steps, "label": result.label,
            "prediction": result.prediction, "match": result.match, "unanimous": result.unanimous,
            "unparsable": result.unparsable, "usd": result.usd}


def solution_page(result: CritiqueResult, record: StepRecord, replies: list[CallRecord], *,
                  simulated: bool) -> dict[str, Any]:
    """One solution: its paragraphs (index from 0, as the labels count them), the label's and the vote's, and
    each critique (its reply, what it boxed, the vote parsed from it)."""
    critiques = [{"vote": vote, "boxed": boxed, "text": reply.text, "finish_reason": reply.finish_reason,
                  "prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
                  "usd": reply.usd}
                 for vote, boxed, reply in zip(result.votes, result.boxed, replies, strict=True)]
    return {"simulated": simulated, "id": result.id, "task": result.task, "problem": record.problem,
            "paragraphs": list(record.steps), "label": result.label, "prediction": result.prediction,
            "match": result.match, "unanimous": result.unanimous, "unparsable": result.unparsable,
            "truncated": result.truncated, "critiques": critiques, "prompt_tokens": result.prompt_tokens,
            "completion_tokens": result.completion_tokens, "usd": result.usd}
