"""`python -m tracevote plan`: how many traces and problems a question needs, and what they cost, from a pilot.

The pilot is a scored pool (data/scores/<dataset>.parquet and its manifest pools/<dataset>.json), e.g. one built at
a small pool.n_pool. tracevote.deepconf.plan resamples its traces into each method's accuracy and interval width at
each K, and the problems needed to tell two methods apart; this module reads the pilot, prices each option on each
endpoint (tokens per trace from the pilot's pool, prices from endpoints.<key>.pricing, hours from the latencies the
pool recorded) and prints the tables and the cheapest option that meets both targets.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
from tabulate import tabulate

from tracevote.cli.estimate import tokens
from tracevote.cli.plan_measured import measured_table
from tracevote.core.config import Params
from tracevote.core.config_deepconf import MEASURES
from tracevote.core.config_endpoints import ModelConfig
from tracevote.core.costs import money, usd
from tracevote.core.errors import ConfigError, DataError
from tracevote.core.parquet import read_parquet_metadata
from tracevote.core.study_paths import model_paths
from tracevote.deepconf.evaluate import ProblemScores, split_problems
from tracevote.deepconf.plan import Projection, project
from tracevote.deepconf.plan_validation import Validation, cross_validate, predicted_interval
from tracevote.deepconf.signals import table_signal
from tracevote.store import codec
from tracevote.store.pool import Pool, read_manifest


@dataclass(frozen=True)
class Targets:
    width: float  # the widest interval wanted, as accuracy (0.10 for 10 points)
    difference: float  # the difference between the two methods to find, as accuracy
    power: float
    methods: tuple[str, ...]  # the two compared; empty: cons and the pilot's best DeepConf method
    max_k: int
    draws: int


@dataclass(frozen=True)
class TraceUsage:
    """A trace's mean size and time, over a pool's traces."""

    prompt_tokens: float
    completion_tokens: float  # as billed
    seconds: float | None  # mean latency; None when the pool recorded none


@dataclass(frozen=True)
class Priced:
    """An endpoint an option is priced on, at the usage of its own pilot (`own`), else of the main pilot."""

    model: ModelConfig
    usage: TraceUsage
    own: bool


@dataclass(frozen=True, eq=False)
class Pilot:
    dataset: str
    scores: Path
    problems: list[ProblemScores]
    usage: TraceUsage
    simulated: bool
    measured: list[ProblemScores] | None = None  # the whole table when the pilot is its first traces and it has more

    @property
    def traces(self) -> int:
        return min(len(problem) for problem in self.problems)


@dataclass(frozen=True)
class Option:
    """K traces on each of `problems` problems: what meets both targets at K."""

    k: int
    for_width: int | None
    for_difference: int | None

    @property
    def problems(self) -> int | None:
        needed = [n for n in (self.for_width, self.for_difference) if n is not None]
        return max(needed) if needed else None

    @property
    def traces(self) -> int | None:
        return None if self.problems is None else self.problems * self.k


def read_pilot(dataset: str, scores: Path, manifest: Path, pilot_traces: int | None = None) -> Pilot:
    """The pilot's score table split into problems, and its pool's mean usage and latency a trace. With
    `pilot_traces`, the pilot is each problem's first that many traces, and a table with more is kept as the run
    the plan is measured against."""
    if not scores.is_file():
        raise DataError(f"{scores}: no score table; run a pilot first: dvc exp run -S pool.n_pool=32 score@{dataset}")
    try:
        table, metadata = pd.read_parquet(scores), read_parquet_metadata(scores)
    except (OSError, ValueError) as exc:
        raise DataError(f"{scores}: not a score table ({exc})") from exc
    signal = table_signal(metadata)  # the votes the plan predicts weigh the table's measures as aggregate does
    whole = split_problems(table, MEASURES, signal)
    problems = (whole if pilot_traces is None
                else split_problems(first_traces(table, pilot_traces, scores), MEASURES, signal))
    return Pilot(dataset=dataset, scores=scores, problems=problems,
                 usage=pool_usage(manifest, [p.problem_id for p in problems]),
                 simulated=metadata.get("simulated") == "true",
                 measured=whole if pilot_traces and max(len(p) for p in whole) > pilot_traces else None)


def first_traces(table: pd.DataFrame, n: int, path: Path) -> pd.DataFrame:
    """Each problem's first `n` traces by sample_id (the pool a top-up from n keeps)."""
    fewest = int(table.groupby("problem_id").size().min())
    if fewest < n:
        raise ConfigError(f"--pilot-traces: {n} is more than the {fewest} traces a problem of {path} has")
    ordered = table.sort_values(["problem_id", "sample_id"], kind="stable")
    return ordered[ordered.groupby("problem_id").cumcount() < n]


