"""20,000 rows in a real browser: the latent map is an image, not 20,000 glyphs, and clicks reconstruct."""
from __future__ import annotations

import io
import re
import time
import zlib

import numpy as np
import pytest
from browserkit import wait_ready, wait_text


def screenshot(page, artifacts, name):
    page.screenshot(path=str(artifacts / f"{name}.png"), full_page=True)

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(300),
    pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning"),
]

N = 20_000

MAP_STATE = """() => {
  const v = __gk.figure('Latent space'); if (!v) return null;
  const kinds = v.model.renderers.map(r => r.glyph ? r.glyph.type : r.type);
  // images drawn by the ImageRGBA renderer (the points' raster): 0 while it has nothing to show
  const images = v.model.renderers.filter(r => r.glyph && r.glyph.type === 'ImageRGBA').map(r => {
    const d = r.data_source.data; const c = d instanceof Map ? d.get('image') : d.image; return c ? c.length : 0; });
  let longest = 0;
  for (const doc of Bokeh.documents) for (const m of doc.all_models) {
    if (m.type !== 'ColumnDataSource') continue;
    const d = m.data; const cols = d instanceof Map ? [...d.values()] : Object.values(d);
    for (const c of cols) if (c && c.length > longest) longest = c.length;
  }
  return {kinds, longest, images: images.reduce((a, b) => a + b, 0)};
}"""


# the packed image the server sent and a hash (FNV-1a over the uint32 pixels) of what the page unpacked
# (null while either is missing, e.g. between a new packed image and its unpacking: the caller polls)
UNPACKED = """() => {
  const v = __gk.figure('Latent space'); if (!v) return null;
  const r = v.model.renderers.find(r => r.glyph && r.glyph.type === 'ImageRGBA');
  if (!r || !r.tags || !r.tags[0] || !r.tags[0].data) return null;
  const get = (d, k) => (d instanceof Map ? d.get(k) : d[k]);
  const img = (get(r.data_source.data, 'image') || [])[0];
  const packed = (get(r.tags[0].data, 'packed') || [])[0];
  if (!img || !packed || !packed.length) return null;
  let h = 2166136261;
  for (let i = 0; i < img.length; i++) h = Math.imul(h ^ img[i], 16777619) >>> 0;
  return {shape: img.shape, hash: h, packed: Array.from(packed)};
}"""


# times at which the reconstruction's sources change: the page's own prediction and the server's nearest row
STAMP_SOURCES = """() => { window.__stamps = {};
  for (const name of ['reconstruction-profile', 'reconstruction-nearest']) {
    const s = Bokeh.documents.map(d => d.get_model_by_name(name)).find(m => m);
    __stamps[name] = [];
    s.properties.data.change.connect(() => __stamps[name].push(performance.now()));
  } }"""
PROFILE = """() => { const s = Bokeh.documents.map(d => d.get_model_by_name('reconstruction-profile')).find(m => m);
  const get = (k) => Array.from(s.data instanceof Map ? s.data.get(k) : s.data[k]);
  return {mean: get('mean'), lower: get('lower'), upper: get('upper'), stamps: __stamps}; }"""


def fnv1a(values) -> int:
    h = 2166136261
    for v in values.tolist():
        h = ((h ^ v) * 16777619) & 0xFFFFFFFF
    return h


def big_npz() -> bytes:
    rng = np.random.default_rng(0)
    label = rng.integers(0, 5, N)
    z = rng.uniform(-2, 2, (5, 3))[label] + 0.4 * rng.standard_normal((N, 3))
    Y = np.c_[z, np.sin(z)] @ rng.standard_normal((6, 30)) + 0.05 * rng.standard_normal((N, 30))
    buf = io.BytesIO()
    np.savez(buf, Y=Y.astype(np.float32), labels=np.array([f"group {c}" for c in label]))
    return buf.getvalue()


class HeldReplies:
    """Relays the page's websocket; while ``held``, the server's messages wait (in order) until ``release()``."""

    def __init__(self, page):
        self.held, self.queue, self.page_ws = False, [], None
        page.route_web_socket(re.compile(r".*/ws(\?.*)?$"), self._route)

    def _route(self, ws):
        server = ws.connect_to_server()
        self.page_ws = ws
        ws.on_message(server.send)
        server.on_message(self._from_server)

    def _from_server(self, message):
        if self.held:
            self.queue.append(message)
        else:
            self.page_ws.send(message)

    def release(self):
        self.held = False
        queue, self.queue = self.queue, []
        for message in queue:
            self.page_ws.send(message)


