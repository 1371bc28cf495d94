"""One sample <-> one frame payload whose parts can be read alone.

Formats 2 and 3: `b"TVC2" | u32 header length | u32 crc32 of the header | header JSON | blocks`. The header
holds what scoring needs besides C_i (ids, finish_reason, usage, latency, the answer candidates and
the EXTRACT_VERSION that found them) and a block table, one entry per block:
`[block name, stored bytes, raw bytes, crc32 of the stored bytes, shuffled, [[array, dtype, shape], ...],
compression]`. Each block is zstd-compressed on its own ("zstd"), or stored as it is ("none") when that
saves less than a fifth, so scoring reads 4 bytes a token and decompresses nothing else:

    confidence   token_confidence: C_i, computed in float64 from the logprobs as parsed, stored float32
    text         text, token_bytes (only when the tokens do not concatenate to the text), token_lens,
                 token_logprobs (float32), reasoning (UTF-8, only when the server split its thinking out of the
                 content: a reader that does not know it skips it, so the format number did not change)
    top          the top-k logprobs, for re-analysis only. Format 3: top_steps, quantised log-distances from
                 the chosen logprob, differenced along each row (logprobs.top_steps), and top_absent, packed
                 bits of the absent entries (when any); the header's "top_quantum" gives their step and scale.
                 Each value is within ~(1 nat + its distance to the chosen logprob) * 2**-11 (exactly:
                 logprobs.top_error_bound); the chosen token's own entry is exact. Format 2:
                 top_logprobs_kmajor, float16, k-major (relative error at most 2**-11).
    extra        top_tokens_json, raw (when kept)

Arrays of shuffled blocks (floats, uint16 and uint32) are byte-shuffled (all first bytes, then all second
bytes, ...), which lets zstd find the redundancy in exponents and high bytes. The confidence block is not:
reading it is then one cast (unshuffling cost more than decompressing), and shuffling would save only
~0.35 B/token. Tokens are not stored as strings: their UTF-8 lengths cut the text (or the token byte
string) back into tokens.

The header's "v" is 3 when the payload holds a top-k block, else 2 (the two differ only there, so a
payload without top-k stays readable by format-2 code); a format-2 top block is read as it always was.
Format 1 payloads (`u32 size | zstd(u32 header length | header | blobs)`, no C_i when top-k was kept) are
still read; their C_i is recomputed from the float16 top-k.
"""

from __future__ import annotations

import math
import struct
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from tracevote.answers.extract import EXTRACT_VERSION, AnswerCandidates, answer_candidates, split_candidates
from tracevote.store.logprobs import TOP_SCALE, TOP_STEP, token_confidence, top_from_steps, top_steps
from tracevote.store.records import Sample
from tracevote.store.zstd import zstd_codec

FORMAT_VERSION = 3  # written when the top-k is kept; a payload without it is written as format 2
READABLE_VERSIONS = (2, 3)
MAGIC = b"TVC2"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"  # a format 1 payload's zstd frame starts right after its u32 size
U32 = struct.Struct("<I")
HEAD = struct.Struct("<4sII")  # magic, header length, header crc32
SHUFFLED = {"float16", "float32", "uint16", "uint32"}
CONFIDENCE = "confidence"
# A block is stored as it is unless zstd saves a fifth: C_i of real traces is near-random float32, where
# zstd saves ~10% and decompressing it was the largest cost of scoring.
WORTH_COMPRESSING = 0.8


@dataclass(frozen=True)
class Decoded:
    """A payload's header and all its arrays by name."""

    header: dict[str, Any]
    blobs: dict[str, np.ndarray]

    def text(self) -> str:
        return self.blobs["text"].tobytes().decode("utf-8", errors="surrogatepass")

    def reasoning(self) -> str:
        """The thinking a reasoning parser split out ("" for a reply without, and for pools written before it)."""
        reasoning = self.blobs.get("reasoning")
        return "" if reasoning is None else reasoning.tobytes().decode("utf-8", errors="surrogatepass")

    def candidates(self) -> AnswerCandidates:
        """The answer candidates read afresh from the text (and the reasoning, where the server split it)."""
        return split_candidates(self.text(), self.reasoning())


