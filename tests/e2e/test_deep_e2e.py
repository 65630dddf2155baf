"""The deep GP in a real browser: a 2-layer model on a bundled sample shows one latent map per layer.

Screenshot: test-artifacts/e2e/deep-layers.png.
"""
from __future__ import annotations

import re
import time

import pytest
from browserkit import fill_numbers, open_page, poll, train_to_end, wait_js

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(300),
    pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning"),
]

JS = """
window.__gd = {
  points() {  // per layer: the number of points drawn (a source without an 'x' column yet counts 0)
    const out = [];
    for (const doc of Bokeh.documents) for (const m of doc.all_models) {
      const d = m.data;
      if (!d || m.selected === undefined) continue;
      const get = (c) => d instanceof Map ? d.get(c) : d[c];
      if (get('row') !== undefined && get('colour') !== undefined) out.push((get('x') || []).length);
    }
    return out;
  },
};
"""


def test_two_layer_deep_gp_shows_one_latent_map_per_layer(page, served_app, artifacts):
    open_page(page, served_app, sample="Three-phase flow (synthetic, 12-D)",
              model="Deep GP (stacked Bayesian GP-LVMs)", js=JS)
    page.get_by_label("Layer dims, data side first (e.g. 5, 2)").wait_for(state="visible", timeout=20_000)
    fill_numbers(page, {"Layer dims, data side first (e.g. 5, 2)": "4, 2", "Iterations": 6, "Inducing points M": 10})
    train_to_end(page)

    view = page.locator(".gx-deep").first
    view.wait_for(state="visible", timeout=30_000)
    maps = poll(lambda: page.evaluate("__gk.named('gx-deep-layer-').length") == 2 or None, timeout=20)
    assert maps, "expected one latent map per layer"
    counts = poll(lambda: (c := page.evaluate("__gd.points()")) and len(c) == 2 and all(n > 0 for n in c) and c,
                  timeout=20)
    assert counts and counts[0] == counts[1], counts
    assert poll(lambda: page.evaluate("__gk.named('gx-deep-ard-').length") == 2, timeout=20), \
        "expected one ARD chart per layer"

    # click a point of the top layer: its row is followed down and reconstructed
    view.scroll_into_view_if_needed()
    pos = wait_js(page,
        """() => { const v = __gk.named('gx-deep-layer-1')[0]; if (!v) return null;
             const src = v.model.renderers.map(r => r.data_source).find(s => {
               const d = s.data; return (d instanceof Map ? d.get('row') : d.row) !== undefined; });
             if (!src) return null;
             const d = src.data, get = (c) => Array.from((d instanceof Map ? d.get(c) : d[c]) || []);
             if (!get('x').length || !get('y').length) return null;
             const x = get('x')[0], y = get('y')[0], r = v.canvas_view.el.getBoundingClientRect();
             return [r.left + v.frame.x_scale.compute(x), r.top + v.frame.y_scale.compute(y)]; }""", timeout=20)
    assert pos, "no point on the top layer's map"
    page.mouse.click(pos[0], pos[1])
    page.get_by_text(re.compile(r"^Row \d+, from the top down")).first.wait_for(state="visible", timeout=20_000)
    time.sleep(0.6)
    view.screenshot(path=str(artifacts / "deep-layers.png"))
    page.screenshot(path=str(artifacts / "deep-page.png"), full_page=True)
