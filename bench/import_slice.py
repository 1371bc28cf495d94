"""Import a slice of a paper-scale pool from disk, as `pool import` does, and scale it to 30 x 4,096 traces.

Issue 46 weighed hand-written fast paths against the libraries on what a user waits for; importing a pool is one.
Neither importer has a compiled loop: the interchange JSONL is read with orjson and numpy (store.interchange, every
line twice: checked whole first, then stored), the official DeepConf pickles with pickle and numpy
(store.deepconf_pickle). A whole 30 x 4,096-trace pool with top-20 would be ~170 GB of JSONL, too much for this
machine, so one problem's `--traces` (SYNTHETIC, bench.synthetic_pool's draws, ~`--tokens` each) are written once
and imported into fresh pools, interleaved with the parse alone and with msgspec's typed decoding of the same lines
(the other library path), CPU beside wall; the last column scales each side's CPU rate to 30 x 4,096 x `--tokens`.

    python -m bench.import_slice --traces 64 --tokens 3000 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import msgspec
import numpy as np
import orjson

from bench.bench_stage import official_trace, write_pickle
from bench.measure import Spread, interleaved, timed
from bench.synthetic_pool import PoolShape, draw_problem, samples
from tracevote.core.config import load_params
from tracevote.datasets.problems import Problem
from tracevote.sampling.prompts import setting_messages
from tracevote.store.deepconf_pickle import import_runs
from tracevote.store.interchange import import_file, numbered_lines, parse_line, to_json_line
from tracevote.store.pool import Pool, Setting

PARAMS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "params.yaml"
PROBLEMS = [Problem("p-1", "What is 3+4?", 7)]
PAPER_TRACES = 30 * 4096


class Line(msgspec.Struct, gc=False):
    """The logprob fields of an interchange line, typed (the rest skipped)."""

    tokens: list[str]
    token_logprobs: list[float | None]
    top_logprobs: list[list[float | None]] | None = None


def write_slice(folder: Path, traces: int, tokens: int) -> tuple[Path, Path, int, int]:
    """(the JSONL with top-20, the pickles' folder, tokens in each)."""
    jsonl = folder / "samples.jsonl"
    draw = draw_problem(0, PoolShape(1, traces, tokens, 20))
    with jsonl.open("wb") as out:
        for sample in samples("p-1", draw):
            out.write(to_json_line(sample, simulated=False))
    confidence_only = draw_problem(0, PoolShape(1, traces, tokens, 0))
    write_pickle(folder / "outputs", 0, 7, [official_trace(s) for s in samples("p-1", confidence_only)])
    return jsonl, folder / "outputs", int(draw.offsets[-1]), int(confidence_only.offsets[-1])


def sides(folder: Path, jsonl: Path, pickles: Path) -> dict[str, Callable[[], object]]:
    setting = Setting.from_params(load_params(PARAMS))
    opened: list[Pool] = []

    def fresh_pool() -> Pool:
        pool = Pool.open_or_create(folder / f"pools{len(opened)}", setting, simulated=False)
        pool.register(setting_messages(PROBLEMS, setting))
        opened.append(pool)
        return pool

    def imported(keep_top_logprobs: bool) -> None:
        import_file(jsonl, fresh_pool(), PROBLEMS, keep_top_logprobs=keep_top_logprobs, n_pool=None)
        shutil.rmtree(opened[-1].root)

    def pickles_imported() -> None:
        import_runs(pickles, fresh_pool, PROBLEMS, n_pool=None)
        shutil.rmtree(opened[-1].root)

    decoder = msgspec.json.Decoder(Line)
    return {
        "JSONL import, top-20 kept": lambda: imported(True),
        "JSONL import, confidence only": lambda: imported(False),
        "JSONL parse_line alone": lambda: [parse_line(line, "x") for _, line in numbered_lines(jsonl)],
        "JSONL orjson + arrays": lambda: [_arrays(orjson.loads(line)) for _, line in numbered_lines(jsonl)],
        "JSONL msgspec typed + arrays": lambda: [_arrays(msgspec.structs.asdict(decoder.decode(line)))
                                                 for _, line in numbered_lines(jsonl)],
        "pickle import (official runs)": pickles_imported,
    }


def _arrays(record: dict) -> tuple[np.ndarray, np.ndarray]:
    return np.array(record["token_logprobs"], dtype=np.float64), np.array(record["top_logprobs"], dtype=np.float64)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=3000, help="mean tokens a trace")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        jsonl, pickles, tokens, pickle_tokens = write_slice(folder, args.traces, args.tokens)
        pickle_bytes = sum(path.stat().st_size for path in pickles.iterdir())
        print(f"SYNTHETIC slice: 1 problem x {args.traces} traces; JSONL with top-20 {jsonl.stat().st_size / 1e6:.0f} "
              f"MB, {tokens} tokens; pickles {pickle_bytes / 1e6:.0f} MB, {pickle_tokens} tokens; load average at "
              f"start: {os.getloadavg()}")
        runs = interleaved({name: (lambda side=side: timed(side)) for name, side in sides(folder, jsonl,
                                                                                          pickles).items()},
                           args.repeat)
    print(f"load average at end: {os.getloadavg()}")
    for name, side_runs in runs.items():
        slice_tokens = pickle_tokens if name.startswith("pickle") else tokens
        cpu = [run.cpu for run in side_runs]
        paper_minutes = PAPER_TRACES * args.tokens / (slice_tokens / float(np.median(cpu))) / 60
        print(f"{name:32s} wall {Spread.of([r.wall for r in side_runs]).show('.2f')} s, CPU "
              f"{Spread.of(cpu).show('.2f')} s: {slice_tokens / np.median(cpu) / 1e6:.2f} M tokens/CPU-s, "
              f"30 x 4,096 x {args.tokens} tokens ~{paper_minutes:.0f} CPU-min")


if __name__ == "__main__":
    main()