def pool_usage(manifest_path: Path, problem_ids: list[str]) -> TraceUsage:
    """Mean prompt and completion tokens, and mean latency (None if none recorded), over the pool's traces of
    `problem_ids`."""
    manifest = read_manifest(manifest_path)
    pool = Pool(manifest.pool_root(manifest_path))
    usages = [codec.usage_of(frame.payload) for problem_id in problem_ids if pool.log_path(problem_id).is_file()
              for frame in pool.frames_within(problem_id, manifest.n_pool)]
    if not usages:
        raise DataError(f"{manifest_path}: its pool {pool.root} holds none of the score table's problems")
    latency = np.array([u.latency_s for u in usages])
    return TraceUsage(float(np.mean([u.prompt_tokens for u in usages])),
                      float(np.mean([u.completion_tokens for u in usages])),
                      float(latency.mean()) if np.all(latency > 0) else None)


def candidate_ks(pilot_traces: int, max_k: int) -> tuple[int, ...]:
    """The pilot's own K, then each power of two above it up to max_k: candidate_ks(32, 512) -> (32, 64, ..., 512)."""
    if max_k < pilot_traces:
        raise ConfigError(f"--max-k: {max_k} is below the pilot's {pilot_traces} traces a problem")
    powers = [2 ** j for j in range(1, max_k.bit_length()) if pilot_traces < 2 ** j <= max_k]
    return (pilot_traces, *powers)


def compared(projection: Projection, methods: tuple[str, ...]) -> tuple[str, str]:
    """The two methods the difference is about: those named, else cons and the DeepConf method the pilot puts
    highest at its own K."""
    if methods:
        if len(methods) != 2:
            raise ConfigError(f"--methods: {','.join(methods)!r} must name two methods, e.g. cons,tail_top10")
        for method in methods:
            projection.index(method)
        return methods[0], methods[1]
    deepconf = [i for i, name in enumerate(projection.methods) if name not in ("pass1", "cons")]
    best = max(deepconf, key=lambda i: projection.accuracy[i])
    return "cons", projection.methods[best]


def options(projections: list[Projection], pair: tuple[str, str], targets: Targets, level: float) -> list[Option]:
    return [Option(p.k, _most(p.problems_for_width(m, targets.width) for m in pair),
                   p.problems_to_detect(*pair, targets.difference, targets.power, level)) for p in projections]


def _most(counts: Iterable[int | None]) -> int | None:
    known = [n for n in counts if n is not None]
    return max(known) if known else None


def plan_endpoints(params: Params, extra: tuple[str, ...]) -> list[str]:
    """deepconf.endpoint, deepconf.endpoints, then each endpoint named with --endpoint, each once."""
    keys = list(dict.fromkeys((params.deepconf.endpoint, *params.deepconf.endpoints, *extra)))
    unknown = [key for key in keys if key not in params.endpoints]
    if unknown:
        raise ConfigError(f"--endpoint: no endpoint {unknown[0]!r} in endpoints: (there are: "
                          f"{', '.join(params.endpoints)})")
    return keys


def priced_on(params: Params, keys: list[str], pilot: Pilot) -> list[Priced]:
    """Each endpoint at its own pilot's usage where it has a pool of this dataset (the main endpoint's is the pilot;
    a model of deepconf.endpoints has one under study/<endpoint>/), else at the main pilot's tokens and no hours."""
    main = params.deepconf.endpoint
    priced = []
    for key in keys:
        manifest = model_paths(key, pilot.dataset, main).manifest
        if key == main:
            priced.append(Priced(params.endpoint_model(key), pilot.usage, own=True))
        elif manifest.is_file():
            ids = [p.problem_id for p in pilot.problems]
            priced.append(Priced(params.endpoint_model(key), pool_usage(manifest, ids), own=True))
        else:
            priced.append(Priced(params.endpoint_model(key), replace(pilot.usage, seconds=None), own=False))
    return priced