def test_twenty_thousand_rows_rasterised_map_and_click(page, served_app, artifacts):
    relay = HeldReplies(page)
    page.goto(served_app)
    wait_ready(page)
    page.locator("input[type=file]").first.set_input_files(
        files=[{"name": "big.npz", "mimeType": "application/octet-stream", "buffer": big_npz()}])
    wait_text(page, f"N = {N} points", timeout=60_000)
    iters = page.get_by_label("Iterations")
    iters.fill("6")
    iters.press("Enter")
    time.sleep(0.5)
    page.get_by_role("button", name="▶ Train", exact=True).click()
    wait_text(page, "Finished after", timeout=180_000)
    page.wait_for_function(f"() => {{ const s = ({MAP_STATE})(); return s && s.images > 0; }}",
                           timeout=30_000)
    # the map's dimension pickers are labelled controls, showing latent dimensions
    for name in ("horizontal", "vertical"):
        assert re.fullmatch(r"x\d+", page.get_by_label(name, exact=True).input_value()), name
    state = page.evaluate(MAP_STATE)
    assert "ImageRGBA" in state["kinds"] and state["images"] == 1, state  # datashader's image of the points
    assert state["longest"] < N, f"a data source holds {state['longest']} values: points were sent as glyphs"
    # the image came zlib-packed (far below its raw 1 MB) and the page unpacked it pixel for pixel; the page
    # unpacks asynchronously, so a newer image (e.g. the final result's after a snapshot's) may still be on
    # its way: read until the shown image is the newest packed one, or time out
    deadline = time.monotonic() + 60
    while True:
        got = page.evaluate(UNPACKED)
        if got is not None:
            pixels = np.frombuffer(zlib.decompress(bytes(got["packed"])), dtype="<u4")
            if got["hash"] == fnv1a(pixels):
                break
        if time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert got is not None, "the latent map has no packed or no unpacked image"
    assert len(got["packed"]) < pixels.nbytes / 10 and list(got["shape"]) == [400, 640]
    assert got["hash"] == fnv1a(pixels) and (pixels >> 24).any()
    screenshot(page, artifacts, "20k-latent-map")
    pos = page.evaluate("""() => { const v = __gk.figure('Latent space');
        const r = v.canvas_view.el.getBoundingClientRect(), f = v.frame.bbox;
        return [r.left + f.left + 0.5 * f.width, r.top + f.top + 0.5 * f.height]; }""")
    # the page draws the click's prediction itself: it appears while the server's answers are held back
    page.evaluate(STAMP_SOURCES)
    relay.held = True
    page.mouse.click(pos[0], pos[1])
    page.wait_for_function("() => __stamps['reconstruction-profile'].length > 0", timeout=30_000)
    drawn = page.evaluate(PROFILE)
    assert not drawn["stamps"]["reconstruction-nearest"], drawn["stamps"]  # the server's part is still held
    mean, lower, upper = (np.array(drawn[k], dtype=float) for k in ("mean", "lower", "upper"))
    assert mean.shape == (30,) and np.all(np.isfinite(mean)) and np.all(lower < mean) and np.all(mean < upper)
    assert relay.queue or page.get_by_text("Nearest training point #").count() == 0
    relay.release()
    wait_text(page, "Nearest training point #", timeout=60_000)
    # then the nearest row arrives (its source may be patched in a message after the text's)
    page.wait_for_function("() => __stamps['reconstruction-nearest'].length > 0", timeout=30_000)
    # following the pointer, the page predicts at every mouse move, again without the server
    page.locator("div.bk-Checkbox").filter(has_text="Follow the pointer").locator("input[type=checkbox]").check()
    # the checkbox's change reaches the server, and the slice's flag the page (waiting in Playwright relays it)
    page.wait_for_function("""() => Bokeh.documents.some(doc => [...doc.all_models].some(m => {
        if (m.type !== 'ColumnDataSource') return false;
        const f = m.data instanceof Map ? m.data.get('follow') : m.data.follow; return f && f[0] === true; }))""",
                           timeout=30_000)
    relay.held = True
    before = len(page.evaluate(PROFILE)["stamps"]["reconstruction-profile"])
    for k in range(1, 6):
        page.mouse.move(pos[0] + 12 * k, pos[1] - 8 * k)
    page.wait_for_function(f"() => __stamps['reconstruction-profile'].length >= {before + 3}", timeout=30_000)
    moved = np.array(page.evaluate(PROFILE)["mean"], dtype=float)
    assert not np.allclose(moved, mean)  # a prediction at another place
    relay.release()
    # the click selected nothing (a selection of image pixels would travel to the server first)
    selected = page.evaluate("""() => __gk.figure('Latent space').model.renderers.map(r => r.data_source.selected)
        .map(s => s.indices.length + s.image_indices.length)""")
    assert not any(selected), selected
    text = page.get_by_text(re.compile(r"At x\d+ = ")).first.inner_text()
    assert re.search(r"label group \d", text), text
    screenshot(page, artifacts, "20k-reconstruction")