@dataclass(frozen=True, eq=False)
class ScoreFields:
    """What scoring reads of one sample."""

    sample_id: int
    finish_reason: str
    candidates: AnswerCandidates
    confidence: np.ndarray  # C_i, float32 (formats 2, 3) or float64 (recomputed for format 1) [n tokens]


def encode(sample: Sample, *, raw: bytes | None = None, keep_top_tokens: bool = False,
           simulated: bool = False) -> bytes:
    """A payload holding every field of `sample`, C_i always, and the top-k if the sample has it (format 3; format 2
    without); the header says `"simulated": true` when tracevote's simulator answered (real samples' bytes are
    unchanged)."""
    text_bytes = sample.text.encode("utf-8", errors="surrogatepass")
    blocks = {CONFIDENCE: {"token_confidence": _confidence_of(sample).astype(np.float32)},
              "text": _text_arrays(sample, text_bytes)}
    quantum = {}
    if sample.top_logprobs is not None:
        blocks["top"] = top_steps(sample.top_logprobs, sample.token_logprobs)
        quantum = {"top_quantum": [TOP_STEP, TOP_SCALE]}
    extra = {}
    if keep_top_tokens and sample.top_tokens is not None:
        extra["top_tokens_json"] = np.frombuffer(orjson.dumps(sample.top_tokens), dtype=np.uint8)
    if raw is not None:
        extra["raw"] = np.frombuffer(raw, dtype=np.uint8)
    if extra:
        blocks["extra"] = extra
    table, stored = [], []
    for name, arrays in blocks.items():
        shuffled = name != CONFIDENCE
        body = b"".join(_to_bytes(array) if shuffled else array.tobytes() for array in arrays.values())
        packed = zstd_codec().compress(body, asbytes=True)
        compressed = len(packed) < WORTH_COMPRESSING * len(body)
        packed = packed if compressed else body
        table.append([name, len(packed), len(body), zlib.crc32(packed), shuffled,
                      [[key, str(array.dtype), list(array.shape)] for key, array in arrays.items()],
                      "zstd" if compressed else "none"])
        stored.append(packed)
    header = orjson.dumps({
        "v": FORMAT_VERSION if quantum else 2, "problem_id": sample.problem_id, "sample_id": sample.sample_id,
        "answer": sample.answer, "finish_reason": sample.finish_reason, "prompt_tokens": sample.prompt_tokens,
        "completion_tokens": sample.completion_tokens, "latency_s": sample.latency_s,
        "candidates": split_candidates(sample.text, sample.reasoning).to_json(), "extract_version": EXTRACT_VERSION,
        "blocks": table, **quantum, **({"simulated": True} if simulated else {}),
    })
    return b"".join([HEAD.pack(MAGIC, len(header), zlib.crc32(header)), header, *stored])


def _confidence_of(sample: Sample) -> np.ndarray:
    """The sample's C_i, or C_i computed in float64 from what it holds (e.g. an imported sample)."""
    if sample.token_confidence is not None:
        return np.asarray(sample.token_confidence)
    return token_confidence(sample.top_logprobs, sample.token_logprobs)


def _text_arrays(sample: Sample, text_bytes: bytes) -> dict[str, np.ndarray]:
    token_bytes = [token.encode("utf-8", errors="surrogatepass") for token in sample.tokens]
    lengths = np.fromiter((len(b) for b in token_bytes), dtype=np.uint32, count=len(token_bytes))
    arrays: dict[str, np.ndarray] = {"text": np.frombuffer(text_bytes, dtype=np.uint8)}
    joined = b"".join(token_bytes)
    if joined != text_bytes:
        arrays["token_bytes"] = np.frombuffer(joined, dtype=np.uint8)
    arrays["token_lens"] = lengths.astype(np.uint16 if lengths.size == 0 or lengths.max() < 65536 else np.uint32)
    arrays["token_logprobs"] = np.asarray(sample.token_logprobs, dtype=np.float32)
    if sample.reasoning:
        arrays["reasoning"] = np.frombuffer(sample.reasoning.encode("utf-8", errors="surrogatepass"), dtype=np.uint8)
    return arrays