def traces_usd(priced: Priced, traces: int) -> float:
    """`traces` of the mean size at the endpoint's list prices, every input token at the cache-miss price."""
    usage = priced.usage
    return usd(round(traces * usage.prompt_tokens), round(traces * usage.completion_tokens), priced.model.priced())


def traces_hours(priced: Priced, traces: int, concurrency: int) -> float | None:
    """Hours for `traces` at the mean latency, `concurrency` at a time; None without a measured latency."""
    seconds = priced.usage.seconds
    return None if seconds is None else traces * seconds / concurrency / 3600


# --- the printout -----------------------------------------------------------------------------------

def render(pilot: Pilot, projections: list[Projection], validation: Validation, pair: tuple[str, str],
           targets: Targets, params: Params, models: list[Priced]) -> str:
    level = params.eval.ci_level
    rows = options(projections, pair, targets, level)
    lines = [f"Plan for {pilot.dataset} from its pilot {pilot.scores}: {len(pilot.problems)} problems x "
             f"{pilot.traces} traces" + (" (SIMULATED model)" if pilot.simulated else ""),
             f"each K: {targets.draws} pools a problem resampled from the pilot's traces (Bayesian bootstrap, fresh "
             f"confidences fitted within problems), voted as the aggregate votes",
             f"interval: a study's {level:.0%} interval on the pilot's problems, widened on each side by the method's "
             f"error on held-out problems (its {level:.0%} quantile over {validation.folds} folds x K="
             f"{','.join(map(str, validation.ks))}: the 'error' column)", "",
             f"accuracy % and interval on {len(pilot.problems)} problems, predicted:",
             _accuracy_table(projections, validation), "",
             f"options: {pair[0]} and {pair[1]} each within {_points(targets.width)} points wide, and {pair[1]} - "
             f"{pair[0]} of {_points(targets.difference)} points found with power {targets.power:g} (paired, "
             f"two-sided at {1 - level:.2g}); {tokens(round(pilot.usage.completion_tokens))} tokens out and "
             f"{tokens(round(pilot.usage.prompt_tokens))} in a trace (the pilot's mean):",
             _options_table(rows, models, params.pool.concurrency), "",
             *_recommendation(pilot, supported(projections, validation, pair, rows), models,
                              params.pool.concurrency, _difference_text(projections, validation, pair))]
    if pilot.measured is not None:
        lines += ["", measured_table(pilot.measured, projections, validation, params.eval)]
    if pilot.simulated:
        lines.append("SIMULATED (the pilot's model is the simulator): the dollars are what the named models would "
                     "cost at list prices; the hours are the simulator's")
    return "\n".join(lines)


def supported(projections: list[Projection], validation: Validation, pair: tuple[str, str],
              rows: list[Option]) -> list[Option]:
    """The options at a K where the predicted difference of the pair is larger than its cross-validated error: only
    there can the pilot say which way a study would go."""
    margin = validation.difference_margin(*pair)
    return [row for row, projection in zip(rows, projections, strict=True)
            if abs(predicted_difference(projection, pair)) > margin]


def predicted_difference(projection: Projection, pair: tuple[str, str]) -> float:
    return float(projection.accuracy[projection.index(pair[1])] - projection.accuracy[projection.index(pair[0])])


def _difference_text(projections: list[Projection], validation: Validation, pair: tuple[str, str]) -> str:
    differences = ", ".join(f"{100 * predicted_difference(p, pair):+.1f} at K={p.k}" for p in projections)
    return (f"{pair[1]} - {pair[0]} predicted {differences} points; its error on held-out problems "
            f"±{100 * validation.difference_margin(*pair):.1f}")


def _points(share: float) -> str:
    return f"{100 * share:.3g}"


