"""`python -m tracevote ledger verify|repair`: every frame of the ledgers under a path checked, and each damaged
log rewritten with only its good frames (tracevote.store.verify does both)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from tracevote.core.errors import DataError

if TYPE_CHECKING:
    from tracevote.store.verify import LedgerReport


def _ledger_paths(args: argparse.Namespace) -> list[Path]:
    from tracevote.store.verify import DEFAULT_FOLDERS

    paths = args.paths or [Path(folder) for folder in DEFAULT_FOLDERS if Path(folder).is_dir()]
    if not paths:
        raise DataError(f"no ledgers here: none of {', '.join(DEFAULT_FOLDERS)} exists; name a PATH")
    return paths


def cmd_ledger_verify(args: argparse.Namespace) -> int:
    from tracevote.store.verify import find_ledgers, verify_ledger

    reports = [verify_ledger(root, logs) for root, logs in find_ledgers(_ledger_paths(args))]
    for report in reports:
        print(_ledger_lines(report))
    bad = [report for report in reports if not report.ok]
    if not reports:
        print("no ledgers found under " + ", ".join(map(str, _ledger_paths(args))))
    elif bad:
        targets = " ".join(str(log.path) for report in bad for log in report.logs if not log.ok)
        print(f"{len(bad)} of {len(reports)} ledgers have problems."
              + (f" `python -m tracevote ledger repair {targets}` keeps each damaged log's good frames; "
                 f"the next run of its stage requests only the calls dropped" if targets else ""))
    return 1 if bad else 0


def _ledger_lines(report: LedgerReport) -> str:
    frames = sum(log.good_frames for log in report.logs)
    lines = [f"{report.root}: {len(report.logs)} logs, {frames:,} good frames: "
             + ("ok" if report.ok else "PROBLEMS")]
    lines += [f"  {problem}" for problem in report.problems]
    for log in report.logs:
        lines += [f"  {log.path.name}: DAMAGED at {damage}" for damage in log.damage]
        lines += [f"  {log.path.name}: bad frame at {frame}" for frame in log.bad_frames]
        if log.torn_bytes:
            lines.append(f"  {log.path.name}: a torn tail of {log.torn_bytes:,} bytes (a kill mid-write; the next "
                         f"run cuts it and requests that call again)")
    return "\n".join(lines)


def cmd_ledger_repair(args: argparse.Namespace) -> int:
    from tracevote.store.verify import find_ledgers, repair_ledger

    repaired = [repair for root, logs in find_ledgers(_ledger_paths(args)) for repair in repair_ledger(root, logs)]
    for repair in repaired:
        print(f"{repair.path}: kept {repair.kept:,} good frames, dropped {repair.dropped_bytes:,} bytes")
    if not repaired:
        print("nothing to repair: every frame is good")
    else:
        print(f"repaired {len(repaired)} logs. The calls dropped are missing now: run the stage again (with "
              f"TRACEVOTE_REBUILD=1 if dvc.lock records it as built) and it requests only those")
    return 0
