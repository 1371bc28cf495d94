"""The JSON-lines interchange format: `pool export` writes it, `pool import` reads traces made elsewhere.

One object per sample:
    {"problem_id": "aime_2025-01", "sample_id": 0, "text": "...", "tokens": ["...", ...],
     "token_logprobs": [-0.01, ...], "top_logprobs": [[-0.01, -4.7, ...], ...],
     "top_tokens": [["a", "b", ...], ...],        (optional)
     "token_confidence": [...],                    (optional; instead of top_logprobs)
     "answer": 70, "finish_reason": "stop",
     "usage": {"prompt_tokens": 98, "completion_tokens": 1234}, "latency_s": 3.2, "simulated": false}

Logprobs may be null, non-finite or <= -9999 (a sentinel): all mean "absent". Export writes absent
values as null. `pool export --fields a,b` writes only those fields (and builds only those: the logprob arrays
are most of a line's size and of the time it takes).

Sizes are bounded before anything is allocated for them: a line holds at most MAX_LINE_BYTES, a token's
top_logprobs row at most MAX_TOP_LOGPROBS entries (ragged rows are padded to the widest), and every
per-token array has exactly one entry per token. An empty file is an error: it cannot be what was meant.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import orjson

from tracevote.answers.extract import split_answer
from tracevote.core.errors import ConfigError, DataError
from tracevote.core.fileio import parse_json_object
from tracevote.datasets.problems import Problem
from tracevote.store import codec
from tracevote.store.frame_writer import FrameWriter
from tracevote.store.logprobs import clean_logprobs, token_confidence
from tracevote.store.pool import Pool
from tracevote.store.records import Sample

MAX_LISTED_BAD_LINES = 50  # a file of bad lines is usually one systematic mistake; the first 50 show it
# A 1M-token trace (decoding.max_tokens' bound) with top-20 logprobs and tokens writes ~400 bytes per token.
MAX_LINE_BYTES = 512 * 2**20
MAX_TOP_LOGPROBS = 100  # entries per token: no API sends more (OpenAI and DeepSeek 20, vLLM's default 20)
MAX_COUNT = 2**32 - 1  # sample ids and usage counts
EXPECTED_LINE = ('one JSON object per line: {"problem_id", "sample_id", "text", "tokens", "token_logprobs", '
                 '"top_logprobs" or "token_confidence", ...}')
_NUMBER_TYPES = frozenset({int, float, type(None)})
ANY_SAMPLE_ID_FLAG = "--allow-any-sample-id"  # named in the out-of-range message so the user sees the way out


def _optional(values: np.ndarray | None) -> Any:
    return _ABSENT if values is None else _nullable(values)


_ABSENT = object()  # an optional field the sample lacks (None is a value: a null answer or latency)
_EXPORTED: dict[str, Callable[[Sample, bool], Any]] = {
    "problem_id": lambda sample, _: sample.problem_id,
    "sample_id": lambda sample, _: sample.sample_id,
    "text": lambda sample, _: sample.text,
    "reasoning": lambda sample, _: sample.reasoning or _ABSENT,  # only from a server that split its thinking out
    "tokens": lambda sample, _: sample.tokens,
    "token_logprobs": lambda sample, _: _nullable(sample.token_logprobs),
    "top_logprobs": lambda sample, _: _optional(sample.top_logprobs),
    "top_tokens": lambda sample, _: _ABSENT if sample.top_tokens is None else sample.top_tokens,
    "token_confidence": lambda sample, _: _optional(sample.token_confidence),
    "answer": lambda sample, _: sample.answer,
    "finish_reason": lambda sample, _: sample.finish_reason,
    "usage": lambda sample, _: {"prompt_tokens": sample.prompt_tokens, "completion_tokens": sample.completion_tokens},
    "latency_s": lambda sample, _: sample.latency_s,
    "simulated": lambda _, simulated: simulated,
}
EXPORT_FIELDS: tuple[str, ...] = tuple(_EXPORTED)


def to_json_line(sample: Sample, *, simulated: bool, fields: Sequence[str] = EXPORT_FIELDS,
                 extra: Mapping[str, Any] | None = None) -> bytes:
    """The sample's line with `fields` (checked by export_fields), in that order, then `extra` (the confidence
    scores `pool export --scores` joins); an optional field the sample lacks (top_logprobs, top_tokens,
    token_confidence) is left out. Only the fields named are converted: a line without the logprob arrays is far
    cheaper to make. A simulated sample's line always says so."""
    record: dict[str, Any] = {}
    if simulated and "simulated" not in fields:
        fields = (*fields, "simulated")
    for name in fields:
        value = _EXPORTED[name](sample, simulated)
        if value is not _ABSENT:
            record[name] = value
    record.update(extra or {})
    return orjson.dumps(record) + b"\n"


