"""A newcomer's own files, uploaded through the page and trained with the defaults.

Each file is generated here (`userdata`), never a bundled sample.
"""
from __future__ import annotations

import re

import pytest
from browserkit import open_page, poll, train_to_end, wait_loaded

from userdata import mixed_units_csv

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(420),
    pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning"),
]


def _upload(page, path) -> None:
    page.locator("input[type=file]").first.set_input_files(str(path))


def _summary(page) -> str:
    values = page.locator("textarea").evaluate_all("(els) => els.map((e) => e.value)")
    return next((v for v in values if "model summary" in v), "")


def _nn_errors(page) -> tuple[int, int] | None:
    found = re.search(r"1-NN errors in the latent space: (\d+) of (\d+)", _summary(page))
    return (int(found.group(1)), int(found.group(2))) if found else None


def test_mixed_units_are_standardised_by_default_with_a_note(page, served_app, tmp_path, artifacts):
    path = tmp_path / "wine-like.csv"
    path.write_bytes(mixed_units_csv())
    open_page(page, served_app)
    box = page.locator("div.bk-Checkbox").filter(has_text="Standardise features").locator("input[type=checkbox]")
    assert not box.is_checked()  # the bundled glyph images keep their units
    _upload(page, path)
    summary = wait_loaded(page, "wine-like.csv")
    assert "standardised (zero mean, unit variance)" in summary
    note = page.locator(".gx-units-note").first
    line = note.get_by_text(re.compile(r"^Standardised by default: the columns' spreads differ [\d,]+-fold "
                                       r"\('proline' vs '\w+'\)\. Untick to model the raw units\.$"))
    line.wait_for(timeout=30_000)
    assert poll(box.is_checked, timeout=10), "the checkbox does not show the standardisation"

    train_to_end(page)  # the defaults
    errors = poll(lambda: _nn_errors(page), timeout=60)
    assert errors is not None and errors[1] == 120 and errors[0] <= 12, _summary(page)
    page.screenshot(path=str(artifacts / "own-data-mixed-units.png"))

    box.uncheck()  # the user's choice: the raw units, and a note on what that means
    note.get_by_text("unstandardised, the widest columns dominate").wait_for(timeout=30_000)
    assert "standardised" not in wait_loaded(page, "wine-like.csv").replace("unstandardised", "")

    # the next data set does not inherit the choice, nor the note
    page.get_by_label("Data set (bundled sample or your file)").select_option(label="Swiss roll (3-D)")
    wait_loaded(page, "swiss-roll")
    assert poll(lambda: not note.is_visible(), timeout=20) and not box.is_checked()
