"""Missing values in a real browser: a CSV with empty fields keeps its rows, the Bayesian GP-LVM trains
on it and the page shows (and exports) the values it filled in."""
from __future__ import annotations

import math
import re
import time

import numpy as np
import pytest
from browserkit import poll, source_columns, wait_ready, wait_text

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(300),
    pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning"),
]




def gappy_csv(n=40, seed=3) -> tuple[bytes, int, int]:
    """A CSV with empty fields: (content, missing cells, rows with a missing cell)."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(-2, 2, n)
    Y = np.column_stack([np.sin(t), np.cos(t), t / 2, np.sin(2 * t), t ** 2 / 4])
    Y += 0.03 * rng.standard_normal(Y.shape)
    miss = rng.random(Y.shape) < 0.12
    miss[:, 0] = False
    lines = ["alpha,beta,gamma,delta,epsilon,label"]
    for i in range(n):
        cells = ["" if miss[i, j] else f"{Y[i, j]:.5f}" for j in range(Y.shape[1])]
        lines.append(",".join(cells) + f",{'AB'[i % 2]}")
    return ("\n".join(lines) + "\n").encode(), int(miss.sum()), int(miss.any(1).sum())


def test_csv_with_empty_fields_trains_bayesian_and_shows_imputed_values(page, served_app, artifacts, tmp_path):
    content, n_missing, n_rows = gappy_csv()
    page.goto(served_app)
    wait_ready(page)
    page.locator("input[type=file]").first.set_input_files(
        files=[{"name": "gappy.csv", "mimeType": "text/csv", "buffer": content}])
    # every row is kept, and the data card counts the missing cells per column
    wait_text(page, f"missing: {n_missing} cell(s) in {n_rows} of 40 rows", timeout=30_000)
    page.get_by_text(re.compile(r"40\s+points")).first.wait_for(state="visible", timeout=30_000)
    page.get_by_text(re.compile(r"missing in beta: \d+")).first.wait_for(state="visible", timeout=30_000)

    # the exact GP-LVM says it cannot use them and offers a choice; the Bayesian one takes them as they are
    model = page.get_by_label("Model", exact=True)
    model.select_option(label="GP-LVM (exact)")
    wait_text(page, "cannot use missing values", timeout=20_000)
    page.get_by_text("Fill missing cells with their column mean").first.wait_for(state="visible", timeout=20_000)
    page.get_by_text("Drop the rows with missing cells").first.wait_for(state="visible", timeout=20_000)
    model.select_option(label="Bayesian GP-LVM")
    wait_text(page, "trains on the data as it is", timeout=20_000)

    iters = page.get_by_label("Iterations")
    iters.fill("25")
    iters.press("Enter")
    train = page.get_by_role("button", name="▶ Train", exact=True)
    deadline = time.monotonic() + 20
    while not train.is_enabled() and time.monotonic() < deadline:
        time.sleep(0.2)
    train.click()
    wait_text(page, re.compile(r"(Finished|Stopped) after"), timeout=180_000)

    # the imputed-values view: the first incomplete row, its filled-in values with ±2σ
    wait_text(page, "filled in by the Bayesian GP-LVM", timeout=30_000)
    # the values' source may be patched in a message after the view's text
    src = poll(lambda: (s := source_columns(page, "imputed")) and s["imputed"] and s, timeout=30)
    assert src, f"no imputed values in the page: {source_columns(page, "imputed")}"
    imputed, upper, lower = src["imputed"], src["upper"], src["lower"]
    assert imputed and len(imputed) == len(upper) == len(lower)
    assert all(math.isfinite(v) for v in imputed)
    assert all(lo < v < up for v, lo, up in zip(imputed, lower, upper))
    page.get_by_text(re.compile(r"= -?[\d.e+-]+ ± [\d.e+-]+")).first.wait_for(state="visible", timeout=30_000)
    first = page.get_by_text(re.compile(r"^Row \d+")).first.inner_text()
    view = page.locator(".gx-imputation").first
    view.scroll_into_view_if_needed()
    time.sleep(0.5)
    page.screenshot(path=str(artifacts / "missing-01-imputed-values.png"), full_page=True)
    view.screenshot(path=str(artifacts / "missing-02-imputed-view.png"))

    # the next incomplete row
    page.get_by_role("button", name="Next incomplete row ▶").click()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        now = page.get_by_text(re.compile(r"^Row \d+")).first.inner_text()
        if now != first:
            break
        time.sleep(0.2)
    assert now != first

    # the completed data as CSV: a value and a std column per feature, no empty cell
    with page.expect_download(timeout=30_000) as info:
        page.get_by_role("button", name="Imputed data (CSV)").click()
    path = tmp_path / "imputed.csv"
    info.value.save_as(path)
    rows = path.read_text().strip().splitlines()
    assert rows[0] == ("index,label,alpha,alpha_std,beta,beta_std,gamma,gamma_std,delta,delta_std,"
                       "epsilon,epsilon_std")
    assert len(rows) == 41
    cells = [r.split(",") for r in rows[1:]]
    assert all(len(c) == 12 and all(x != "" for x in c) for c in cells)
    stds = np.array([[float(x) for x in c[3::2]] for c in cells])
    assert (stds > 0).sum() == n_missing
