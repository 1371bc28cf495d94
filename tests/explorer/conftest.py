"""The explorer tests' fixtures: `browser`, one headless Chromium per test module (tests/explorer/browser.py)."""

from tests.explorer.browser import browser

__all__ = ["browser"]
