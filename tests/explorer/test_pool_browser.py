"""The pool pages in headless Chromium, network cut: the index opens, a filter narrows it, a header sorts, a problem
page opens with its hostile text shown as text, a trace row links to its route, and no console error anywhere."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.explorer_project import HOSTILE, write_project
from tests.explorer.browser import open_page
from tracevote.core.config import load_params
from tracevote.explorer.build import build_site
from tracevote.explorer.sitefiles import read_data

pytestmark = pytest.mark.slow
TRACES = 32


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    project = write_project(tmp_path_factory.mktemp("toy"), problems=4, traces=TRACES)
    return build_site(load_params(project.params), project.root, project.root / "explorer").out


def _rows(opened: object, nth: int = -1) -> int:
    return int(opened.page.locator(".tv-table-box").nth(nth).get_attribute("data-rows"))


def test_the_index_of_sections_leads_to_the_pool(browser: object, site: Path) -> None:
    opened = open_page(browser, site, "#/")
    assert opened.page.locator(".tv-banner").count() == 1
    opened.page.click("a[href='#/pool/0']")
    opened.wait_ready()
    assert _rows(opened) == len(read_data(site, "pool0/index")["problems"])
    assert opened.page.locator(".tv-banner").inner_text().startswith("SIMULATED")
    assert opened.clean() == []


@pytest.mark.parametrize(("filter_id", "test"), [("wrong_cons", lambda row: not row["cons_right"]),
                                                 ("wrong_filter", lambda row: row["wrong_filter"]),
                                                 ("disagree", lambda row: row["disagree"])])
def test_a_filter_narrows_the_index(browser: object, site: Path, filter_id: str, test: object) -> None:
    problems = read_data(site, "pool0/index")["problems"]
    expected = sum(1 for row in problems if test(row))
    opened = open_page(browser, site, "#/pool/0")
    opened.page.click(f"button[data-filter={filter_id}]")
    assert _rows(opened) == expected
    assert opened.page.locator("tbody tr").count() == expected
    opened.page.click(f"button[data-filter={filter_id}]")
    assert _rows(opened) == len(problems)
    linked = open_page(browser, site, f"#/pool/0?f={filter_id}")  # a link selects the filter on load
    assert _rows(linked) == expected
    assert opened.clean() == [] and linked.clean() == []


def test_a_link_to_a_method_the_pool_has_no_result_of_says_so_and_shows_every_problem(browser: object,
                                                                                    site: Path) -> None:
    problems = read_data(site, "pool0/index")["problems"]
    asked = open_page(browser, site, "#/pool/0?f=wrong_online_x%3Cb%3E")  # a method named x<b>, typed into the address
    note = asked.page.locator("[data-unknown-filter]")
    assert note.inner_text() == ("The link asked for the problems online_x<b> got wrong, but this pool's aggregate has "
                                 f"no per-problem result of it at K = {read_data(site, 'pool0/index')['k']}: every "
                                 "problem is shown.")
    assert note.locator("b").count() == 0
    assert _rows(asked) == len(problems)
    known = open_page(browser, site, "#/pool/0?f=wrong_cons")
    assert known.page.locator("[data-unknown-filter]").count() == 0
    assert asked.clean() == [] and known.clean() == []


def test_the_filters_in_this_pool_narrow_it(site: Path) -> None:
    """The toy pool holds problems on both sides of the index's filters, so the test above can fail."""
    problems = read_data(site, "pool0/index")["problems"]
    assert 0 < sum(not row["cons_right"] for row in problems) < len(problems)


def test_a_problem_page_shows_its_traces_and_its_text_as_text(browser: object, site: Path) -> None:
    opened = open_page(browser, site, "#/pool/0")
    opened.page.click("a[href='#/pool/0/p/0']")
    opened.wait_ready()
    assert opened.page.locator("[data-problem-text]").text_content() == HOSTILE
    assert opened.page.locator(".tv-banner[data-simulated=true]").count() == 1
    assert opened.page.locator("#tv-main img").count() == 0
    assert opened.page.title() == "tracevote explorer"  # the onerror in the text never ran
    assert _rows(opened) == TRACES
    opened.page.click("button[data-filter=right]")
    right = sum(read_data(site, "pool0/p0")["traces"]["correct"])
    assert _rows(opened) == right
    assert opened.clean() == []


