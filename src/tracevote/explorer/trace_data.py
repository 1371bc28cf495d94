"""A trace page's data, from a pool sample: its text cut into tokens, each token's confidence, the sliding-window
curve, each online method's threshold and where the trace would stop under it, and on each token its alternatives.

What the page gets, per trace (compact: a paper-scale problem has 4,096 traces of ~3,000 tokens):
- `text` and `lens`: the tokens joined and each token's length in UTF-16 units (JavaScript string lengths), so the
  page cuts the text back into tokens with `slice`; `reasoning` counts the leading tokens of the thinking a server's
  reasoning parser split out of the reply (0 when it did not).
- `conf`: each token's signal as the score table averages it (confidence.token: deepconf, chosen or entropy, at
  confidence.top_k; store.token_signals.trace_signal), rounded to 3 decimals, null where a token has none;
  `chosen`: the chosen token's logprob, rounded to 3 decimals; `range`: the 5th and 95th percentiles of `conf`,
  the ends of the colour scale.
- `curve`: the mean of every full window of confidence.group_size tokens with a confidence (stride 1, as
  deepconf.confidence computes the groups; a trace shorter than a window has none), at the token ending it:
  `values`, and `first`, the first window's last token (the others follow one a token), or `ends`, every window's
  last token, when some token has no confidence.
- `stops`: per online method, the tokens the trace would spend under the problem's threshold: the `spent` of its
  first record low below the threshold (the score stage's stop table, as deepconf.online replays it), null when it
  runs to its end.
Per problem (`thresholds`): each method's threshold is the median over the aggregate's working sets at report.k of
the percentile of the warmup traces' lowest-group confidences (deepconf.online.replay; its range beside it). The
replay draws a threshold per working set, so a trace page shows the typical one: a departure documented in
docs/explorer.md.
The alternatives (`top`: each token's top-k logprobs rounded to 2 decimals, packed_top; `top_tokens`: their
strings where the pool keeps them, pool.keep_top_tokens, as indices into the chunk's vocabulary: top_chunk) go to a
file of their own per chunk, loaded only when a reader opens a token: they are most of a trace's bytes.
A chunk holds CHUNK traces in the pool log's order (trace_sections); the problem's `traces` file says which.
"""

from __future__ import annotations

import base64
import itertools
import math
import re
import zlib
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tracevote.answers.extract import split_boxed_text
from tracevote.core.arrow_numpy import array_numpy
from tracevote.core.config import Params
from tracevote.core.config_deepconf import ConfidenceConfig
from tracevote.core.parquet import read_parquet
from tracevote.core.study_paths import ModelPaths
from tracevote.deepconf.stop_table import StopRows, StopTable, rows_by_code, stop_profiles
from tracevote.deepconf.voting import row_percentile
from tracevote.deepconf.working_sets import working_sets
from tracevote.explorer.sitefiles import SiteWriter
from tracevote.store.pool import Pool, read_manifest
from tracevote.store.records import Sample
from tracevote.store.token_signals import trace_signal

CHUNK = 64  # traces per chunk file
CONF_DIGITS, TOP_DIGITS = 3, 2
ABSENT = 65535  # a packed top-k entry the server did not send
COLOUR_PERCENTILES = (5, 95)
_SURROGATE = re.compile("[\ud800-\udfff]")  # a token cut inside a character: one UTF-16 unit either way
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")  # two UTF-16 units each


@dataclass(frozen=True)
class Threshold:
    """One online method's threshold on one problem: the median over the working sets, and their range."""

    method: str  # online_<name>
    percentile: float
    median: float | None  # None: no working set had a warmup trace with a confidence
    low: float | None
    high: float | None

    def to_json(self) -> dict[str, Any]:
        return {"method": self.method, "percentile": self.percentile, "threshold": _round(self.median),
                "low": _round(self.low), "high": _round(self.high)}


