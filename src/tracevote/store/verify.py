"""`python -m tracevote ledger verify|repair`: every frame of every ledger checked, damaged logs cut back to
their good frames.

verify reads every byte: each frame's checksum, its key (an integer sample id in a pool), its payload decoded
(a Sample or a CallRecord naming the same key as its frame), and whether a simulated reply
sits in a real ledger; per ledger, its setting against its fingerprint, items.json, and logs no item names.
repair rewrites a log with the frames that pass all of that (first copy of each key), atomically, under the
writers' lock; the calls it drops are missing to the next run, which requests only them.
A pool's confidence blocks (tracevote.store.confidence_block) are checked too: each is read whole and compared
with what its log holds; a stale or damaged one (which the score stage would pass over, reading the log
instead), a block no problem owns, and a file a killed block write left are problems; repair rewrites each
problem's block from its log and removes the rest.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from tracevote.core.errors import DataError
from tracevote.core.names import safe_name
from tracevote.store import calls, codec, confidence_block, frame_writer, framing, live
from tracevote.store.calls import CallLedger
from tracevote.store.framing import Frame
from tracevote.store.ledger import LOG_SUFFIX, Ledger, fingerprint_of
from tracevote.store.live import LiveLedger
from tracevote.store.pool import Pool

# where the paid stages keep ledgers (study: the pools of deepconf.endpoints' models, study/<endpoint>/pools/)
DEFAULT_FOLDERS = ("pools", "study", "online", "debates", "critiques", "grading/critic")
LEDGER_CLASSES: tuple[type[Ledger], ...] = (Pool, LiveLedger, CallLedger)
SKIPPED_FOLDERS = frozenset({".git", ".dvc", ".venv", "node_modules", "__pycache__"})
FrameCheck = Callable[[Frame], str | None]


@dataclass
class LogReport:
    """One log: how many frames pass, and what does not (damage, frames failing a check, a torn tail)."""

    path: Path
    good_frames: int = 0
    damage: list[str] = field(default_factory=list)
    bad_frames: list[str] = field(default_factory=list)
    torn_bytes: int = 0

    @property
    def ok(self) -> bool:
        return not self.damage and not self.bad_frames


@dataclass
class LedgerReport:
    root: Path
    problems: list[str] = field(default_factory=list)  # of the ledger itself: meta, items.json, stray logs
    logs: list[LogReport] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and all(log.ok for log in self.logs)


def find_ledgers(paths: Iterable[Path]) -> list[tuple[Path, list[Path] | None]]:
    """(ledger root, the logs asked for or None for all) for each path: a log file, a ledger folder, or a
    folder searched for ledgers. A path that is none of these is a DataError."""
    found: dict[Path, list[Path] | None] = {}
    for path in paths:
        if path.is_file() and path.name.endswith(LOG_SUFFIX):
            root = path.parent.parent
            if _ledger_class(root) is None:
                raise DataError(f"{path}: not a log of a ledger (no pool.json or ledger.json in {root})")
            logs = found.setdefault(root, [])
            if logs is not None:
                logs.append(path)
        elif path.is_dir():
            for root in _ledgers_under(path):
                found[root] = None
        else:
            raise DataError(f"{path}: no such ledger, log or folder")
    return sorted(found.items())


def _ledgers_under(folder: Path) -> Iterator[Path]:
    if _ledger_class(folder) is not None:
        yield folder
        return
    for child in sorted(folder.iterdir()):
        if child.is_dir() and not child.is_symlink() and child.name not in SKIPPED_FOLDERS:
            yield from _ledgers_under(child)


def _ledger_class(root: Path) -> type[Ledger] | None:
    """The kind of ledger at `root`, by its meta file; anything at that name counts (a directory there is reported)."""
    return next((cls for cls in LEDGER_CLASSES if (root / cls.META).exists()), None)


def verify_ledger(root: Path, logs: list[Path] | None = None) -> LedgerReport:
    """Check the ledger at `root` (only `logs` of it, when given)."""
    report = LedgerReport(root)
    found = _ledger_class(root)
    if found is not None:  # what every stage refuses on opening the ledger; its logs are read once it is mended
        report.problems += found.layout_problems(root)
        if report.problems:
            return report
    try:
        ledger = _open(root)
    except DataError as exc:
        report.problems.append(str(exc))
        return report
    report.problems += _ledger_problems(ledger)
    check = frame_check(ledger)
    for path in logs if logs is not None else sorted((root / ledger.LOGS).glob(f"*{LOG_SUFFIX}")):
        try:
            report.logs.append(verify_log(path, check))
        except DataError as exc:  # not a file where a log belongs: the others are still checked
            report.problems.append(str(exc))
    if isinstance(ledger, Pool):
        report.problems += block_problems(ledger, [log.path for log in report.logs if log.ok], whole=logs is None)
    return report


def block_problems(pool: Pool, good_logs: list[Path], *, whole: bool) -> list[str]:
    """What is wrong with the confidence blocks of `good_logs` (and, when `whole`, any other file in the blocks'
    folder: a block no problem owns, or a killed write's leftover)."""
    owners = _problem_of_log(pool)
    problems = [problem for log in good_logs
                if log.name in owners and (problem := _block_problem(pool, owners[log.name], log)) is not None]
    if whole:
        for path in _strays(pool, owners):
            problems.append(f"{path}: left by a block write that was killed" if confidence_block.leftover(path)
                            else f"{path}: no problem of {pool.ITEMS} has this block (left there by hand?)")
    return problems


def _block_problem(pool: Pool, problem_id: str, log: Path) -> str | None:
    """What is wrong with the problem's confidence block, checked against every frame of `log`; None when it
    is sound or there is none."""
    block = pool.block_path(problem_id)
    if not block.exists():
        return None
    problem = confidence_block.check_block(block, log, pool.read_frames(problem_id, check_every_crc=True))
    return None if problem is None else f"{block}: {problem}"


def _strays(pool: Pool, owners: dict[str, str]) -> list[Path]:
    """Every file in the blocks' folder that is no known problem's block (a killed write's leftover included)."""
    blocks = {pool.block_path(problem_id) for problem_id in owners.values()}
    return [path for path in sorted((pool.root / confidence_block.FOLDER).glob("*")) if path not in blocks]


def _problem_of_log(pool: Pool) -> dict[str, str]:
    """Log file name -> problem id, for every problem the pool knows."""
    return {pool.log_path(problem_id).name: problem_id for problem_id in pool.problem_ids()}


def _open(root: Path) -> Ledger:
    cls = _ledger_class(root)
    if cls is None:
        raise DataError(f"{root}: not a ledger (no pool.json or ledger.json)")
    ledger = cls(root)
    for name in ("fingerprint", "setting"):
        if name not in ledger.meta:
            raise DataError(f"{root / cls.META}: no {name!r}")
    return ledger


def _ledger_problems(ledger: Ledger) -> list[str]:
    problems = []
    expected = fingerprint_of(ledger.meta["setting"])
    if ledger.fingerprint != expected:
        problems.append(f"{ledger.root / ledger.META}: fingerprint {ledger.fingerprint} is not its setting's "
                        f"({expected}): the setting was edited, so the stored calls may answer another one")
    try:
        items = orjson.loads((ledger.root / ledger.ITEMS).read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        return [*problems, f"{ledger.root / ledger.ITEMS}: unreadable ({exc})"]
    if not isinstance(items, dict) or not all(isinstance(v, str) for v in items.values()):
        return [*problems, f"{ledger.root / ledger.ITEMS}: not an object of item id -> digest"]
    names = {safe_name(item_id) + LOG_SUFFIX for item_id in items}
    for path in sorted((ledger.root / ledger.LOGS).glob(f"*{LOG_SUFFIX}")):
        if path.name not in names:
            problems.append(f"{path}: no item of {ledger.ITEMS} has this log (left there by hand?)")
    return problems


def frame_check(ledger: Ledger) -> FrameCheck:
    """The per-frame check for this kind of ledger: None when the frame is good, else what is wrong."""
    if isinstance(ledger, Pool):
        return lambda frame: _check_sample(frame, ledger.simulated)
    if isinstance(ledger, LiveLedger):
        return lambda frame: _check_trace(frame, ledger.simulated)
    return lambda frame: _check_call(frame, ledger.simulated)


def _check_sample(frame: Frame, ledger_simulated: bool) -> str | None:
    if not isinstance(frame.key, int):
        return f"key {frame.key!r} is text, but a pool's keys are sample ids"
    try:
        header = codec.decode(frame.payload).header  # type: ignore[arg-type]
    except (ValueError, KeyError, TypeError, OSError) as exc:
        return f"sample {frame.key} does not decode ({exc})"
    if header.get("sample_id", frame.key) != frame.key:
        return f"sample {frame.key} holds sample {header.get('sample_id')}"
    if header.get("simulated") and not ledger_simulated:
        return f"sample {frame.key} was answered by the simulator, in a real pool"
    return None


def _check_trace(frame: Frame, ledger_simulated: bool) -> str | None:
    """A live run's trace: it decodes, holds the trace its key names, and how it ended is one of the known ways."""
    if not isinstance(frame.key, int):
        return f"key {frame.key!r} is text, but a live run's keys are trace indices"
    try:
        trace = live.decode(frame.payload, f"trace {frame.key}")
    except DataError as exc:
        return str(exc)
    if trace.index != frame.key:
        return f"trace {frame.key} holds trace {trace.index}"
    if trace.stop_reason not in live.STOP_REASONS:
        return f"trace {frame.key} ended in an unknown way: {trace.stop_reason!r}"
    if trace.simulated and not ledger_simulated:
        return f"trace {frame.key} was answered by the simulator, in a real ledger"
    return None


def _check_call(frame: Frame, ledger_simulated: bool) -> str | None:
    try:
        record = calls.decode(frame.payload)  # type: ignore[arg-type]
    except (DataError, ValueError, TypeError, OSError) as exc:
        return f"call {frame.key!r} does not decode ({exc})"
    if record.key != str(frame.key):
        return f"call {frame.key!r} holds call {record.key!r}"
    if record.simulated and not ledger_simulated:
        return f"call {frame.key!r} was answered by the simulator, in a real ledger"
    return None


def verify_log(path: Path, check: FrameCheck) -> LogReport:
    data = framing.map_log(path)
    found = framing.salvage(data)
    report = LogReport(path, torn_bytes=found.torn_bytes)
    for damage in found.damages:
        key = framing.key_named_at(data, damage.offset)
        named = "" if key is None else f", its header names key {key!r}"
        report.damage.append(f"byte {damage.offset:,}: {damage.reason}{named}; "
                             f"{damage.resumes_at - damage.offset:,} bytes to the next good frame")
    first_at: dict[framing.Key, int] = {}
    for frame in found.frames:
        if frame.key in first_at:  # readers take the first copy; repair drops this one
            report.bad_frames.append(f"byte {frame.offset:,}: a second copy of key {frame.key!r} (the one read is "
                                     f"at byte {first_at[frame.key]:,}); repair drops it")
            continue
        first_at[frame.key] = frame.offset
        problem = check(frame)
        if problem is None:
            report.good_frames += 1
        else:
            report.bad_frames.append(f"byte {frame.offset:,}: {problem}")
    return report


@dataclass(frozen=True)
class Repair:
    path: Path
    kept: int
    dropped_bytes: int  # damaged stretches, frames failing a check, and a torn tail


def repair_log(path: Path, check: FrameCheck) -> Repair | None:
    """Rewrite the log with only its good frames; None when it had nothing to drop."""
    fd = frame_writer.lock_log(path)
    try:
        data = framing.map_log(path)
        found = framing.salvage(data)
        kept = [frame for frame in framing.first_copies(found.frames) if check(frame) is None]
        if len(kept) == len(found.frames) and not found.damages and not found.torn_bytes:
            return None
        frame_writer.replace_log(path, kept)
        return Repair(path, len(kept), len(data) - path.stat().st_size)
    finally:
        os.close(fd)


def repair_ledger(root: Path, logs: list[Path] | None = None) -> list[Repair]:
    ledger = _open(root)
    check = frame_check(ledger)
    paths = logs if logs is not None else sorted((root / ledger.LOGS).glob(f"*{LOG_SUFFIX}"))
    for path in paths:  # before any log is rewritten: a repair refused is a repair not begun
        framing.refuse_non_file(path)
    repairs = [repair for path in paths if (repair := repair_log(path, check)) is not None]
    if isinstance(ledger, Pool):
        repair_blocks(ledger, paths, whole=logs is None)
    return repairs


def repair_blocks(pool: Pool, logs: list[Path], *, whole: bool) -> None:
    """Each log's confidence block rewritten unless it passes `block_problems`; strays and leftovers removed."""
    owners = _problem_of_log(pool)
    mine = [owners[log.name] for log in logs if log.name in owners]
    for problem_id in mine:
        if _block_problem(pool, problem_id, pool.log_path(problem_id)) is not None:
            pool.block_path(problem_id).unlink()
    if whole:
        for path in _strays(pool, owners):
            path.unlink()
    pool.write_confidence_blocks(mine)
