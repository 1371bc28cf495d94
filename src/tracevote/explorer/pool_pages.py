"""The explorer's DeepConf pool sections: per pool an index of its problems (data/pool<N>/index.js) and per
problem its traces (data/pool<N>/p<i>.js), loaded only when a reader opens that problem.

A method is right on a problem when it is right in most of its working sets at report.k (accuracy above one half);
its answer is the one it gave most often (the aggregate's `prediction`, the smallest on ties).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from tracevote.core.config import Params
from tracevote.core.config_view import DEFAULT_VIEW, ViewConfig
from tracevote.deepconf.results import ProblemPassAtK
from tracevote.explorer.answer_texts import ClassTexts, math_answer_texts, shown
from tracevote.explorer.live_traces import LiveSource, live_sections, open_live
from tracevote.explorer.pool_inputs import PoolInputs, ProblemRows, pool_sources, read_pool
from tracevote.explorer.sitefiles import SiteWriter
from tracevote.explorer.trace_data import TraceSource, open_traces, trace_sections, trace_settings
from tracevote.explorer.trace_subset import chosen_traces, subset_note
from tracevote.report.tables import method_label, percent

RIGHT_ABOVE = 0.5  # a method is right on a problem when its accuracy over working sets exceeds this
TOP_ANSWERS = 5  # answers of the distribution the index lists per problem (the problem page lists them all)


def sections(writer: SiteWriter, params: Params, root: Path) -> list[dict[str, Any]]:
    """Write every pool's pages; returns their entries of the site's index."""
    entries = []
    for number, source in enumerate(pool_sources(params, root)):
        pool = read_pool(source, root, params.report.k)
        live = open_live(params, root, source.paths.dataset) if source.main else None
        samples = open_traces(source.paths, root, params)
        entries.append(write_pool(writer, number, pool, params.report.k, samples, live,
                                  {**trace_settings(params), "built": samples is not None},
                                  math_answer_texts(pool, root), view=params.view))
    return entries


def pool_label(pool: PoolInputs) -> str:
    paths = pool.source.paths
    return f"DeepConf pool: {paths.dataset} ({paths.endpoint})"


def write_pool(writer: SiteWriter, number: int, pool: PoolInputs, k: int,
               samples: TraceSource | None = None, live: LiveSource | None = None,
               trace_pages: dict[str, Any] | None = None,
               answer_texts: dict[str, ClassTexts] | None = None, *, view: ViewConfig = DEFAULT_VIEW) -> dict[str, Any]:
    """data/pool<number>/index.js and each problem's p<i>.js (and its trace pages' files, where the pool's samples
    are at hand: `samples`, for the traces `view` chooses (trace_subset), and those of the dataset's live run:
    `live`; the index says what the trace pages follow: `trace_pages`; a math problem's answers show as
    `answer_texts` of its classes); returns the site index's entry."""
    methods = list(pool.result.methods)
    results = method_results(pool, k)
    passk = {row.problem_id: row for row in pool.result.pass_at_k_problems if row.k == k}
    rows = []
    shown = [problem for problem in pool.problems if problem.id in pool.rows or problem.id in results]
    for i, problem in enumerate(shown):
        traces = pool.rows.get(problem.id)
        by_method = results.get(problem.id, {})
        problem_passk = problem_pass_at_k(passk.get(problem.id))
        texts = (answer_texts or {}).get(problem.id)
        rows.append({**index_row(i, problem.id, str(problem.answer), traces, by_method, methods, texts),
                     **problem_passk})
        page = problem_page(number, i, problem.id, problem.problem, str(problem.answer), traces, by_method, pool, k,
                            texts)
        page["pass_at_k"] = problem_passk
        subset = None if samples is None or traces is None else chosen_traces(traces.columns, view)
        page["trace_data"] = None if samples is None else trace_sections(
            writer, number, i, problem.id, samples, math=isinstance(problem.answer, str),
            only=None if subset is None else subset.ids)
        page["trace_subset"] = None if subset is None else subset_note(subset, len(traces.columns["sample_id"]))
        page["live"] = None if live is None else live_sections(writer, number, i, problem.id, live)
        writer.put(f"pool{number}/p{i}", page)
    header = pool_header(pool, k)
    writer.put(f"pool{number}/index", {**header, "problems": rows, "trace_pages": trace_pages})
    solved = sum(1 for row in rows if row["cons_right"])
    summary = (f"{len(rows)} problems, {sum(row['traces'] for row in rows)} traces; Cons@{k} right on {solved}"
               + (f"; model {pool.model}" if pool.model else ""))
    return {"view": "pool", "index": number, "label": pool_label(pool), "simulated": pool.simulated,
            "summary": summary}


def pool_header(pool: PoolInputs, k: int) -> dict[str, Any]:
    """What the pool's index and each of its problem pages say above their tables."""
    paths = pool.source.paths
    return {"label": pool_label(pool), "dataset": paths.dataset, "endpoint": paths.endpoint, "model": pool.model,
            "simulated": pool.simulated, "k": k, "repeat": pool.result.repeat,
            "methods": [{"name": name, "label": method_label(name, k), "filter": is_filter(name)}
                        for name in pool.result.methods],
            "measures": list(pool.measures), "pass_at_k": pool_pass_at_k(pool, k)}


