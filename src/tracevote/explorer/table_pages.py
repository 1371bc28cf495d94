"""The explorer's study and compare sections: the study stage's table of each dataset of study.datasets
(metrics/study/<dataset>/study.json) and the compare stage's (metrics/compare/compare.json), as they wrote them,
each row linking into the problems behind it.

A row of a vote (a model's method at K) links to the pool section of that model and dataset, filtered to the
problems the method got wrong; a debate row links to the debate section of its dataset. A table whose file is
absent gives no section; a row whose pool or debate has no section links nowhere.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from tracevote.core.config import Params
from tracevote.explorer import debate_pages
from tracevote.explorer.pool_inputs import pool_sources

if TYPE_CHECKING:
    from tracevote.explorer.sitefiles import SiteWriter

STUDY, COMPARE = "study", "compare"
Link = Callable[[dict[str, Any]], str | None]


def sections(writer: SiteWriter, params: Params, root: Path) -> list[dict[str, Any]]:
    """The study sections (one per dataset of study.datasets with its study.json), then compare's (one or none)."""
    pools = pool_numbers(params, root)
    debates = {dataset: n for n, dataset in enumerate(debate_pages.debated_datasets(params, root))}
    entries = []
    for dataset in params.study.datasets:
        path = root / "metrics" / "study" / dataset / "study.json"  # a checked name: core.config.DATASET_NAME
        if path.is_file():
            entries.append(study_section(writer, path, len(entries), study_link(pools, debates, dataset)))
    path = root / "metrics" / "compare" / "compare.json"
    if path.is_file():
        entries.append(compare_section(writer, path, params, pools, debates))
    return entries


def pool_numbers(params: Params, root: Path) -> dict[tuple[str, str], int]:
    """(dataset, endpoint) -> the number of its pool section (pool_pages numbers pool_sources in order)."""
    return {(source.paths.dataset, source.paths.endpoint): number
            for number, source in enumerate(pool_sources(params, root))}


def study_link(pools: dict[tuple[str, str], int], debates: dict[str, int], dataset: str) -> Link:
    """A study row's link: its model's pool on `dataset` filtered to its method's wrong problems, or the debate."""
    def link(row: dict[str, Any]) -> str | None:
        if row["method"] == "debate":
            return _debate_hash(debates, dataset)
        number = pools.get((dataset, row["model"]))
        return None if number is None else method_hash(number, row["method"])
    return link


def study_section(writer: SiteWriter, path: Path, number: int, link: Link) -> dict[str, Any]:
    study = orjson.loads(path.read_bytes())
    points = [{**point, "link": link(point)} for point in study["points"]]
    writer.put(f"{STUDY}{number}/index", {**study, "points": points})
    dataset, simulated = study["dataset"], bool(study["simulated"])
    return {"view": STUDY, "index": number, "label": f"Study: {dataset}", "simulated": simulated,
            "summary": f"{len(study['models'])} models, {len(points)} rows (method x K) priced in dollars"}


def compare_section(writer: SiteWriter, path: Path, params: Params, pools: dict[tuple[str, str], int],
                    debates: dict[str, int]) -> dict[str, Any]:
    """compare.json's rows; votes link to the first compared dataset's pool, the debate to its first dataset's
    debate, and every compared dataset's pool and debate are listed."""
    compare = orjson.loads(path.read_bytes())
    endpoint = params.deepconf.endpoint
    datasets = list(compare["datasets"]) or [d for d in params.debate.datasets if d in debates]
    links = [{"label": f"{kind} {dataset}", "hash": hash_}
             for dataset in datasets
             for kind, hash_ in (("pool", _pool_hash(pools, dataset, endpoint)),
                                 ("debate", _debate_hash(debates, dataset)))
             if hash_ is not None]
    first = datasets[0] if datasets else None

    def link(row: dict[str, Any]) -> str | None:
        if first is None:
            return None
        if row["method"] == "debate":
            return _debate_hash(debates, first)
        number = pools.get((first, endpoint))
        return None if number is None else method_hash(number, row["method"])

    rows = [{**row, "link": link(row)} for row in compare["rows"]]
    writer.put(f"{COMPARE}0/index", {**compare, "rows": rows, "links": links})
    return {"view": COMPARE, "index": 0, "label": "Compare: voting beside debate", "simulated":
            bool(compare["simulated"]), "summary": f"{len(rows)} rows on {', '.join(datasets) or 'no dataset'}"}


def method_hash(number: int, method: str) -> str:
    """The pool section's index filtered to the problems `method` got wrong at report.k: method_hash(0, "cons") ->
    "#/pool/0?f=wrong_cons" (pool.js's filter wrong_<method>; for a method the pool's aggregate has no result of, the
    page says so above the table and shows every problem)."""
    return f"#/pool/{number}?f=wrong_{method}"


def _pool_hash(pools: dict[tuple[str, str], int], dataset: str, endpoint: str) -> str | None:
    number = pools.get((dataset, endpoint))
    return None if number is None else f"#/pool/{number}"


def _debate_hash(debates: dict[str, int], dataset: str) -> str | None:
    number = debates.get(dataset)
    return None if number is None else f"#/debate/{number}"
