"""Sharing pools: push to a remote, then a fresh clone rebuilds every metric without the model.

Remotes are real: moto's S3 server on loopback, and a local folder. The model is the simulator
behind a loopback HTTP server that is stopped before the clone runs, so any request would fail.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from moto.server import ThreadedMotoServer

from tests.dvcproject import dvc, make_project, project_env, run
from tests.test_pipeline import ran_stages, small_sim_params
from tracevote.core.config import SimConfig
from tracevote.sim.model import SimModel
from tracevote.sim.server import running_server

pytestmark = pytest.mark.slow
S3_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}

SUMMARY = "metrics/deepconf/toy/summary.json"


@contextlib.contextmanager
def s3_remote() -> Iterator[tuple[str, str]]:
    """A moto S3 server on loopback with an empty bucket; yields (url, endpoint)."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        boto3.client("s3", endpoint_url=endpoint, **_boto_credentials()).create_bucket(Bucket="pools")
        yield "s3://pools/tracevote", endpoint
    finally:
        server.stop()


def _boto_credentials() -> dict[str, str]:
    return {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region_name": "us-east-1"}


def add_remote(project: Path, kind: str, url: str, endpoint: str | None) -> None:
    dvc(project, "remote", "add", "-f", "-d", "shared", url)
    if endpoint:
        dvc(project, "remote", "modify", "shared", "endpointurl", endpoint)


def built_and_pushed(root: Path, kind: str, url: str, endpoint: str | None) -> Path:
    """A project whose pipeline ran against a sim server that is gone once this returns."""
    with running_server(SimModel(SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=150))) as base_url:
        params = small_sim_params(backend="openai", base_url=base_url, needs_key=False)
        project = make_project(root / "origin", params)
        add_remote(project, kind, url, endpoint)
        dvc(project, "repro", env=project_env(S3_ENV))
    dvc(project, "push", env=project_env(S3_ENV))
    run(project, "git", "add", "-A")
    run(project, "git", "commit", "-qm", "built and pushed")
    return project


@contextlib.contextmanager
def remote(kind: str, tmp_path: Path) -> Iterator[tuple[str, str | None]]:
    if kind == "s3":
        with s3_remote() as (url, endpoint):
            yield url, endpoint
    else:
        yield str(tmp_path / "folder-remote"), None


@pytest.mark.parametrize("kind", ["s3", "local"])
def test_fresh_clone_regenerates_metrics_from_pulled_pools(tmp_path: Path, kind: str) -> None:
    with remote(kind, tmp_path) as (url, endpoint):
        origin = built_and_pushed(tmp_path, kind, url, endpoint)
        expected = json.loads((origin / SUMMARY).read_text())

        clone = tmp_path / "clone"
        run(tmp_path, "git", "clone", "-q", str(origin), str(clone))
        pulled = dvc(clone, "repro", "--pull", env=project_env(S3_ENV))  # what `make repro` runs
        assert ran_stages(pulled.stdout) == set()
        for paid in ("pools/toy", "debates/toy", "critiques/toy_steps"):
            assert any((clone / paid).rglob("*.tvf")), f"{paid} was not pulled"
        debate_metrics = (origin / "metrics" / "debate.json").read_text()
        (clone / "metrics" / "debate.json").unlink()
        rescored = dvc(clone, "repro", "--force", "score_debate", env=project_env(S3_ENV))  # from pulled ledgers
        assert "Running stage 'score_debate'" in rescored.stdout
        assert (clone / "metrics" / "debate.json").read_text() == debate_metrics

        for stale in (SUMMARY, "metrics/deepconf/toy/results.json"):
            (clone / stale).unlink()
        rerun = dvc(clone, "repro", "--force", "--downstream", "score")  # recompute everything after the pool
        assert ran_stages(rerun.stdout) == {"score", "aggregate", "report", "compare"}
        assert json.loads((clone / SUMMARY).read_text()) == expected
        assert expected["simulated"] is True


def test_fresh_clone_without_pull_refuses_to_pay_again(tmp_path: Path) -> None:
    with remote("local", tmp_path) as (url, endpoint):
        origin = built_and_pushed(tmp_path, "local", url, endpoint)
        clone = tmp_path / "clone"
        run(tmp_path, "git", "clone", "-q", str(origin), str(clone))
        result = dvc(clone, "repro", check=False)
        assert result.returncode != 0
        assert "dvc pull" in result.stderr + result.stdout
        assert not (clone / "pools" / "toy").exists(), "the refusal left a pool folder behind"
        assert not (clone / "debates" / "toy").exists(), "the refusal left a debate folder behind"
        assert not (clone / "critiques" / "toy_steps").exists(), "the refusal left a critique folder behind"

        pulled = dvc(clone, "repro", "--pull")  # what the message recommends (`make repro`)
        assert not {"build_pool", "build_debate", "build_critiques"} & ran_stages(pulled.stdout)
        assert (clone / SUMMARY).read_text() == (origin / SUMMARY).read_text()
