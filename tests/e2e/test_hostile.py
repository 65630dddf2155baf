"""Hostile text in every channel a user controls must stay text in the page.

Files whose header, label values, feature names or *file name* carry markup
are uploaded; the app trains briefly, the points are hovered and clicked,
every view is opened. No payload may run (``window.__xss`` stays unset, no
dialog opens) and no injected element may exist anywhere in the DOM,
including Bokeh's shadow roots. Each test also checks that the hostile
strings really were shown, as text, so that it cannot pass by showing nothing.
"""
from __future__ import annotations

import io
import re
import time

import numpy as np
import pytest
from browserkit import page_text, serve_in_process, wait_loaded, wait_ready

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(600),
    pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning"),
]

MARK = "__xss"

# Each payload sets window.__xss (or opens a dialog) if it is ever parsed as HTML.
# Attribute values are quoted so that Markdown (CommonMark) also treats them as raw HTML.
IMG = '<img src="x" onerror="window.__xss=(window.__xss||0)+1">'
SCRIPT = "<script>window.__xss=2</script>"
SVG = '<svg onload="window.__xss=3"></svg>'
# file names hold no "/" (a path separator: the upload widget keeps what follows the last one)
SVG_OPEN = '<svg onload="window.__xss=3">'
IFRAME = '<iframe srcdoc="<script>parent.__xss=4</script>"></iframe>'
DETAILS = '<details open ontoggle="window.__xss=5">d</details>'
ALERT = '<img src="x" onerror="alert(document.domain)">'
MD_IMG = '![p](x" onerror="window.__xss=6)'
PAYLOADS = [IMG, SCRIPT, SVG, IFRAME, DETAILS, ALERT, MD_IMG]

# Walks the document and every (open) shadow root; reports what should never exist.
FIND_INJECTED = """
(mark) => {
  const found = [];
  const visit = (root) => {
    for (const el of root.querySelectorAll('*')) {
      const tag = el.tagName.toLowerCase();
      for (const a of Array.from(el.attributes || [])) {
        const n = a.name.toLowerCase();
        if (n.startsWith('on') && (a.value.includes(mark) || a.value.includes('alert('))) found.push(`${tag}[${n}]`);
        if ((n === 'src' || n === 'href' || n === 'srcdoc') && a.value.includes(mark)) found.push(`${tag}[${n}]`);
      }
      if (tag === 'img' && /^x\b/.test(el.getAttribute('src') || '')) found.push('img[src=x]');
      if ((tag === 'script' || tag === 'iframe' || tag === 'svg' || tag === 'details') && (el.outerHTML || '').includes(mark)) found.push(tag);
      if (el.shadowRoot) visit(el.shadowRoot);
    }
  };
  visit(document);
  return found;
}
"""

# Page positions of the points of every scatter whose source holds hostile labels.
HOSTILE_POINTS = """
(mark) => {
  const out = [];
  const get = (data, k) => data instanceof Map ? data.get(k) : data[k];
  const keys = (data) => data instanceof Map ? [...data.keys()] : Object.keys(data);
  function* walk(v) { yield v; if (v.children) { for (const c of v.children()) yield* walk(c); } }
  for (const root of Object.values(Bokeh.index)) {
    for (const v of walk(root)) {
      if (!v.frame || !v.canvas_view) continue;
      const rviews = v.renderer_views instanceof Map ? [...v.renderer_views.entries()] : [];
      for (const [model] of rviews) {
        const ds = model.data_source, g = model.glyph;
        if (!ds || !g || !g.x || !g.y || !g.x.field || !g.y.field) continue;
        const data = ds.data;
        const hostile = keys(data).some(k => { const c = get(data, k);
          return c && c.length && Array.from(c).some(s => typeof s === 'string' && s.includes(mark)); });
        if (!hostile) continue;
        const xs = get(data, g.x.field), ys = get(data, g.y.field);
        if (!xs || !ys) continue;  // a source being replaced: its columns are not all there yet
        const r = v.canvas_view.el.getBoundingClientRect();
        for (let i = 0; i < Math.min(xs.length, 60); i++) {
          const px = r.left + v.frame.x_scale.compute(xs[i]), py = r.top + v.frame.y_scale.compute(ys[i]);
          if (Number.isFinite(px) && Number.isFinite(py)) out.push([px, py]);
        }
      }
    }
  }
  return out;
}
"""


