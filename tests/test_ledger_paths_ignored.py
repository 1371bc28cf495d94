"""Every ledger folder a stage writes is git-ignored by the repository's own .gitignore, and every manifest beside one
is not (issue 45 item 3). The folders are read from dvc.yaml, not listed here: an output DVC caches and keeps
through a failed run (`persist: true`) that is a folder is a ledger, since a failed paid stage leaves its calls
there before DVC writes its own .gitignore entries, and `git add -A` would then commit them. A new paid stage's
folder is checked the moment dvc.yaml names it."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from tests.conftest import REPO_ROOT
from tracevote.cli.grade import CLI_CRITIC_DIR
from tracevote.store.ledger import LOG_SUFFIX, Ledger
from tracevote.store.verify import DEFAULT_FOLDERS, LEDGER_CLASSES

PLACEHOLDER = re.compile(r"\$\{[^}]+\}")


def _stage_bodies() -> list[dict[str, Any]]:
    stages = yaml.safe_load((REPO_ROOT / "dvc.yaml").read_text())["stages"]
    return [stage.get("do", stage) for stage in stages.values()]


def _filled(text: str) -> str:
    """A path of dvc.yaml with each `${...}` (a dataset, an endpoint, a run) given a name."""
    return PLACEHOLDER.sub("x1", text)


def _outs(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    outs = []
    for out in body.get("outs", []):
        path, flags = (out, {}) if isinstance(out, str) else next(iter(out.items()))
        outs.append((_filled(path), flags or {}))
    return outs


def ledger_folders() -> list[str]:
    """Each cached, persistent folder output of dvc.yaml (a file output has a suffix), and the command line's own."""
    folders = {path for body in _stage_bodies() for path, flags in _outs(body)
               if flags.get("cache", True) and flags.get("persist") and not PurePosixPath(path).suffix}
    return sorted({*folders, CLI_CRITIC_DIR})


def manifests() -> list[str]:
    return sorted({_filled(match) for body in _stage_bodies()
                   for match in re.findall(r"--manifest (\S+)", str(body.get("cmd", "")))})


def _ledger_files(ledger_class: type[Ledger]) -> list[str]:
    """What a ledger of this kind holds, relative to its root."""
    return [ledger_class.META, ledger_class.ITEMS, f"{ledger_class.LOGS}/p1{LOG_SUFFIX}"]


def test_the_folders_found_are_the_paid_stages_and_ledger_verify_looks_in_each() -> None:
    folders = ledger_folders()
    for prefix in ("pools/", "online/", "study/", "debates/", "critiques/", "grading/critic/"):
        assert any(folder.startswith(prefix) for folder in folders), (prefix, folders)
    assert [f for f in folders if not any(f.startswith(root + "/") for root in DEFAULT_FOLDERS)] == []


@pytest.fixture(scope="module")
def ledger_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git repository with the project's .gitignore, a ledger of every kind in every ledger folder (at its top, as
    debates and critiques keep theirs, and a level down, as pools keep one per setting), and every manifest."""
    root = tmp_path_factory.mktemp("ledger_tree")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    shutil.copy(REPO_ROOT / ".gitignore", root / ".gitignore")
    for folder in ledger_folders():
        for ledger_class in LEDGER_CLASSES:
            for at in (folder, f"{folder}/model-0123456789ab"):
                for name in _ledger_files(ledger_class):
                    path = root / at / name
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text("{}\n")
    for manifest in manifests():
        (root / manifest).parent.mkdir(parents=True, exist_ok=True)
        (root / manifest).write_text("{}\n")
    return root


def _untracked(root: Path) -> list[str]:
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=root, check=True,
                            capture_output=True, text=True).stdout
    return sorted(line[3:] for line in status.splitlines())


@pytest.mark.parametrize("folder", ledger_folders())
def test_no_file_of_a_ledger_folder_is_seen_by_git(ledger_tree: Path, folder: str) -> None:
    seen = [path for path in _untracked(ledger_tree) if path.startswith(folder + "/")]
    assert seen == [], f"{folder}: git would commit {seen}; add it to .gitignore"


def test_every_manifest_is_seen_by_git(ledger_tree: Path) -> None:
    assert manifests() and set(manifests()) <= set(_untracked(ledger_tree))