def thresholds(problem_id: str, lowest: np.ndarray, params: Params) -> list[Threshold]:
    """Each online method's threshold on a problem whose samples (ascending ids) have lowest-group confidences
    `lowest`, over the aggregate's working sets at report.k; [] when report.k is below the warmup (no replay)."""
    k, warmup = params.report.k, params.online.warmup
    if k < warmup or k > len(lowest):
        return []
    sets = working_sets(problem_id, len(lowest), k, params.eval)
    warm = np.asarray(lowest, dtype=np.float64)[sets[:, :warmup]]
    found = []
    for name, percentile in params.online.percentiles.items():
        values = row_percentile(warm, percentile)
        values = values[~np.isnan(values)]
        found.append(Threshold(f"online_{name}", float(percentile),
                               *((float(np.median(values)), float(values.min()), float(values.max()))
                                 if len(values) else (None, None, None))))
    return found


def would_stop(rows: StopRows, threshold: float | None) -> int | None:
    """Tokens a trace spends under `threshold`: its first record low below it (`rows`: the trace's own rows of the
    stop table, in order), or None when it never falls below (or there is no threshold).

    >>> rows = StopRows(np.array([0, 0]), np.array([4, 9]), np.array([2.0, 1.0]))
    >>> would_stop(rows, 1.5), would_stop(rows, 0.5), would_stop(rows, 3.0)
    (9, None, 4)
    """
    if threshold is None:
        return None
    below = np.flatnonzero(rows.value < threshold)
    return int(rows.spent[below[0]]) if len(below) else None


def window_curve(signal: np.ndarray, group_size: int) -> tuple[np.ndarray, np.ndarray]:
    """(ends, means): the mean of every full window of `group_size` consecutive tokens that have a signal, and the
    index of each window's last token among all tokens. Tokens without a signal (NaN) are left out first.

    >>> ends, means = window_curve(np.array([1.0, 3.0, np.nan, 2.0, 6.0]), 2)
    >>> ends.tolist(), means.tolist()
    ([1, 3, 4], [2.0, 2.5, 4.0])
    """
    kept = np.flatnonzero(~np.isnan(signal))
    if len(kept) < group_size:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    prefix = np.concatenate(([0.0], np.cumsum(np.asarray(signal, dtype=np.float64)[kept])))
    means = (prefix[group_size:] - prefix[:-group_size]) / group_size
    return kept[group_size - 1:], means


