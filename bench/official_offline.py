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

Run as a user runs the official analysis (`python bench/official_offline.py --outputs DIR ...`), it starts
where theirs starts: it imports what theirs imports (numpy, pandas), lists DIR's `deepconf_simple_*.pkl`
files, unpickles each whole (text, token_ids, confs, ...), and computes the four measures of every trace
with an answer, as `analyze_single_experiment` does before voting. The voting after that (and the
second pass `filter_top_confidence` makes over tail and bottom windows) is left out: our score stage does
no voting, so the baseline does only the work the stage does. The measures are saved with np.save, and
the seconds spent loading and measuring are printed as one JSON line.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pickle
import re
import time

import numpy as np
import pandas as pd  # noqa: F401  imported, as the official analysis imports it (its start-up cost is real)

OFFLINE_NAME = re.compile(r"^deepconf_simple_qid(\d+)_rid([^_]+)_(\d{8}_\d{6})\.pkl$")


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


def analyze_folder(outputs: str, window: int, bottom_fraction: float, tail_tokens: int) -> tuple[list, float, float]:
    """Every valid trace's measures, files in question order, and the seconds spent loading and measuring."""
    names = sorted((name for name in os.listdir(outputs) if OFFLINE_NAME.match(name)),
                   key=lambda name: int(OFFLINE_NAME.match(name).group(1)))  # type: ignore[union-attr]
    results, loading, measuring = [], 0.0, 0.0
    for name in names:
        start = time.perf_counter()
        with open(os.path.join(outputs, name), "rb") as f:
            data = pickle.load(f)
        middle = time.perf_counter()
        valid = [trace for trace in data.get("all_traces", []) if trace.get("extracted_answer")]
        results += [trace_measures(trace["confs"], window, bottom_fraction, tail_tokens) for trace in valid]
        loading, measuring = loading + middle - start, measuring + time.perf_counter() - middle
        del data
    return results, loading, measuring


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--outputs", required=True, help="the folder of deepconf_simple_*.pkl files")
    parser.add_argument("--out", required=True, help="the measures, [traces, 4], as .npy")
    parser.add_argument("--window", type=int, default=2048)
    parser.add_argument("--bottom-fraction", type=float, default=0.1)
    parser.add_argument("--tail", type=int, default=2048)
    args = parser.parse_args()
    results, loading, measuring = analyze_folder(args.outputs, args.window, args.bottom_fraction, args.tail)
    np.save(args.out, np.array(results, dtype=np.float64).reshape(-1, 4))
    print(json.dumps({"traces": len(results), "load_s": loading, "measure_s": measuring}))


if __name__ == "__main__":
    main()
