"""Steps shared by the browser tests: open the page, fill the Model card, train, wait.

Plain functions over a Playwright ``page``; the fixtures (served app,
Chromium) are in ``tests/e2e/conftest.py``.
"""
from __future__ import annotations

import re
import time

READY = "window.Bokeh && Bokeh.documents.length > 0 && Object.keys(Bokeh.index).length > 0"
DATA_SET = "Data set (bundled sample or your file)"


def poll(fn, timeout: float = 20.0, every: float = 0.25):
    """Call ``fn`` until it returns something truthy or ``timeout`` seconds pass; its last value."""
    deadline = time.monotonic() + timeout
    value = fn()
    while not value and time.monotonic() < deadline:
        time.sleep(every)
        value = fn()
    return value


def wait_text(page, text, timeout: float = 60_000) -> None:
    page.get_by_text(text).first.wait_for(state="visible", timeout=timeout)


def open_page(page, url: str, sample: str | None = None, model: str | None = None, js: str | None = None) -> None:
    """Load the app, wait for Bokeh, optionally install helper ``js`` and pick a sample and a model."""
    page.goto(url)
    page.wait_for_function(READY, timeout=120_000)
    if js:
        page.evaluate(js)
    if sample is not None:
        page.get_by_label(DATA_SET).select_option(label=sample)
    if model is not None:
        page.get_by_label("Model", exact=True).select_option(label=model)


def fill_numbers(page, values: dict) -> None:
    """Type each ``{label: value}`` into its box and commit it with Enter."""
    for label, value in values.items():
        box = page.get_by_label(label)
        box.fill(str(value))
        box.press("Enter")


def click_train(page, timeout: float = 20.0) -> None:
    button = page.get_by_role("button", name="▶ Train", exact=True)
    assert poll(button.is_enabled, timeout=timeout), "Train stayed disabled"
    button.click()


def train_to_end(page, timeout: float = 150_000) -> None:
    """Click Train and wait for the "Finished after ..." status."""
    click_train(page)
    wait_text(page, re.compile(r"Finished after"), timeout=timeout)
