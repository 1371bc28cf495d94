"""The trace view in headless Chromium with the network cut: each token's colour and confidence, and on a token
its alternatives and their strings, read back from the page equal the pool's stored values; the curve, the
thresholds and the would-stop markers are drawn; the console stays clean."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np
import pytest

from bench.explorer_trace_project import DATASET, GROUP, PoolProject
from tests.explorer.browser import browser, open_page  # noqa: F401 (the module fixture)
from tests.explorer.trace_project import trace_project
from tracevote.core.config_view import ViewConfig
from tracevote.core.study_paths import model_paths
from tracevote.deepconf.stop_table import StopRows
from tracevote.explorer.build import build_site
from tracevote.explorer.live_traces import open_live
from tracevote.explorer.trace_data import Window, open_traces, thresholds, token_confidence, would_stop
from tracevote.store.records import Sample

# the colour TV.confidenceColor gives, as the browser writes it back (rgb)
COLOUR_OF = ("([v, lo, hi]) => { const d = document.createElement('div'); "
             "d.style.background = TV.confidenceColor(v, lo, hi); return d.style.backgroundColor; }")
SCREENSHOT = "explorer-trace.png"  # docs/images/ holds it: TRACEVOTE_SCREENSHOTS=docs/images writes it there


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> PoolProject:
    return trace_project(tmp_path_factory)


@pytest.fixture(scope="module")
def site(project: PoolProject, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's site, built in a folder of this module's (the project is shared: read, never changed)."""
    site = tmp_path_factory.mktemp("trace-site") / "explorer"
    build_site(project.params, project.root, site)
    return site


def longest(project: PoolProject) -> Sample:
    """Problem 0's longest trace (its curve has the most windows)."""
    problem_id = project.pool.problem_ids()[0]
    return max(project.pool.iter_samples(problem_id), key=lambda sample: (sample.n_tokens, -sample.sample_id))


