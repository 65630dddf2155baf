"""The dynamical (GPDS) and multi-view (MRD) models in a real browser, on their bundled samples.

Screenshots go to test-artifacts/e2e/ (gpds-*.png, mrd-*.png).
"""
from __future__ import annotations

import re
import time

import pytest
from browserkit import fill_numbers, open_page, poll, train_to_end, wait_text

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(300),
    pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning"),
]



def columns(page, key, *cols):
    """Every source with column ``key`` and all of ``cols``: a list of {col: values} for ``cols`` (and key)."""
    return page.evaluate(
        """([key, cols]) => __gk.sources(key).filter(m => cols.every(c => __gk.has(m, c)))
             .map(m => Object.fromEntries([key, ...cols].map(c => [c, __gk.col(m, c)])))""",
        [key, list(cols)])


def open_and_choose(page, url, sample_label, model_label):
    open_page(page, url, sample=sample_label, model=model_label)


def train(page, iters: int, inducing: int):
    fill_numbers(page, {"Iterations": iters, "Inducing points M": inducing})
    train_to_end(page)


def test_gpds_sample_trains_and_the_time_slider_moves_the_reconstruction(page, served_app, artifacts):
    open_and_choose(page, served_app, "Walking, with a gap in time (for the dynamical model)",
                    "GP-LVM with dynamics (GPDS)")
    # the time comes from the sample's label; the page says the column is not a feature
    time_select = page.get_by_label("Time of each row")
    time_select.wait_for(timeout=20_000)
    assert "time (s)" in time_select.locator("option:checked").inner_text()
    train(page, iters=15, inducing=12)

    view = page.locator(".gx-dynamics").first
    view.wait_for(state="visible", timeout=30_000)
    # the trajectory over a grid of times reaches before and after the frames
    path = poll(lambda: [s for s in columns(page, "marker_t") if s["marker_t"]], timeout=30)
    assert path, "no marker on the latent trajectory"
    first = page.get_by_text(re.compile(r"^t = ")).first
    wait_text(page, "(in a gap)", timeout=20_000)  # it starts inside the gap of 5.0-6.6 s
    before = poll(lambda: [s for s in columns(page, "at_mean", "at_lower", "at_upper") if s["at_mean"]], timeout=20)
    assert before, "no reconstruction at the slider's time"
    before = before[0]
    assert len(before["at_mean"]) == 13
    text0 = first.inner_text()
    view.scroll_into_view_if_needed()
    time.sleep(0.5)
    page.screenshot(path=str(artifacts / "gpds-01-gap.png"), full_page=True)

    # drag the time slider to its right end: beyond the last frame
    handle = page.locator(".gx-time-slider .noUi-handle").first
    box = page.locator(".gx-time-slider .noUi-base").first.bounding_box()
    handle.hover()
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] + 20, box["y"] + box["height"] / 2, steps=8)
    page.mouse.up()
    wait_text(page, "(after the data)", timeout=20_000)
    after = poll(lambda: [s for s in columns(page, "at_mean", "at_lower", "at_upper")
                          if s["at_mean"] != before["at_mean"]], timeout=20)
    assert after, "the reconstruction did not change with the time slider"
    after = after[0]
    assert first.inner_text() != text0
    # the data end at 12 s: the marker moves beyond them
    markers = poll(lambda: (m := [s["marker_t"][0] for s in columns(page, "marker_t") if s["marker_t"]])
                   and m[0] > 12.0 and m, timeout=20)
    assert markers, [s["marker_t"] for s in columns(page, "marker_t")]

    # the player's "next" button steps back into the data range from the start
    page.locator(".gx-time-player").first.scroll_into_view_if_needed()
    time.sleep(0.3)
    page.screenshot(path=str(artifacts / "gpds-02-after-the-data.png"), full_page=True)
    view.screenshot(path=str(artifacts / "gpds-03-dynamics-view.png"))


def test_mrd_sample_trains_and_shows_per_view_ard_and_reconstructions(page, served_app, artifacts):
    open_and_choose(page, served_app, "Two views: image and sensors (for MRD)",
                    "MRD (shared and private latent dims of several views)")
    wait_text(page, re.compile(r"View 1: image \(100 columns\)"), timeout=20_000)
    wait_text(page, re.compile(r"View 2: sensor \(8 columns\)"), timeout=20_000)
    train(page, iters=30, inducing=12)

    view = page.locator(".gx-views").first
    view.wait_for(state="visible", timeout=30_000)
    # ARD bars of both views, side by side for every latent dimension
    ard = poll(lambda: [s for s in columns(page, "ard_value", "ard_view") if s["ard_value"]], timeout=30)
    assert ard, "no per-view ARD bars"
    ard = ard[0]
    assert set(ard["ard_view"]) == {"image", "sensor"} and len(ard["ard_value"]) == 2 * 5
    assert max(ard["ard_value"]) == pytest.approx(1.0)
    wait_text(page, re.compile(r"x\d: shared \(image, sensor\)"), timeout=10_000)

    # click a latent point: the reconstruction in every view
    pts = poll(lambda: [s for s in columns(page, "colour", "x", "y") if s["x"]], timeout=30)
    assert pts
    xs, ys = pts[0]["x"], pts[0]["y"]
    pos = page.evaluate(
        """([x, y]) => { const v = __gk.figure('Latent space'); if (!v) return null;
             const r = v.canvas_view.el.getBoundingClientRect();
             return [r.left + v.frame.x_scale.compute(x), r.top + v.frame.y_scale.compute(y)]; }""",
        [xs[0], ys[0]])
    assert pos is not None, "latent map not found"
    page.mouse.click(pos[0], pos[1])
    wait_text(page, "At the clicked latent point", timeout=20_000)
    poll(lambda: [s for s in columns(page, "vmean", "role", "view") if s["role"] and s["role"][0] == "click"],
         timeout=20)
    images = [s for s in columns(page, "vimage", "role", "view") if s["role"] == ["click"]]
    profiles = [s for s in columns(page, "vmean", "role", "view") if s["role"] and s["role"][0] == "click"]
    assert len(images) == 1 and images[0]["view"] == ["image"]
    assert len(profiles) == 1 and len(profiles[0]["vmean"]) == 8 and set(profiles[0]["view"]) == {"sensor"}

    # given a row of the sensor view, predict the image view
    page.get_by_role("button", name="Predict", exact=True).click()
    wait_text(page, re.compile(r"latent point inferred from sensor alone; image predicted"), timeout=60_000)
    roles = poll(lambda: (r := {s["role"][0] for s in columns(page, "vimage", "role") if s["role"]})
                 >= {"predicted", "actual"} and r, timeout=20)
    assert roles, {s["role"][0] for s in columns(page, "vimage", "role") if s["role"]}
    view.scroll_into_view_if_needed()
    time.sleep(0.5)
    page.screenshot(path=str(artifacts / "mrd-01-page.png"), full_page=True)
    view.screenshot(path=str(artifacts / "mrd-02-views.png"))
