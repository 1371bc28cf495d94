"""One sample <-> one compact, compressed frame payload.

Layout before compression: `u32 header length | header JSON | blobs`, the header listing each blob's
name, dtype and shape. Float arrays are byte-shuffled (all first bytes, then all second bytes, ...),
which lets zstd find the redundancy in exponents. Top-k logprobs are stored as float16, k-major:
relative error at most 2**-11 (about 5e-4), far below the 3-decimal rounding of the official code.
Tokens are not stored as strings: their UTF-8 lengths cut the text (or, when the tokens do not
concatenate to the text, a separate token byte string) back into tokens.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import pyarrow as pa

from tracevote.records import Sample

FORMAT_VERSION = 1
U32 = struct.Struct("<I")
SHUFFLED = {"float16", "float32", "uint16", "uint32"}


@dataclass(frozen=True)
class Decoded:
    """A payload's header and blobs, decoded lazily by name."""

    header: dict[str, Any]
    blobs: dict[str, np.ndarray]

    def text(self) -> str:
        return self.blobs["text"].tobytes().decode("utf-8", errors="surrogatepass")


def encode(sample: Sample, *, raw: bytes | None = None, keep_top_tokens: bool = False) -> bytes:
    """A compressed payload holding every field of `sample` (top-k only if the sample has it)."""
    text_bytes = sample.text.encode("utf-8", errors="surrogatepass")
    token_bytes = [token.encode("utf-8", errors="surrogatepass") for token in sample.tokens]
    lengths = np.fromiter((len(b) for b in token_bytes), dtype=np.uint32, count=len(token_bytes))
    blobs: dict[str, np.ndarray] = {"text": np.frombuffer(text_bytes, dtype=np.uint8)}
    joined = b"".join(token_bytes)
    if joined != text_bytes:
        blobs["token_bytes"] = np.frombuffer(joined, dtype=np.uint8)
    blobs["token_lens"] = lengths.astype(np.uint16 if lengths.size == 0 or lengths.max() < 65536 else np.uint32)
    blobs["token_logprobs"] = np.asarray(sample.token_logprobs, dtype=np.float32)
    if sample.top_logprobs is not None:
        blobs["top_logprobs_kmajor"] = np.ascontiguousarray(sample.top_logprobs.astype(np.float16).T)
    if sample.token_confidence is not None:
        blobs["token_confidence"] = np.asarray(sample.token_confidence, dtype=np.float32)
    if keep_top_tokens and sample.top_tokens is not None:
        blobs["top_tokens_json"] = np.frombuffer(orjson.dumps(sample.top_tokens), dtype=np.uint8)
    if raw is not None:
        blobs["raw"] = np.frombuffer(raw, dtype=np.uint8)
    header = {
        "v": FORMAT_VERSION, "problem_id": sample.problem_id, "sample_id": sample.sample_id,
        "answer": sample.answer, "finish_reason": sample.finish_reason, "prompt_tokens": sample.prompt_tokens,
        "completion_tokens": sample.completion_tokens, "latency_s": sample.latency_s,
        "blobs": [[name, str(array.dtype), list(array.shape)] for name, array in blobs.items()],
    }
    head = orjson.dumps(header)
    body = b"".join([U32.pack(len(head)), head, *(_to_bytes(a) for a in blobs.values())])
    return U32.pack(len(body)) + pa.compress(body, codec="zstd", asbytes=True)


def decode(payload: bytes) -> Decoded:
    (size,) = U32.unpack_from(payload)
    body = pa.decompress(memoryview(payload)[U32.size:], decompressed_size=size, codec="zstd", asbytes=True)
    (head_len,) = U32.unpack_from(body)
    header = orjson.loads(body[U32.size: U32.size + head_len])
    if header.get("v") != FORMAT_VERSION:
        raise ValueError(f"unknown sample format version {header.get('v')!r}")
    offset = U32.size + head_len
    blobs: dict[str, np.ndarray] = {}
    for name, dtype, shape in header["blobs"]:
        count = int(np.prod(shape)) if shape else 1
        nbytes = count * np.dtype(dtype).itemsize
        blobs[name] = _from_bytes(body[offset: offset + nbytes], np.dtype(dtype), tuple(shape))
        offset += nbytes
    return Decoded(header, blobs)


def to_sample(decoded: Decoded) -> Sample:
    """The full record back, tokens and all (for export; scoring reads the arrays directly)."""
    header, blobs = decoded.header, decoded.blobs
    source = blobs.get("token_bytes", blobs["text"]).tobytes()
    ends = np.cumsum(blobs["token_lens"], dtype=np.int64)
    starts = ends - blobs["token_lens"]
    bounds = zip(starts.tolist(), ends.tolist(), strict=True)
    tokens = [source[start:end].decode("utf-8", errors="surrogatepass") for start, end in bounds]
    top = blobs.get("top_logprobs_kmajor")
    top_tokens = blobs.get("top_tokens_json")
    return Sample(
        problem_id=header["problem_id"], sample_id=header["sample_id"], text=decoded.text(), tokens=tokens,
        token_logprobs=blobs["token_logprobs"],
        top_logprobs=None if top is None else top.T.astype(np.float32),
        top_tokens=None if top_tokens is None else orjson.loads(top_tokens.tobytes()),
        token_confidence=blobs.get("token_confidence"), answer=header["answer"],
        finish_reason=header["finish_reason"], prompt_tokens=header["prompt_tokens"],
        completion_tokens=header["completion_tokens"], latency_s=header["latency_s"],
    )


def _to_bytes(array: np.ndarray) -> bytes:
    if str(array.dtype) not in SHUFFLED or array.size == 0:
        return array.tobytes()
    return np.ascontiguousarray(array.reshape(-1).view(np.uint8).reshape(-1, array.itemsize).T).tobytes()


def _from_bytes(data: bytes, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    raw = np.frombuffer(data, dtype=np.uint8)
    if str(dtype) in SHUFFLED and raw.size:
        raw = np.ascontiguousarray(raw.reshape(dtype.itemsize, -1).T)
    return raw.view(dtype).reshape(shape)