def _accuracy_table(projections: list[Projection], validation: Validation) -> str:
    methods = projections[0].methods
    cells = [[method, f"{100 * validation.margin(method):.1f}",
              *(_with_interval(p, i, validation.margin(method)) for p in projections)]
             for i, method in enumerate(methods)]
    return tabulate(cells, headers=["method", "error", *(f"K={p.k}" for p in projections)], tablefmt="simple",
                    disable_numparse=True)


def _with_interval(projection: Projection, i: int, margin: float) -> str:
    low, high = predicted_interval(float(projection.low[i]), float(projection.high[i]), margin)
    return f"{100 * projection.accuracy[i]:5.1f} [{100 * low:5.1f}, {100 * high:5.1f}]"


def _options_table(rows: list[Option], models: list[Priced], concurrency: int) -> str:
    headers = ["K", "problems for width", "problems for difference", "traces",
               *(f"{m.model.endpoint}{'' if m.own else '*'} {what}" for m in models for what in ("$", "hours"))]
    cells = [[str(row.k), _count(row.for_width), _count(row.for_difference), _count(row.traces),
              *(cell for m in models for cell in _price_cells(m, row.traces, concurrency))] for row in rows]
    return tabulate(cells, headers=headers, tablefmt="simple", disable_numparse=True,
                    colalign=("right",) * len(headers))


def _count(n: int | None) -> str:
    return "?" if n is None else f"{n:,}"


def _price_cells(priced: Priced, traces: int | None, concurrency: int) -> list[str]:
    if traces is None:
        return ["?", "?"]
    hours = traces_hours(priced, traces, concurrency)
    return [money(traces_usd(priced, traces)), "unknown" if hours is None else f"{hours:.2g}"]


def _recommendation(pilot: Pilot, rows: list[Option], models: list[Priced], concurrency: int,
                    difference: str) -> list[str]:
    if not rows:
        return [f"no recommendation: the pilot cannot support one: {difference}, as large as the difference or "
                "larger at every K, so it cannot say which way a study would go"]
    known = [row for row in rows if row.traces is not None]
    if not known:
        return ["no recommendation: the pilot's two methods never disagree and their intervals never vary"]
    best = min(known, key=lambda row: (row.traces or 0, row.k))
    if best.problems is None or best.traces is None:  # unreachable: `known` holds priced rows only
        return []
    costs = "; ".join(f"{money(traces_usd(m, best.traces))} on {m.model.endpoint}"
                      + _hours_text(traces_hours(m, best.traces, concurrency)) for m in models)
    more = (f" (the pilot has {len(pilot.problems)}: the dataset needs {best.problems - len(pilot.problems):,} more)"
            if best.problems > len(pilot.problems) else "")
    return [difference,
            f"recommended: pool.n_pool={best.k} on {best.problems:,} problems{more}, {best.traces:,} traces: {costs}",
            f"(hours with pool.concurrency={concurrency} requests in flight, each as fast as its pilot's; "
            "* an endpoint with no pilot of its own: priced at the main pilot's tokens, its hours unknown)"]


def _hours_text(hours: float | None) -> str:
    return "" if hours is None else f", ~{hours:.2g} h"


def run_plan(params: Params, datasets: list[str], targets: Targets, extra_endpoints: tuple[str, ...],
             scores: Path | None = None, manifest: Path | None = None, pilot_traces: int | None = None) -> str:
    """The plan of each dataset's pilot, one after the other."""
    keys = plan_endpoints(params, extra_endpoints)
    texts = []
    for dataset in datasets:
        paths = model_paths(params.deepconf.endpoint, dataset, params.deepconf.endpoint)
        pilot = read_pilot(dataset, scores or paths.scores, manifest or paths.manifest, pilot_traces)
        projections = [project(pilot.problems, k, params.eval, targets.draws, MEASURES)
                       for k in candidate_ks(pilot.traces, targets.max_k)]
        validation = cross_validate(pilot.problems, params.eval, targets.draws, MEASURES)
        pair = compared(projections[0], targets.methods)
        texts.append(render(pilot, projections, validation, pair, targets, params, priced_on(params, keys, pilot)))
    return "\n\n".join(texts)
