"""Stored token confidence is exact: every measure matches a plain float64 reference to 1e-6 relative.

Logprobs carry full float64 precision here (float16 top-k would be off by up to ~5e-4 per entry), and
go through the real path: DeepSeek-format JSON -> ingest -> codec -> pool log -> Pool.read_problem.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import orjson
import pytest

from tracevote.core.config_deepconf import ConfidenceConfig
from tracevote.deepconf.confidence import trace_measures
from tracevote.sampling.ingest import parse_completion
from tracevote.store import codec, frame_writer
from tracevote.store.pool import Pool
from tracevote.store.records import Sample

CFG = ConfidenceConfig(group_size=32, bottom_fraction=0.1, tail_tokens=64)
K = 20
LENGTHS = (1, 31, 200, 457)


def random_logprobs(seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(chosen [n], top [n, K]) with every digit of a float64 significant; top rows best first."""
    rng = np.random.default_rng(seed)
    top = -np.sort(rng.exponential(2.5, size=(n, K)) + rng.random((n, K)) * 1e-3, axis=1)
    return top[:, 0].copy(), top


def deepseek_body(chosen: np.ndarray, top: np.ndarray, dump: object) -> bytes:
    content = [{"token": f"t{i} ", "logprob": float(chosen[i]), "bytes": list(f"t{i} ".encode()),
                "top_logprobs": [{"token": f"a{j}", "logprob": float(top[i, j]), "bytes": [97]} for j in range(K)]}
               for i in range(len(chosen))]
    text = "".join(item["token"] for item in content) + r"so \boxed{7}"
    content.append({"token": r"so \boxed{7}", "logprob": -0.125, "bytes": [115],
                    "top_logprobs": [{"token": "x", "logprob": -0.125 - j / 7, "bytes": [120]} for j in range(K)]})
    doc = {"id": "x", "object": "chat.completion", "model": "deepseek-chat",
           "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                        "logprobs": {"content": content}, "finish_reason": "stop"}],
           "usage": {"prompt_tokens": 12, "completion_tokens": len(content)}}
    return dump(doc)  # type: ignore[operator]


def reference_measures(confidence: list[float]) -> tuple[float, float, float, float]:
    """avg, bottom10, lowest, tail of one trace, written the plain way (cf. the official code)."""
    m = len(confidence)
    window = min(CFG.group_size, m)
    groups = [sum(confidence[i:i + window]) / window for i in range(m - window + 1)]
    n_bottom = max(1, int(len(groups) * CFG.bottom_fraction))
    tail = confidence[-CFG.tail_tokens:]
    return (sum(confidence) / m, sum(sorted(groups)[:n_bottom]) / n_bottom, min(groups), sum(tail) / len(tail))


def exact_confidence(chosen: np.ndarray, top: np.ndarray) -> list[float]:
    extra = [0.125 + sum(j / 7 for j in range(K)) / K]  # the answer token appended by deepseek_body
    return [-sum(float(v) for v in row) / K for row in top] + extra


def write_pool(root: Path, samples: list[Sample]) -> Pool:
    root.mkdir(parents=True)
    (root / "pool.json").write_bytes(orjson.dumps({"format": 1, "fingerprint": "test", "setting": {}}))
    with frame_writer.FrameWriter(root / "samples" / "p.tvf") as writer:
        for sample in samples:
            writer.append(sample.sample_id, codec.encode(sample))
    return Pool(root)


def assert_exact(pool: Pool, references: list[list[float]]) -> None:
    traces = pool.read_problem("p", len(references))
    measures = trace_measures(traces, CFG)
    for name_index, name in enumerate(("avg", "bottom10", "lowest", "tail")):
        expected = [reference_measures(c)[name_index] for c in references]
        np.testing.assert_allclose(measures.by_name(name), expected, rtol=1e-6, err_msg=name)


@pytest.mark.parametrize("keep_top", [True, False])
@pytest.mark.parametrize("dump", [orjson.dumps, lambda doc: json.dumps(doc, indent=1).encode()],
                         ids=["fast-path", "slow-path"])
def test_measures_from_ingested_json_are_exact(tmp_path: Path, keep_top: bool, dump: object) -> None:
    samples, references = [], []
    for sample_id, n in enumerate(LENGTHS):
        chosen, top = random_logprobs(sample_id, n)
        samples.append(parse_completion(deepseek_body(chosen, top, dump), problem_id="p", sample_id=sample_id,
                                        latency_s=0.1, keep_top_logprobs=keep_top, expect_top_logprobs=K))
        references.append(exact_confidence(chosen, top))
    pool = write_pool(tmp_path / "pool", samples)
    assert [c.boxed for c in pool.read_problem("p", 9).candidates] == [7] * len(LENGTHS)
    assert_exact(pool, references)


def test_codec_computes_exact_confidence_for_a_sample_without_it(tmp_path: Path) -> None:
    samples, references = [], []
    for sample_id, n in enumerate(LENGTHS):
        chosen, top = random_logprobs(100 + sample_id, n)
        samples.append(Sample(problem_id="p", sample_id=sample_id, text="t " * n, tokens=["t "] * n,
                              token_logprobs=chosen, top_logprobs=top, top_tokens=None, token_confidence=None,
                              answer=None, finish_reason="stop", prompt_tokens=3, completion_tokens=n,
                              latency_s=0.0))
        references.append(exact_confidence(chosen, top)[:-1])
    assert_exact(write_pool(tmp_path / "pool", samples), references)
