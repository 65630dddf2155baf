"""The SVI model in a real browser: minibatch settings in the Model card, progress in epochs.

Screenshot: test-artifacts/e2e/svi-finished.png.
"""
from __future__ import annotations

import re

import pytest
from browserkit import click_train, fill_numbers, open_page, poll

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(300),
    pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning"),
]


def test_svi_model_trains_in_minibatches_and_reports_epochs(page, served_app, artifacts):
    open_page(page, served_app, sample="Three-phase flow (synthetic, 12-D)",
              model="Bayesian GP-LVM, stochastic (SVI: minibatches, big data)")
    batch = page.get_by_label("Minibatch (rows per iteration)")
    batch.wait_for(state="visible", timeout=20_000)
    optimiser = page.get_by_label("Optimiser")
    # the optimiser's options follow the model in a later update than the minibatch box
    svi_only = ["Stochastic (SVI, minibatches)"]
    only = poll(lambda: optimiser.locator("option").all_inner_texts() == svi_only, timeout=30)
    assert only, optimiser.locator("option").all_inner_texts()
    assert optimiser.locator("option:checked").inner_text() == "Stochastic (SVI, minibatches)"
    # a small data set: no big-data proposal
    assert not page.locator(".gx-suggestion").first.is_visible()
    fill_numbers(page, {"Minibatch (rows per iteration)": 90, "Iterations": 40, "Inducing points M": 10})
    click_train(page)
    # 40 iterations of 90 rows over 450 rows: 8 epochs
    page.get_by_text(re.compile(r"Finished after 40 iterations \(8\.00 epochs\)")).first.wait_for(
        state="visible", timeout=120_000)
    page.screenshot(path=str(artifacts / "svi-finished.png"), full_page=True)
