"""The method pages in headless Chromium, network cut: the sections lead to them, a debate transcript and a critique
render what their data hold, a grading item shows the critic's reply, a study row opens its pool filtered to its
method's wrong problems, a compare row its pool or its debate, an agent's hostile reply is shown as text, and no
console error anywhere.

With TRACEVOTE_EXPLORER_SHOTS set to a folder, the debate, critique, grading item, study and compare pages are also
saved there as explorer-debate.png, explorer-critique.png, explorer-grading.png, explorer-study.png and
explorer-compare.png (how docs/images/ got them).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.explorer.browser import open_page
from tests.explorer.methods_project import HOSTILE, POOL_RUN, RUN, hostile_debate, methods_project
from tracevote.core.config import load_params
from tracevote.explorer import debate_pages
from tracevote.explorer.build import TITLE, build_site
from tracevote.explorer.sitefiles import SiteWriter, read_data

pytestmark = pytest.mark.slow
SHOTS = os.environ.get("TRACEVOTE_EXPLORER_SHOTS")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    project = methods_project(tmp_path_factory)
    return build_site(load_params(project / "params.yaml"), project, tmp_path_factory.mktemp("site") / "explorer").out


def shot(opened: object, name: str, height: int = 1500) -> None:
    if SHOTS:
        opened.page.set_viewport_size({"width": 1400, "height": height})  # a debate's first rounds and its judge
        opened.page.screenshot(path=str(Path(SHOTS) / f"explorer-{name}.png"))


def test_the_sections_lead_to_every_method(browser: object, site: Path) -> None:
    opened = open_page(browser, site, "#/")
    views = opened.page.eval_on_selector_all(".tv-sections li", "items => items.map(item => item.dataset.view)")
    assert {"debate", "critique", "grading", "study", "compare"} <= set(views)
    opened.page.click("a[href='#/debate/0']")
    opened.wait_ready()
    assert opened.page.locator(".tv-banner").count() == 1
    assert int(opened.page.locator(".tv-table-box").get_attribute("data-rows")) == 12
    assert opened.clean() == []


def test_a_debate_transcript_shows_every_reply_the_judge_and_the_ratings(browser: object, site: Path) -> None:
    i = next(i for i in range(12) if read_data(site, f"debate0/p{i}")["stop"] == "round2")
    page = read_data(site, f"debate0/p{i}")
    opened = open_page(browser, site, f"#/debate/0/p/{i}")
    replies = opened.page.locator("article.tv-reply:not(.judge)")
    assert replies.count() == len(page["replies"])
    assert [replies.nth(k).locator("pre").inner_text() for k in range(replies.count())] == \
        [reply["text"] for reply in page["replies"]]
    assert opened.page.locator("section[data-round]").evaluate_all("s => s.map(x => x.dataset.round)") == \
        ["0", "1", "judge", "2"]
    judge = opened.page.locator("article.tv-reply.judge h4").inner_text()
    assert judge == "Picks " + " then ".join(f"agent {a}" for a in page["picks"])
    assert "rated agent 1:" in opened.page.locator("section[data-round='1'] .tv-meta").first.inner_text()
    assert opened.page.locator(".tv-banner").count() == 1
    shot(opened, "debate")
    assert opened.clean() == []


def test_a_critique_marks_the_labels_and_the_critics_paragraph(browser: object, site: Path) -> None:
    pages = [read_data(site, f"critique0/s{i}") for i in range(12)]
    marked = [i for i, page in enumerate(pages) if page["label"] >= 0 and page["prediction"] not in (None, -1)]
    i = min(marked, key=lambda i: pages[i]["label"] == pages[i]["prediction"])  # two marks apart, where there are
    page = pages[i]
    opened = open_page(browser, site, f"#/critique/0/s/{i}")
    assert opened.page.locator("li.tv-paragraph").count() == len(page["paragraphs"])
    assert opened.page.locator("li.label-error").get_attribute("data-paragraph") == str(page["label"])
    assert opened.page.locator("li.critic-error").get_attribute("data-paragraph") == str(page["prediction"])
    assert opened.page.locator("details.tv-critique").count() == len(page["critiques"]) == 3
    assert opened.page.locator(".tv-banner").count() == 1
    shot(opened, "critique")
    assert opened.clean() == []


def grading_section(site: Path, run: str) -> int:
    sections = read_data(site, "index")["sections"]
    return next(s["index"] for s in sections if s["view"] == "grading"
                and read_data(site, f"grading{s['index']}/index")["run"] == run)


def test_a_grading_item_shows_the_critics_reply(browser: object, site: Path) -> None:
    n = grading_section(site, RUN)
    items = read_data(site, f"grading{n}/index")["items"]
    j = next(row["j"] for row in items if row["critic_score"] is not None)
    opened = open_page(browser, site, f"#/grading/{n}/i/{j}")
    texts = opened.page.locator("pre.tv-text").all_inner_texts()
    assert read_data(site, f"grading{n}/i{j}")["critic_reply"] in texts
    shot(opened, "grading")
    assert opened.clean() == []


def test_a_pool_runs_row_opens_its_trace_in_the_pool(browser: object, site: Path) -> None:
    n = grading_section(site, POOL_RUN)
    first = read_data(site, f"grading{n}/index")["items"][0]
    problem = next(p["i"] for p in read_data(site, "pool0/index")["problems"] if p["id"] == first["id"])
    opened = open_page(browser, site, f"#/grading/{n}")
    expected = f"#/pool/0/p/{problem}/t/{first['line']}"
    assert opened.page.locator("tbody tr").first.get_attribute("data-href") == expected
    opened.page.click(f"tr[data-href='{expected}'] a")
    opened.wait_ready()
    assert opened.page.evaluate("location.hash") == expected
    assert opened.clean() == []


def test_a_study_row_opens_its_pool_filtered_to_the_methods_wrong_problems(browser: object, site: Path) -> None:
    points = read_data(site, "study0/index")["points"]
    row = next(p for p in points if p["method"] == "avg" and p["model"] == "deepseek")
    problems = read_data(site, "pool0/index")["problems"]
    wrong = sum(1 for problem in problems if problem["m_avg"] is not None and problem["m_avg"] <= 50)
    opened = open_page(browser, site, "#/study/0")
    shot(opened, "study")
    opened.page.click(f"tr[data-href='{row['link']}'] a")
    opened.wait_ready()
    assert opened.page.locator("button[data-filter=wrong_avg]").get_attribute("aria-pressed") == "true"
    assert int(opened.page.locator(".tv-table-box").get_attribute("data-rows")) == wrong
    assert opened.clean() == []


def test_a_compare_row_opens_the_problems_behind_it(browser: object, site: Path) -> None:
    compare = read_data(site, "compare0/index")
    opened = open_page(browser, site, "#/compare/0")
    assert int(opened.page.locator(".tv-table-box").get_attribute("data-rows")) == len(compare["rows"])
    assert opened.page.locator("#tv-main ul li a").evaluate_all("links => links.map(a => a.getAttribute('href'))") \
        == [link["hash"] for link in compare["links"]] == ["#/pool/0", "#/debate/0"]
    assert opened.page.locator(".tv-banner").count() == 1
    shot(opened, "compare", height=700)  # the whole table, no blank below
    cons = next(row for row in compare["rows"] if row["method"] == "cons")
    opened.page.click(f"tr[data-href='{cons['link']}'] a")
    opened.wait_ready()
    problems = read_data(site, "pool0/index")["problems"]
    assert opened.page.locator("button[data-filter=wrong_cons]").get_attribute("aria-pressed") == "true"
    assert int(opened.page.locator(".tv-table-box").get_attribute("data-rows")) == sum(
        1 for problem in problems if not problem["cons_right"])
    opened.goto("#/compare/0")
    opened.page.click("tr[data-href='#/debate/0'] a")
    opened.wait_ready()
    assert opened.page.evaluate("location.hash") == "#/debate/0"
    assert opened.clean() == []


def test_an_agents_hostile_reply_is_shown_as_text(browser: object, tmp_path: Path) -> None:
    root = hostile_debate(tmp_path / "project")  # debates only: build_site would ask for its pool's aggregate
    with SiteWriter(tmp_path / "explorer") as writer:
        writer.copy_assets()
        entries = debate_pages.sections(writer, load_params(root / "params.yaml"), root)
        writer.put("index", {"title": TITLE, "simulated": True, "sections": entries})
        site = writer.finish()
    opened = open_page(browser, site, "#/debate/0/p/0")
    assert opened.page.locator("#tv-main img").count() == 0
    assert all(text.startswith(HOSTILE) for text in opened.page.locator("article.tv-reply pre").all_inner_texts())
    assert opened.clean() == []
