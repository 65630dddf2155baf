"""The runs table survives a page reload in a real browser: the page sets its browser's token in a cookie,
the reloaded page shows the same rows and a click shows a kept run again; another browser (a new context,
no cookie) starts with an empty table."""
from __future__ import annotations

import pytest

from browserkit import DATA_SET, fill_numbers, open_page, set_slider, train_to_end, wait_js, wait_text

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning"),
]

TABLE = "() => __gk.table('runs_bound_per_row')"
FULL_TABLE = ("() => { const t = __gk.table('runs_bound_per_row'); return t && t.runs_run.length === 3 "
              "&& t.runs_nn_errors_all.every(v => v !== null) ? t : null; }")


@pytest.mark.timeout(600)
def test_the_runs_table_survives_a_reload_and_another_browser_does_not_see_it(served_app, page, browser,
                                                                               browser_context_args, artifacts):
    open_page(page, served_app)
    page.get_by_label(DATA_SET).select_option(label="Three-phase flow (synthetic, 12-D)")
    wait_text(page, "three-phase-flow")
    page.get_by_label("Model", exact=True).select_option(label="GP-LVM (exact)")
    fill_numbers(page, {"Iterations": 10})
    other = None
    try:
        train_to_end(page)
        assert set_slider(page, "Latent dimensions Q", 3)
        train_to_end(page)
        before = wait_js(page, FULL_TABLE, timeout=60)
        assert before, page.evaluate(TABLE)
        cookie = [c for c in page.context.cookies() if c["name"] == "gx_runs"]
        assert len(cookie) == 1 and len(cookie[0]["value"]) >= 16
        assert before["runs_Q"] == [2, 5, 3]

        page.reload()
        open_page(page, page.url)
        after = wait_js(page, "() => { const t = __gk.table('runs_bound_per_row'); "
                              "return t && t.runs_run.length === 3 ? t : null; }", timeout=60)
        assert after == before  # every cell of the PCA row and both runs
        wait_text(page, "2 runs of this browser kept from before")
        assert [c["value"] for c in page.context.cookies() if c["name"] == "gx_runs"] == [cookie[0]["value"]]
        page.locator(".gx-runs-table .tabulator-row").nth(1).click()  # run 1 (row 0 is PCA)
        wait_text(page, "Run 1 shown again from the runs table")
        page.screenshot(path=str(artifacts / "runs_after_reload.png"), full_page=True)

        context = browser.new_context(**browser_context_args)  # another browser: no cookie
        other = context.new_page()
        open_page(other, served_app)
        wait_js(other, "() => { const t = __gk.table('runs_bound_per_row'); return t !== null; }", timeout=60)
        assert other.evaluate(TABLE)["runs_run"] == []
        theirs = [c["value"] for c in context.cookies() if c["name"] == "gx_runs"]
        assert theirs and theirs != [cookie[0]["value"]]
    except Exception:
        page.screenshot(path=str(artifacts / "runs_reload_failed.png"), full_page=True)
        raise
    finally:
        if other is not None:
            other.context.close()
