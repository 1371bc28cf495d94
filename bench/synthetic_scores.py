"""A synthetic score table and stop table at any scale, as the score stage writes them (SYNTHETIC: no model).

Unlike bench_aggregate's tables, the measures and the stop table come from simulated per-token
confidences, so the stop table has the density the score stage gives: every trace of at least a window
keeps all its record lows (running minima of its window means), pruned as score prunes them
(StopProfiles.within over the problem's finite `lowest`).

Token confidence model, per trace: a level (higher for correct answers), a slow random walk, and
per-token noise; lengths log-normal around ~3,000 tokens.

    python -m bench.synthetic_scores --problems 30 --samples 4096 --out /tmp/synth
writes /tmp/synth/scores.parquet and /tmp/synth/stops.parquet.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from tracevote.core.config_deepconf import MEASURES
from tracevote.core.parquet import write_parquet
from tracevote.deepconf.confidence import StopProfiles
from tracevote.deepconf.score import SCORE_COLUMNS, STOP_COLUMNS

GROUP_SIZE = 2048  # params.yaml confidence.group_size
TAIL_TOKENS = 2048
BOTTOM_FRACTION = 0.10
CHUNK = 256  # traces simulated at once: bounds the padded token matrix
DRIFT = 0.005  # per-token step of the random walk: ~55 records per trace (the simulator's 30 x 96 pool: ~37)
PAPER_POOL_DRIFT = 0.03  # ~190 records per trace, as bench_paper's synthetic pool gives the score stage


@dataclass(frozen=True)
class Measures:
    """avg, bottom10, lowest, tail per trace (MEASURES order), and the records of each trace."""

    values: np.ndarray  # float64 [4, traces]
    stops: StopProfiles


def token_confidences(lengths: np.ndarray, levels: np.ndarray, rng: np.random.Generator,
                      drift_step: float = DRIFT) -> np.ndarray:
    """float64 [traces, max length], NaN past each trace's end."""
    width = int(lengths.max())
    drift = np.cumsum(rng.normal(0.0, drift_step, (len(lengths), width)), axis=1)
    values = levels[:, None] + drift + rng.normal(0.0, 2.5, (len(lengths), width))
    values[np.arange(width)[None, :] >= lengths[:, None]] = np.nan
    return values


def window_measures(tokens: np.ndarray, lengths: np.ndarray) -> Measures:
    """The score stage's four measures and record lows of each row of `tokens` (see deepconf.confidence)."""
    prefix = np.concatenate((np.zeros((len(tokens), 1)), np.nancumsum(tokens, axis=1)), axis=1)
    rows = np.arange(len(tokens))
    window = np.minimum(GROUP_SIZE, lengths)
    n_groups = lengths - window + 1
    starts = np.arange(tokens.shape[1])[None, :]
    in_trace = starts < n_groups[:, None]
    ends = np.minimum(starts + window[:, None], tokens.shape[1])
    groups = np.where(in_trace, (np.take_along_axis(prefix, ends, axis=1) - prefix[:, :-1]) / window[:, None], np.inf)
    ordered = np.sort(groups, axis=1)
    bottom = np.maximum(1, (n_groups * BOTTOM_FRACTION).astype(np.int64))
    bottom10 = np.cumsum(ordered, axis=1)[rows, bottom - 1] / bottom
    tail_width = np.minimum(TAIL_TOKENS, lengths)
    tail = (prefix[rows, lengths] - prefix[rows, lengths - tail_width]) / tail_width
    values = np.stack([prefix[rows, lengths] / lengths, bottom10, ordered[:, 0], tail])
    return Measures(values=values, stops=_records(groups, lengths >= GROUP_SIZE))


def _records(groups: np.ndarray, full: np.ndarray) -> StopProfiles:
    """Record lows of the full-window rows of `groups` (+inf past each row's last window)."""
    running = np.minimum.accumulate(groups, axis=1)
    record = np.isfinite(groups) & full[:, None]
    record[:, 1:] &= groups[:, 1:] < running[:, :-1]
    trace, start = np.nonzero(record)
    counts = np.bincount(trace, minlength=len(groups))
    return StopProfiles(offsets=np.concatenate(([0], np.cumsum(counts))).astype(np.int64),
                        spent=(start + GROUP_SIZE).astype(np.int64), value=groups[trace, start])


