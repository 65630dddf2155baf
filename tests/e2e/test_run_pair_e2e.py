"""Two runs side by side in a real browser: two maps appear; a box selection drawn in the left map selects
the same data rows in the right map, and the row under the pointer in the left map is ringed in the right."""
from __future__ import annotations

import pytest

from browserkit import DATA_SET, fill_numbers, open_page, poll, set_slider, train_to_end, wait_js, wait_text

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning"),
]

# the left map's page box and the page pixel of a data point (x, y) in it
PIXEL = """([side, x, y]) => {
  const v = __gk.named('pair-' + side).find(v => v.model.name === 'pair-' + side);
  if (!v) return null;
  const box = v.canvas_view.el.getBoundingClientRect();
  return [box.left + v.frame.x_scale.compute(x), box.top + v.frame.y_scale.compute(y)];
}"""

# data coordinates of a page pixel in a map
DATA_AT = """([side, px, py]) => {
  const v = __gk.named('pair-' + side).find(v => v.model.name === 'pair-' + side);
  const box = v.canvas_view.el.getBoundingClientRect();
  return [v.frame.x_scale.invert(px - box.left), v.frame.y_scale.invert(py - box.top)];
}"""

# the selected rows as the right map's renderer sees them
SELECTED_RIGHT = """() => {
  for (const doc of Bokeh.documents) for (const m of doc.all_models)
    if (m.name === 'pair-points-right') return Array.from(m.data_source.selected.indices).sort((a, b) => a - b);
  return null;
}"""

HOVERED_RIGHT = """() => {
  for (const doc of Bokeh.documents) for (const m of doc.all_models)
    if (m.name === 'pair-hovered-right') return [__gk.col(m.data_source, 'pair_hx_right'),
                                                 __gk.col(m.data_source, 'pair_hy_right')];
  return null;
}"""


@pytest.mark.timeout(600)
def test_two_runs_side_by_side_share_their_selection(served_app, page, artifacts):
    open_page(page, served_app)
    page.get_by_label(DATA_SET).select_option(label="Three-phase flow (synthetic, 12-D)")
    wait_text(page, "three-phase-flow")
    fill_numbers(page, {"Iterations": 15})
    try:
        for model, Q in (("Bayesian GP-LVM", 2), ("GP-LVM (exact)", 3)):
            page.get_by_label("Model", exact=True).select_option(label=model)
            assert set_slider(page, "Latent dimensions Q", Q)
            train_to_end(page)
        page.locator("div.bk-Checkbox").filter(has_text="Show two runs side by side").locator(
            "input[type=checkbox]").check()
        points = wait_js(page, "() => { const t = __gk.table('pair_x_left'); "
                               "return t && t.pair_x_left.length === 450 ? t : null; }", timeout=60)
        assert points, "the two maps' points did not arrive"
        wait_js(page, "() => __gk.named('pair-').filter(v => v.model.name === 'pair-left' || "
                      "v.model.name === 'pair-right').length === 2", timeout=30)
        for side, title in (("left", "Run 1: Bayesian GP-LVM"), ("right", "Run 2: GP-LVM (exact)")):
            text = page.evaluate("(s) => __gk.named('pair-' + s).find(v => v.model.name === 'pair-' + s)"
                                 ".model.title.text", side)
            assert text.startswith(title), text
        page.locator(".gx-run-pair").scroll_into_view_if_needed()

        # a box drawn in the left map around the middle of its points (the box-select tool is active)
        xs, ys = sorted(points["pair_x_left"]), sorted(points["pair_y_left"])
        lo = page.evaluate(PIXEL, ["left", xs[len(xs) // 4], ys[len(ys) // 4]])
        hi = page.evaluate(PIXEL, ["left", xs[3 * len(xs) // 4], ys[3 * len(ys) // 4]])
        (x0, y0), (x1, y1) = [round(v) for v in lo], [round(v) for v in hi]
        page.mouse.move(x0, y0)
        page.mouse.down()
        page.mouse.move((x0 + x1) / 2, (y0 + y1) / 2, steps=5)
        page.mouse.move(x1, y1, steps=5)
        page.mouse.up()
        (dx0, dy0), (dx1, dy1) = page.evaluate(DATA_AT, ["left", x0, y0]), page.evaluate(DATA_AT, ["left", x1, y1])
        inside = {i for i, (x, y) in enumerate(zip(points["pair_x_left"], points["pair_y_left"]))
                  if min(dx0, dx1) <= x <= max(dx0, dx1) and min(dy0, dy1) <= y <= max(dy0, dy1)}
        assert len(inside) >= 20
        selected = poll(lambda: page.evaluate(SELECTED_RIGHT) or None, timeout=30)
        assert selected, "no rows selected in the right map after a box in the left one"
        # the rows inside the box (up to points on its edge, within a pixel's rounding)
        assert len(set(selected) ^ inside) <= 3, (len(selected), len(inside))
        page.screenshot(path=str(artifacts / "run_pair_selected.png"), full_page=True)

        # the pointer on a point of the left map rings the same row in the right map
        row = sorted(inside)[len(inside) // 2]
        px, py = page.evaluate(PIXEL, ["left", points["pair_x_left"][row], points["pair_y_left"][row]])
        page.mouse.move(px, py)
        ringed = poll(lambda: (page.evaluate(HOVERED_RIGHT) or [[]])[0] or None, timeout=30)
        assert ringed, "nothing ringed in the right map"
        hx, hy = page.evaluate(HOVERED_RIGHT)
        assert (points["pair_x_right"][row], points["pair_y_right"][row]) in set(zip(hx, hy))
    except Exception:
        page.screenshot(path=str(artifacts / "run_pair_failed.png"), full_page=True)
        raise