def test_token_colours_and_alternatives_are_the_pools(browser: object, project: PoolProject,  # noqa: F811
                                                      site: Path) -> None:
    sample = longest(project)
    problem = sorted(project.pool.problem_ids()).index(sample.problem_id)
    opened = open_page(browser, site, f"#/pool/0/p/{problem}/t/{sample.sample_id}")
    page = opened.page
    assert page.locator("[data-simulated='true']").count() == 1
    spans = page.locator(".tv-tok")
    assert spans.count() == sample.n_tokens
    stored = token_confidence(sample, Window.of(project.params.confidence))
    low, high = np.percentile(stored[~np.isnan(stored)], (5, 95)).round(3).tolist()
    for k in (0, sample.n_tokens // 2, sample.n_tokens - 1):
        span = spans.nth(k)
        assert span.get_attribute("data-i") == str(k)
        assert float(span.get_attribute("data-conf")) == pytest.approx(round(float(stored[k]), 3), abs=5e-4)
        assert span.text_content() == sample.tokens[k]
        expected = page.evaluate(COLOUR_OF, [round(float(stored[k]), 3), low, high])
        assert span.evaluate("node => node.style.backgroundColor") == expected
        span.click()
        page.wait_for_selector(f"#tv-token-panel[data-i='{k}'][data-ready='true']")
        rows = page.locator("#tv-token-panel tr[data-rank]")
        top = sample.top_logprobs[k].astype(np.float64)
        assert rows.count() == len(top)
        for rank in range(len(top)):
            row = rows.nth(rank)
            assert float(row.get_attribute("data-logprob")) == pytest.approx(round(float(top[rank]), 2), abs=5e-3)
            assert row.get_attribute("data-token") == sample.top_tokens[k][rank]
    assert opened.clean() == []


def test_the_curve_thresholds_and_stops_are_drawn(browser: object, project: PoolProject,  # noqa: F811
                                                  site: Path, tmp_path: Path) -> None:
    sample = longest(project)
    problem = sorted(project.pool.problem_ids()).index(sample.problem_id)
    opened = open_page(browser, site, f"#/pool/0/p/{problem}/t/{sample.sample_id}")
    page = opened.page
    assert int(page.locator("polyline[data-curve]").get_attribute("data-curve")) == sample.n_tokens - GROUP + 1
    assert sorted(page.locator("line[data-threshold]").evaluate_all("ls => ls.map(l => l.dataset.threshold)")) == [
        "online_high", "online_low"]
    source = open_traces(model_paths("deepseek", DATASET, "deepseek"), project.root, project.params)
    _, lowest, _ = source.scores[sample.problem_id]
    rows = source.stops.rows_of(sample.problem_id)
    mine = rows.sample == sample.sample_id
    own = StopRows(sample=rows.sample[mine], spent=rows.spent[mine], value=rows.value[mine])
    for t in thresholds(sample.problem_id, lowest, project.params):
        spent = would_stop(own, t.median)
        marker = page.locator(f"line[data-would-stop='{t.method}']")
        assert marker.count() == (spent is not None)
        if spent is not None:
            assert marker.get_attribute("data-token") == str(spent - 1)
            assert t.method in page.locator(f".tv-tok[data-i='{spent - 1}']").get_attribute("data-stop")
    page.locator(".tv-tok").nth(1).focus()  # the keyboard opens a token too
    page.wait_for_selector("#tv-token-panel[data-i='1'][data-ready='true']")
    shots = Path(os.environ.get("TRACEVOTE_SCREENSHOTS") or tmp_path)
    page.screenshot(path=str(shots / SCREENSHOT), full_page=True)
    assert (shots / SCREENSHOT).stat().st_size > 0
    assert opened.clean() == []


def test_a_live_trace_shows_where_the_run_stopped_it(browser: object, project: PoolProject,  # noqa: F811
                                                     site: Path) -> None:
    source = open_live(project.params, project.root, DATASET)
    problem_id = sorted(project.pool.problem_ids())[0]
    traces = source.ledgers[1][1].traces(problem_id)
    index, trace = next((i, t) for i, t in sorted(traces.items()) if t.stop_reason == "confidence")
    opened = open_page(browser, site, "#/pool/0/p/0")
    opened.page.locator(f"a[href='#/pool/0/p/0/t/{index}?live=1']").click()
    opened.wait_ready()
    page = opened.page
    assert page.locator("[data-simulated='true']").count() == 1
    assert page.locator(".tv-tok").count() == trace.sample.n_tokens
    assert page.locator("line[data-live-stop='online_low']").get_attribute("data-token") == str(
        trace.sample.n_tokens - 1)
    assert "live" in page.locator(f".tv-tok[data-i='{trace.sample.n_tokens - 1}']").get_attribute("data-stop")
    assert page.locator("li[data-reason='confidence']").count() == 1
    assert opened.clean() == []


def test_a_trace_outside_view_trace_pages_is_listed_unlinked(browser: object, project: PoolProject,  # noqa: F811
                                                              tmp_path: Path) -> None:
    """view.trace_pages 3: a trace outside the subset keeps its row (no link, no data file), the page says why, and
    its address says it has no page; one inside is linked, has its data and opens."""
    params = dataclasses.replace(project.params, view=ViewConfig(trace_pages=3))
    site = tmp_path / "explorer"
    build_site(params, project.root, site)
    opened = open_page(browser, site, "#/pool/0/p/0")
    page = opened.page
    problem_id = sorted(project.pool.problem_ids())[0]
    ids = sorted(sample.sample_id for sample in project.pool.iter_samples(problem_id))
    note = page.locator("[data-trace-subset='true']")
    assert "6 of these 16 traces have a trace page" in note.text_content()
    assert "view.trace_pages: 3" in note.text_content()
    table = page.locator("[data-trace-subset='true'] + * tbody tr")
    assert table.count() == len(ids)
    inside = {int(href.rsplit("/", 1)[1]) for href in
              table.locator("a").evaluate_all("links => links.map(a => a.getAttribute('href'))")}
    outside = sorted(set(ids) - inside)
    assert len(inside) == 6 and len(outside) == 10
    written = "".join(path.read_text() for path in (site / "data" / "pool0" / "p0").glob("c*.js"))
    for sample_id in outside:
        row = table.filter(has=page.locator(f"td:first-child:text-is('{sample_id}')"))
        assert row.count() == 1 and row.locator("a").count() == 0 and row.get_attribute("data-href") is None
        assert f'"id":{sample_id},' not in written
    for sample_id in inside:
        assert f'"id":{sample_id},' in written
    opened.goto("#/pool/0")
    assert "3 most and 3 least confident traces by avg have one" in page.locator(
        "[data-trace-pages='built']").text_content()
    opened.goto(f"#/pool/0/p/0/t/{outside[0]}")
    assert page.locator("[data-no-trace-page='true']").count() == 1
    opened.goto("#/pool/0/p/0")
    page.locator(f"a[href='#/pool/0/p/0/t/{min(inside)}']").click()
    opened.wait_ready()
    assert page.locator(".tv-tok").count() > 0
    assert opened.clean() == []
