"""The offline page for `dvc plots show`: the Vega-Lite version it picks, the page around the bundle, and the one
path that .dvc/config, the Makefile and `python -m tracevote plots template` agree on."""

from __future__ import annotations

import configparser
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, hang_guard_s
from tracevote.cli.plots import DEFAULT_TEMPLATE
from tracevote.core.errors import DataError
from tracevote.report.offline_page import Bundle, newest_vega_lite, offline_page


@pytest.mark.parametrize(
    ("available", "expected"),
    [
        (["5.8", "5.14", "5.21", "6.1", "6.4"], "5.21"),
        (["5.9", "5.10"], "5.10"),  # by number, not by text
        (["5.17"], "5.17"),
    ],
)
def test_the_newest_vega_lite_5_is_picked(available: list[str], expected: str) -> None:
    assert newest_vega_lite(available) == expected


def test_a_bundle_without_vega_lite_5_is_refused_by_name() -> None:
    with pytest.raises(DataError, match=r"no Vega-Lite 5\.x \(it has 6\.1, 6\.4\)"):
        newest_vega_lite(["6.1", "6.4"])


def test_the_page_inlines_the_bundle_and_keeps_only_dvc_placeholders_it_fills() -> None:
    bundle = Bundle("const tag = '</script>'; window.vegaEmbed = () => tag;", "vega 0, vega-lite 5.0")
    page = offline_page(bundle)
    assert "{plot_divs}" in page and "{refresh_tag}" in page
    assert "{scripts}" not in page  # DVC fills it with <script src=> tags of a CDN
    assert "const tag = '<\\/script>'" in page  # the bundle's own text cannot close its <script>
    assert page.count("</script>") == 1
    assert "(() => {\nconst tag" in page  # its top-level names stay out of the page's globals
    assert "https://" not in page


@pytest.mark.parametrize("placeholder", ["{plot_divs}", "{scripts}", "{refresh_tag}"])
def test_a_bundle_holding_a_dvc_placeholder_is_refused(placeholder: str) -> None:
    with pytest.raises(DataError, match=re.escape(f"contains DVC's placeholder {placeholder}")):
        offline_page(Bundle(f"var text = '{placeholder}';", "vega 0"))


def test_dvc_config_the_makefile_and_the_command_name_one_file() -> None:
    config = configparser.ConfigParser()
    config.read(REPO_ROOT / ".dvc" / "config")
    assert Path(".dvc") / config["plots"]["html_template"] == DEFAULT_TEMPLATE  # DVC reads it relative to .dvc/
    makefile = (REPO_ROOT / "Makefile").read_text()
    assert re.search(r"^PLOTS_TEMPLATE := (.+)$", makefile, re.MULTILINE).group(1) == str(DEFAULT_TEMPLATE)
    ignored = (REPO_ROOT / ".dvc" / ".gitignore").read_text().splitlines()
    assert f"/{DEFAULT_TEMPLATE.name}" in ignored  # generated: git never tracks it


def test_outside_a_dvc_project_the_command_refuses_and_writes_nothing(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "tracevote", "plots", "template"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=hang_guard_s())
    assert result.returncode != 0
    assert "no .dvc/ folder here: run this at the top of a DVC project, or give --out" in result.stderr
    assert list(tmp_path.iterdir()) == []
