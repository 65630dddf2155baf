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


# Text of the Data card's summary (written by the server once a data set is loaded): name, N, D, labels.
DATA_SUMMARY = """
() => {
  const out = [];
  const visit = (root) => {
    for (const el of root.querySelectorAll('*')) {
      if (el.classList.contains('gx-summary'))
        for (const n of (el.shadowRoot || el).querySelectorAll('p, li')) out.push(n.textContent);
      if (el.shadowRoot) visit(el.shadowRoot);
    }
  };
  visit(document);
  return out.join('\\n');
}
"""


def data_summary(page) -> str:
    return page.evaluate(DATA_SUMMARY)


def wait_js(page, predicate: str, arg=None, timeout: float = 60.0, every: float = 0.25):
    """Evaluate ``predicate`` (a JS function of ``arg``) until it returns something truthy; that value.

    A predicate that throws (a model, source or column not there yet) counts as "not yet":
    it is polled again instead of failing the test, until ``timeout`` seconds pass.
    """
    guarded = f"""(arg) => {{ try {{ return ({predicate})(arg); }} catch (e) {{ return null; }} }}"""
    return poll(lambda: page.evaluate(guarded, arg), timeout=timeout, every=every)


def wait_loaded(page, name: str, timeout: float = 60.0) -> str:
    """Wait until the Data card's summary names ``name``; the summary.

    The upload widget shows a file's name as soon as it is picked, so a
    name elsewhere in the page does not mean the server has loaded it.
    """
    summary = poll(lambda: (lambda s: s if name in s else "")(data_summary(page)), timeout=timeout)
    assert summary, f"{name!r} was not loaded (the Data card shows: {data_summary(page)!r})"
    return summary


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


def click_train(page, timeout: float = 60.0) -> None:
    button = page.get_by_role("button", name="▶ Train", exact=True)
    assert poll(button.is_enabled, timeout=timeout), "Train stayed disabled"
    button.click()


def train_to_end(page, timeout: float = 150_000) -> None:
    """Click Train and wait for the "Finished after ..." (the cap) or "Converged after ..." status."""
    click_train(page)
    wait_text(page, re.compile(r"(Finished|Converged) after"), timeout=timeout)
