"""Browser tests: a real Chromium (Debian's /usr/bin/chromium, driven by Playwright)
against pytest-django's live server. Every test here is skipped, with the reason, when
that Chromium is missing; Playwright never downloads a browser."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.browser import CHROMIUM, CHROMIUM_ARGS


@pytest.fixture(scope="session", autouse=True)
def _chromium_installed() -> None:
    if not CHROMIUM.exists():
        pytest.skip(
            "browser tests need Debian's Chromium at /usr/bin/chromium "
            "(apt-get install chromium); they never download a browser"
        )


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop running on this thread; the ORM calls
    # the tests make between browser steps are plain synchronous code all the same.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(
                executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
            )
            yield chromium
            chromium.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def open_page(browser, live_server):
    """A fresh browser context (no cookies) at a laptop's screen size."""
    contexts = []

    def make(*, javascript: bool = True):
        context = browser.new_context(
            viewport={"width": 1440, "height": 900},
            java_script_enabled=javascript,
            base_url=live_server.url,
        )
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(10_000)
        return page

    yield make
    for context in contexts:
        context.close()


SCREENSHOT_DIR = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
_saved: list[Path] = []


@pytest.fixture
def screenshot() -> Callable[[object, str], Path]:
    """Save a full-page screenshot of a Playwright page as <name>.png; the folder is
    printed at the end of the run."""

    def save(page: object, name: str) -> Path:
        SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOT_DIR / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        _saved.append(path)
        return path

    return save


def pytest_terminal_summary(terminalreporter) -> None:
    if _saved:
        terminalreporter.write_sep("-", "dashboard screenshots")
        terminalreporter.write_line(f"{len(_saved)} screenshots saved in {SCREENSHOT_DIR}/")
        for path in _saved:
            terminalreporter.write_line(f"  {path.name}")
