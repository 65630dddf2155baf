"""Latent geometry in a real headless Chromium: magnification shading while training, a geodesic from two
clicks with the walk along it, and an ARD-bar click that sets a map axis.

Screenshots go to test-artifacts/e2e/ (geometry-*.png).
"""
from __future__ import annotations

import re
import time

import pytest
from browserkit import fill_numbers, open_page, poll, wait_js, wait_text

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(600),
    pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning"),
]

SAMPLE = "Three-phase flow (synthetic, 12-D)"

# a named source's column (a plain array), or null
COLUMN = """([name, col]) => { for (const doc of Bokeh.documents) for (const m of doc.all_models) {
    if (m.name !== name || !m.data) continue;
    const d = m.data, v = d instanceof Map ? d.get(col) : d[col];
    return v === undefined ? null : Array.from(v, (x) => (x && x.length !== undefined ? Array.from(x) : x)); }
  return null; }"""

# a fingerprint of the magnification image on show: [sum, length], or null while there is none
MAG_IMAGE = """() => { for (const doc of Bokeh.documents) for (const m of doc.all_models) {
    if (m.name !== 'latent-magnification' || !m.data) continue;
    const d = m.data, im = d instanceof Map ? d.get('image') : d.image;
    if (!im || !im.length) return null;
    let s = 0; for (const v of im[0]) s += v; return [s, im[0].length]; }
  return null; }"""

# the page pixel of data coordinates (x, y) in the figure titled `title`, or null
PIXEL = """([title, x, y]) => { function* walk(v) { yield v; if (v.children) for (const c of v.children()) yield* walk(c); }
  for (const root of Object.values(Bokeh.index)) for (const v of walk(root)) {
    const t = v.model && v.model.title;
    if (!(t && (t.text === title || t === title) && v.frame)) continue;
    const r = v.canvas_view.el.getBoundingClientRect();
    return [r.left + v.frame.x_scale.compute(x), r.top + v.frame.y_scale.compute(y)]; }
  return null; }"""

# the latent map's axis labels
AXES = """() => { function* walk(v) { yield v; if (v.children) for (const c of v.children()) yield* walk(c); }
  for (const root of Object.values(Bokeh.index)) for (const v of walk(root)) {
    const t = v.model && v.model.title;
    if (!(t && t.text === 'Latent space' && v.frame)) continue;
    const label = (side) => side.find((m) => m.axis_label !== undefined).axis_label;
    return [label(v.model.below), label(v.model.left)]; }
  return null; }"""


# the text of the elements of a CSS class, through the shadow roots Panel renders into
TEXT_OF = """(cls) => { const out = [];
  const visit = (root) => { for (const el of root.querySelectorAll('*')) {
      if (el.classList.contains(cls)) out.push((el.shadowRoot || el).textContent);
      if (el.shadowRoot) visit(el.shadowRoot); } };
  visit(document); return out.join(' '); }"""


def column(page, name, col):
    return page.evaluate(COLUMN, [name, col])


def click_at(page, title, x, y):
    pos = wait_js(page, PIXEL, [title, x, y], timeout=30)
    assert pos, f"figure {title!r} not found"
    page.mouse.click(pos[0], pos[1])


