"""A trace page at paper scale: one problem's chunk of 64 simulated traces (SIMULATED; ~3,000 tokens each, top-20,
the alternatives' strings kept, windows of 2,048 tokens), built by the pipeline's stages and the explorer; then, in
headless Chromium (Debian's, the network cut), the time from a trace's link to its page drawn, and from a click on a
token to its alternatives shown (its chunk's alternatives file loaded and inflated), in three rounds.

    python -m bench.explorer_trace_open --work /tmp/trace-open
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from pathlib import Path

from bench.explorer_build import offline_context
from bench.explorer_trace_project import PAPER_CHUNK, build_project
from tracevote.explorer.build import build_site

ROUNDS, TIMEOUT_MS = 3, 120_000


def timed_rounds(site: Path, sample_id: int) -> list[tuple[float, float]]:
    """(ms to draw the trace page, ms to show a token's alternatives) per round, each in a fresh offline browser."""
    times = []
    for _ in range(ROUNDS):
        with offline_context(viewport={"width": 1400, "height": 900}) as context:
            page = context.new_page()
            page.goto((site / "index.html").resolve().as_uri() + "#/pool/0/p/0")
            page.wait_for_selector("#tv-main[data-ready='true']", timeout=TIMEOUT_MS)
            started = time.perf_counter()
            page.evaluate("hash => { location.hash = hash; }", f"#/pool/0/p/0/t/{sample_id}")
            page.wait_for_selector(".tv-tok", timeout=TIMEOUT_MS)
            page.wait_for_selector("#tv-main[data-ready='true']", timeout=TIMEOUT_MS)
            drawn = time.perf_counter() - started
            started = time.perf_counter()
            page.locator(".tv-tok").nth(500).click()
            page.wait_for_selector("#tv-token-panel[data-ready='true']", timeout=TIMEOUT_MS)
            times.append((1000 * drawn, 1000 * (time.perf_counter() - started)))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--work", type=Path, required=True, help="a folder for the project (replaced)")
    work = parser.parse_args().work
    shutil.rmtree(work, ignore_errors=True)
    started = time.perf_counter()
    project = build_project(work, PAPER_CHUNK)
    print(f"SIMULATED project: {time.perf_counter() - started:.1f} s")
    started = time.perf_counter()
    summary = build_site(project.params, project.root, work / "explorer")
    print(f"site: {time.perf_counter() - started:.1f} s, {summary.bytes / 1e6:.1f} MB in {summary.files} files")
    for path in sorted((work / "explorer" / "data" / "pool0" / "p0").glob("*.js")):
        print(f"  {path.name}: {path.stat().st_size / 1e6:.2f} MB")
    sample = max(project.pool.iter_samples(project.pool.problem_ids()[0]), key=lambda s: s.n_tokens)
    rounds = timed_rounds(work / "explorer", sample.sample_id)
    for name, values in (("trace page drawn", [r[0] for r in rounds]),
                         ("token's alternatives", [r[1] for r in rounds])):
        print(f"{name}: median {statistics.median(values):.0f} ms ({', '.join(f'{v:.0f}' for v in values)}); "
              f"trace {sample.sample_id}, {sample.n_tokens} tokens")


if __name__ == "__main__":
    main()
