"""The explorer's screenshots in docs/explorer.md: a small SYNTHETIC project's site (bench.explorer_project) in
headless Chromium with the network cut, the pool's index and a problem page, written to docs/images/explorer-*.png.

    python bench/explorer_screenshots.py [--out docs/images]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script
    sys.path.insert(0, str(ROOT))

from bench.explorer_build import READY, offline_context  # noqa: E402
from bench.explorer_project import write_project  # noqa: E402
from tracevote.core.config import load_params  # noqa: E402
from tracevote.explorer.build import build_site  # noqa: E402

# name -> (route, viewport height): the problem page tall enough to show its first traces
SHOTS = {"explorer-pool.png": ("#/pool/0", 600), "explorer-problem.png": ("#/pool/0/p/1", 1080)}


def take(site: Path, out: Path) -> list[Path]:
    written = []
    with offline_context(viewport={"width": 1280, "height": 760}) as context:
        page = context.new_page()
        for name, (hash_, height) in SHOTS.items():
            page.set_viewport_size({"width": 1280, "height": height})
            page.goto((site / "index.html").as_uri() + hash_)
            page.wait_for_selector(READY)
            page.screenshot(path=str(out / name))
            written.append(out / name)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="explorer-shots-") as scratch:
        project = write_project(Path(scratch) / "project", problems=12, traces=64, ks=(1, 16, 64))
        site = build_site(load_params(project.params), project.root, project.root / "explorer").out
        for path in take(site, args.out):
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
