"""SiteWriter: only our own data paths become files, JSON is safe inside a script element, and a site is put in
place whole or not at all."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracevote.core.errors import ConfigError
from tracevote.explorer.sitefiles import SiteWriter, data_file, read_data, script_json

HOSTILE = "</script><img src=x onerror=alert(1)><!-- & \u2028\u2029 ]]>"


@pytest.mark.parametrize("path", ["../index", "pool0/../../x", "/etc/passwd", "pool0/", "Pool0", "pool0/p1.js",
                                  "pool 0", "", "pool0//p1", "pool0\\p1", "p\u00e91", "index\n", ".", "a/./b"])
def test_put_refuses_a_path_that_is_not_ours(tmp_path: Path, path: str) -> None:
    with SiteWriter(tmp_path / "site") as writer, pytest.raises(ValueError, match="explorer data path"):
        writer.put(path, 1)
    assert not list(tmp_path.rglob("*.js"))


@pytest.mark.parametrize(("path", "file"), [("index", "data/index.js"), ("pool0/index", "data/pool0/index.js"),
                                            ("pool0/p12/c3", "data/pool0/p12/c3.js"), ("debate_0", "data/debate_0.js")])
def test_data_file_of_a_path(path: str, file: str) -> None:
    assert data_file(path) == file


def test_a_path_is_written_once(tmp_path: Path) -> None:
    with SiteWriter(tmp_path / "site") as writer:
        writer.put("pool0/p1", 1)
        with pytest.raises(ValueError, match="written twice"):
            writer.put("pool0/p1", 2)


@pytest.mark.parametrize("value", [HOSTILE, {"problem": HOSTILE, "n": [1, 2.5, None, True]}, ["<", ">", "&"]])
def test_script_json_cannot_leave_its_script_and_reads_back(value: object) -> None:
    data = script_json(value)
    for raw in (b"<", b">", b"&", "\u2028".encode(), "\u2029".encode()):
        assert raw not in data
    assert json.loads(data) == value


def test_nan_is_written_as_null() -> None:
    assert json.loads(script_json([float("nan"), 1.0])) == [None, 1.0]


def test_a_data_file_is_one_put_of_its_value(tmp_path: Path) -> None:
    with SiteWriter(tmp_path / "site") as writer:
        writer.put("pool0/p1", {"problem": HOSTILE})
        writer.finish()
    assert read_data(tmp_path / "site", "pool0/p1") == {"problem": HOSTILE}


def test_finish_replaces_the_old_site_whole(tmp_path: Path) -> None:
    target = tmp_path / "site"
    for value in ("old", "new"):
        with SiteWriter(target) as writer:
            writer.copy_assets()
            writer.put("index" if value == "new" else "stale", value)
            writer.finish()
    assert read_data(target, "index") == "new"
    assert not (target / "data" / "stale.js").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]  # no temporary folder left


def test_a_failed_build_keeps_the_last_site(tmp_path: Path) -> None:
    target = tmp_path / "site"
    with SiteWriter(target) as writer:
        writer.put("index", "good")
        writer.finish()
    with pytest.raises(RuntimeError), SiteWriter(target) as writer:
        writer.put("index", "half")
        raise RuntimeError("a section builder failed")
    assert read_data(target, "index") == "good"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]


def test_the_target_must_be_a_folder(tmp_path: Path) -> None:
    (tmp_path / "site").write_text("not a site")
    with pytest.raises(ConfigError, match="not a folder"):
        SiteWriter(tmp_path / "site")


def test_the_shell_loads_the_core_then_every_view_then_the_index(tmp_path: Path) -> None:
    with SiteWriter(tmp_path / "site") as writer:
        writer.copy_assets()
        writer.finish()
    shell = (tmp_path / "site" / "index.html").read_text()
    order = [shell.index(f'src="{name}"') for name in ("assets/tv.js", "assets/pool.js", "data/index.js")]
    assert order == sorted(order)
    assert "http" not in shell  # nothing from a network
    assert (tmp_path / "site" / "assets" / "tv.css").is_file()