def test_magnification_while_training_geodesic_from_two_clicks_and_ard_axis(page, served_app, artifacts):
    open_page(page, served_app, sample=SAMPLE, model="Bayesian GP-LVM")
    wait_text(page, "three-phase-flow")
    fill_numbers(page, {"Iterations": 3000})
    page.get_by_text("Magnification", exact=True).first.click()
    page.get_by_role("button", name="▶ Train", exact=True).click()

    # the magnification shading arrives and changes with the snapshots while the model trains
    seen = []
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and len(seen) < 3:
        image = page.evaluate(MAG_IMAGE)
        if image and image[1] == 128 * 128 and (not seen or image[0] != seen[-1]):
            seen.append(image[0])
        time.sleep(0.3)
    assert len(seen) >= 3, f"the magnification shading did not change while training: {seen}"
    assert page.get_by_text("Stop", exact=False).first.is_visible()
    # the colour bar on show is the magnification's (log scale)
    bar = wait_js(page, """() => { for (const doc of Bokeh.documents) for (const m of doc.all_models)
        if (m.type === 'ColorBar' && m.visible && String(m.title).includes('magnification')) return [m.title,
          m.color_mapper.type]; return null; }""", timeout=30)
    assert bar and "log scale" in bar[0] and bar[1] == "LogColorMapper", bar
    page.screenshot(path=str(artifacts / "geometry-01-magnification-training.png"), full_page=True)
    page.get_by_role("button", name="■ Stop", exact=True).click()
    wait_text(page, "Stopped after", timeout=120_000)

    # geodesic mode: two clicks on two training points draw the path, its lengths and the walk
    page.get_by_role("button", name="Geodesic", exact=True).click()
    wait_text(page, "Click the map twice", timeout=30_000)

    def settled_points():
        xs, ys = column(page, "latent-points", "x"), column(page, "latent-points", "y")
        return (xs, ys) if xs and ys and len(xs) == len(ys) else None

    first = poll(settled_points, timeout=60)
    time.sleep(2.0)  # the final snapshot's map may still arrive after "Stopped"
    xs, ys = poll(settled_points, timeout=60) or first
    i, j = min(range(len(xs)), key=lambda k: xs[k]), max(range(len(xs)), key=lambda k: xs[k])
    click_at(page, "Latent space", xs[i], ys[i])
    wait_text(page, "Now click where the path ends", timeout=30_000)
    click_at(page, "Latent space", xs[j], ys[j])
    path_x = wait_js(page, f"() => {{ const v = ({COLUMN})(['geodesic-path', 'x']); return v && v.length === 64 && v; }}",
                     timeout=120)
    assert path_x, "no geodesic drawn after two clicks"
    assert abs(path_x[0] - xs[i]) < 1e-6 and abs(path_x[-1] - xs[j]) < 1e-6  # from row to row
    lengths = poll(lambda: (t := page.evaluate(TEXT_OF, "gx-geodesic-lengths")) and "straight" in t and t, timeout=30)
    m = re.search(r"Geodesic length ([\d.e+-]+) · straight segment ([\d.e+-]+)", lengths)
    assert m, lengths
    assert 0 < float(m.group(1)) <= float(m.group(2)) * (1 + 1e-3)
    # the walk: the profile at the player's point, which moves along the path
    profile0 = wait_js(page, f"() => {{ const v = ({COLUMN})(['geodesic-profile', 'frame']); return v && v.length && v; }}",
                       timeout=30)
    assert profile0 and len(profile0) == 12
    frame0 = column(page, "geodesic-frame", "x")
    page.locator(".gx-geodesic-player button.last").first.click()  # the player's last point: the path's end
    moved = wait_js(page, f"""() => {{ const f = ({COLUMN})(['geodesic-frame', 'x']);
        return f && f.length === 1 && Math.abs(f[0] - {frame0[0]}) > 1e-9 && f; }}""", timeout=30)
    assert moved, "the walk's point did not move along the path"
    assert abs(moved[0] - path_x[-1]) < 1e-9
    profile1 = column(page, "geodesic-profile", "frame")
    assert profile1 != profile0, "the walk's profile did not change along the path"
    page.screenshot(path=str(artifacts / "geometry-02-geodesic.png"), full_page=True)

    # an ARD bar's click puts its dimension on the map's horizontal axis; Shift+click on the vertical one
    axes = page.evaluate(AXES)
    shown = {int(a.rsplit("x", 1)[1]) - 1 for a in axes}
    dim = min(d for d in range(5) if d not in shown)
    values = column(page, "ard-bars", "value")
    click_at(page, "ARD: relevance (1/ℓ²)", dim + 0.5, max(values) * 0.02)
    assert wait_js(page, f"() => {{ const a = ({AXES})(); return a && a[0] === 'latent x{dim + 1}'; }}", timeout=60), \
        f"the ARD click did not put x{dim + 1} on the horizontal axis: {page.evaluate(AXES)}"
    other = min(d for d in range(5) if d not in shown and d != dim)
    pos = wait_js(page, PIXEL, ["ARD: relevance (1/ℓ²)", other + 0.5, max(values) * 0.02], timeout=30)
    page.keyboard.down("Shift")
    page.mouse.click(pos[0], pos[1])
    page.keyboard.up("Shift")
    assert wait_js(page, f"() => {{ const a = ({AXES})(); return a && a[1] === 'latent x{other + 1}'; }}", timeout=60), \
        f"Shift+click did not put x{other + 1} on the vertical axis: {page.evaluate(AXES)}"
    page.screenshot(path=str(artifacts / "geometry-03-ard-axes.png"), full_page=True)
