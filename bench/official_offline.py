"""Baseline: our re-implementation of DeepConf's official offline analysis (no code copied).

It mirrors `analysis_offline.py` on the `reproduce` branch of github.com/facebookresearch/deepconf:
- `calculate_mean_confidence`: np.mean of the trace's `confs` list;
- `calculate_tail_confidence`: np.mean of `confs[-2048:]` (all of them when shorter);
- `calculate_bottom_window_confidence`: a Python loop with a running sum over windows of 2048 tokens
  (stride 1), then the mean of the lowest max(1, int(n * 0.1)) window means by np.partition (the
  minimum when that is one window); a trace shorter than the window gives np.mean(confs);
- `analyze_single_experiment` calls it twice per trace: once for bottom-10%, once with
  bottom_percent=-1 (the lowest window), so the windows are built twice, as here.

Input is what its pickles hold: one Python list of per-token confidences per trace (produced by
`helper.compute_confidence`). Differences: theirs rounds each confidence to 3 decimals when it makes
the list; we hand both implementations the same unrounded values, so the numbers can be compared.
Theirs returns 0.0 for an empty trace; ours NaN, as our score table does. Error printing is left out.
"""

from __future__ import annotations

import math

import numpy as np


def mean_confidence(confs: list[float]) -> float:
    return float(np.mean(confs)) if confs else math.nan


def tail_confidence(confs: list[float], tail_tokens: int = 2048) -> float:
    tail = confs[-tail_tokens:] if len(confs) > tail_tokens else confs
    return float(np.mean(tail)) if tail else math.nan


def bottom_window_confidence(confs: list[float], window: int = 2048, bottom_fraction: float = 0.1) -> float:
    """Mean of the lowest windows; bottom_fraction -1 means the single lowest window (as theirs)."""
    if not confs:
        return math.nan
    if len(confs) < window:
        return float(np.mean(confs))
    running = sum(confs[:window])
    means = [running / window]
    for i in range(1, len(confs) - window + 1):
        running = running - confs[i - 1] + confs[i + window - 1]
        means.append(running / window)
    if bottom_fraction == -1:
        return min(means)
    n_bottom = max(1, int(len(means) * bottom_fraction))
    if n_bottom == 1:
        return min(means)
    return float(np.mean(np.partition(means, n_bottom - 1)[:n_bottom]))


def trace_measures(confs: list[float], window: int, bottom_fraction: float, tail_tokens: int) -> tuple[float, ...]:
    """(avg, bottom10, lowest, tail) of one trace, the four calls analyze_single_experiment makes."""
    return (mean_confidence(confs), bottom_window_confidence(confs, window, bottom_fraction),
            bottom_window_confidence(confs, window, -1), tail_confidence(confs, tail_tokens))