def utf16_lengths(tokens: list[str]) -> list[int]:
    """Each token's length as JavaScript counts it: utf16_lengths(["a", "é", "😀"]) -> [1, 1, 2]. Only a character
    past U+FFFF takes two UTF-16 units, so a trace without one (one scan of its text) is measured by len alone:
    encoding every token was a sixth of `view`'s trace pages."""
    if not _ASTRAL.search("".join(tokens)):
        return [len(token) for token in tokens]
    return [len(token.encode("utf-16-le", errors="surrogatepass")) // 2 for token in tokens]


def reasoning_tokens(sample: Sample) -> int:
    """How many leading tokens hold the thinking a reasoning parser split out (0 when the server split none): the
    tokens that end before the reply's content begins."""
    if not sample.reasoning:
        return 0
    joined = "".join(sample.tokens)
    if not joined.endswith(sample.text):
        return 0
    boundary = len(joined) - len(sample.text)
    ends = np.cumsum([len(token) for token in sample.tokens])
    return int(np.searchsorted(ends, boundary, side="right"))


@dataclass(frozen=True)
class Window:
    """The confidence settings a trace page follows: the pool's confidence.token, top_k and group_size, or those a
    live run ran under (its manifest's)."""

    token: str  # confidence.token
    top_k: int | None  # confidence.top_k
    group_size: int  # confidence.group_size

    @staticmethod
    def of(cfg: ConfidenceConfig) -> Window:
        return Window(cfg.token, cfg.top_k, cfg.group_size)


def token_confidence(sample: Sample, cfg: Window) -> np.ndarray:
    """Each token's signal as the score stage computes it from the stored sample (float64, NaN where none)."""
    confidence = sample.token_confidence if sample.token_confidence is not None else np.full(sample.n_tokens, np.nan)
    return np.asarray(trace_signal(cfg.token, cfg.top_k, sample.token_logprobs, sample.top_logprobs, confidence),
                      dtype=np.float64)


def trace_record(sample: Sample, cfg: Window, stops: dict[str, int | None],
                 live: dict[str, Any] | None = None) -> dict[str, Any]:
    """The page's data of one trace (see the module docstring); `stops`: method -> tokens spent (would_stop),
    `live`: where a live run stopped it (live_stop), or None."""
    signal = token_confidence(sample, cfg)
    present = signal[~np.isnan(signal)]
    low, high = (np.percentile(present, COLOUR_PERCENTILES).tolist() if len(present) else (0.0, 1.0))
    ends, means = window_curve(signal, cfg.group_size)
    consecutive = len(ends) == 0 or int(ends[-1] - ends[0]) == len(ends) - 1
    return {
        "id": sample.sample_id, "answer": sample.answer, "finish": sample.finish_reason,
        "text": _SURROGATE.sub("\ufffd", "".join(sample.tokens)), "lens": utf16_lengths(sample.tokens),
        "reasoning": reasoning_tokens(sample), "conf": rounded(signal, CONF_DIGITS),
        "chosen": rounded(sample.token_logprobs, CONF_DIGITS), "range": [round(low, 3), round(high, 3)],
        "curve": {"first": int(ends[0]) if len(ends) else None, "ends": None if consecutive else ends.tolist(),
                  "values": rounded(means, CONF_DIGITS)},
        "stops": stops, "live": live,
    }


def top_record(sample: Sample) -> dict[str, Any]:
    """A trace's alternatives: each token's top-k logprobs (rows best first, packed: `packed_top`) and, where kept,
    their strings."""
    top = sample.top_logprobs
    strings = sample.top_tokens
    return {"id": sample.sample_id, "k": None if top is None else int(np.shape(top)[1]),
            "top": None if top is None else packed_top(top),
            "top_tokens": strings}


def packed_top(top: np.ndarray) -> str:
    """Top-k rows [n, k] as little-endian uint16, row after row, `packed`: minus each logprob in hundredths of a nat
    (rounded; 0 for a logprob above 0, at most 65534), 65535 where absent. ~1.7 bytes an entry where JSON numbers
    of two decimals take ~6.5; the page reads them back with a DataView.

    >>> unpacked_top(packed_top(np.array([[-0.004, -8.416, np.nan]])), 3).tolist()
    [[0.0, -8.42, nan]]
    """
    hundredths = np.round(-np.asarray(top, dtype=np.float64) * 10 ** TOP_DIGITS)
    with np.errstate(invalid="ignore"):
        values = np.where(np.isnan(hundredths), ABSENT, np.clip(hundredths, 0, ABSENT - 1))
    return packed(values.astype("<u2").tobytes())


def packed(data: bytes) -> str:
    """zlib's deflate of `data` (the page inflates it with the browser's own DecompressionStream("deflate")), as
    base64: rows of alternatives repeat, and deflate takes a third to nine tenths off them."""
    return base64.b64encode(zlib.compress(data, 6)).decode("ascii")


def unpacked(text: str) -> bytes:
    return zlib.decompress(base64.b64decode(text))


def top_chunk(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The alternatives' file of a chunk: `top_record`s whose strings are replaced by indices into one vocabulary of
    the chunk's distinct strings (`vocab`), little-endian uint16 (uint32 past 65,536 strings: `width` bytes),
    `packed`. Alternatives repeat: lists of strings took ~125 bytes a token at top-20.

    >>> chunk = top_chunk([{"id": 0, "k": 2, "top": "", "top_tokens": [["a", "b"], ["b", "a"]]}])
    >>> chunk["vocab"], chunk["width"], unpacked_strings(chunk, chunk["traces"][0])
    (['a', 'b'], 2, [['a', 'b'], ['b', 'a']])
    """
    vocab: dict[str, int] = {}
    traces = []
    for record in records:
        rows, k = record["top_tokens"], record["k"]
        strings = () if rows is None or k is None else itertools.chain.from_iterable(_k_long(rows, k))
        indices = None if rows is None or k is None else [vocab.setdefault(string, len(vocab)) for string in strings]
        traces.append({**record, "top_tokens": indices})
    width = 2 if len(vocab) <= 65536 else 4
    for trace in traces:
        if trace["top_tokens"] is not None:
            strings = np.asarray(trace["top_tokens"], dtype="<u2" if width == 2 else "<u4").tobytes()
            trace["top_tokens"] = packed(strings)
    return {"vocab": [_SURROGATE.sub("\ufffd", string) for string in vocab], "width": width, "traces": traces}


def _k_long(rows: list[list[str]], k: int) -> list[list[str]]:
    """Rows of k strings: one of fewer (llama.cpp's, whose logprobs are absent there) padded with ""."""
    if all(len(row) == k for row in rows):
        return rows
    return [[*row[:k], *[""] * (k - len(row))] for row in rows]


def unpacked_strings(chunk: dict[str, Any], trace: dict[str, Any]) -> list[list[str]] | None:
    """A trace's alternatives' strings back from its chunk (`top_chunk`), rows of k."""
    if trace["top_tokens"] is None:
        return None
    indices = np.frombuffer(unpacked(trace["top_tokens"]), dtype="<u2" if chunk["width"] == 2 else "<u4")
    strings = [chunk["vocab"][i] for i in indices.tolist()]
    return [strings[at:at + trace["k"]] for at in range(0, len(strings), trace["k"])]


def unpacked_top(text: str, k: int) -> np.ndarray:
    """`packed_top`'s rows back, float64 [n, k], NaN where absent (what the page shows)."""
    values = np.frombuffer(unpacked(text), dtype="<u2").reshape(-1, k).astype(np.float64)
    return np.where(values == ABSENT, np.nan, -values / 10 ** TOP_DIGITS) + 0.0


def live_stop(method: str, threshold: float | None, kept: int, received: int, reason: str) -> dict[str, Any]:
    """Where a live run stopped a trace: it kept `kept` tokens (the stop token last) of `received`."""
    return {"method": method, "threshold": _round(threshold), "spent": kept, "received": received, "reason": reason}


def rounded(values: np.ndarray | list[float], digits: int) -> list[float | None]:
    """Numbers rounded for the page, NaN and infinities as None: rounded([1.23456, nan], 2) -> [1.23, None]."""
    array = np.round(np.asarray(values, dtype=np.float64), digits) + 0.0  # + 0.0: no "-0.0" on the page
    values = array.tolist()
    if np.isfinite(array).all():
        return values
    return [v if math.isfinite(v) else None for v in values]


def _round(value: float | None) -> float | None:
    return None if value is None or not np.isfinite(value) else round(value, CONF_DIGITS)




def trace_settings(params: Params) -> dict[str, Any]:
    """What a pool's trace pages follow, for its index page: read whether or not the pool's samples are at hand,
    so the page can say what its trace pages show, which traces have one (view.trace_pages per end, ranked by
    view.trace_pages_by), or why there are none."""
    cfg = params.confidence
    return {"signal": cfg.token, "top_k": cfg.top_k, "group_size": cfg.group_size, "warmup": params.online.warmup,
            "percentiles": dict(params.online.percentiles), "k": params.report.k, "repeat": params.eval.repeat,
            "seed": params.eval.seed, "per_end": params.view.trace_pages, "by": params.view.trace_pages_by}


# --- the files of a pool's trace pages ------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class TraceSource:
    """What a pool's trace pages read: its samples, the score table's lowest-group confidences and token counts
    (ascending sample ids per problem), the stop table, and the settings that decide thresholds and windows."""

    pool: Pool
    scores: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]  # problem -> (sample ids, lowest, n_tokens)
    stops: StopTable
    params: Params


def open_traces(paths: ModelPaths, root: Path, params: Params) -> TraceSource | None:
    """The trace pages' inputs of a pool, or None when its samples are not on disk (a project that fetched only the
    score table and aggregate: the problem pages still show every trace's row)."""
    manifest_path = root / paths.manifest
    if not manifest_path.is_file():
        return None
    pool_root = read_manifest(manifest_path).pool_root(manifest_path)
    if not (pool_root / "pool.json").is_file():
        return None
    table = read_parquet(root / paths.scores, ["problem_id", "sample_id", "lowest", "n_tokens"])
    names, codes = np.unique(np.asarray(table.column("problem_id").to_pylist(), dtype=object), return_inverse=True)
    all_ids = array_numpy(table.column("sample_id"), np.int64)
    all_lowest = array_numpy(table.column("lowest"), np.float64)
    all_tokens = array_numpy(table.column("n_tokens"), np.int64)
    scores = {}
    for code, where in rows_by_code(codes).items():
        ids = all_ids[where]
        order = np.argsort(ids, kind="stable")
        scores[str(names[code])] = (ids[order], all_lowest[where][order], all_tokens[where][order])
    stops = StopTable.read(root / paths.stops)
    return TraceSource(Pool(pool_root), scores, stops, params)


def trace_sections(writer: SiteWriter, number: int, i: int, problem_id: str, source: TraceSource, *,
                   chunk: int = CHUNK, math: bool = False, only: Collection[int] | None = None) -> str | None:
    """Write problem `i` of pool `number`'s trace files: data/pool<number>/p<i>/traces.js (the thresholds and
    which chunk holds each trace), p<i>/c<j>.js (`chunk` traces each, in the pool log's order: one pass over the log,
    a chunk in memory at a time) and p<i>/c<j>_top.js (their alternatives); only the traces of `only` when given
    (trace_subset; the others are not decoded); a `math` problem's trace answers with its boxed text (the integer
    read of it is no answer there). Returns the index's data path, or None when the score table has no row of the
    problem."""
    if problem_id not in source.scores:
        return None
    ids, lowest, n_tokens = source.scores[problem_id]
    found = thresholds(problem_id, lowest, source.params)
    window = Window.of(source.params.confidence)
    profiles = stop_profiles(source.stops.rows_of(problem_id), problem_id, ids, n_tokens)
    position = {sample_id: p for p, sample_id in enumerate(ids.tolist())}
    chunks: list[list[int]] = []
    records: list[dict[str, Any]] = []
    tops: list[dict[str, Any]] = []
    has_top = keeps_strings = False

    def flush() -> None:
        j = len(chunks)
        chunks.append([record["id"] for record in records])
        writer.put(f"pool{number}/p{i}/c{j}", {"traces": records.copy()})
        if has_top:
            writer.put(f"pool{number}/p{i}/c{j}_top", top_chunk(tops))
        records.clear()
        tops.clear()

    for sample in source.pool.iter_samples(problem_id, only):
        at = position.get(sample.sample_id)
        if at is None:  # beyond pool.n_pool: not scored
            continue
        start, end = profiles.offsets[at], profiles.offsets[at + 1]
        rows = StopRows(sample=np.full(end - start, sample.sample_id), spent=profiles.spent[start:end],
                        value=profiles.value[start:end])
        records.append(trace_record(sample, window,
                                    {t.method: would_stop(rows, t.median) for t in found}))
        if math:
            records[-1]["answer"] = split_boxed_text(sample.text, sample.reasoning)
        has_top = has_top or sample.top_logprobs is not None
        keeps_strings = keeps_strings or sample.top_tokens is not None
        tops.append(top_record(sample))
        if len(records) == chunk:
            flush()
    if records:
        flush()
    index = f"pool{number}/p{i}/traces"
    replay = source.params
    writer.put(index, {"problem_id": problem_id, "simulated": source.pool.simulated, "signal": window.token,
                       "top_k": window.top_k, "group_size": window.group_size, "warmup": replay.online.warmup,
                       "k": replay.report.k, "repeat": replay.eval.repeat, "seed": replay.eval.seed,
                       "thresholds": [t.to_json() for t in found], "chunks": chunks, "scored": len(ids),
                       "has_top": has_top, "top_tokens": keeps_strings})
    return index