def export_fields(spec: str) -> tuple[str, ...]:
    """`pool export --fields`: "problem_id,answer" -> ("problem_id", "answer"), in the order given, a repeat
    dropped; an unknown or empty name is a ConfigError listing the valid ones."""
    names = [name.strip() for name in spec.split(",")]
    unknown = [name for name in names if name not in _EXPORTED]
    if unknown:
        raise ConfigError(f"--fields {spec!r}: {', '.join(repr(name) for name in unknown)} "
                        f"{'is not a field' if len(unknown) == 1 else 'are not fields'}; the fields are "
                        f"{', '.join(EXPORT_FIELDS)}")
    return tuple(dict.fromkeys(names))


def _nullable(values: np.ndarray) -> Any:
    as_objects = np.asarray(values, dtype=np.float64).astype(object)
    as_objects[np.isnan(np.asarray(values, dtype=np.float64))] = None
    return as_objects.tolist()


def numbered_lines(path: Path, max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[tuple[int, bytes]]:
    """(line number from 1, line) for every non-blank line; an unreadable file, or a line longer than
    max_line_bytes (read no further than that), is a DataError."""
    try:
        with open(path, "rb") as handle:
            for number, line in enumerate(iter(lambda: handle.readline(max_line_bytes + 1), b""), start=1):
                if len(line) > max_line_bytes:
                    raise DataError(f"{path}: line {number}: longer than {max_line_bytes:,} bytes, the most one "
                                    f"sample's line may hold (is this a JSON-lines file?)")
                if line.strip():
                    yield number, line
    except OSError as exc:
        raise DataError(f"{path}: cannot read it ({exc.strerror or exc})") from exc


def read_lines(path: Path) -> Iterator[tuple[Sample, bool]]:
    """Every (sample, simulated) in an interchange file; the first bad line raises, naming line and field."""
    for number, line in numbered_lines(path):
        yield parse_line(line, f"{path}: line {number}")


def parse_line(line: bytes, where: str) -> tuple[Sample, bool]:
    record = parse_json_object(line, where)
    tokens = _field(record, "tokens", list, where)
    if not all(isinstance(t, str) for t in tokens):
        raise DataError(f"{where}: field 'tokens': every token must be a string")
    n = len(tokens)
    text = _field(record, "text", str, where)
    reasoning = _field(record, "reasoning", str, where) if "reasoning" in record else ""
    prompt_tokens, completion_tokens = _usage(record, where, n)
    sample = Sample(
        problem_id=_field(record, "problem_id", str, where), sample_id=_sample_id(record, where), text=text,
        tokens=tokens, token_logprobs=_per_token(record, "token_logprobs", where, n),
        top_logprobs=_top_logprobs(record, where, n), top_tokens=_top_tokens(record, where, n),
        token_confidence=_per_token(record, "token_confidence", where, n) if "token_confidence" in record else None,
        answer=split_answer(text, reasoning), finish_reason=_finish_reason(record, where),
        prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
        latency_s=_latency(record, where), reasoning=reasoning,
    )
    return sample, _simulated(record, where)


def _finish_reason(record: dict[str, Any], where: str) -> str:
    value = record.get("finish_reason")
    if value is not None and not isinstance(value, str):
        raise DataError(f"{where}: field 'finish_reason': expected text or null, got {value!r:.60}")
    return value or "unknown"


def _simulated(record: dict[str, Any], where: str) -> bool:
    value = record.get("simulated", False)
    if not isinstance(value, bool):
        raise DataError(f"{where}: field 'simulated': expected true or false, got {value!r:.60}")
    return value


def _field(record: dict[str, Any], name: str, kind: type, where: str) -> Any:
    value = record.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise DataError(f"{where}: field {name!r}: expected {kind.__name__}, got {value!r:.60}")
    return value


def _sample_id(record: dict[str, Any], where: str) -> int:
    value = _field(record, "sample_id", int, where)
    if not 0 <= value <= MAX_COUNT:
        raise DataError(f"{where}: field 'sample_id': {value} is not in 0..2**32-1")
    return value


def _usage(record: dict[str, Any], where: str, n: int) -> tuple[int, int]:
    """(prompt_tokens, completion_tokens); a missing usage counts 0 prompt tokens and one per token."""
    usage = record.get("usage") or {}
    if not isinstance(usage, dict):
        raise DataError(f"{where}: field 'usage': expected an object, got {usage!r:.60}")
    counts = []
    for name, default in (("prompt_tokens", 0), ("completion_tokens", n)):
        value = usage.get(name, default)
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_COUNT:
            raise DataError(f"{where}: field 'usage.{name}': expected an integer in 0..2**32-1, got {value!r:.60}")
        counts.append(value)
    return counts[0], counts[1]


def _latency(record: dict[str, Any], where: str) -> float:
    value = record.get("latency_s") or 0.0
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value < float("inf"):
        raise DataError(f"{where}: field 'latency_s': expected a finite number >= 0, got {value!r:.60}")
    return float(value)


def _per_token(record: dict[str, Any], name: str, where: str, n: int) -> np.ndarray:
    """A list of n numbers or nulls -> float32 with absent values as NaN."""
    values = _field(record, name, list, where)
    if len(values) != n:
        raise DataError(f"{where}: field {name!r}: {len(values)} values for {n} tokens")
    return clean_logprobs(_numbers(values, name, where))


def _top_logprobs(record: dict[str, Any], where: str, n: int) -> np.ndarray | None:
    """One list per token, best first; ragged rows are padded with absent entries."""
    rows = record.get("top_logprobs")
    if rows is None:
        return None
    if not isinstance(rows, list) or len(rows) != n or not all(isinstance(row, list) for row in rows):
        raise DataError(f"{where}: field 'top_logprobs': expected {n} lists (one per token)")
    width = max((len(row) for row in rows), default=0)
    if width > MAX_TOP_LOGPROBS:  # checked before padding every row to the widest
        widest = next(i for i, row in enumerate(rows) if len(row) == width)
        raise DataError(f"{where}: field 'top_logprobs': token {widest} has {width} entries, more than "
                        f"{MAX_TOP_LOGPROBS}")
    padded = [value for row in rows for value in [*row, *([None] * (width - len(row)))]]
    return clean_logprobs(_numbers(padded, "top_logprobs", where).reshape(n, width))


def _top_tokens(record: dict[str, Any], where: str, n: int) -> list[list[str]] | None:
    rows = record.get("top_tokens")
    if rows is None:
        return None
    if (not isinstance(rows, list) or len(rows) != n
            or not all(isinstance(row, list) and all(isinstance(t, str) for t in row) for row in rows)):
        raise DataError(f"{where}: field 'top_tokens': expected {n} lists of strings (one per token)")
    return rows


def _numbers(values: list[Any], name: str, where: str) -> np.ndarray:
    """Numbers and nulls (NaN); anything else, a string "1.5", true or a nested list included, is an error."""
    if not {type(v) for v in values} <= _NUMBER_TYPES:
        bad = next(v for v in values if type(v) not in _NUMBER_TYPES)
        raise DataError(f"{where}: field {name!r}: expected numbers or null, got {bad!r:.60}")
    return np.array([np.nan if v is None else v for v in values], dtype=np.float64)


@dataclass(frozen=True)
class ImportSummary:
    read: int
    stored: int
    already_stored: int
    simulated: bool


@dataclass(frozen=True)
class CheckedFile:
    """What validate_file found in a file with no bad line."""

    samples: int
    simulated: bool  # every sample says it came from the simulator (a file never mixes the two kinds)


class _BadLines:
    """Collects bad-line messages: the first MAX_LISTED_BAD_LINES kept, the rest only counted."""

    def __init__(self) -> None:
        self.listed: list[str] = []
        self.total = 0

    def add(self, message: str) -> None:
        self.total += 1
        if len(self.listed) < MAX_LISTED_BAD_LINES:
            self.listed.append(message)

    def raise_if_any(self, path: Path) -> None:
        if not self.total:
            return
        more = [f"  ... and {self.total - len(self.listed)} more"] if self.total > len(self.listed) else []
        lines = [f"  {message}" for message in self.listed] + more
        noun = "line" if self.total == 1 else "lines"
        raise DataError("\n".join([f"{path}: {self.total} bad {noun}, nothing imported:", *lines]))


def validate_file(path: Path, problem_ids: set[str], *, n_pool: int | None) -> CheckedFile:
    """Check every line before anything is written.

    One DataError lists every bad line (line number, field, value). Sample ids must lie in 0..n_pool-1,
    unless n_pool is None.
    """
    first_seen: dict[tuple[str, int], int] = {}
    bad = _BadLines()
    kinds: dict[bool, int] = {}  # simulated or not -> the first line of that kind
    count = 0
    for number, line in numbered_lines(path):
        where = f"line {number}"
        try:
            sample, is_sim = parse_line(line, where)
            _check_belongs(sample, where, problem_ids, n_pool)
            first_line = first_seen.setdefault((sample.problem_id, sample.sample_id), number)
            _check_unique(sample, where, number, first_line)
        except DataError as exc:
            bad.add(str(exc))
            continue
        count += 1
        first_of_kind = kinds.setdefault(is_sim, number)
        if len(kinds) > 1 and first_of_kind == number:
            bad.add(f"{where}: field 'simulated': {is_sim!r}, but line {kinds[not is_sim]} says {not is_sim!r}; "
                    f"real and simulated samples never share a pool")
    bad.raise_if_any(path)
    if not count:
        raise DataError(f"{path}: no samples, nothing imported (expected {EXPECTED_LINE})")
    return CheckedFile(samples=count, simulated=kinds.get(True) is not None)


def _check_belongs(sample: Sample, where: str, problem_ids: set[str], n_pool: int | None) -> None:
    if sample.problem_id not in problem_ids:
        raise DataError(f"{where}: field 'problem_id': {sample.problem_id!r:.80} is not in the dataset "
                        f"({len(problem_ids)} problems)")
    if n_pool is not None and sample.sample_id >= n_pool:
        raise DataError(f"{where}: field 'sample_id': {sample.sample_id} is outside 0..{n_pool - 1} "
                        f"(pool.n_pool is {n_pool}; {ANY_SAMPLE_ID_FLAG} admits it)")


def _check_unique(sample: Sample, where: str, line: int, first_line: int) -> None:
    if line != first_line:
        raise DataError(f"{where}: duplicate sample {sample.problem_id:.80}/{sample.sample_id} "
                        f"(first on line {first_line})")


def import_file(path: Path, pool: Pool, problems: list[Problem], *, keep_top_logprobs: bool,
                n_pool: int | None, keep_top_tokens: bool = False) -> ImportSummary:
    """Validate the whole file, then append every sample the pool lacks (all-or-nothing on bad input).
    The caller has registered the problems' prompts (Pool.register).

    n_pool bounds the sample ids (0..n_pool-1); None admits any id.
    """
    checked = validate_file(path, {p.id for p in problems}, n_pool=n_pool)
    return store_file(path, checked, pool, keep_top_logprobs=keep_top_logprobs, keep_top_tokens=keep_top_tokens)


def store_file(path: Path, checked: CheckedFile, pool: Pool, *, keep_top_logprobs: bool,
               keep_top_tokens: bool = False) -> ImportSummary:
    """Append every sample of a file validate_file passed (`checked` is what it returned) that the pool lacks,
    with the alternatives' token strings where the file has them and `keep_top_tokens` (pool.keep_top_tokens).
    The caller has registered the problems' prompts (Pool.register)."""
    read, simulated = checked.samples, checked.simulated
    pool.check_kind(simulated)
    stored = skipped = 0
    with ExitStack() as stack:
        writers: dict[str, FrameWriter] = {}
        for sample, is_sim in read_lines(path):
            if sample.problem_id not in writers:
                writers[sample.problem_id] = stack.enter_context(pool.writer(sample.problem_id))
            writer = writers[sample.problem_id]
            if sample.sample_id in writer.keys:
                skipped += 1
                continue
            payload = codec.encode(for_storage(sample, keep_top_logprobs), keep_top_tokens=keep_top_tokens,
                                   simulated=is_sim)
            writer.append(sample.sample_id, payload)
            stored += 1
    pool.write_confidence_blocks(writers)  # the logs are closed: each problem's block, for the score stage
    return ImportSummary(read=read, stored=stored, already_stored=skipped, simulated=simulated or pool.simulated)


def for_storage(sample: Sample, keep_top_logprobs: bool) -> Sample:
    """The sample as the pool keeps it: without top-k (but with C_i) when the pool drops top-k."""
    if keep_top_logprobs or sample.top_logprobs is None:
        return sample
    confidence = token_confidence(sample.top_logprobs, sample.token_logprobs).astype(np.float32)
    return dataclasses.replace(sample, top_logprobs=None, top_tokens=None, token_confidence=confidence)


def export_pool(pool: Pool, problem_ids: list[str], out: BinaryIO, *, fields: Sequence[str] = EXPORT_FIELDS,
                scores: Mapping[tuple[str, int], Mapping[str, float | None]] | None = None,
                on_sample: Callable[[], None] = lambda: None) -> int:
    """Every stored sample of `problem_ids` as a line of `fields` to `out`, with `score` (its confidence measures,
    by name; null for a sample the table does not score) when `scores` is given; `on_sample` is called after each
    line (the CLI's progress bar). Returns how many were written."""
    count = 0
    for problem_id in problem_ids:
        for sample in pool.iter_samples(problem_id):
            extra = None if scores is None else {"score": scores.get((problem_id, sample.sample_id))}
            out.write(to_json_line(sample, simulated=pool.simulated, fields=fields, extra=extra))
            count += 1
            on_sample()
    return count