def test_a_header_sorts_the_traces(browser: object, site: Path) -> None:
    opened = open_page(browser, site, "#/pool/0/p/1")
    table = opened.page.locator(".tv-table-box").last
    table.locator("th[data-key=n_tokens]").click()  # numbers sort largest first
    tokens = read_data(site, "pool0/p1")["traces"]["n_tokens"]
    column = [th.get_attribute("data-key") for th in table.locator("th").all()].index("n_tokens")
    first = table.locator("tbody tr").first.locator("td").nth(column).inner_text()
    assert int(first) == max(tokens)
    table.locator("th[data-key=n_tokens]").click()
    first = table.locator("tbody tr").first.locator("td").nth(column).inner_text()
    assert int(first) == min(tokens)
    assert opened.clean() == []


def test_a_trace_row_links_to_its_route(browser: object, site: Path) -> None:
    opened = open_page(browser, site, "#/pool/0/p/2")
    link = opened.page.locator(".tv-table-box").last.locator("tbody tr a").first
    sample = link.inner_text()
    link.click()
    opened.wait_ready()
    assert opened.page.evaluate("location.hash") == f"#/pool/0/p/2/t/{sample}"
    assert opened.page.locator(".tv-banner[data-simulated=true]").count() == 1
    assert opened.page.locator("h2", has_text=f"Trace {sample}").count() == 1 or opened.page.evaluate(
        "typeof TV.poolTrace === 'function'")
    assert opened.clean() == []


def test_a_long_table_draws_its_first_rows_until_show_all(browser: object, site: Path) -> None:
    opened = open_page(browser, site, "#/")
    drawn = opened.page.evaluate("""() => {
        const table = TV.table({columns: [{key: "x", label: "x", kind: "number"}], rows: [{x: 1}, {x: 2}, {x: 3}],
                                pageSize: 2});
        document.body.append(table);
        const before = [table.dataset.rows, table.querySelectorAll("tbody tr").length];
        table.querySelector(".tv-more").click();
        return [...before, table.querySelectorAll("tbody tr").length, table.querySelector(".tv-more").hidden];
    }""")
    assert drawn == ["3", 2, 3, True]
    assert opened.clean() == []


def test_a_real_pools_pages_have_no_banner_and_nothing_in_its_place(browser: object, tmp_path: Path) -> None:
    """A view's missing parts (the banner of a real model, a note it has no cause for) leave nothing on the page: the
    DOM's own append would have written "null" where the banner goes."""
    project = write_project(tmp_path, problems=2, traces=8, simulated=False, ks=(1, 4))
    out = build_site(load_params(project.params), project.root, tmp_path / "explorer").out
    for hash_ in ("#/", "#/pool/0", "#/pool/0/p/0"):
        opened = open_page(browser, out, hash_)
        assert opened.page.locator(".tv-banner").count() == 0
        assert "null" not in opened.page.locator("#tv-main").inner_text()
        assert opened.clean() == []


def test_pass_at_k_and_avg_at_k_show_on_the_index_and_the_problem_page(browser: object, site: Path) -> None:
    pool = read_data(site, "pool0/index")
    opened = open_page(browser, site, "#/pool/0")
    header = opened.page.locator("#tv-main th").all_inner_texts()
    assert f"pass@{pool['k']}" in " ".join(header) and f"avg@{pool['k']}" in " ".join(header)
    summary = opened.page.locator(".tv-summary").first.inner_text()
    assert f"pass@{pool['k']} {pool['pass_at_k']['pass_at_k']:.1f}%" in summary
    opened.page.click("a[href='#/pool/0/p/0']")
    opened.wait_ready()
    page = read_data(site, "pool0/p0")["pass_at_k"]
    assert opened.page.locator("[data-pass-at-k]").inner_text() == (
        f"{page['correct']} of {page['samples']} traces right: pass@{pool['k']} {page['pass_at_k']:.1f}%, "
        f"avg@{pool['k']} {page['avg_at_k']:.1f}%")
    assert opened.clean() == []
