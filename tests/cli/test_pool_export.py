"""`python -m tracevote pool export` as a process on a small real pool: --fields writes only the fields named (in
that order, each as the full export has it), an unknown name is one error listing the fields, and the progress
bar shows on a terminal (a real pseudo-terminal here) but not in a pipe or with --quiet."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import shutil
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, hang_guard_s
from tests.dvcproject import project_env
from tests.store.test_framing_codec import make_sample
from tracevote.core.config import load_params
from tracevote.datasets.problems import Problem
from tracevote.sampling.prompts import setting_messages
from tracevote.store.interchange import EXPORT_FIELDS, import_file, to_json_line
from tracevote.store.pool import Pool, Setting

PROBLEMS = [Problem("p-1", "What is 3+4?", 7)]
N_SAMPLES = 3


def pool_project(root: Path) -> Path:
    """params.yaml (the tests' fixture) and a pool of N_SAMPLES samples (top logprobs, no top tokens) in pool/."""
    shutil.copy(FIXTURES / "params.yaml", root / "params.yaml")
    setting = Setting.from_params(load_params(root / "params.yaml"))
    pool = Pool.open_or_create(root / "pools", setting, simulated=False)
    pool.register(setting_messages(PROBLEMS, setting))
    samples = root / "samples.jsonl"
    samples.write_bytes(b"".join(to_json_line(make_sample(sample_id=i, seed=i), simulated=False)
                                 for i in range(N_SAMPLES)))
    import_file(samples, pool, PROBLEMS, keep_top_logprobs=True, n_pool=N_SAMPLES)
    pool.root.rename(root / "pool")
    return root


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One pool project for the tests that only export from it (to stdout, or to out.jsonl)."""
    return pool_project(tmp_path_factory.mktemp("pool-export"))


@pytest.fixture(scope="module")
def full_export(project: Path) -> subprocess.CompletedProcess[str]:
    """Every field, in a pipe: the one export each test checks a narrower or quieter export against."""
    return export(project)


def export(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tracevote", "pool", "export", "--pool-dir", "pool", *args],
                          cwd=project, env=project_env(), capture_output=True, text=True, timeout=hang_guard_s())


def lines_of(result: subprocess.CompletedProcess[str]) -> list[dict[str, object]]:
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.mark.parametrize("spec", ["problem_id,sample_id,answer", "answer, problem_id", "text,answer,text",
                                  "usage,latency_s,simulated,top_logprobs"])
def test_fields_keeps_only_those_in_the_order_named(project: Path, full_export: subprocess.CompletedProcess[str],
                                                    spec: str) -> None:
    full = lines_of(full_export)
    named = list(dict.fromkeys(name.strip() for name in spec.split(",")))
    some = lines_of(export(project, "--fields", spec))
    assert len(some) == len(full) == N_SAMPLES
    assert some == [{name: line[name] for name in named} for line in full]
    assert all(list(line) == named for line in some)


def test_a_field_the_samples_lack_is_left_out_as_in_the_full_export(
        project: Path, full_export: subprocess.CompletedProcess[str]) -> None:
    full = lines_of(full_export)
    lacked = ("top_tokens", "reasoning")  # no top tokens kept; a reply without split thinking has no reasoning
    assert list(full[0]) == [name for name in EXPORT_FIELDS if name not in lacked]
    assert lines_of(export(project, "--fields", "sample_id,top_tokens")) == [{"sample_id": i} for i in range(3)]


@pytest.mark.parametrize(("spec", "named"), [
    ("problem_id,confidence", "'confidence' is not a field"),
    ("id,answr", "'id', 'answr' are not fields"),
    ("problem_id,,answer", "'' is not a field"),
])
def test_an_unknown_field_is_one_error_listing_the_fields(project: Path, spec: str, named: str) -> None:
    result = export(project, "--fields", spec)
    assert result.returncode == 2 and result.stdout == "" and "Traceback" not in result.stderr
    assert result.stderr.strip() == f"error: --fields {spec!r}: {named}; the fields are {', '.join(EXPORT_FIELDS)}"


def test_no_bar_in_a_pipe_and_nothing_at_all_with_quiet(project: Path,
                                                         full_export: subprocess.CompletedProcess[str]) -> None:
    piped, quiet = full_export, export(project, "--quiet")
    assert piped.stderr == f"pool export: {N_SAMPLES} samples from pool\n"
    assert quiet.returncode == 0 and quiet.stderr == "" and quiet.stdout == piped.stdout


def export_on_a_terminal(project: Path, *args: str) -> tuple[str, bytes]:
    """(what a terminal on stderr showed, stdout) of an export whose stderr is a pseudo-terminal."""
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # 24 rows of 100 columns
    with open(project / "out.jsonl", "wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "tracevote", "pool", "export", "--pool-dir", "pool", *args],
                                   cwd=project, env=project_env(), stdout=out, stderr=terminal)
    os.close(terminal)  # the child holds the only other end: reading stops when it exits
    shown = b""
    while True:
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # EIO: every holder of the terminal's end has closed it
            break
        if not chunk:
            break
        shown += chunk
    os.close(controller)
    assert process.wait(timeout=hang_guard_s()) == 0, shown
    return shown.decode(errors="replace"), (project / "out.jsonl").read_bytes()


def test_a_terminal_shows_the_bar_unless_quiet(project: Path, full_export: subprocess.CompletedProcess[str]) -> None:
    shown, exported = export_on_a_terminal(project)
    assert "pool export: 100%" in shown and f"{N_SAMPLES}/{N_SAMPLES}" in shown and "sample" in shown
    assert shown.rstrip().endswith(f"pool export: {N_SAMPLES} samples from pool")
    assert exported == full_export.stdout.encode()  # the bar never reaches the exported lines
    quiet, _ = export_on_a_terminal(project, "--quiet")
    assert quiet == ""


def test_scores_add_each_samples_confidence_measures(tmp_path: Path) -> None:
    """Issue 29: DeepConf's write-up lists a confidence `score` among the per-sample fields. --scores joins the score
    stage's table (here the real scorer's, of samples 0 and 1); a sample it does not score gets null."""
    import pyarrow.parquet as pq

    from tracevote.core.config_deepconf import MEASURES
    from tracevote.deepconf.score import score_pool

    project = pool_project(tmp_path)  # its own: the table is written into it
    params = load_params(project / "params.yaml")
    [scored] = score_pool(Pool(project / "pool"), [("p-1", 7)], 2, params.confidence, params.answers, workers=1)
    pq.write_table(scored.scores, project / "scores.parquet")
    expected = {(row["problem_id"], row["sample_id"]): {name: row[name] for name in MEASURES}
                for row in scored.scores.to_pylist()}

    lines = lines_of(export(project, "--fields", "problem_id,sample_id", "--scores", "scores.parquet"))
    assert [line["score"] for line in lines] == [expected[("p-1", 0)], expected[("p-1", 1)], None]
    assert all(isinstance(value, float) for value in lines[0]["score"].values())
    missing = export(project, "--scores", "absent.parquet")
    assert missing.returncode == 2 and missing.stdout == ""
    assert missing.stderr == ("error: --scores absent.parquet: not found (the score stage writes "
                              "data/scores/<dataset>.parquet: `dvc repro score@<dataset>`)\n")