@pytest.fixture(scope="module")
def hostile_app(chromium_path):
    """The app served in-process with the same server options as the CLI."""
    with serve_in_process() as url:
        yield url


class Guard:
    """Records dialogs and page errors; checks the XSS flag and the DOM."""

    def __init__(self, page):
        self.page = page
        self.dialogs: list[str] = []
        page.on("dialog", self._on_dialog)

    def _on_dialog(self, dialog):
        self.dialogs.append(f"{dialog.type}: {dialog.message}")
        try:
            dialog.dismiss()
        except Exception:  # noqa: BLE001
            pass

    def check(self, where: str):
        flag = self.page.evaluate("() => window.__xss")
        injected = self.page.evaluate(FIND_INJECTED, MARK)
        assert flag is None, f"{where}: an injected script ran (window.__xss = {flag!r})"
        assert not self.dialogs, f"{where}: a dialog opened: {self.dialogs}"
        assert not injected, f"{where}: injected elements in the DOM: {sorted(set(injected))}"

    def text(self) -> str:
        return page_text(self.page)


def _open(page, url):
    page.goto(url)
    wait_ready(page)


def _upload(page, name: str, data: bytes, mime: str = "text/csv"):
    page.locator("input[type=file]").first.set_input_files(
        files=[{"name": name, "mimeType": mime, "buffer": data}]
    )


