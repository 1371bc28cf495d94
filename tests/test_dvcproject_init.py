"""tests/dvcproject.py's init_repos copies what one real `git init` and `dvc init` made this run: a copy is, file by
file, what the real commands make in a new folder, DVC reads it as a project, and it refuses what `dvc init` refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.dvcproject import dvc, init_repos, init_repos_for_real, run

# what DVC writes at its first run in a project: the btime that keys its cache of this folder (.git/index, whose stat
# data differs by folder, is compared through git instead)
MADE_AT_FIRST_RUN = {".dvc/tmp/btime"}


def files_of(root: Path) -> dict[str, bytes]:
    return {path.relative_to(root).as_posix(): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def test_a_copied_init_is_what_git_init_and_dvc_init_make(tmp_path: Path) -> None:
    real, copied = tmp_path / "real", tmp_path / "copied"
    init_repos_for_real(real)
    copied.mkdir()
    init_repos(copied)

    real_files, copied_files = files_of(real), files_of(copied)
    assert set(real_files) - {".git/index"} - MADE_AT_FIRST_RUN == set(copied_files) - {".git/index"}
    assert {name: real_files[name] for name in copied_files if name != ".git/index"} == {
        name: content for name, content in copied_files.items() if name != ".git/index"}
    # the same files staged (what `dvc init` adds to git) and the same left to commit, whatever the stat data says
    for args in (("ls-files", "--stage"), ("status", "--porcelain")):
        assert run(copied, "git", *args).stdout == run(real, "git", *args).stdout
    assert run(copied, "git", "ls-files").stdout.split() == [".dvc/.gitignore", ".dvc/config", ".dvcignore"]
    assert (copied / ".dvc" / "config").read_text() == "[core]\n    analytics = false\n"

    assert "no data or pipelines tracked" in dvc(copied, "status").stdout
    assert (copied / ".dvc" / "tmp" / "btime").is_file()


def test_init_refuses_a_folder_with_dvc_already(tmp_path: Path) -> None:
    (tmp_path / ".dvc").mkdir()
    with pytest.raises(AssertionError, match="exists: `dvc init` would refuse it"):
        init_repos(tmp_path)


def test_init_refuses_a_project_whose_gitignore_ignores_dvc(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text(".dvc\n", encoding="utf-8")
    with pytest.raises(AssertionError, match="is ignored by git: `dvc init` would refuse it"):
        init_repos(tmp_path)
