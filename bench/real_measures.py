"""Which token confidence tells the real model's right traces from its wrong ones, computed without tracevote.

    .venv/bin/python -m bench.real_measures --real real     # the pool `make real` left in real/
    .venv/bin/python -m bench.real_measures --pool pool.jsonl   # or a `pool export` of EXPORT_FIELDS

Reads the pool's JSON-lines export (--real runs the project's `pool export` in that project, a separate process)
and the held-out problems (their gold answers and texts) with numpy and pandas only, so every figure
docs/real-model.md quotes is checked by code that shares nothing with the score, aggregate and report stages.
For each token signal (DeepConf's C_i = minus the mean of the top-k logprobs at several k, the
chosen token's logprob, minus the entropy of the top-20, not renormalized), it computes DeepConf's four trace measures
(avg, bottom10, lowest, tail: confidence.group_size, bottom_fraction and tail_tokens as given), and prints:
- the AUROC of right against wrong traces, within problems (the mean over problems with both) and pooled;
- the votes on the whole pool (K = the traces per problem): weighted, top-10% and top-90% against Cons@K (a
  logprob or minus an entropy weighs a vote as its exp, which keeps the order: weights must be positive);
- what makes up DeepConf's C_i at k = 20: the best, chosen and tail entries' logprobs and each part's spread;
- the tokens sampled off the best entry, in right and in wrong traces;
- Pass@1 and Cons@K by the problems' distractor sentences (the training problems had 0 or 1).
The pool keeps DeepConf's C_i (float32) and the top-k quantised (tracevote.store.logprobs.TOP_STEP): with
`token_confidence` exported, DeepConf's k = 20 is the C_i the score stage reads (its figures are the report's), and
every other signal comes from the kept top-k, as the stages' own would.
Ties go to the smallest answer (eval.tie_break: smallest); a trace without an answer casts no vote and is wrong.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson
import pandas as pd

HELDOUT = Path("src/tracevote/datasets/data/tinymath_heldout.jsonl")
MEASURES = ("avg", "bottom10", "lowest", "tail")
TOP_K = 20
EXPORT_FIELDS = "problem_id,sample_id,answer,token_logprobs,top_logprobs,token_confidence"
ETAS = (0.1, 0.9)
SENTENCE_END = re.compile(r"(?<=[.?])\s+")


@dataclass(frozen=True)
class Window:
    group_size: int
    bottom_fraction: float
    tail_tokens: int


@dataclass(frozen=True)
class Trace:
    problem_id: str
    answer: int | None
    chosen: np.ndarray  # float64 [tokens]: the sampled token's logprob
    top: np.ndarray  # float64 [tokens, TOP_K]: the top-k logprobs, best first, NaN where absent
    stored: np.ndarray | None  # float64 [tokens]: the pool's own C_i, when exported


def read_pool(path: Path) -> list[Trace]:
    return parse_pool(path.read_bytes())


def parse_pool(export: bytes) -> list[Trace]:
    """The traces of a `pool export` (one JSON object a line)."""
    traces = []
    for line in export.splitlines():
        row = orjson.loads(line)
        top = np.full((len(row["top_logprobs"]), TOP_K), np.nan)
        for i, entries in enumerate(row["top_logprobs"]):
            values = [np.nan if v is None or v <= -9999 else v for v in entries[:TOP_K]]
            top[i, :len(values)] = values
        chosen = np.array([np.nan if v is None else v for v in row["token_logprobs"]], dtype=np.float64)
        stored = row.get("token_confidence")
        stored = None if stored is None else np.array([np.nan if v is None else v for v in stored], dtype=np.float64)
        traces.append(Trace(row["problem_id"], row["answer"], chosen, top, stored))
    return traces


def read_heldout(path: Path) -> pd.DataFrame:
    """Per problem: its gold answer, and its distractor sentences (the story's sentences that are no step)."""
    rows = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    return pd.DataFrame({
        "problem_id": [row["id"] for row in rows],
        "gold": [row["answer"] for row in rows],
        "distractors": [len([s for s in SENTENCE_END.split(row["problem"]) if not s.endswith("?")]) - len(row["steps"])
                        for row in rows]}).set_index("problem_id")


def deepconf(k: int) -> Callable[[Trace], np.ndarray]:
    """C_i = minus the mean of the present entries among the first k of the top-k."""
    return lambda trace: -np.nanmean(trace.top[:, :k], axis=1)


def stored_or_top(trace: Trace) -> np.ndarray:
    """DeepConf's C_i at k = 20: the pool's own when exported, else from the kept top-20."""
    return deepconf(TOP_K)(trace) if trace.stored is None else trace.stored


def chosen(trace: Trace) -> np.ndarray:
    return trace.chosen


def minus_entropy(trace: Trace) -> np.ndarray:
    """Minus the entropy (nats) of the top-20 entries, sum of p log p over them, not renormalized: each term is one
    of the full vocabulary's entropy, so this is a lower bound of minus the whole entropy."""
    present = ~np.isnan(trace.top)
    terms = np.where(present, np.exp(np.where(present, trace.top, 0.0)) * np.where(present, trace.top, 0.0), 0.0)
    return np.where(present.any(axis=1), terms.sum(axis=1), np.nan)


SIGNALS: dict[str, Callable[[Trace], np.ndarray]] = {
    "deepconf k=20": stored_or_top, "deepconf k=10": deepconf(10), "deepconf k=5": deepconf(5),
    "deepconf k=2": deepconf(2), "deepconf k=1": deepconf(1), "chosen": chosen, "entropy k=20": minus_entropy}
# weights of a weighted vote must be positive: a logprob or minus an entropy votes as its exp (same order)
POSITIVE: dict[str, Callable[[np.ndarray], np.ndarray]] = {"chosen": np.exp, "entropy k=20": np.exp}


def trace_measures(confidence: np.ndarray, window: Window) -> dict[str, float]:
    """DeepConf's avg, bottom10, lowest and tail of one trace's C_i (tokens without one dropped)."""
    c = confidence[~np.isnan(confidence)]
    if len(c) == 0:
        return dict.fromkeys(MEASURES, np.nan)
    width = min(window.group_size, len(c))  # a trace shorter than a window has one group: all its tokens
    sums = np.cumsum(np.concatenate(([0.0], c)))
    groups = (sums[width:] - sums[:-width]) / width
    kept = max(1, int(len(groups) * window.bottom_fraction))
    return {"avg": float(c.mean()), "bottom10": float(np.sort(groups)[:kept].mean()), "lowest": float(groups.min()),
            "tail": float(c[-window.tail_tokens:].mean())}


def measure_table(traces: list[Trace], heldout: pd.DataFrame, window: Window) -> pd.DataFrame:
    """One row per trace: problem, answer, correct, and every signal's four measures."""
    table = pd.DataFrame({"problem_id": [t.problem_id for t in traces],
                          "answer": [-1 if t.answer is None else int(t.answer) for t in traces]})
    table["correct"] = table["answer"].to_numpy() == heldout.loc[table["problem_id"], "gold"].to_numpy()
    for name, signal in SIGNALS.items():
        rows = pd.DataFrame([trace_measures(signal(trace), window) for trace in traces])
        for measure in MEASURES:
            table[f"{name}|{measure}"] = rows[measure].to_numpy()
    return table


def auroc(scores: np.ndarray, positive: np.ndarray) -> float | None:
    """P(a right trace scores above a wrong one), ties 1/2; None without both classes."""
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if n_pos == 0 or n_neg == 0:
        return None
    ranks = pd.Series(scores).rank(method="average").to_numpy()
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def aurocs(table: pd.DataFrame, column: str) -> tuple[float, int, float]:
    """(mean within-problem AUROC, problems with both classes, pooled AUROC) over answered traces."""
    rows = table[(table["answer"] >= 0) & np.isfinite(table[column])]
    within = [a for _, group in rows.groupby("problem_id")
              if (a := auroc(group[column].to_numpy(), group["correct"].to_numpy())) is not None]
    pooled = auroc(rows[column].to_numpy(), rows["correct"].to_numpy())
    return float(np.mean(within)), len(within), float("nan") if pooled is None else pooled


def vote(answers: np.ndarray, weights: np.ndarray) -> int:
    """The answer with the largest total weight among answered traces with a weight; ties: the smallest."""
    voting = (answers >= 0) & ~np.isnan(weights)
    if not voting.any():
        return -1
    totals = pd.Series(weights[voting]).groupby(answers[voting]).sum()
    return int(totals.index[totals.to_numpy() == totals.max()].min())


def accuracy(table: pd.DataFrame, heldout: pd.DataFrame, column: str | None, eta: float | None) -> float:
    """Accuracy over problems of the vote on each problem's whole pool: Cons (column None), weighted by the
    column, or weighted among the top eta by it (weight >= the 100(1-eta) percentile, ties kept)."""
    right = []
    for problem_id, group in table.groupby("problem_id"):
        answers = group["answer"].to_numpy()
        weights = np.ones(len(group)) if column is None else group[column].to_numpy().copy()
        if column is not None and column.split("|")[0] in POSITIVE:
            weights = POSITIVE[column.split("|")[0]](weights)
        if eta is not None:
            cutoff = np.percentile(weights[~np.isnan(weights)], 100 * (1 - eta))
            weights = np.where(weights >= cutoff, weights, np.nan)
        right.append(vote(answers, weights) == heldout.loc[problem_id, "gold"])
    return 100 * float(np.mean(right))


def print_aurocs(table: pd.DataFrame) -> None:
    print("AUROC, right vs wrong traces: within problems (mean over problems with both) | pooled")
    print(f"  {'signal':<14}" + "".join(f"{m:>21}" for m in MEASURES))
    for name in SIGNALS:
        cells = []
        for measure in MEASURES:
            within, problems, pooled = aurocs(table, f"{name}|{measure}")
            cells.append(f"{within:.3f} ({problems}) | {pooled:.3f}")
        print(f"  {name:<14}" + "".join(f"{cell:>21}" for cell in cells))


def print_votes(table: pd.DataFrame, heldout: pd.DataFrame, k: int) -> None:
    cons = accuracy(table, heldout, None, None)
    pass1 = 100 * float(table["correct"].mean())
    print(f"\nVotes on the whole pool, K = {k} (accuracy %, {table['problem_id'].nunique()} problems): "
          f"Pass@1 {pass1:.2f}, Cons@{k} {cons:.2f}")
    print(f"  {'signal':<14} {'measure':<9} {'weighted':>9} {'top-10%':>9} {'top-90%':>9}")
    for name in SIGNALS:
        for measure in MEASURES:
            column = f"{name}|{measure}"
            cells = [accuracy(table, heldout, column, eta) for eta in (None, *ETAS)]
            print(f"  {name:<14} {measure:<9}" + "".join(f"{cell:>9.2f}" for cell in cells))


def print_tail(traces: list[Trace]) -> None:
    """What DeepConf's C_i at k = 20 is made of, over every token of the pool with 20 entries."""
    top = np.concatenate([t.top for t in traces])
    chosen_lp = np.concatenate([t.chosen for t in traces])
    full = ~np.isnan(top).any(axis=1)
    top, chosen_lp = top[full], chosen_lp[full]
    head, tail = -top[:, 0] / TOP_K, -top[:, 1:].sum(axis=1) / TOP_K
    print(f"\nDeepConf's C_i at k = {TOP_K} over {len(top):,} tokens with {TOP_K} entries "
          f"({int((~full).sum())} with fewer left out): logprobs, p10 / median / p90")
    for label, values in (("best entry (rank 1)", top[:, 0]), ("chosen token", chosen_lp), ("rank 2", top[:, 1]),
                          ("ranks 2-20", top[:, 1:].ravel()), ("rank 20", top[:, -1])):
        print(f"  {label:<20}" + " / ".join(f"{v:9.4f}" for v in np.percentile(values, [10, 50, 90])))
    print(f"  C_i median {np.median(head + tail):.3f}: the best entry's part median {np.median(head):.5f}, "
          f"ranks 2-20's {np.median(tail):.3f}")
    print(f"  std over tokens: rank 1's part {np.std(head):.4f}, ranks 2-20's part {np.std(tail):.3f}")


def off_best_picks(trace: Trace) -> int:
    """Tokens where the sampler took another token than the best entry (the chosen logprob below the best)."""
    return int((trace.chosen < trace.top[:, 0]).sum())


def print_picks(traces: list[Trace], table: pd.DataFrame) -> None:
    """Where the signal is: the tokens sampled off the best entry, in right and in wrong traces."""
    table = table.assign(picks=[-off_best_picks(t) for t in traces], tokens=[len(t.chosen) for t in traces])
    answered = table[table["answer"] >= 0]
    print("\nTokens sampled off the best entry (chosen logprob below the best one's)")
    for label, rows in (("right", answered[answered["correct"]]), ("wrong", answered[~answered["correct"]])):
        print(f"  {label} traces {len(rows):>5}: {-rows['picks'].sum() / rows['tokens'].sum() * 100:.2f}% of tokens, "
              f"{-rows['picks'].mean():.2f} a trace, {100 * (rows['picks'] < 0).mean():.1f}% of traces have one")
    within, problems, pooled = aurocs(table, "picks")
    print(f"  AUROC of minus that count: within {within:.3f} ({problems}) | pooled {pooled:.3f}")


def print_distractors(table: pd.DataFrame, heldout: pd.DataFrame) -> None:
    print("\nBy distractor sentences (training: 0 or 1)")
    print(f"  {'distractors':>11} {'problems':>9} {'Pass@1':>8} {'Cons':>8}")
    answered = table.groupby("problem_id")["correct"].mean()
    for count, problems in heldout.groupby("distractors"):
        ids = problems.index.intersection(answered.index)
        rows = table[table["problem_id"].isin(ids)]
        cons = accuracy(rows, heldout, None, None) if len(rows) else float("nan")
        print(f"  {count:>11} {len(ids):>9} {100 * answered.loc[ids].mean():>8.2f} {cons:>8.2f}")


def exported(project: Path) -> list[Trace]:
    """The traces of `project`'s pool, through its own `pool export` run in that folder."""
    with tempfile.TemporaryFile() as out:
        subprocess.run([sys.executable, "-m", "tracevote", "pool", "export", "--quiet", "--fields", EXPORT_FIELDS],
                       cwd=project, stdout=out, check=True)
        out.seek(0)
        return parse_pool(out.read())


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--pool", type=Path, help=f"the pool's `pool export --fields {EXPORT_FIELDS}`")
    source.add_argument("--real", type=Path, help="the scratch project of `make real` (its pool exported here)")
    parser.add_argument("--heldout", type=Path, default=HELDOUT, help=f"the problems (default: {HELDOUT})")
    parser.add_argument("--group-size", type=int, default=16, help="confidence.group_size (make real's: 16)")
    parser.add_argument("--tail-tokens", type=int, default=16, help="confidence.tail_tokens (make real's: 16)")
    parser.add_argument("--bottom-fraction", type=float, default=0.1, help="confidence.bottom_fraction")
    args = parser.parse_args(argv)
    traces, heldout = read_pool(args.pool) if args.pool else exported(args.real), read_heldout(args.heldout)
    unknown = sorted({t.problem_id for t in traces} - set(heldout.index))
    if unknown:
        print(f"error: {args.pool or args.real}: problem {unknown[0]!r} is not in {args.heldout}", file=sys.stderr)
        return 2
    table = measure_table(traces, heldout, Window(args.group_size, args.bottom_fraction, args.tail_tokens))
    k = int(table.groupby("problem_id").size().max())
    print(f"{len(traces):,} traces of {table['problem_id'].nunique()} problems; windows of {args.group_size} tokens, "
          f"tail {args.tail_tokens}, bottom {args.bottom_fraction:g}")
    print_aurocs(table)
    print_votes(table, heldout, k)
    print_tail(traces)
    print_picks(traces, table)
    print_distractors(table, heldout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