def decode(payload: bytes | memoryview) -> Decoded:
    """Every array of a payload of either format."""
    view = memoryview(payload)
    if _is_format_1(view):
        return _decode_format_1(view)
    header, offset = _header(view)
    blobs: dict[str, np.ndarray] = {}
    for entry in header["blocks"]:
        blobs.update(_block_arrays(view, offset, entry))
        offset += entry[1]
    _restore_top(header, blobs)
    return Decoded(header, blobs)


def _restore_top(header: dict[str, Any], blobs: dict[str, np.ndarray]) -> None:
    """Format 3: the float32 top-k (top_logprobs_kmajor) back from its steps and the chosen logprobs, in place."""
    if "top_steps" in blobs:
        step, scale = header["top_quantum"]
        blobs["top_logprobs_kmajor"] = top_from_steps(blobs.pop("top_steps"), blobs.pop("top_absent", None),
                                                      blobs["token_logprobs"], step, scale)


def score_fields(payload: bytes | memoryview) -> ScoreFields:
    """C_i, candidates and finish reason, decompressing only the confidence block (formats 2, 3).

    The text is decoded only when the stored candidates come from another EXTRACT_VERSION.
    """
    view = memoryview(payload)
    if _is_format_1(view):
        decoded = _decode_format_1(view)
        top = decoded.blobs.get("top_logprobs_kmajor")
        confidence = decoded.blobs.get("token_confidence")
        if confidence is None:
            confidence = token_confidence(None if top is None else top.T, decoded.blobs["token_logprobs"])
        return ScoreFields(decoded.header["sample_id"], decoded.header["finish_reason"],
                           answer_candidates(decoded.text()), confidence)
    header, offset = _header(view)
    stale = header["extract_version"] != EXTRACT_VERSION
    arrays = _blocks_named(view, header, offset, {CONFIDENCE, "text"} if stale else {CONFIDENCE})
    if "text" in arrays:
        candidates = Decoded(header, arrays).candidates()
    else:
        candidates = AnswerCandidates.from_json(header["candidates"])
    return ScoreFields(header["sample_id"], header["finish_reason"], candidates, arrays["token_confidence"])


def logprob_fields(payload: bytes | memoryview, *, top: bool = True) -> tuple[int, np.ndarray, np.ndarray | None]:
    """(sample id, the chosen logprobs float32 [n], the top-k as rows [n, k] best first or None when the pool keeps
    none or `top` is false), decompressing only the text block and, with `top`, the top block (formats 2, 3; format
    1 decodes whole)."""
    view = memoryview(payload)
    if _is_format_1(view):
        decoded = _decode_format_1(view)
        header, blobs = decoded.header, decoded.blobs
    else:
        header, offset = _header(view)
        blobs = _blocks_named(view, header, offset, {"text", "top"} if top else {"text"})
        _restore_top(header, blobs)
    kmajor = blobs.get("top_logprobs_kmajor") if top else None
    return int(header["sample_id"]), blobs["token_logprobs"], None if kmajor is None else kmajor.T


def sample_id_of(payload: bytes | memoryview) -> int | None:
    """The sample id a payload's header holds, reading nothing else (None for format 1, which keeps it
    inside its compressed body)."""
    view = memoryview(payload)
    return None if _is_format_1(view) else int(_header(view)[0]["sample_id"])


@dataclass(frozen=True)
class Usage:
    """What one request cost and took: its usage counts and seconds, as the header keeps them."""

    prompt_tokens: int
    completion_tokens: int
    latency_s: float