def _wait_shown(page, guard: Guard, text: str, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in guard.text():
            return
        time.sleep(0.25)
    raise AssertionError(f"{text!r} never appeared as text in the page")


def _start_training(page, iterations: int):
    """Set the iterations and press Train until the run visibly starts (or has finished)."""
    iters = page.get_by_label("Iterations")
    if iters.count():
        iters.first.fill(str(iterations))
        iters.first.press("Enter")
    train = page.get_by_role("button", name=re.compile(r"(^|\W)Train$"))
    deadline = time.monotonic() + 60
    while not train.first.is_enabled() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert train.first.is_enabled(), "Train stayed disabled after loading the hostile file"
    for _ in range(3):
        train.first.click()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if not train.first.is_enabled() or re.search(r"(?i)finished after", page_text(page)):
                return train
            time.sleep(0.1)
    raise AssertionError("pressing Train did not start a run")


def _train_briefly(page, guard: Guard):
    train = _start_training(page, 15)
    # finished when the hostile labels are on the latent map and Train is enabled again
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        guard.check("while training")
        if page.evaluate(HOSTILE_POINTS, MARK) and train.first.is_enabled():
            time.sleep(0.8)  # final map, grid and legend
            return
        time.sleep(0.3)
    raise AssertionError("training did not finish with labelled points on the latent map")


def _hover_and_click_points(page, guard: Guard):
    points = page.evaluate(HOSTILE_POINTS, MARK)
    assert points, "no points with the hostile labels on any plot"
    for px, py in points[:25]:
        page.mouse.move(px, py)
        time.sleep(0.08)
    page.mouse.move(*points[0])
    time.sleep(0.5)
    shown_in_tooltip = guard.text()
    # a loaded machine can take a while to draw the tooltip: hover again until a label shows (or give up)
    deadline = time.monotonic() + 15
    while not any(lab in shown_in_tooltip for lab in (IMG, SVG, SCRIPT, ALERT)) and time.monotonic() < deadline:
        for px, py in (page.evaluate(HOSTILE_POINTS, MARK) or points)[:5]:
            page.mouse.move(px, py)
            time.sleep(0.3)
            shown_in_tooltip = guard.text()
            if any(lab in shown_in_tooltip for lab in (IMG, SVG, SCRIPT, ALERT)):
                break
    guard.check("after hovering the points")
    page.mouse.click(*points[0])
    time.sleep(1.5)
    guard.check("after clicking a point")
    return shown_in_tooltip


def _open_every_view(page, guard: Guard):
    """Select every tab, expand every collapsed card, follow the pointer over points."""
    for _ in range(2):
        for tab in page.get_by_role("tab").all():
            try:
                tab.click(timeout=2000)
                time.sleep(0.3)
            except Exception:  # noqa: BLE001
                pass
        opened = page.evaluate(
            """() => { let n = 0;
                 function* walk(v) { yield v; if (v.children) { for (const c of v.children()) yield* walk(c); } }
                 for (const root of Object.values(Bokeh.index)) for (const v of walk(root)) {
                   const m = v.model;
                   if (m && typeof m.collapsed === 'boolean' && m.collapsed) { m.collapsed = false; n++; }
                 }
                 return n; }"""
        )
        if opened:
            time.sleep(1.0)
        time.sleep(0.5)
    for label in ("Follow the pointer",):
        box = page.get_by_label(label)
        if box.count():
            try:
                box.first.check(timeout=2000)
            except Exception:  # noqa: BLE001
                pass
    for px, py in page.evaluate(HOSTILE_POINTS, MARK)[:5]:  # reconstructions follow the pointer
        page.mouse.move(px, py)
        time.sleep(0.3)
    time.sleep(0.5)
    guard.check("after opening every view")


def _hostile_csv() -> bytes:
    rng = np.random.default_rng(0)
    header = [IMG, SCRIPT, "plain", DETAILS, "f5", "f6", "f7", "f8", "notes " + SVG, "label"]
    lines = [",".join('"' + h.replace('"', '""') + '"' for h in header)]
    labels = [IMG, SVG, SCRIPT, ALERT, MD_IMG, IFRAME]
    for i in range(36):
        vals = rng.normal(size=8) + [i % 3, (i % 3) ** 2, 0.1 * i, 1.0, 0, -(i % 3), 0.05 * i, 2.0]
        note = PAYLOADS[i % len(PAYLOADS)]
        lab = labels[i % len(labels)]
        cells = [f"{v:.4f}" for v in vals] + ['"' + note.replace('"', '""') + '"', '"' + lab.replace('"', '""') + '"']
        if i % 5 == 0:  # missing cells: the imputed-values view lists the hostile column names
            cells[i % 3] = ""
        lines.append(",".join(cells))
    return ("\n".join(lines) + "\n").encode()


def _hostile_npz() -> bytes:
    rng = np.random.default_rng(1)
    Y = rng.normal(size=(30, 8)) + np.repeat(np.arange(3), 10)[:, None] * np.linspace(-1, 1, 8)
    labels = np.array([[IMG, SVG, ALERT][i // 10] for i in range(30)])
    names = np.array([IMG, SCRIPT, SVG, DETAILS, "x5", "x6", "x7", "x8"])
    buf = io.BytesIO()
    np.savez(buf, Y=Y, labels=labels, feature_names=names, **{"extra" + IMG.replace("/", ""): np.ones(2)})
    return buf.getvalue()


def test_markup_in_csv_header_labels_and_file_name_stays_text(page, hostile_app, artifacts):
    guard = Guard(page)
    _open(page, hostile_app)
    name = f"{IMG}{SVG_OPEN}.csv"
    _upload(page, name, _hostile_csv())
    assert name in wait_loaded(page, name)  # the file name is shown, as text
    guard.check("after the CSV upload")
    text = guard.text()
    assert IMG in text.replace(name, ""), "the hostile header/label text is not shown anywhere"
    _train_briefly(page, guard)
    guard.check("after training")
    tooltip_text = _hover_and_click_points(page, guard)
    assert any(lab in tooltip_text for lab in (IMG, SVG, SCRIPT, ALERT)), \
        "hovering the points never showed a label"
    _open_every_view(page, guard)
    page.screenshot(path=str(artifacts / "hostile-csv.png"), full_page=True)
    guard.check("at the end")


def test_markup_in_npz_labels_and_feature_names_stays_text(page, hostile_app, artifacts):
    guard = Guard(page)
    _open(page, hostile_app)
    _upload(page, "labels.npz", _hostile_npz(), "application/octet-stream")
    wait_loaded(page, "labels.npz")
    guard.check("after the NPZ upload")
    _train_briefly(page, guard)
    guard.check("after training")
    tooltip_text = _hover_and_click_points(page, guard)
    assert any(lab in tooltip_text for lab in (IMG, SVG, ALERT)), "hovering the points never showed a label"
    _open_every_view(page, guard)
    page.screenshot(path=str(artifacts / "hostile-npz.png"), full_page=True)
    guard.check("at the end")


def test_markup_in_error_messages_stays_text(page, hostile_app, artifacts):
    guard = Guard(page)
    _open(page, hostile_app)
    # a file the loader refuses: its name and content are quoted in the message
    bad_name = f"{SVG_OPEN}{IMG}.csv"
    _upload(page, bad_name, f"{IMG}\n{SCRIPT}\n".encode())
    _wait_shown(page, guard, f"Could not load {bad_name}")
    guard.check("after a refused CSV")
    # an unsupported extension
    _upload(page, f"{IMG}.exe", b"MZ\x90\x00", "application/octet-stream")
    time.sleep(2.0)
    guard.check("after an unsupported file type")
    # a label column that names markup but holds no numbers
    _upload(page, "only-text.csv", f"label,{IMG}\n{SCRIPT},{SVG}\n{IMG},{DETAILS}\n".encode())
    time.sleep(2.0)
    guard.check("after a CSV with no numbers")
    page.screenshot(path=str(artifacts / "hostile-errors.png"), full_page=True)


# Page pixels of a grid over the latent map's frame (for maps drawn as an image).
MAP_GRID = """
(n) => {
  function* walk(v) { yield v; if (v.children) { for (const c of v.children()) yield* walk(c); } }
  for (const root of Object.values(Bokeh.index)) for (const v of walk(root)) {
    const t = v.model && v.model.title;
    if (!(v.frame && t && (t.text === 'Latent space' || t === 'Latent space'))) continue;
    const r = v.canvas_view.el.getBoundingClientRect(), f = v.frame.bbox;
    const out = [];
    for (let i = 1; i < n; i++) for (let j = 1; j < n; j++)
      out.push([r.left + f.left + f.width * i / n, r.top + f.top + f.height * j / n]);
    return out;
  }
  return [];
}
"""


def test_markup_in_labels_of_a_rasterised_map_stays_text(page, hostile_app, artifacts):
    """Above a few thousand points the map is an image and hover is answered on the server."""
    guard = Guard(page)
    _open(page, hostile_app)
    rng = np.random.default_rng(3)
    n = 3200
    groups = rng.integers(0, 4, n)
    Y = rng.normal(size=(n, 6)) * 0.3 + groups[:, None] * np.linspace(-1, 1, 6)
    labels = [[IMG, SVG, DETAILS, ALERT][g] for g in groups]
    lines = ["a,b,c,d,e,f,label"] + [
        ",".join(f"{v:.4f}" for v in row) + ',"' + lab.replace('"', '""') + '"' for row, lab in zip(Y, labels)
    ]
    _upload(page, "many.csv", ("\n".join(lines) + "\n").encode())
    wait_loaded(page, "many.csv")
    guard.check("after the upload")
    train = _start_training(page, 5)
    deadline = time.monotonic() + 240
    shown = False
    while time.monotonic() < deadline and not shown:
        guard.check("while training")
        grid = page.evaluate(MAP_GRID, 9) if train.first.is_enabled() else []
        for px, py in grid:
            page.mouse.move(px, py)
            time.sleep(0.12)
            lines = guard.text().split("\n")  # one text node per line: the hover readout is one
            if any("Point #" in ln and any(lab in ln for lab in (IMG, SVG, DETAILS, ALERT)) for ln in lines):
                shown = True
                break
        time.sleep(0.5)
    page.screenshot(path=str(artifacts / "hostile-raster.png"), full_page=True)
    assert shown, "hovering the rasterised map never showed a point's label"
    guard.check("after hovering the rasterised map")
    _open_every_view(page, guard)
