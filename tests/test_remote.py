"""Sharing pools: push to a remote, then a fresh clone rebuilds every metric without the model.

Remotes are real: moto's S3 server on loopback, an SSH server (asyncssh's, SFTP, tests/ssh_server.py) on
loopback that admits one user key, and a local folder. The model is the simulator
behind a loopback HTTP server that is stopped before any clone runs, so any request would fail.
One origin is built once and pushed to both remotes; each test clones it.
"""

from __future__ import annotations

import configparser
import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import asyncssh
import boto3
import pytest
from moto.server import ThreadedMotoServer

from tests.conftest import hang_guard_s
from tests.dvcproject import dvc, make_project, project_env, run
from tests.test_pipeline import ran_stages, small_sim_params
from tracevote.core.config_endpoints import SimConfig
from tracevote.sim.model import SimModel
from tracevote.sim.server import running_server

pytestmark = pytest.mark.slow
S3_ENV = project_env({"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                      "AWS_DEFAULT_REGION": "us-east-1"})
SUMMARY = "metrics/deepconf/toy/summary.json"
PAID_FOLDERS = ("pools/toy", "debates/toy", "critiques/toy_steps")


@contextlib.contextmanager
def s3_remote() -> Iterator[tuple[str, str]]:
    """A moto S3 server on loopback with an empty bucket; yields (url, endpoint)."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        credentials = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing",
                       "region_name": "us-east-1"}
        boto3.client("s3", endpoint_url=endpoint, **credentials).create_bucket(Bucket="pools")
        yield "s3://pools/tracevote", endpoint
    finally:
        server.stop()


@dataclass(frozen=True)
class SshRemote:
    url: str  # ssh://127.0.0.1:PORT/tracevote
    keyfile: Path  # the user's private key, the one the server admits
    served: Path  # the folder the server serves as /


@contextlib.contextmanager
def ssh_remote(root: Path) -> Iterator[SshRemote]:
    """tests/ssh_server.py on loopback serving `root`/served over SFTP to the holder of one user key.
    (DVC's SSH remote, through sshfs, does not check the server's host key: the docs say so.)"""
    keys, served = root / "keys", root / "served"
    for folder in (keys, served):
        folder.mkdir(parents=True)
    host_key, user_key = asyncssh.generate_private_key("ssh-ed25519"), asyncssh.generate_private_key("ssh-ed25519")
    host_key.write_private_key(str(keys / "host_key"))
    user_key.write_private_key(str(keys / "user_key"))
    user_key.write_public_key(str(keys / "authorized_keys"))
    server = subprocess.Popen([sys.executable, str(Path(__file__).with_name("ssh_server.py")), str(served),
                               str(keys / "host_key"), str(keys / "authorized_keys")],
                              stdout=subprocess.PIPE, text=True)
    try:
        banner = server.stdout.readline() if server.stdout else ""  # blocks until it listens, or it died
        assert banner.startswith("listening on "), f"the SSH server did not start: {banner!r}"
        port = int(banner.split()[-1])
        yield SshRemote(f"ssh://127.0.0.1:{port}/tracevote", keys / "user_key", served)
    finally:
        server.kill()
        server.wait(timeout=hang_guard_s())


@dataclass(frozen=True)
class Origin:
    project: Path
    root: Path
    ssh: SshRemote


def add_dvc_config(project: Path, name: str, sections: dict[str, dict[str, str]]) -> None:
    """Add `sections` to .dvc/<name> (config, or the git-ignored config.local) as `dvc remote add`, `modify` and
    `default` write them: {"core": {"remote": "s3"}} is `dvc remote default s3`, one `dvc` process (~1 CPU s) fewer
    for each such command. DVC reads the INI file configparser writes (`[remote "s3"]`, options unindented)."""
    path = project / ".dvc" / name
    config = configparser.ConfigParser(interpolation=None)  # a path may hold a %
    config.read(path, encoding="utf-8")
    for section, options in sections.items():
        if not config.has_section(section):
            config.add_section(section)
        config[section].update(options)
    with path.open("w", encoding="utf-8") as file:
        config.write(file)


@pytest.fixture(scope="module")
def origin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Origin]:
    """A project whose pipeline ran against a sim server that is gone, pushed to a local folder remote
    (`shared`, the default) and to moto's S3 (`s3`)."""
    root = tmp_path_factory.mktemp("remote")
    with s3_remote() as (s3_url, endpoint), ssh_remote(root / "ssh") as ssh:
        with running_server(SimModel(SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=150))) as base_url:
            params = small_sim_params(backend="openai", base_url=base_url, needs_key=False)
            project = make_project(root / "origin", params)
            add_dvc_config(project, "config", {"core": {"remote": "shared"},
                                               'remote "shared"': {"url": str(root / "folder-remote")},
                                               'remote "s3"': {"url": s3_url, "endpointurl": endpoint},
                                               'remote "ssh"': {"url": ssh.url, "user": "tracevote"}})
            add_dvc_config(project, "config.local", {'remote "ssh"': {"keyfile": str(ssh.keyfile)}})
            dvc(project, "repro")
        for name in ("shared", "s3"):
            dvc(project, "push", "--remote", name, env=S3_ENV)
        dvc(project, "push", "--remote", "ssh")
        run(project, "git", "add", "-A")
        run(project, "git", "commit", "-qm", "built and pushed")
        yield Origin(project, root, ssh)


def fresh_clone(origin: Origin, name: str) -> Path:
    clone = origin.root / name
    run(origin.root, "git", "clone", "-q", str(origin.project), str(clone))
    return clone


def test_fresh_clone_pulls_from_s3_and_runs_nothing(origin: Origin) -> None:
    clone = fresh_clone(origin, "s3-clone")
    add_dvc_config(clone, "config.local", {"core": {"remote": "s3"}})  # dvc remote default --local s3
    pulled = dvc(clone, "repro", "--pull", env=S3_ENV)  # what `make repro` runs
    assert ran_stages(pulled.stdout) == set()
    for paid in PAID_FOLDERS:
        assert any((clone / paid).rglob("*.tvf")), f"{paid} was not pulled from S3"
    assert (clone / SUMMARY).read_text() == (origin.project / SUMMARY).read_text()


def test_fresh_clone_pulls_over_ssh_and_runs_nothing(origin: Origin) -> None:
    clone = fresh_clone(origin, "ssh-clone")
    # dvc remote default --local ssh; dvc remote modify --local ssh keyfile KEY: keys stay out of git
    add_dvc_config(clone, "config.local", {"core": {"remote": "ssh"},
                                           'remote "ssh"': {"keyfile": str(origin.ssh.keyfile)}})
    assert any((origin.ssh.served / "tracevote" / "files").rglob("*")), "nothing was pushed over SSH"
    pulled = dvc(clone, "repro", "--pull")
    assert ran_stages(pulled.stdout) == set()
    for paid in PAID_FOLDERS:
        pulled_logs = sorted(p.relative_to(clone) for p in (clone / paid).rglob("*.tvf"))
        assert pulled_logs, f"{paid} was not pulled over SSH"
        assert all((clone / log).read_bytes() == (origin.project / log).read_bytes() for log in pulled_logs)
    assert (clone / SUMMARY).read_text() == (origin.project / SUMMARY).read_text()
    assert str(origin.ssh.keyfile) not in (clone / ".dvc" / "config").read_text()


def test_an_ssh_pull_with_a_key_the_server_does_not_admit_is_refused(origin: Origin, tmp_path: Path) -> None:
    clone = fresh_clone(origin, "ssh-stranger-clone")
    stranger = tmp_path / "stranger_key"
    asyncssh.generate_private_key("ssh-ed25519").write_private_key(str(stranger))
    add_dvc_config(clone, "config.local", {"core": {"remote": "ssh"}, 'remote "ssh"': {"keyfile": str(stranger)}})
    refused = dvc(clone, "pull", check=False)
    assert refused.returncode != 0
    for paid in PAID_FOLDERS:
        assert not any((clone / paid).rglob("*.tvf")), f"{paid} was pulled without an admitted key"


def test_fresh_clone_refuses_to_pay_again_then_regenerates_metrics_from_pulled_pools(origin: Origin) -> None:
    clone = fresh_clone(origin, "local-clone")
    refused = dvc(clone, "repro", check=False)
    assert refused.returncode != 0
    assert "dvc pull" in refused.stderr + refused.stdout
    for paid in PAID_FOLDERS:
        assert not (clone / paid).exists(), f"the refusal left {paid} behind"

    pulled = dvc(clone, "repro", "--pull")  # what the message recommends (`make repro`)
    assert ran_stages(pulled.stdout) == set()
    expected = json.loads((origin.project / SUMMARY).read_text())
    assert expected["simulated"] is True

    debate_metrics = (origin.project / "metrics" / "debate.json").read_text()
    (clone / "metrics" / "debate.json").unlink()
    for stale in (SUMMARY, "metrics/deepconf/toy/results.json"):
        (clone / stale).unlink()
    # in one `dvc repro`: the debate rescored from pulled ledgers, and everything after the pool recomputed (compare
    # and view follow both)
    rerun = dvc(clone, "repro", "--force", "--downstream", "score_debate", "score")
    assert "Running stage 'score_debate'" in rerun.stdout
    assert (clone / "metrics" / "debate.json").read_text() == debate_metrics
    assert ran_stages(rerun.stdout) == {"score_debate", "score", "aggregate", "report", "compare", "view"}
    assert json.loads((clone / SUMMARY).read_text()) == expected