def pool_pass_at_k(pool: PoolInputs, k: int) -> dict[str, float] | None:
    """pass@K and avg@K over the problems (tracevote.deepconf.passk), in percent; None in an older aggregate."""
    row = pool.result.pass_at_k_at(k)
    return None if row is None else {"pass_at_k": percent(row.pass_at_k), "avg_at_k": percent(row.avg_at_k)}


def problem_pass_at_k(row: ProblemPassAtK | None) -> dict[str, Any]:
    """One problem's pass@K and avg@K in percent, and the n and c they come from (None each in an older aggregate)."""
    if row is None:
        return {"pass_at_k": None, "avg_at_k": None, "samples": None, "correct": None}
    return {"pass_at_k": percent(row.pass_at_k), "avg_at_k": percent(row.avg_at_k), "samples": row.samples,
            "correct": row.correct}


def is_filter(method: str) -> bool:
    """A top-eta confidence filter (`tail_top10`), as opposed to Pass@1, Cons@K and the weighted votes."""
    return "_top" in method


def method_results(pool: PoolInputs, k: int) -> dict[str, dict[str, dict[str, Any]]]:
    """problem id -> method -> {answer, accuracy, answered, right} at K (Pass@1 is neither right nor wrong)."""
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for row in pool.result.problems:
        if row.k == k:
            results.setdefault(row.problem_id, {})[row.method] = {
                "answer": row.prediction, "accuracy": row.accuracy, "answered": row.answered,
                "right": None if row.method == "pass1" else row.accuracy > RIGHT_ABOVE}
    return results


def answer_distribution(traces: ProblemRows | None, texts: ClassTexts | None = None) -> list[dict[str, Any]]:
    """Valid traces' answers, most frequent first (smaller answer on ties), each right when its traces are; a math
    answer shown as its class's text (`texts`), the order still the classes'."""
    if traces is None:
        return []
    columns = traces.columns
    valid = [(answer, right) for answer, right, ok in zip(columns["answer"], columns["correct"], columns["valid"],
                                                         strict=True) if ok and answer is not None]
    counts = Counter(answer for answer, _ in valid)
    right = {answer for answer, ok in valid if ok}
    return [{"answer": shown(answer, texts), "count": count, "right": answer in right}
            for answer, count in sorted(counts.items(), key=lambda item: (-item[1], item[0]))]


def index_row(i: int, problem_id: str, gold: str, traces: ProblemRows | None,
              by_method: dict[str, dict[str, Any]], methods: list[str], texts: ClassTexts | None = None
              ) -> dict[str, Any]:
    """One problem's row of the pool index: flat keys, so the page's table sorts and filters it (a math answer as
    its class's text: `texts`)."""
    distribution = answer_distribution(traces, texts)
    voted = {by_method[name]["answer"] for name in methods if name != "pass1" and name in by_method}
    row: dict[str, Any] = {
        "i": i, "id": problem_id, "gold": gold,
        "traces": 0 if traces is None else len(traces.columns["sample_id"]),
        "valid": 0 if traces is None else sum(traces.columns["valid"]),
        "pass1": percent(by_method.get("pass1", {}).get("accuracy")),
        "cons": percent(by_method.get("cons", {}).get("accuracy")),
        "cons_right": bool(by_method.get("cons", {}).get("right", False)),
        "wrong_filter": any(not result["right"] for name, result in by_method.items() if is_filter(name)),
        "disagree": len(voted) > 1,
        "answers": "  ".join(f"{d['answer']}×{d['count']}" for d in distribution[:TOP_ANSWERS]),
        "distinct": len(distribution),
    }
    for name in methods:
        result = by_method.get(name)
        row[f"m_{name}"] = None if result is None else percent(result["accuracy"])
        row[f"a_{name}"] = None if result is None else shown(result["answer"], texts)
    return row


def problem_page(number: int, i: int, problem_id: str, text: str, gold: str, traces: ProblemRows | None,
                 by_method: dict[str, dict[str, Any]], pool: PoolInputs, k: int, texts: ClassTexts | None = None
                 ) -> dict[str, Any]:
    """One problem's page: its text and gold, each method's result, the answer distribution and every trace's row
    (column by column: a paper-scale problem has 4,096 traces); a math answer as its class's text (`texts`)."""
    return {**pool_header(pool, k), "pool": number, "i": i, "id": problem_id, "problem": text, "gold": gold,
            "results": [{"method": name, **by_method[name], "answer": shown(by_method[name]["answer"], texts),
                         "accuracy": percent(by_method[name]["accuracy"])}
                        for name in pool.result.methods if name in by_method],
            "distribution": answer_distribution(traces, texts),
            "traces": {} if traces is None else trace_columns(traces, texts)}


def trace_columns(traces: ProblemRows, texts: ClassTexts | None) -> dict[str, list]:
    """The problem's score rows, column by column, a math trace's answer as its class's text."""
    if texts is None:
        return traces.columns
    return {**traces.columns, "answer": [shown(answer, texts) for answer in traces.columns["answer"]]}
