"""Parse one long reply as the user's process does (one whole process each), for several source trees, interleaved.

Issue 46 weighed ingest's compiled loops (numba) against msgspec's typed decoding on the figure a user waits for: a
64k-token reply with top-20. Each run is a fresh process that imports tracevote from its tree, reads the reply from
disk and parses it with `parse_completion` `--parses` times; it reports the CPU of the first parse (imports the
parse pulls in, numba's included) and of the later ones (per reply, once loaded), and the whole process's wall and
CPU seconds are measured around it. Each tree runs once untimed first (numba compiles its loops into its cache on
first use). Every tree's stored arrays must be identical, bit for bit.

    git archive cfc8a17 src | tar -x -C /tmp/base   # the tree before the compiled loops left ingest
    python -m bench.interleave_ingest --tree kernels=/tmp/base/src --tree msgspec=src --tokens 65536 --repeat 7
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from bench.bench_ingest import sim_bodies
from bench.measure import Run, Spread, interleaved, run_process

ONE_PROCESS = """
import hashlib, json, sys, time
body = open(sys.argv[1], "rb").read()
from tracevote.sampling.ingest import parse_completion
cpu = []
for _ in range(int(sys.argv[2])):
    started = time.process_time()
    sample = parse_completion(body, problem_id="p", sample_id=0, latency_s=0.0, keep_top_logprobs=True,
                              expect_top_logprobs=20)
    cpu.append(time.process_time() - started)
arrays = (sample.token_logprobs, sample.token_confidence, sample.top_logprobs)
digest = hashlib.sha256(b"".join(a.tobytes() for a in arrays) + "\\0".join(sample.tokens).encode()).hexdigest()
print(json.dumps({"cpu": cpu, "digest": digest}))
"""


def run_once(src: Path, reply: Path, parses: int) -> Run:
    return run_process([sys.executable, "-c", ONE_PROCESS, str(reply), str(parses)], reply.parent,
                       {**os.environ, "PYTHONPATH": str(src)})


def summary(values: list[float], scale: float = 1.0) -> str:
    return Spread.of([v * scale for v in values]).show(".3g")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", action="append", required=True, help="name=path of a tree's src folder")
    parser.add_argument("--tokens", type=int, default=65536, help="the reply's tokens (top-20 each)")
    parser.add_argument("--parses", type=int, default=3, help="parses of the reply in each process")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    trees = {name: Path(path).resolve() for name, path in (t.split("=", 1) for t in args.tree)}
    with tempfile.TemporaryDirectory() as tmp:
        reply = Path(tmp) / "reply.json"
        reply.write_bytes(sim_bodies(1, args.tokens)[0])
        print(f"one {args.tokens}-token reply, top-20, {reply.stat().st_size / 1e6:.0f} MB; {args.parses} parses a "
              f"process; load average at start: {os.getloadavg()}")
        for src in trees.values():
            run_once(src, reply, 1)  # untimed: numba's first compile, the page cache
        times = interleaved({name: (lambda src=src: run_once(src, reply, args.parses)) for name, src in trees.items()},
                            args.repeat)
    print(f"load average at end:   {os.getloadavg()}")
    reports = {name: [json.loads(run.output) for run in runs] for name, runs in times.items()}
    digests = {report["digest"] for runs in reports.values() for report in runs}
    for name, runs in times.items():
        first = [report["cpu"][0] for report in reports[name]]
        later = [cpu for report in reports[name] for cpu in report["cpu"][1:]]
        wall, cpu = summary([r.wall for r in runs]), summary([r.cpu for r in runs])
        print(f"{name:>10}: whole process wall {wall} s, CPU {cpu} s; first parse {summary(first, 1000)} CPU ms"
              + (f", each later {summary(later, 1000)} CPU ms" if later else ""))
    print(f"stored arrays identical in every tree and run: {len(digests) == 1}")


if __name__ == "__main__":
    main()