def usage_of(payload: bytes | memoryview) -> Usage:
    """The sample's usage and latency, reading only the header (formats 2, 3; format 1 decodes its body)."""
    view = memoryview(payload)
    header = _decode_format_1(view).header if _is_format_1(view) else _header(view)[0]
    return Usage(int(header["prompt_tokens"]), int(header["completion_tokens"]), float(header["latency_s"]))


@dataclass(frozen=True)
class TextFields:
    """What grading reads of one sample: its text and what decides its answer (and the thinking a reasoning parser
    split out, "" when none: a math answer's box may be there, answers.extract.split_boxed_text)."""

    sample_id: int
    text: str
    finish_reason: str
    candidates: AnswerCandidates
    reasoning: str = ""


def text_fields(payload: bytes | memoryview) -> TextFields:
    """The text, finish reason and answer candidates, decompressing only the text block (formats 2, 3)."""
    view = memoryview(payload)
    if _is_format_1(view):
        decoded = _decode_format_1(view)
        text = decoded.text()
        return TextFields(decoded.header["sample_id"], text, decoded.header["finish_reason"], answer_candidates(text),
                          decoded.reasoning())
    header, offset = _header(view)
    decoded = Decoded(header, _blocks_named(view, header, offset, {"text"}))
    text = decoded.text()
    stored = header["extract_version"] == EXTRACT_VERSION
    candidates = AnswerCandidates.from_json(header["candidates"]) if stored else decoded.candidates()
    return TextFields(header["sample_id"], text, header["finish_reason"], candidates, decoded.reasoning())


def _blocks_named(view: memoryview, header: dict[str, Any], offset: int, names: set[str]) -> dict[str, np.ndarray]:
    """The arrays of the format 2 or 3 blocks called `names`, decompressing no other block."""
    arrays: dict[str, np.ndarray] = {}
    for entry in header["blocks"]:
        if entry[0] in names:
            arrays.update(_block_arrays(view, offset, entry))
        offset += entry[1]
    return arrays


def to_sample(decoded: Decoded) -> Sample:
    """The full record back, tokens and all (for export; scoring reads `score_fields`)."""
    header, blobs = decoded.header, decoded.blobs
    tokens = _tokens(blobs.get("token_bytes", blobs["text"]), blobs["token_lens"])
    top = blobs.get("top_logprobs_kmajor")
    top_tokens = blobs.get("top_tokens_json")
    return Sample(
        problem_id=header["problem_id"], sample_id=header["sample_id"], text=decoded.text(), tokens=tokens,
        token_logprobs=blobs["token_logprobs"],
        top_logprobs=None if top is None else top.T.astype(np.float32),
        top_tokens=None if top_tokens is None else orjson.loads(top_tokens.tobytes()),
        token_confidence=blobs.get("token_confidence"), answer=header["answer"],
        finish_reason=header["finish_reason"], prompt_tokens=header["prompt_tokens"],
        completion_tokens=header["completion_tokens"], latency_s=header["latency_s"], reasoning=decoded.reasoning(),
    )


def _tokens(source: np.ndarray, lengths: np.ndarray) -> list[str]:
    """The tokens cut from `source` (UTF-8 bytes, uint8) by their byte lengths, decoded once and sliced.

    >>> _tokens(np.frombuffer("aéb".encode(), np.uint8), np.array([1, 2, 1]))
    ['a', 'é', 'b']
    """
    ends = np.cumsum(lengths, dtype=np.int64)
    starts = ends - lengths
    raw = source.reshape(-1)
    try:
        text = raw.tobytes().decode("utf-8", errors="surrogatepass")
    except UnicodeDecodeError:
        text = None
    if text is None or int(ends[-1] if ends.size else 0) != raw.size or _cuts_a_character(raw, starts, lengths):
        return _tokens_one_by_one(raw.tobytes(), starts, ends)  # subtle: a corrupt cut raises as it always did
    # a character's first byte is never a continuation byte (0b10xxxxxx): counting them gives character offsets
    firsts = np.concatenate(([0], np.cumsum((raw & 0xC0) != 0x80, dtype=np.int64)))
    char_ends = (ends if len(text) == raw.size else firsts[ends]).tolist()
    return [text[start:end] for start, end in zip([0, *char_ends][:-1], char_ends, strict=True)]


