"""Headless Chromium for the explorer's tests, driven by Playwright with the network cut: Debian's /usr/bin/chromium
(never a downloaded browser), its proxy on a closed port, every host name unresolvable, and every request that is
not file:// aborted. Each page collects its console errors and page errors, which a test asserts empty.

Use the module fixture `browser` (one browser per test module) and `open_page(browser, site, hash)`. Without chromium
the tests skip, except where TRACEVOTE_REQUIRE_CHROMIUM is set (CI), as tests/test_plots_browser.py does.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
OFFLINE_ARGS = ["--no-sandbox", "--disable-gpu", "--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND"]
TIMEOUT_MS = 60_000  # a wait's upper bound on a loaded machine; tests wait for elements, never for time


def require_chromium() -> None:
    if CHROMIUM.is_file():
        return
    missing = f"{CHROMIUM} is absent (Debian's chromium package): the explorer is not rendered"
    if os.environ.get("TRACEVOTE_REQUIRE_CHROMIUM"):
        pytest.fail(f"{missing}, though TRACEVOTE_REQUIRE_CHROMIUM is set", pytrace=False)
    pytest.skip(missing)


@dataclass
class Opened:
    """A page of the site and what went wrong on it."""

    page: object  # playwright.sync_api.Page
    errors: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)  # requests that tried to leave file://

    def goto(self, hash_: str) -> None:
        """Go to a route of the same site and wait until its view has drawn."""
        self.page.evaluate("hash => { location.hash = hash; }", hash_)
        self.wait_ready()

    def wait_ready(self) -> None:
        self.page.wait_for_selector("#tv-main[data-ready='true'], #tv-main .tv-error", timeout=TIMEOUT_MS)

    def clean(self) -> list[str]:
        """Every console error, page error and blocked request so far (empty on a clean page)."""
        return [*self.errors, *(f"request left file://: {url}" for url in self.blocked)]


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=OFFLINE_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def open_page(browser: object, site: Path, hash_: str = "#/", viewport: dict[str, int] | None = None) -> Opened:
    """A new offline context on <site>/index.html<hash_>, waited until its view has drawn."""
    context = browser.new_context(viewport=viewport or {"width": 1400, "height": 900})
    opened = Opened(context.new_page())

    def route(request_route: object) -> None:
        url = request_route.request.url
        if url.startswith("file://"):
            request_route.continue_()
        else:
            opened.blocked.append(url)
            request_route.abort()

    context.route("**/*", route)
    opened.page.on("console", lambda message: opened.errors.append(f"console {message.type}: {message.text}")
                   if message.type == "error" else None)
    opened.page.on("pageerror", lambda error: opened.errors.append(f"page error: {error}"))
    opened.page.goto((site / "index.html").resolve().as_uri() + hash_)
    opened.wait_ready()
    return opened
