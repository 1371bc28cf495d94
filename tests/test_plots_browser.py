"""`dvc plots show` opened in a real browser with no network: every chart of the page draws.

A small simulated project runs its pipeline, `python -m tracevote plots template` writes the offline page that
.dvc/config names, and Debian's chromium renders DVC's HTML headless with its proxy on a closed port and every host
name unresolvable. DVC's own page, which loads its chart libraries from a CDN, is the control: it draws nothing.
Without chromium this file skips, except where TRACEVOTE_REQUIRE_CHROMIUM is set (CI's .ci/run, which installs
chromium first): there a missing browser is a failure, so a failed install cannot pass as two quiet skips.
"""

from __future__ import annotations

import configparser
import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, hang_guard_s
from tests.dvcproject import dvc, project_env
from tests.images import assert_not_blank
from tests.test_pipeline import build_once
from tracevote.cli.plots import DEFAULT_TEMPLATE

CHROMIUM = Path("/usr/bin/chromium")
OFFLINE = ("--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--proxy-server=127.0.0.1:9",
           "--host-resolver-rules=MAP * ~NOTFOUND")
VIRTUAL_TIME_MS = 20_000  # Chromium's virtual clock: the page's scripts run to the end, whatever the machine's load
VEGA_CHARTS = {"accuracy_vs_k_avg", "accuracy_vs_k_bottom10", "accuracy_vs_k_lowest", "accuracy_vs_k_tail",
               "accuracy_vs_tokens", "critique_f1_by_task"}
IMAGES = {"plots_deepconf_toy_confidence_png", "plots_critique_critique_png", "plots_grading_word_counts_png"}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def browser() -> None:
    """Skip without chromium, or fail where CI requires it."""
    if CHROMIUM.is_file():
        return
    missing = f"{CHROMIUM} is absent (Debian's chromium package): the offline plots page is not rendered"
    if os.environ.get("TRACEVOTE_REQUIRE_CHROMIUM"):
        pytest.fail(f"{missing}, though TRACEVOTE_REQUIRE_CHROMIUM is set: .ci/install-chromium could not install "
                    "it (its message is near the top of CI's log)", pytrace=False)
    pytest.skip(missing)


class PlotDivs(HTMLParser):
    """The plot divs of a page as Chromium left it (each <div id> directly in <body>), and which hold a chart that
    vega-embed drew (an <svg> or <canvas> of class "marks")."""

    VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
                      "wbr"})

    def __init__(self) -> None:
        super().__init__()
        self.open: list[str] = []
        self.current: str | None = None
        self.drawn: dict[str, bool] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "div" and self.open == ["html", "body"] and attributes.get("id"):
            self.current = attributes["id"]
            self.drawn[self.current] = False
        elif self.current and tag in ("svg", "canvas") and "marks" in (attributes.get("class") or "").split():
            self.drawn[self.current] = True
        if tag not in self.VOID:
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag not in self.VOID:
            self.open.pop()
        if self.open == ["html", "body"]:
            self.current = None


def drawn_charts(page: Path, profile: Path) -> dict[str, bool]:
    dom = chromium(page, profile, f"--virtual-time-budget={VIRTUAL_TIME_MS}", "--dump-dom").stdout
    parser = PlotDivs()
    parser.feed(dom)
    return parser.drawn


def chromium(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(CHROMIUM), *OFFLINE, f"--user-data-dir={profile}", *args, page.as_uri()],
                          capture_output=True, text=True, timeout=hang_guard_s(), check=True)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A simulated project whose pipeline ran (a copy of the one tests/test_pipeline.py builds once per run), with
    the repository's plots.html_template and the page it names."""
    project = build_once(tmp_path_factory)
    config = configparser.ConfigParser()
    config.read(REPO_ROOT / ".dvc" / "config")
    dvc(project, "config", "plots.html_template", config["plots"]["html_template"])
    subprocess.run([sys.executable, "-m", "tracevote", "plots", "template"], cwd=project, env=project_env(),
                   check=True, capture_output=True, timeout=hang_guard_s())
    return project


def test_every_chart_of_the_offline_page_draws_with_no_network(project: Path, tmp_path: Path) -> None:
    dvc(project, "plots", "show", "--html-template", str(DEFAULT_TEMPLATE), "-o", str(tmp_path / "flag"))
    dvc(project, "plots", "show", "-o", str(tmp_path / "config"))  # .dvc/config names the same page
    page = tmp_path / "flag" / "index.html"
    assert page.read_text() == (tmp_path / "config" / "index.html").read_text()
    assert "cdn.jsdelivr.net" not in page.read_text()

    drawn = drawn_charts(page, tmp_path / "profile")
    assert drawn == {**dict.fromkeys(VEGA_CHARTS, True), **dict.fromkeys(IMAGES, False)}
    for image in (tmp_path / "flag" / "static").iterdir():
        assert_not_blank(image)
    screenshot = tmp_path / "page.png"
    chromium(page, tmp_path / "profile", f"--virtual-time-budget={VIRTUAL_TIME_MS}", "--window-size=1300,2900",
             f"--screenshot={screenshot}")
    assert_not_blank(screenshot)


def test_dvcs_own_page_draws_nothing_offline(project: Path, tmp_path: Path) -> None:
    """The control: with the libraries on a CDN the same browser draws no chart, so the network really is off."""
    dvc(project, "config", "--unset", "plots.html_template")
    try:
        dvc(project, "plots", "show", "-o", str(tmp_path / "default"))
    finally:
        dvc(project, "config", "plots.html_template", DEFAULT_TEMPLATE.name)
    page = tmp_path / "default" / "index.html"
    assert "cdn.jsdelivr.net" in page.read_text()
    drawn = drawn_charts(page, tmp_path / "profile")
    assert drawn == dict.fromkeys(VEGA_CHARTS | IMAGES, False)
