"""Benchmark: the explorer at paper scale (SYNTHETIC pool: no model). Its build time, the site's size, and the first
page's load time in headless Chromium, as a reader waits for them.

Set-up, outside the timing: bench.explorer_project writes a project of --problems x --traces (default 30 x 4,096, the
paper's pool; ~3,000 tokens a trace in the score table's lengths) with its score table, stop table and aggregate
(the aggregate stage's own script; eval.repeat and eval.bootstrap are cut to keep the set-up short, which changes
nothing the explorer writes). Then, --rounds times:
- build: `python -m tracevote view` in the project, a whole process (wall seconds: start-up, reading, writing);
- first page: a fresh Chromium context opens explorer/index.html#/pool/0 and waits until the pool's table is
  drawn; the figure is the page's own clock at that moment (performance.now(), from the navigation's start),
  and the data files it loaded are listed (only data/index.js and data/pool0/index.js);
- a problem page: from the pool's index, the hash of problem 0, timed until its trace table is drawn.

    python bench/explorer_build.py                      # 30 x 4,096
    python bench/explorer_build.py --work /tmp/paper [--reuse]   # keep the project; time it again
    python bench/explorer_build.py --problems 3 --traces 64 --rounds 1   # a quick check
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: `python bench/explorer_build.py`
    sys.path.insert(0, str(ROOT))

from bench.explorer_project import write_project  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
OFFLINE_ARGS = ["--no-sandbox", "--disable-gpu", "--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND"]
READY = "#tv-main[data-ready='true']"


@contextmanager
def offline_context(**options: Any) -> Iterator[Any]:
    """A fresh context of headless Chromium (Debian's) that reaches file:// only: a dead proxy and every other
    request aborted. `options` go to new_context (e.g. viewport)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=OFFLINE_ARGS)
        try:
            context = browser.new_context(**options)
            context.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file://")
                          else route.abort())
            yield context
        finally:
            browser.close()


def build_seconds(project: Path) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "tracevote", "view"], cwd=project, check=True, capture_output=True)
    return time.perf_counter() - start


def site_size(site: Path) -> tuple[int, int, int]:
    """(bytes, files, largest file's bytes) of the site."""
    sizes = [file.stat().st_size for file in site.rglob("*") if file.is_file()]
    return sum(sizes), len(sizes), max(sizes)


def page_times(site: Path) -> tuple[float, float, list[str]]:
    """(first page ms, problem page ms, the data files the first page loaded), in a fresh offline context."""
    with offline_context() as context:
        page = context.new_page()
        loaded: list[str] = []
        page.on("request", lambda request: loaded.append(request.url.split("/explorer/", 1)[-1]))
        page.goto((site / "index.html").as_uri() + "#/pool/0")
        page.wait_for_selector(READY, timeout=120_000)
        first_ms = page.evaluate("performance.now()")
        first_data = [name for name in loaded if name.startswith("data/")]
        started = page.evaluate("() => { const t = performance.now(); location.hash = '#/pool/0/p/0'; return t; }")
        page.wait_for_selector(READY + " [data-problem-text]", timeout=120_000)
        problem_ms = page.evaluate("performance.now()") - started
    return first_ms, problem_ms, first_data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", type=int, default=30)
    parser.add_argument("--traces", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--work", type=Path, help="the project's folder (default: a temporary one, removed after)")
    parser.add_argument("--reuse", action="store_true", help="with --work: time the project an earlier run wrote there")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="explorer-bench-") as scratch:
        project = args.work or Path(scratch) / "project"
        start = time.perf_counter()
        if args.reuse and (project / "data" / "aggregate").is_dir():
            print(f"set-up: {project}'s project as an earlier run left it")
        else:
            write_project(project, problems=args.problems, traces=args.traces, repeat=8, bootstrap=100,
                          ks=(1, 64, 512) if args.traces >= 512 else (1, args.traces))
            print(f"set-up (SYNTHETIC pool, score table and aggregate): {args.problems} problems x {args.traces} "
                  f"traces, {time.perf_counter() - start:.0f} s")
        builds, firsts, problems = [], [], []
        for _ in range(args.rounds):
            builds.append(build_seconds(project))
            first_ms, problem_ms, first_data = page_times(project / "explorer")
            firsts.append(first_ms)
            problems.append(problem_ms)
        total, files, largest = site_size(project / "explorer")
        print(f"build (python -m tracevote view): median {statistics.median(builds):.2f} s "
              f"(rounds: {', '.join(f'{s:.2f}' for s in builds)})")
        print(f"site: {total / 1e6:.1f} MB in {files} files, the largest {largest / 1e6:.2f} MB")
        print(f"first page (#/pool/0, table drawn): median {statistics.median(firsts):.0f} ms "
              f"(rounds: {', '.join(f'{ms:.0f}' for ms in firsts)}); data files loaded: {', '.join(first_data)}")
        print(f"a problem page ({args.traces} traces, table drawn): median {statistics.median(problems):.0f} ms "
              f"(rounds: {', '.join(f'{ms:.0f}' for ms in problems)})")


if __name__ == "__main__":
    main()
