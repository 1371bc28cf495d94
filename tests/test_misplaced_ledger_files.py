"""A ledger whose layout is wrong is refused by every paid stage before its first request, in one line naming the path
(issue 45 item 3), and `ledger verify` gives the same verdict on the same damaged tree as the stage does: both run
the one check of store.layout, and the same frame checks.

One built project (three problems, tiny builds, a loopback simulator that counts what it is asked), then for each
kind of damage a copy with every stage's ledger damaged that way: a pool (build_pool), a live run's ledgers
(build_online) and a call ledger (build_critiques) are the three kinds of ledger there are."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO_ROOT, hang_guard_s
from tests.dvcproject import copy_project, model_overrides, project_env
from tests.sim_servers import module_server, requests_by_key
from tests.stage_here import run_stage_here
from tests.test_hostile_ids import PAID_STAGES, SCRIPTS, run_paid_stages, run_paid_stages_here, write_stage_inputs
from tracevote.cli.demo import deep_merge, write_params
from tracevote.core.config_endpoints import SimConfig
from tracevote.store import confidence_block, framing
from tracevote.store.ledger import LOG_SUFFIX, Ledger
from tracevote.store.pool import Pool
from tracevote.store.verify import LEDGER_CLASSES, find_ledgers, verify_ledger

pytestmark = pytest.mark.slow

IDS = ["p1", "p2", "p3"]
STAGES = {"build_pool": "pools/toy", "build_online": "online/toy", "build_critiques": "critiques/toy_steps"}
SIM = SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=40, critique_noise=0.3)


server = module_server(SIM)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, server: str) -> Path:
    project = tmp_path_factory.mktemp("built") / "project"
    project.mkdir()
    write_stage_inputs(project, IDS)
    params = yaml.safe_load((project / "params.yaml").read_text())
    served = model_overrides(backend="openai", base_url=server, name="tracevote-sim", needs_key=False, extra_body={})
    more_frames = {"critique": {"n_votes": 2}, "online": {"warmup": 2, "live": {"budget": 3}}}  # logs of 2 or more
    write_params(project / "params.yaml", deep_merge(deep_merge(params, served), more_frames))
    for stage in STAGES:  # a setup step: in this process
        run_stage_here(project, f"{SCRIPTS.get(stage, stage)}.py", *PAID_STAGES[stage])
    return project


def busiest_ledger(folder: Path) -> Path:
    """The ledger under a stage's folder with the longest log (a live run has two: the warmup's and a method's)."""
    roots = sorted(meta.parent for cls in LEDGER_CLASSES for meta in folder.glob(f"*/{cls.META}"))
    return max(roots, key=lambda root: len(framing.scan(busiest_log(root))))


def kind_of(root: Path) -> type[Ledger]:
    return next(cls for cls in LEDGER_CLASSES if (root / cls.META).exists())


def busiest_log(root: Path) -> Path:
    """The ledger's log holding the most frames (a damaged frame in it is followed by good ones)."""
    logs = sorted((root / kind_of(root).LOGS).glob(f"*{LOG_SUFFIX}"))
    return max(logs, key=lambda log: len(framing.scan(log)))


def to_directory(path: Path) -> Path:
    path.unlink()
    path.mkdir()
    (path / "left-here").write_text("by hand\n")
    return path


def log_a_directory(root: Path) -> Path:
    return to_directory(busiest_log(root))


def meta_a_directory(root: Path) -> Path:
    return to_directory(root / kind_of(root).META)


def items_a_directory(root: Path) -> Path:
    return to_directory(root / kind_of(root).ITEMS)


def linked_outside(path: Path) -> Path:
    """`path` moved outside the project and a link to it left in its place (a copy made with `cp -rs`, say)."""
    project = next(folder for folder in path.parents if (folder / "params.yaml").is_file())
    away = project.parent / "outside" / "-".join(path.relative_to(project).parts)
    away.parent.mkdir(exist_ok=True)
    shutil.move(path, away)
    path.symlink_to(away)
    return path


def logs_linked_outside(root: Path) -> Path:
    return linked_outside(root / kind_of(root).LOGS)


def log_linked_outside(root: Path) -> Path:
    return linked_outside(busiest_log(root))


