"""The side-by-side ingestion scripts of docs/benchmarks.md ("Ingestion without compiled loops") run as documented,
at a tiny scale, and report every side (timings are never asserted)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO_ROOT, hang_guard_s


def run_module(*argv: str) -> str:
    done = subprocess.run([sys.executable, "-m", *argv], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=hang_guard_s(), check=True)
    return done.stdout


def test_interleave_ingest_parses_one_reply_per_tree_identically() -> None:
    out = run_module("bench.interleave_ingest", "--tree", "one=src", "--tree", "two=src", "--tokens", "64",
                     "--repeat", "1", "--parses", "2")
    assert "one 64-token reply, top-20" in out
    for tree in ("one", "two"):
        assert f"{tree}: whole process wall" in out and "each later" in out
    assert "stored arrays identical in every tree and run: True" in out


def test_import_slice_imports_jsonl_and_pickles_and_scales_them() -> None:
    out = run_module("bench.import_slice", "--traces", "2", "--tokens", "40", "--repeat", "1")
    assert "SYNTHETIC slice: 1 problem x 2 traces" in out
    for side in ("JSONL import, top-20 kept", "JSONL import, confidence only", "JSONL parse_line alone",
                 "JSONL orjson + arrays", "JSONL msgspec typed + arrays", "pickle import (official runs)"):
        assert side in out and "30 x 4,096 x 40 tokens" in out.split(side, 1)[1].splitlines()[0]