def _cuts_a_character(raw: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> bool:
    """Whether a (non-empty) token starts inside a character: its bytes alone are not UTF-8."""
    firsts = starts[(lengths > 0) & (starts < raw.size)]
    return bool(((raw[firsts] & 0xC0) == 0x80).any())


def _tokens_one_by_one(source: bytes, starts: np.ndarray, ends: np.ndarray) -> list[str]:
    bounds = zip(starts.tolist(), ends.tolist(), strict=True)
    return [source[start:end].decode("utf-8", errors="surrogatepass") for start, end in bounds]


def _is_format_1(view: memoryview) -> bool:
    return len(view) >= 8 and view[:4] != MAGIC and view[4:8] == ZSTD_MAGIC


def _header(view: memoryview) -> tuple[dict[str, Any], int]:
    """The format 2 or 3 header and the offset of its first block; checks magic and checksum."""
    if len(view) < HEAD.size:
        raise ValueError(f"sample payload of {len(view)} bytes is too short for a header")
    magic, length, crc = HEAD.unpack_from(view)
    if magic != MAGIC:
        raise ValueError(f"unknown sample payload format (starts with {bytes(magic)!r})")
    head = view[HEAD.size: HEAD.size + length]
    if len(head) != length or zlib.crc32(head) != crc:
        raise ValueError("sample payload header is cut short or corrupt (crc mismatch)")
    header = orjson.loads(head)
    if header.get("v") not in READABLE_VERSIONS:
        raise ValueError(f"unknown sample format version {header.get('v')!r}")
    return header, HEAD.size + length


def _block_arrays(view: memoryview, offset: int, entry: list[Any]) -> dict[str, np.ndarray]:
    name, stored, raw_size, crc, shuffled, layout, compression = entry
    packed = view[offset: offset + stored]
    if len(packed) != stored or zlib.crc32(packed) != crc:
        raise ValueError(f"sample payload block {name!r} is cut short or corrupt (crc mismatch)")
    body = packed if compression == "none" else memoryview(zstd_codec().decompress(packed, decompressed_size=raw_size))
    return _split(body, layout, shuffled=shuffled)


def _split(body: memoryview, layout: list[Any], *, shuffled: bool = True) -> dict[str, np.ndarray]:
    arrays: dict[str, np.ndarray] = {}
    offset = 0
    for name, dtype_name, shape in layout:
        dtype = np.dtype(dtype_name)
        nbytes = math.prod(shape) * dtype.itemsize
        data = body[offset: offset + nbytes]
        arrays[name] = _from_bytes(data, dtype, tuple(shape)) if shuffled else np.frombuffer(data, dtype).reshape(shape)
        offset += nbytes
    return arrays


def _decode_format_1(view: memoryview) -> Decoded:
    (size,) = U32.unpack_from(view)
    body = memoryview(zstd_codec().decompress(view[U32.size:], decompressed_size=size))
    (head_len,) = U32.unpack_from(body)
    header = orjson.loads(body[U32.size: U32.size + head_len])
    if header.get("v") != 1:
        raise ValueError(f"unknown sample format version {header.get('v')!r}")
    return Decoded(header, _split(body[U32.size + head_len:], header["blobs"]))


def _to_bytes(array: np.ndarray) -> bytes:
    if str(array.dtype) not in SHUFFLED or array.size == 0:
        return array.tobytes()
    return np.ascontiguousarray(array.reshape(-1).view(np.uint8).reshape(-1, array.itemsize).T).tobytes()


def _from_bytes(data: memoryview, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    raw = np.frombuffer(data, dtype=np.uint8)
    if str(dtype) in SHUFFLED and raw.size:
        raw = np.ascontiguousarray(raw.reshape(dtype.itemsize, -1).T)
    return raw.view(dtype).reshape(shape)
