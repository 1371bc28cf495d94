"""Benchmark: the explorer at paper scale MEASURED, trace pages included (SYNTHETIC pool: no model).

Set-up, outside the timing: bench.synthetic_pool writes a pool of --problems x --traces (default 30 x 4,096, the
paper's) of ~--tokens tokens (default 3,000; log-normal lengths around it) with the top-20 logprobs the committed
params keep (pool.keep_top_logprobs: true; their strings are not kept, pool.keep_top_tokens: false), then the score
and aggregate stages' own scripts make its score, stop table and aggregate (bench.bench_paper's commands, the
committed defaults: K up to 512, 64 working sets). view.trace_pages stays at its default, so each problem's most and
least confident traces get a trace page. Free disk is checked first (top-20 at paper scale is ~16 GB).

Then, timed:
- build: `python -m tracevote view` in the project, a whole process, wall and CPU seconds (process + children);
- the site: its size, its number of files, its largest file;
- in headless Chromium (Debian's, the network cut), per round in a fresh context: the first page (#/pool/0 until its
  table is drawn, by the page's own clock), a problem page of --traces traces (from the index until its table is
  drawn), and a trace page (from the problem page, the link of its longest trace with a page, until it is drawn) and
  then one of its tokens' alternatives (a click until they show: the chunk's alternatives loaded and inflated).

    python bench/explorer_paper.py --work /tmp/explorer-paper              # paper scale (~40 min of set-up)
    python bench/explorer_paper.py --work /tmp/explorer-paper --reuse      # time the project a run left there
    python bench/explorer_paper.py --work /tmp/ep --problems 2 --traces 256 --tokens 300 --rounds 1   # quick
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: `python bench/explorer_paper.py`
    sys.path.insert(0, str(ROOT))

from bench.bench_paper import HEADROOM, commands, estimated_bytes, paper_params  # noqa: E402
from bench.explorer_build import READY, offline_context, page_times, site_size  # noqa: E402
from bench.measure import Run, run_process, stage_env  # noqa: E402
from bench.synthetic_pool import PoolShape, write_workspace  # noqa: E402
from tracevote.explorer.sitefiles import read_data  # noqa: E402

TOP_K = 20
TIMEOUT_MS = 300_000


def set_up(work: Path, shape: PoolShape, workers: int) -> None:
    """The pool, its score and stop tables and its aggregate; SystemExit when the disk lacks room."""
    work.mkdir(parents=True, exist_ok=True)
    need, free = estimated_bytes(shape) + HEADROOM, shutil.disk_usage(work).free
    if free < need:
        raise SystemExit(f"explorer_paper refused: the pool needs ~{need / 2**30:.1f} GiB in {work}, only "
                         f"{free / 2**30:.1f} GiB free; nothing was written")
    started = time.perf_counter()
    workspace = write_workspace(work, shape, paper_params(), workers=workers)
    pool_bytes = site_size(workspace.pool_root)[0]
    print(f"set-up: pool written ({pool_bytes / 1e9:.1f} GB), {time.perf_counter() - started:.0f} s", flush=True)
    for stage in ("score", "aggregate"):
        done = run_process(commands(workspace)[stage], work, stage_env())
        print(f"set-up: {stage}, {done.wall:.0f} s", flush=True)


def build(work: Path) -> Run:
    return run_process([sys.executable, "-m", "tracevote", "view"], work, stage_env())


def trace_page_times(site: Path, problem: int) -> tuple[float, float, int, int]:
    """(ms from the problem page's link to the trace page drawn, ms from a token's click to its alternatives shown,
    the trace's sample id, its tokens), in a fresh offline context: the problem's longest trace with a page."""
    sample_id, tokens = longest_with_page(site, problem)
    with offline_context(viewport={"width": 1400, "height": 900}) as context:
        page = context.new_page()
        page.goto((site / "index.html").as_uri() + f"#/pool/0/p/{problem}")
        page.wait_for_selector(READY + " [data-problem-text]", timeout=TIMEOUT_MS)
        started = time.perf_counter()
        page.evaluate("hash => { location.hash = hash; }", f"#/pool/0/p/{problem}/t/{sample_id}")
        page.wait_for_selector(".tv-tok", timeout=TIMEOUT_MS)
        page.wait_for_selector(READY, timeout=TIMEOUT_MS)
        drawn = 1000 * (time.perf_counter() - started)
        started = time.perf_counter()
        page.locator(".tv-tok").nth(tokens // 2).click()
        page.wait_for_selector("#tv-token-panel[data-ready='true']", timeout=TIMEOUT_MS)
        opened = 1000 * (time.perf_counter() - started)
    return drawn, opened, sample_id, tokens


def longest_with_page(site: Path, problem: int) -> tuple[int, int]:
    """(sample id, tokens) of the problem's longest trace among those with a trace page, read from the site."""
    page = read_data(site, f"pool0/p{problem}")
    columns = page["traces"]
    subset = page["trace_subset"]
    chosen = set(columns["sample_id"]) if subset is None else set(subset["ids"])
    return max(((n, sample_id) for sample_id, n in zip(columns["sample_id"], columns["n_tokens"], strict=True)
                if sample_id in chosen), key=lambda pair: (pair[0], -pair[1]))[::-1]


def _spread(values: list[float], digits: int = 0) -> str:
    return (f"median {statistics.median(values):.{digits}f} "
            f"(rounds: {', '.join(f'{value:.{digits}f}' for value in values)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, required=True, help="the project's folder (kept; replaced unless --reuse)")
    parser.add_argument("--reuse", action="store_true", help="time the project an earlier run left in --work")
    parser.add_argument("--problems", type=int, default=30)
    parser.add_argument("--traces", type=int, default=4096)
    parser.add_argument("--tokens", type=int, default=3000, help="a trace's median length")
    parser.add_argument("--workers", type=int, default=2, help="processes writing the pool")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    shape = PoolShape(args.problems, args.traces, args.tokens, TOP_K)
    if not (args.reuse and (args.work / "data" / "aggregate").is_dir()):
        shutil.rmtree(args.work, ignore_errors=True)
        set_up(args.work, shape, args.workers)
    site = args.work / "explorer"
    builds = [build(args.work) for _ in range(args.rounds)]
    total, files, largest = site_size(site)
    pages = [trace_page_times(site, 0) for _ in range(args.rounds)]
    firsts, problems = zip(*[page_times(site)[:2] for _ in range(args.rounds)], strict=True)
    print(f"SYNTHETIC pool: {args.problems} problems x {args.traces} traces x ~{args.tokens:,} tokens, top-{TOP_K}; "
          f"pool {site_size(args.work / 'pools')[0] / 1e9:.1f} GB")
    print(f"build (python -m tracevote view): wall {_spread([b.wall for b in builds], 1)} s; "
          f"CPU {_spread([b.cpu for b in builds], 1)} s")
    trace_bytes = sum(site_size(folder)[0] for folder in (site / "data" / "pool0").glob("p*") if folder.is_dir())
    print(f"site: {total / 1e6:.1f} MB in {files} files, the largest {largest / 1e6:.2f} MB; "
          f"the trace pages' files (data/pool0/p<i>/): {trace_bytes / 1e6:.1f} MB")
    print(f"first page (#/pool/0, table drawn): {_spread(list(firsts))} ms")
    print(f"a problem page ({args.traces} traces, table drawn): {_spread(list(problems))} ms")
    sample_id, tokens = pages[0][2], pages[0][3]
    print(f"a trace page (trace {sample_id}, {tokens:,} tokens, drawn from its link): "
          f"{_spread([p[0] for p in pages])} ms; a token's alternatives: {_spread([p[1] for p in pages])} ms")


if __name__ == "__main__":
    main()