def problem_tables(problem_id: str, n: int, rng: np.random.Generator,
                   drift: float = DRIFT) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One problem's score rows (SCORE_COLUMNS) and stop rows (STOP_COLUMNS)."""
    gold = int(rng.integers(0, 1000))
    distractors = rng.integers(0, 1000, 6)
    weights = 1.0 / np.arange(1, 7)
    answers = np.where(rng.random(n) < rng.beta(2, 2), gold, rng.choice(distractors, n, p=weights / weights.sum()))
    valid = rng.random(n) >= 0.03
    correct = valid & (answers == gold)
    lengths = np.clip(rng.lognormal(np.log(3000), 0.45, n), 64, 16000).astype(np.int64)
    levels = rng.normal(12.0, 1.0, n) + 0.8 * correct
    parts = [window_measures(token_confidences(lengths[a:a + CHUNK], levels[a:a + CHUNK], rng, drift),
                             lengths[a:a + CHUNK])
             for a in range(0, n, CHUNK)]
    values = np.concatenate([p.values for p in parts], axis=1)
    values[:, rng.random(n) < 0.002] = np.nan  # a trace without any confident token
    stops = _without_nan(StopProfiles.concatenate([p.stops for p in parts]), np.isnan(values[2]))
    finite = values[2][np.isfinite(values[2])]
    stops = stops.within(finite.min(), finite.max())
    scores = pd.DataFrame({
        "problem_id": pd.Series([problem_id] * n, dtype=str), "sample_id": np.arange(n, dtype=np.int64),
        "answer": pd.array(np.where(valid, answers, 0), dtype="Int64"), "answer_source":
        pd.Series(np.where(valid, "boxed", "none"), dtype=str), "correct": correct, "valid": valid,
        "n_tokens": lengths, "finish_reason": pd.Series(np.where(valid, "stop", "length"), dtype=str),
        **{m: values[i] for i, m in enumerate(MEASURES)}}, columns=list(SCORE_COLUMNS))
    scores.loc[~valid, "answer"] = pd.NA
    per_trace = np.diff(stops.offsets)
    stop_rows = pd.DataFrame({"problem_id": pd.Series([problem_id] * len(stops.spent), dtype=str),
                              "sample_id": np.repeat(np.arange(n, dtype=np.int64), per_trace),
                              "spent": stops.spent, "value": stops.value}, columns=list(STOP_COLUMNS))
    return scores, stop_rows


def _without_nan(stops: StopProfiles, dropped: np.ndarray) -> StopProfiles:
    """`stops` with no records for the traces in `dropped` (bool [traces])."""
    counts = np.where(dropped, 0, np.diff(stops.offsets))
    keep = np.repeat(~dropped, np.diff(stops.offsets))
    return StopProfiles(offsets=np.concatenate(([0], np.cumsum(counts))).astype(np.int64),
                        spent=stops.spent[keep], value=stops.value[keep])


def synthetic_tables(problems: int, samples: int, seed: int = 0,
                     drift: float = DRIFT) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The score table and stop table of `problems` x `samples` synthetic traces."""
    rng = np.random.default_rng(seed)
    tables = [problem_tables(f"synth-{p:02d}", samples, rng, drift) for p in range(problems)]
    return (pd.concat([t[0] for t in tables], ignore_index=True),
            pd.concat([t[1] for t in tables], ignore_index=True))


def write_tables(out: Path, problems: int, samples: int, seed: int = 0, drift: float = DRIFT) -> tuple[Path, Path]:
    """Write scores.parquet and stops.parquet under `out` (as the score stage writes them, one row group
    per problem); returns their paths."""
    scores, stops = synthetic_tables(problems, samples, seed, drift)
    out.mkdir(parents=True, exist_ok=True)
    metadata = {"simulated": "true", "pool": "synthetic", "model": "synthetic", "group_size": str(GROUP_SIZE)}
    paths = out / "scores.parquet", out / "stops.parquet"
    for path, table in zip(paths, (scores, stops), strict=True):
        write_parquet(path, (rows for _, rows in table.groupby("problem_id", sort=False)), metadata)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", type=int, default=30)
    parser.add_argument("--samples", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--drift", type=float, default=DRIFT,
                        help=f"per-token step of the confidence walk: more drift, more record lows ({DRIFT}: ~55 "
                             f"per trace; {PAPER_POOL_DRIFT}: ~190, the density of bench_paper's pool)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    scores, stops = write_tables(args.out, args.problems, args.samples, args.seed, args.drift)
    table = pd.read_parquet(stops, columns=["sample_id"])
    print(f"{scores}: {args.problems} x {args.samples} samples; {stops}: {len(table)} stop records "
          f"({len(table) / (args.problems * args.samples):.1f} per trace)")


if __name__ == "__main__":
    main()
