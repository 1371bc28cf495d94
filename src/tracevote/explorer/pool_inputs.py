"""Which DeepConf pools the explorer shows and what it reads of each: the aggregate's per-problem results, the
score table's rows (pyarrow only: no pandas, so `view` starts fast) and the problems file.

deepconf.endpoint's pool of every dataset of deepconf.datasets must be aggregated (`dvc repro aggregate@<dataset>`);
each model of deepconf.endpoints is shown where its aggregate exists (study/<endpoint>/).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from tracevote.core.arrow_numpy import array_numpy
from tracevote.core.config import Params
from tracevote.core.errors import ConfigError, DataError
from tracevote.core.parquet import read_parquet
from tracevote.core.study_paths import AGGREGATE_STAGE, ModelPaths, model_paths, model_stage
from tracevote.datasets.problems import Problem, load_problems
from tracevote.deepconf.results import AggregateResult
from tracevote.deepconf.score import KEY_COLUMNS

TRACE_COLUMNS = ("sample_id", "answer", "correct", "valid", "n_tokens", "finish_reason", "answer_source")


@dataclass(frozen=True)
class PoolSource:
    """One (model, dataset) pool's files and whether it is the project's main model."""

    paths: ModelPaths
    main: bool


@dataclass(frozen=True, eq=False)
class ProblemRows:
    """One problem's rows of the score table, column by column (TRACE_COLUMNS, then the measures)."""

    columns: dict[str, list]


@dataclass(frozen=True, eq=False)
class PoolInputs:
    source: PoolSource
    result: AggregateResult
    simulated: bool
    model: str | None
    problems: list[Problem]
    measures: tuple[str, ...]  # the score table's measure columns: the four measures, then any compared signal's
    rows: dict[str, ProblemRows]  # by problem id


def pool_sources(params: Params, root: Path) -> list[PoolSource]:
    """deepconf.endpoint's pool of each dataset, then each other model's where its aggregate exists."""
    main = params.deepconf.endpoint
    sources = [PoolSource(model_paths(main, dataset, main), True) for dataset in params.deepconf.datasets]
    for endpoint in params.deepconf.endpoints:
        for dataset in params.deepconf.datasets:
            paths = model_paths(endpoint, dataset, main)
            if (root / paths.aggregate).is_file():
                sources.append(PoolSource(paths, False))
    return sources


def read_pool(source: PoolSource, root: Path, k: int) -> PoolInputs:
    """The pool's aggregate (which must hold report.k), problems and score rows; DataError names a missing file."""
    paths = source.paths
    stored = _read_aggregate(root / paths.aggregate, paths, source.main)
    try:
        result = AggregateResult.from_json(stored["result"])
        simulated = bool(stored["simulated"])
    except (KeyError, TypeError) as exc:
        raise DataError(f"{paths.aggregate}: not an aggregate stage's output ({exc!r} missing or malformed); "
                        f"rerun `dvc repro {_aggregate_stage(paths, source.main)}`") from None
    if k not in result.k:
        raise ConfigError(f"report.k {k}: {paths.aggregate} has results at K = {', '.join(map(str, result.k))} "
                          f"only (eval.k); set report.k to one of them or rerun the aggregate stage")
    problems_file = Path("data") / f"{paths.dataset}.jsonl"
    if not (root / problems_file).is_file():
        raise DataError(f"{problems_file}: no problems file for dataset {paths.dataset} "
                        f"(`dvc repro normalize@{paths.dataset}`)")
    table = _read_scores(root / paths.scores, paths)
    simulated = simulated or (table.schema.metadata or {}).get(b"simulated") == b"true"
    measures = tuple(name for name in table.column_names
                     if name not in KEY_COLUMNS and pa.types.is_floating(table.schema.field(name).type))
    return PoolInputs(source=source, result=result, simulated=simulated, model=stored.get("model"),
                      problems=load_problems(root / problems_file), measures=measures,
                      rows=problem_rows(table, measures))


def _aggregate_stage(paths: ModelPaths, main: bool) -> str:
    return f"aggregate@{paths.dataset}" if main else model_stage(AGGREGATE_STAGE, paths.dataset, paths.endpoint)


def _read_aggregate(file: Path, paths: ModelPaths, main: bool) -> dict:
    try:
        stored = orjson.loads(file.read_bytes())
    except FileNotFoundError:
        raise DataError(f"{paths.aggregate}: no aggregate of the {paths.endpoint} pool of {paths.dataset} yet; "
                        f"run `dvc repro {_aggregate_stage(paths, main)}` first") from None
    except orjson.JSONDecodeError as exc:
        raise DataError(f"{paths.aggregate}: not JSON ({exc})") from None
    if not isinstance(stored, dict):
        raise DataError(f"{paths.aggregate}: not an aggregate stage's output (a JSON object)")
    return stored


def _read_scores(file: Path, paths: ModelPaths) -> pa.Table:
    try:
        schema = pq.read_schema(file)
    except FileNotFoundError:
        raise DataError(f"{paths.scores}: no score table of the {paths.endpoint} pool of {paths.dataset}") from None
    except (OSError, pa.ArrowInvalid) as exc:
        raise DataError(f"{paths.scores}: not a Parquet score table ({exc})") from None
    missing = [name for name in ("problem_id", *TRACE_COLUMNS) if name not in schema.names]
    if missing:
        raise DataError(f"{paths.scores}: no column {', '.join(missing)}: not a score table")
    return read_parquet(file)


def problem_rows(table: pa.Table, measures: tuple[str, ...]) -> dict[str, ProblemRows]:
    """Each problem's rows, in the table's order, as lists (measures rounded to 4 decimals; NaN stays NaN)."""
    ids = np.asarray(table.column("problem_id").to_pylist(), dtype=object)
    order = np.argsort(ids, kind="stable")
    names, starts = np.unique(ids[order], return_index=True)
    bounds = [*starts.tolist(), len(order)]
    at = order.tolist()  # reordered in Python: Arrow's take loads pyarrow.compute (core.arrow_numpy)
    columns = {name: [values[j] for j in at] for name in TRACE_COLUMNS
               for values in (table.column(name).to_pylist(),)}
    for name in measures:
        values = array_numpy(table.column(name), np.float64)[order]
        columns[name] = np.round(values, 4).tolist()
    return {str(name): ProblemRows({key: values[bounds[i]:bounds[i + 1]] for key, values in columns.items()})
            for i, name in enumerate(names)}