def frame_damaged(root: Path) -> Path:
    """One byte flipped inside the first of several frames: intact frames follow, so it is damage, not a torn tail."""
    log = busiest_log(root)
    frames = framing.scan(log)
    data = bytearray(log.read_bytes())
    data[frames[1].offset // 2] ^= 0xFF
    log.write_bytes(bytes(data))
    return log


def tail_torn(root: Path) -> Path:
    """The log cut partway through its last frame, as a kill mid-write leaves it: the next run cuts the tail off and
    asks for that call again, and verify reports it but calls the ledger sound."""
    log = busiest_log(root)
    last = framing.scan(log)[-1].offset
    os.truncate(log, last + (log.stat().st_size - last) // 2)
    return log


Damage = Callable[[Path], Path]
REFUSED: list[Damage] = [log_a_directory, meta_a_directory, items_a_directory, logs_linked_outside,
                         log_linked_outside, frame_damaged]
ACCEPTED: list[Damage] = [tail_torn]


def damaged_copy(built: Path, tmp_path: Path, damage: Damage) -> tuple[Path, dict[str, Path]]:
    """A copy of the built project with each stage's first ledger damaged; the damaged path of each stage."""
    project = copy_project(built, tmp_path / "project")
    return project, {stage: damage(busiest_ledger(project / folder)) for stage, folder in STAGES.items()}


def verify_ok(project: Path, folder: str, *, blocks: bool = True) -> bool:
    """`ledger verify <folder>`'s verdict, from the functions the command runs; without `blocks`, a pool's confidence
    block that no longer matches its log does not count (verify reports it, build_pool rewrites it, score passes
    over it: no stage refuses one)."""
    reports = [verify_ledger(root, logs) for root, logs in find_ledgers([project / folder])]
    counted = [problem for report in reports for problem in report.problems
               if blocks or f"/{confidence_block.FOLDER}/" not in problem]
    return not counted and all(log.ok for report in reports for log in report.logs)


# how the stages run on each damage: as processes, as DVC runs them, for the first; in this process for the others,
# the same scripts with the same command lines (tests/test_hostile_ids.py's run_paid_stages_here)
RUNS = {damage: "processes" if damage is REFUSED[0] else "here" for damage in REFUSED}


@pytest.mark.parametrize("damage", REFUSED, ids=lambda damage: f"{damage.__name__}-{RUNS[damage]}")
def test_every_stage_refuses_a_damaged_ledger_before_any_request_and_verify_agrees(
        built: Path, server: str, tmp_path: Path, damage: Damage, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    project, paths = damaged_copy(built, tmp_path, damage)
    before = sum(requests_by_key(server).values())
    results = (run_paid_stages(project, STAGES) if RUNS[damage] == "processes"
               else run_paid_stages_here(project, monkeypatch, capsys, STAGES))
    assert set(results) == set(STAGES)
    assert sum(requests_by_key(server).values()) == before  # not one request, not even a probe
    for stage, result in results.items():
        assert result.returncode == 2 and "Traceback" not in result.stderr, f"{stage}: {result.stderr}"
        [line] = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
        assert str(paths[stage].relative_to(project)) in line, f"{stage}: {line}"
        assert "ledger repair" not in line or damage is frame_damaged, f"{stage}: {line}"
        assert not verify_ok(project, STAGES[stage]), f"{stage}: ledger verify says ok on what the stage refused"


@pytest.mark.parametrize("damage", ACCEPTED, ids=lambda damage: damage.__name__)
def test_what_every_stage_accepts_verify_calls_sound(built: Path, tmp_path: Path, damage: Damage,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    project, _ = damaged_copy(built, tmp_path, damage)
    verdicts = {stage: verify_ok(project, folder, blocks=False) for stage, folder in STAGES.items()}
    results = run_paid_stages_here(project, monkeypatch, capsys, STAGES)
    for stage, result in results.items():
        assert result.returncode == 0, f"{stage}: {result.stderr}"
        assert verdicts[stage], f"{stage}: ledger verify refuses what the stage accepts"


def test_a_directory_where_a_pools_confidence_block_belongs_is_refused_before_any_request(built: Path, server: str,
                                                                                         tmp_path: Path) -> None:
    """build_pool writes each problem's block after its last sample: found only then, the samples were paid."""
    project = copy_project(built, tmp_path / "project")
    root = busiest_ledger(project / STAGES["build_pool"])
    block = to_directory(sorted((root / confidence_block.FOLDER).glob(f"*{confidence_block.SUFFIX}"))[0])
    (root / Pool.LOGS / block.name.replace(confidence_block.SUFFIX, LOG_SUFFIX)).unlink()  # its samples to request
    before = sum(requests_by_key(server).values())
    result = run_paid_stages(project, ["build_pool"])["build_pool"]
    assert sum(requests_by_key(server).values()) == before
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    [line] = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert f"{block.relative_to(project)}: a directory where a ledger file belongs" in line, line
    assert not verify_ok(project, STAGES["build_pool"])


def test_where_dvc_lock_records_the_run_the_line_names_the_directory_not_ledger_repair(built: Path, server: str,
                                                                                     tmp_path: Path) -> None:
    """A directory at a live log read as a missing trace: with dvc.lock recording the run, the stage blamed `ledger
    repair` and TRACEVOTE_REBUILD (and, given that, paid for the trace and failed to store it)."""
    project, paths = damaged_copy(built, tmp_path, log_a_directory)
    params = yaml.safe_load((project / "params.yaml").read_text())
    lock = {"schema": "2.0", "stages": {"build_online@toy": {"cmd": "python stages/build_online.py", "params": {
        "params.yaml": {"online.warmup": params["online"]["warmup"], "decoding": params["decoding"]}}}}}
    (project / "dvc.lock").write_text(yaml.safe_dump(lock))
    before = sum(requests_by_key(server).values())
    for env in ({}, {"TRACEVOTE_REBUILD": "1"}):
        result = subprocess.run([sys.executable, str(REPO_ROOT / "stages" / "build_online.py"),
                                 *PAID_STAGES["build_online"]], cwd=project, env=project_env(env),
                                capture_output=True, text=True, timeout=hang_guard_s())
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        [line] = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
        assert f"{paths['build_online'].relative_to(project)}: a directory where a ledger log belongs" in line, line
        assert "ledger repair" not in line and "TRACEVOTE_REBUILD" not in line, line
    assert sum(requests_by_key(server).values()) == before
