"""C_i of up to _ROWS_PER_CHUNK rows (a streamed batch: one call, no second array) is bit for bit what the chunked
path of a longer trace gives for the same rows: absent entries, sentinels, infinities and rows with nothing present
(C_i then from the chosen logprob, or NaN) included."""

from __future__ import annotations

import numpy as np

from tracevote.store.logprobs import _ROWS_PER_CHUNK, token_confidence


def test_one_chunk_at_once_gives_the_chunked_paths_bits() -> None:
    rng = np.random.default_rng(7)
    rows = _ROWS_PER_CHUNK + 300  # the whole trace takes the chunked path
    top = rng.normal(-3.0, 3.0, (rows, 20))
    top[rng.random(top.shape) < 0.2] = np.nan
    top[rng.random(top.shape) < 0.05] = -9999.0
    top[rng.random(top.shape) < 0.02] = np.inf
    top[rng.random(rows) < 0.05] = np.nan  # rows with no present entry: C_i falls back on the chosen logprob
    chosen = rng.normal(-1.0, 1.0, rows)
    chosen[rng.random(rows) < 0.3] = np.nan
    whole = token_confidence(top, chosen)
    first = token_confidence(top[:_ROWS_PER_CHUNK], chosen[:_ROWS_PER_CHUNK])
    last = token_confidence(top[_ROWS_PER_CHUNK:], chosen[_ROWS_PER_CHUNK:])
    assert np.isnan(whole).any() and not np.isnan(whole).all()
    assert np.concatenate([first, last]).tobytes() == whole.tobytes()
    assert token_confidence(top[:0], chosen[:0]).shape == (0,)
    small = token_confidence(np.array([[-0.5, -1.5], [np.nan, -9999.0], [np.nan, np.nan]]),
                             np.array([-0.5, -0.25, np.nan]))
    np.testing.assert_array_equal(small, [1.0, 0.25, np.nan])
