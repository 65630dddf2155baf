"""The runs table in a real browser: three runs of different Q and kernels give three rows and a PCA row
with their settings; clicking the first shows its map again (the same shading image); the CSV has every
column."""
from __future__ import annotations

import io

import pandas as pd
import pytest

from browserkit import DATA_SET, fill_numbers, open_page, poll, set_slider, train_to_end, wait_js, wait_text

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning"),
]

# the latent map's shading image as the page holds it: its size and a checksum of its finite values
SHADING = """() => {
  for (const doc of Bokeh.documents) for (const m of doc.all_models) {
    if (m.name !== 'latent-variance') continue;
    const images = __gk.column(m, 'image');
    if (!images || !images.length) return null;
    const flat = Array.from(images[0].flat ? images[0].flat(Infinity) : images[0]);
    let s = 0, w = 0;
    flat.forEach((v, i) => { if (Number.isFinite(v)) { s += v; w += v * ((i % 97) + 1); } });
    return [flat.length, s, w];
  }
  return null;
}"""

RUNS = [("Bayesian GP-LVM", "RBF (ARD)", 2), ("Bayesian GP-LVM", "Linear (ARD)", 3),
        ("GP-LVM (exact)", "Matérn 3/2 (ARD)", 4)]


def settled_shading(page, timeout=60.0):
    """The shading image once it has stopped changing for a second."""
    last = [None]

    def steady():
        now = page.evaluate(SHADING)
        same = now is not None and now == last[0]
        last[0] = now
        return now if same else None

    return poll(steady, timeout=timeout, every=1.0)


@pytest.mark.timeout(600)
def test_three_runs_make_three_rows_and_pca_and_a_click_shows_the_first_again(served_app, page, artifacts):
    open_page(page, served_app)
    page.get_by_label(DATA_SET).select_option(label="Three-phase flow (synthetic, 12-D)")
    wait_text(page, "three-phase-flow")
    fill_numbers(page, {"Iterations": 20})
    shading = None
    try:
        for model, kernel, Q in RUNS:
            page.get_by_label("Model", exact=True).select_option(label=model)
            page.get_by_label("Kernel", exact=True).select_option(label=kernel)
            assert set_slider(page, "Latent dimensions Q", Q)
            train_to_end(page)
            if shading is None:
                shading = settled_shading(page)
                assert shading and shading[0] > 0, "the first run's map was not drawn"
        table = wait_js(page, "() => { const t = __gk.table('runs_bound_per_row'); return t && t.runs_run.length === 4 "
                              "&& t.runs_nn_errors_all.every(v => v !== null) ? t : null; }", timeout=60)
        assert table, page.evaluate("() => __gk.table('runs_bound_per_row')")
        table = {key[len("runs_"):]: value for key, value in table.items() if key.startswith("runs_")}
        assert table["model"] == ["PCA"] + [m for m, _, _ in RUNS]
        assert table["Q"] == [2, 2, 3, 4]
        assert [k.split(" + ")[0] for k in table["kernel"][1:]] == [k for _, k, _ in RUNS]
        assert table["run"] == [0, 1, 2, 3]
        assert all(isinstance(v, (int, float)) for v in table["bound_per_row"])
        assert shading != settled_shading(page)  # the third run's map is on show now
        page.screenshot(path=str(artifacts / "runs_table.png"), full_page=True)

        page.locator(".tabulator-row").nth(1).click()  # run 1 (row 0 is PCA)
        wait_text(page, "Run 1 shown again from the runs table")
        assert poll(lambda: settled_shading(page) == shading, timeout=60), "run 1's map did not come back"
        page.screenshot(path=str(artifacts / "runs_table_restored.png"), full_page=True)

        with page.expect_download() as info:
            page.get_by_role("button", name="Runs table (CSV)").click()
        frame = pd.read_csv(io.BytesIO(open(info.value.path(), "rb").read()))
    except Exception:
        page.screenshot(path=str(artifacts / "runs_failed.png"), full_page=True)
        raise
    from gplvm_explorer.state.runs import COLUMNS

    assert list(frame.columns) == [h for _, h in COLUMNS]
    assert frame["Q"].tolist() == [2, 2, 3, 4] and len(frame) == 4


@pytest.mark.timeout(600)
def test_best_of_three_restarts_makes_three_rows_and_shows_the_best_bound_again(served_app, page, artifacts):
    open_page(page, served_app)
    page.get_by_label(DATA_SET).select_option(label="Three-phase flow (synthetic, 12-D)")
    wait_text(page, "three-phase-flow")
    page.get_by_label("Model", exact=True).select_option(label="Bayesian GP-LVM")
    page.get_by_label("Initialisation", exact=True).select_option(label="Random")
    fill_numbers(page, {"Iterations": 10, "Restarts K": 3})
    try:
        page.get_by_role("button", name="Best of K restarts").click()
        wait_text(page, "Best of 3 restarts", timeout=300_000)
        table = wait_js(page, "() => { const t = __gk.table('runs_bound_per_row'); return t && t.runs_run.length === 4 "
                              "&& t.runs_status.some(s => s && s.endsWith('best of 3')) ? t : null; }", timeout=60)
        assert table, page.evaluate("() => __gk.table('runs_bound_per_row')")
        table = {key[len("runs_"):]: value for key, value in table.items() if key.startswith("runs_")}
        assert table["model"] == ["PCA"] + ["Bayesian GP-LVM"] * 3 and table["run"] == [0, 1, 2, 3]
        seeds = table["seed"][1:]
        assert seeds == [seeds[0], seeds[0] + 1, seeds[0] + 2]
        bounds = table["bound_per_row"][1:]
        best = bounds.index(max(bounds))
        assert [s.endswith("best of 3") for s in table["status"][1:]] == [i == best for i in range(3)]
        # the best run is the one on show: its row's number in the status line, its bound in the objective
        wait_text(page, f"Run {best + 1} shown again from the runs table")
        selected = page.locator(".gx-runs-table .tabulator-row.tabulator-selected")
        assert poll(lambda: selected.count() == 1 and selected.first.locator(".tabulator-cell").first.inner_text()
                    == str(best + 1), timeout=30), "the best run's row is not the selected one"
        page.screenshot(path=str(artifacts / "runs_restarts.png"), full_page=True)
    except Exception:
        page.screenshot(path=str(artifacts / "runs_restarts_failed.png"), full_page=True)
        raise
