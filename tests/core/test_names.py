"""core.names: any id becomes one safe, bounded, collision-free file name, and paths stay inside their folder."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracevote.core.errors import DataError
from tracevote.core.names import NAME_MAX, check_inside, inside, recorded_path, safe_name


def hashed(slug: str, name: str) -> str:
    """The digest form, derived here from the rule (slug, '~', the first 20 hex digits of the UTF-8 sha256)."""
    return f"{slug}~{hashlib.sha256(name.encode('utf-8', 'surrogatepass')).hexdigest()[:20]}"


@pytest.mark.parametrize(("name", "expected"), [
    ("p1", "p1"),  # plain lowercase ids keep their name: every existing ledger still reads
    ("aime_2025-03", "aime_2025-03"),
    ("math.test-7", "math.test-7"),
    ("a" * 80, "a" * 80),
    ("a" * 81, hashed("a" * 40, "a" * 81)),
    ("P1", hashed("p1", "P1")),  # case differs from "p1": a distinct name, also on a case-insensitive disk
    ("AIME-2025 #3", hashed("aime-2025-3", "AIME-2025 #3")),
    ("..", hashed("id", "..")),
    (".", hashed("id", ".")),
    ("", hashed("id", "")),
    (".hidden", hashed("hidden", ".hidden")),
    ("x.", hashed("x", "x.")),  # Windows drops a trailing dot
    ("-rf", hashed("rf", "-rf")),
    ("/abs/path", hashed("abs-path", "/abs/path")),
    ("a/b", hashed("a-b", "a/b")),
    ("a\\b", hashed("a-b", "a\\b")),
    ("a\x00b", hashed("a-b", "a\x00b")),
    ("../../../../../escaped", hashed("escaped", "../../../../../escaped")),
    ("x" * 10_240, hashed("x" * 40, "x" * 10_240)),
    ("con", hashed("con", "con")),  # Windows reserved names, whatever the case or extension
    ("CON", hashed("con", "CON")),
    ("nul.txt", hashed("nul-txt", "nul.txt")),
    ("lpt1", hashed("lpt1", "lpt1")),
    ("com9.tvf", hashed("com9-tvf", "com9.tvf")),
    ("console", "console"),  # only the exact names are reserved
    ("\uff50\uff11", hashed("id", "\uff50\uff11")),  # fullwidth "ｐ１"
    ("\u0440" + "1", hashed("1", "\u04401")),  # Cyrillic "р1", not "p1"
    ("\u0430", hashed("id", "\u0430")),  # Cyrillic "а"
    ("\ud800", hashed("id", "\ud800")),  # a lone surrogate still has a name
])
def test_names(name: str, expected: str) -> None:
    assert safe_name(name) == expected


def test_non_text_is_refused() -> None:
    with pytest.raises(TypeError, match="takes text, not bytes"):
        safe_name(b"p1")  # type: ignore[arg-type]


WINDOWS_RESERVED = {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(10)), *(f"lpt{i}" for i in range(10))}
any_text = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, blacklist_categories=()), max_size=60)
hostile_parts = st.sampled_from(["..", ".", "/", "\\", "\x00", "~", "C:", "CON", "nul", " ", "\u0430", "\uff50",
                                 "P", "p", "1", "-", "_", "a" * 90])
hostile = st.one_of(any_text, st.lists(hostile_parts, max_size=12).map("".join),
                    st.integers(0, 300).map(lambda n: "x" * n))


@given(hostile)
def test_a_name_is_one_short_plain_component(name: str) -> None:
    result = safe_name(name)
    assert 1 <= len(result.encode()) <= NAME_MAX and result.isascii() and result.isprintable()
    assert result not in (".", "..") and not {"/", "\\", "\x00", ":"} & set(result)
    assert Path(result).name == result and not result.endswith((".", " ")) and not result.startswith((".", "-"))
    assert result.split(".")[0] not in WINDOWS_RESERVED


@given(st.lists(hostile, unique=True, max_size=20))
def test_distinct_ids_get_distinct_names_even_folded_to_lowercase(names: list[str]) -> None:
    variants = list({variant for name in names for variant in (name, name.upper(), name.lower(), name.swapcase())})
    results = [safe_name(name) for name in variants]
    assert len(set(results)) == len(variants)
    assert len({result.lower() for result in results}) == len(variants)  # a case-insensitive file system


@given(hostile)
def test_the_same_id_always_gets_the_same_name(name: str) -> None:
    assert safe_name(name) == safe_name(str(name))


def test_names_do_not_depend_on_the_process() -> None:
    """No per-process salt (PYTHONHASHSEED): a rerun, a clone or another machine finds the same files."""
    ids = ["p1", "P1", "../escaped", "\u04401"]
    script = f"from tracevote.core.names import safe_name; print([safe_name(i) for i in {ids!r}])"
    outputs = {subprocess.run([sys.executable, "-c", script], env={**os.environ, "PYTHONHASHSEED": seed},
                              capture_output=True, text=True, check=True).stdout for seed in ("1", "2")}
    assert outputs == {f"{[safe_name(i) for i in ids]}\n"}


@settings(max_examples=60)
@given(hostile, st.sampled_from(["", ".tvf", ".json"]))
def test_inside_stays_in_its_folder(tmp_path_factory: pytest.TempPathFactory, name: str, suffix: str) -> None:
    folder = tmp_path_factory.getbasetemp() / "inside"
    folder.mkdir(exist_ok=True)
    path = inside(folder, name, suffix)
    assert path.parent == folder and path.resolve().parent == folder.resolve()


def test_a_symlinked_folder_pointing_outside_is_refused(tmp_path: Path) -> None:
    (tmp_path / "outside").mkdir()
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "calls").symlink_to(tmp_path / "outside")
    with pytest.raises(DataError, match="resolves outside"):
        inside(tmp_path / "project" / "calls", "p1", ".tvf")


def test_a_symlinked_log_pointing_outside_is_refused(tmp_path: Path) -> None:
    (tmp_path / "calls").mkdir()
    (tmp_path / "victim").write_bytes(b"keep")
    (tmp_path / "calls" / "p1.tvf").symlink_to(tmp_path / "victim")
    with pytest.raises(DataError, match="resolves outside"):
        check_inside(tmp_path / "calls", tmp_path / "calls" / "p1.tvf")


def test_a_project_under_a_symlinked_parent_is_fine(tmp_path: Path) -> None:
    (tmp_path / "real" / "calls").mkdir(parents=True)
    (tmp_path / "home").symlink_to(tmp_path / "real")
    assert inside(tmp_path / "home" / "calls", "p1", ".tvf") == tmp_path / "home" / "calls" / "p1.tvf"


@pytest.mark.parametrize(("relative", "ok"), [
    ("aime/simulated-0123456789ab", True),
    ("cli", True),
    ("", False),
    (".", False),
    ("../../elsewhere", False),
    ("aime/../../x", False),
    ("/etc", False),
    ("a\x00b", False),
])
def test_a_manifest_cannot_point_outside_its_folder(relative: str, ok: bool) -> None:
    manifest = Path("pools/aime.json")
    if ok:
        assert recorded_path(manifest.parent, relative, source=manifest) == manifest.parent / relative
    else:
        with pytest.raises(DataError, match=r"pools/aime\.json: the recorded path .* is not a folder inside pools"):
            recorded_path(manifest.parent, relative, source=manifest)
