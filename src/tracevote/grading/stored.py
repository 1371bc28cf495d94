"""What build_grading_critic leaves, read back: the manifest of a run whose critic is disabled, and the critic's
stored scores, which the grade stage and `python -m tracevote grade` read. Apart from grading.build, which pays
for the calls, so a process that only reads them loads no HTTP client, simulator or progress bar."""

from __future__ import annotations

from pathlib import Path

from tracevote.core.config import Params
from tracevote.core.errors import DataError
from tracevote.core.names import recorded_path
from tracevote.grading.accuracy import Pairing
from tracevote.grading.critic import CriticScores, critic_items, critic_setting, ledger_root, read_scores
from tracevote.grading.runs import MANIFEST, CriticManifest, read_critic_manifest, write_critic_manifest
from tracevote.store.calls import CallLedger
from tracevote.store.ledger import fingerprint_of


def record_disabled_critic(params: Params, run: str, critic_dir: Path, *, stage: str) -> CriticManifest:
    """The manifest of a run whose critic is off (grading.critic.enabled: false): nothing is read or sent."""
    manifest = CriticManifest(run, False, None, None, 0, 0, False, params.grading.critic.max_samples)
    write_critic_manifest(critic_dir, manifest)
    print(f"{stage}: the critic is disabled (grading.critic.enabled: false); no request sent")
    return manifest


def ledger_scores(params: Params, pairing: Pairing, critic_dir: Path, *,
                  structured: bool = False) -> tuple[CriticScores, bool]:
    """The critic's scores as the ledger of this setting under `critic_dir` holds them, read without a manifest
    (the command line's, in a pipeline run's folder), and whether they are simulated."""
    ledger = CallLedger(ledger_root(critic_dir, params, structured=structured))
    items = critic_items(pairing, params.grading.critic.max_samples)
    return read_scores(ledger, items, str(ledger.root), structured=structured), ledger.simulated


def stored_critic_scores(params: Params, pairing: Pairing, critic_dir: Path, *,
                         structured: bool = False) -> tuple[CriticScores | None, bool]:
    """The critic's scores of this run as build_grading_critic stored them, and whether the critic was simulated;
    (None, False) when the critic is disabled. A manifest of another setting is an error naming what to run.
    `structured` must be what the build was given (it names the ledger) and reads the replies as JSON first."""
    cfg = params.grading.critic
    manifest = read_critic_manifest(critic_dir)
    if not cfg.enabled:
        return None, False
    fingerprint = fingerprint_of(critic_setting(params, structured=structured))
    if not manifest.enabled or manifest.fingerprint != fingerprint or manifest.max_samples != cfg.max_samples:
        raise DataError(f"{critic_dir / MANIFEST}: the critic ran under another grading.critic setting than "
                        f"params.yaml's, or with structured replies {'off' if structured else 'on'} (or not at "
                        f"all); run build_grading_critic (`dvc repro`)")
    ledger = CallLedger(recorded_path(critic_dir, str(manifest.ledger), source=critic_dir / MANIFEST))
    items = critic_items(pairing, cfg.max_samples)
    return read_scores(ledger, items, str(critic_dir / MANIFEST), structured=structured), manifest.simulated
