"""The explorer in a real headless Chromium against a served app.

Screenshots of each state go to test-artifacts/e2e/.
"""
from __future__ import annotations

import re
import time

import pytest
from browserkit import data_summary, poll, wait_loaded, wait_ready

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(420),
    # pytest-playwright's own base_url fixture triggers this on recent pytest
    pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning"),
]




def open_app(page, url):
    page.goto(url)
    wait_ready(page)


def col_len(page, col):
    return page.evaluate(
        """(col) => { const s = __gk.sources(col); return s.length ? Math.max(...s.map(m => __gk.column(m, col).length)) : -1; }""",
        col,
    )


def col_values(page, col, must_have=None):
    return page.evaluate(
        """([col, other]) => { const s = __gk.sources(col).filter(m => !other || __gk.column(m, other) !== undefined);
             return s.length ? Array.from(__gk.column(s[0], col)) : null; }""",
        [col, must_have],
    )


# the latent map's points and ranges (a signature to see when the map stops changing), or null
MAP_POINTS = """() => { const v = __gk.figure('Latent space'); if (!v) return null;
  const s = __gk.sources('x').filter(m => __gk.column(m, 'label') !== undefined && __gk.column(m, 'y') !== undefined);
  if (!s.length) return null;
  const xs = Array.from(__gk.column(s[0], 'x')), ys = Array.from(__gk.column(s[0], 'y'));
  if (!xs.length || xs.length !== ys.length) return null;
  const xr = v.model.x_range, yr = v.model.y_range;
  return {xs, ys, ranges: [xr.start, xr.end, yr.start, yr.end]}; }"""


def settled_map(page, quiet=1.5, timeout=60.0):
    """The latent map's points once it has not changed for ``quiet`` seconds.

    The map of a run's final result is computed on a server thread after the status line says the
    run ended: it can arrive seconds later on a loaded machine, moving the points and the ranges.
    """
    deadline = time.monotonic() + timeout
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        state = page.evaluate(MAP_POINTS)
        now = time.monotonic()
        if state is None or state != last:
            last, since = state, now
        elif now - since >= quiet:
            return state
        time.sleep(0.25)
    raise AssertionError(f"the latent map did not settle within {timeout:.0f} s (last: {last!r:.300})")


def screenshot(page, artifacts, name):
    page.screenshot(path=str(artifacts / f"{name}.png"), full_page=True)


def wait_text(page, text, timeout=60_000):
    page.get_by_text(text).first.wait_for(state="visible", timeout=timeout)


def click_latent(page, x, y):
    """Click the latent map at data coordinates (x, y); returns the page pixel."""
    pos = page.evaluate(
        """([x, y]) => { const v = __gk.figure('Latent space'); if (!v) return null;
             const r = v.canvas_view.el.getBoundingClientRect();
             return [r.left + v.frame.x_scale.compute(x), r.top + v.frame.y_scale.compute(y)]; }""",
        [x, y],
    )
    assert pos is not None, "latent map figure not found"
    page.mouse.click(pos[0], pos[1])
    return pos


def test_train_live_click_reconstruct_stop(page, panel_serve_subprocess, artifacts):
    """Served by `panel serve gplvm_explorer/app.py` (proves the entry point)."""
    open_app(page, panel_serve_subprocess)
    # default sample already loaded
    wait_text(page, "rotating-glyph", timeout=60_000)
    page.locator("select").first.select_option(label="Rotating glyph (images)")
    wait_text(page, "images of 16 × 16 pixels")
    screenshot(page, artifacts, "01-first-open")

    # many iterations, so the fit is still running when we look (and press Stop)
    iters = page.get_by_label("Iterations")
    iters.fill("20000")
    iters.press("Enter")
    page.get_by_role("button", name="▶ Train", exact=True).click()
    # the objective curve grows across several polls while training
    lengths = []
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        n = col_len(page, "objective")
        if not lengths or n != lengths[-1]:
            lengths.append(n)
        if len([v for v in lengths if v > 0]) >= 4:
            break
        time.sleep(0.3)
    grown = [v for v in lengths if v > 0]
    assert len(grown) >= 4, f"objective curve did not grow live: {lengths}"
    assert grown == sorted(grown)
    # ARD bars: one per latent dimension (Q = 5 by default), with real values
    # (the bars come with the run's first published result, which can lag the objective's progress)
    q = 5
    assert poll(lambda: col_len(page, "dimension") == q, timeout=60), \
        f"ARD bars: {col_len(page, 'dimension')} bars, expected {q}"
    values = poll(lambda: (v := col_values(page, "value", must_have="dimension")) and len(v) == q
                  and max(v) > 0 and v, timeout=30)
    assert values, f"ARD bars without real values: {col_values(page, 'value', must_have='dimension')}"
    # the page stays responsive while training: the status line shows progress
    wait_text(page, "it/s")
    # wait for the latent points
    # the map's glyph source is the one with both columns; the ARD bars' source has 'colour' but no 'x'
    page.wait_for_function(
        "() => __gk.sources('colour').some(s => (__gk.column(s, 'x') || []).length > 0)", timeout=60_000)
    screenshot(page, artifacts, "02-training")

    page.get_by_role("button", name="■ Stop", exact=True).click()
    wait_text(page, "Stopped after", timeout=60_000)
    # the final map and grid arrive after the status line: wait until the map stops changing
    points = settled_map(page)
    screenshot(page, artifacts, "03-stopped")
    # exports become available once a model exists
    csv_btn = page.get_by_role("button", name="Latent coordinates (CSV)")
    csv_btn.wait_for(timeout=10_000)
    assert csv_btn.is_enabled()

    # click the latent map at a known data coordinate: training point 0
    xs, ys = points["xs"], points["ys"]
    assert xs and ys
    x, y = xs[0], ys[0]
    click_latent(page, x, y)
    wait_text(page, "Nearest training point #", timeout=60_000)
    text = page.get_by_text(re.compile(r"At x\d+ = ")).first.inner_text()
    m = re.search(r"At x\d+ = (-?[\d.e+-]+), x\d+ = (-?[\d.e+-]+)", text)
    assert m, text
    span_x = max(xs) - min(xs) or 1.0
    span_y = max(ys) - min(ys) or 1.0
    assert abs(float(m.group(1)) - x) < 0.05 * span_x
    assert abs(float(m.group(2)) - y) < 0.05 * span_y
    first_text = text
    screenshot(page, artifacts, "04-reconstruction")
    # a second click elsewhere updates the reconstruction
    click_latent(page, xs[len(xs) // 2], ys[len(ys) // 2])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        t2 = page.get_by_text(re.compile(r"At x\d+ = ")).first.inner_text()
        if t2 != first_text:
            break
        time.sleep(0.2)
    assert t2 != first_text, "reconstruction did not update on the second click"
    time.sleep(0.5)
    screenshot(page, artifacts, "05-second-click")
    # the whole page (the template scrolls inside): a tall viewport for one picture
    page.set_viewport_size({"width": 1280, "height": 1750})
    time.sleep(1.5)
    screenshot(page, artifacts, "06-whole-page")


def test_upload_valid_then_malformed_keeps_previous(page, served_app, artifacts, tmp_path):
    open_app(page, served_app)
    good = tmp_path / "measurements.csv"
    rows = ["height,width,depth,weight,species"]
    for i in range(40):
        rows.append(f"{1 + i * 0.1:.2f},{2 + (i % 7) * 0.3:.2f},{(i * 37 % 11) / 3:.3f},{i % 5 + 0.5},"
                    f"{'ABC'[i % 3]}")
    good.write_text("\n".join(rows) + "\n")
    page.locator("input[type=file]").set_input_files(str(good))
    wait_loaded(page, "measurements")
    page.get_by_text(re.compile(r"40\s+points")).first.wait_for(state="visible", timeout=30_000)
    # choose the label column: the points will be coloured by species
    page.get_by_label("Label column (colours only)").select_option("species")
    wait_text(page, "3 distinct", timeout=30_000)
    screenshot(page, artifacts, "07-upload-valid")

    bad = tmp_path / "broken.csv"
    bad.write_bytes(b"a,b,c\n1,2,3\n4,five,6,7,8\n\x00\x00\x00")
    page.locator("input[type=file]").set_input_files(str(bad))
    wait_text(page, "Could not load broken.csv", timeout=30_000)
    # the previous data stays loaded
    assert page.get_by_text(re.compile(r"40\s+points")).first.is_visible()
    assert "measurements.csv" in data_summary(page)
    assert page.get_by_label("Data set (bundled sample or your file)").evaluate(
        "el => el.options[el.selectedIndex].text") == "Your file: measurements.csv"
    screenshot(page, artifacts, "08-upload-malformed")


def test_an_idle_tab_costs_the_server_no_cpu(page, panel_serve_subprocess, cpu_seconds):
    """Nothing polls: with a page open and nothing training, the server sleeps."""
    open_app(page, panel_serve_subprocess)
    wait_text(page, "rotating-glyph", timeout=60_000)
    # a fresh server compiles its numerical kernels in the background once (a cold numba cache
    # takes a minute of CPU): that is start-up work, not the idle tab's
    page.get_by_text("Compiling numerical kernels").first.wait_for(state="hidden", timeout=360_000)
    pid = panel_serve_subprocess.pid

    def used_over(window=6.0):
        c0, t0 = cpu_seconds(pid), time.monotonic()
        time.sleep(window)
        return (cpu_seconds(pid) - c0) / (time.monotonic() - t0)

    # sessions of earlier tests on this server end within seconds; then only this idle tab is left
    # (polling a few times a second, as the page once did, costs ~10% of a core, every window)
    deadline = time.monotonic() + 40.0
    used = used_over()
    while used >= 0.03 and time.monotonic() < deadline:
        used = used_over()
    assert used < 0.03, f"an idle tab costs the server {used:.1%} of a core"


# a value typed and Train clicked in the same moment: the click reaches the server while Panel still waits
# for the value's debounce (Panel then runs the click without the document lock)
TYPE_AND_CLICK_TRAIN = """(iters) => {
  let input = null;
  for (const doc of Bokeh.documents) for (const m of doc.all_models)
    if (m.title === 'Iterations' && m.value !== undefined) input = m;
  let train = null;
  for (const root of Object.values(Bokeh.index)) for (const v of __gk.walk(root))
    if (v.model.label === '▶ Train' && v.click) train = v;
  if (!input || !train) return false;
  input.value = iters;
  train.click();
  return true;
}"""


def test_train_clicked_while_a_typed_value_is_pending_trains_and_logs_no_error(page, panel_serve_subprocess,
                                                                                 artifacts):
    log = artifacts / "panel-serve.log"
    start = log.stat().st_size
    open_app(page, panel_serve_subprocess)
    wait_text(page, "rotating-glyph", timeout=60_000)
    assert poll(lambda: page.evaluate(TYPE_AND_CLICK_TRAIN, 40), timeout=30), "Iterations box or Train button not found"
    wait_text(page, "Finished after 40 iterations", timeout=120_000)
    assert poll(lambda: col_len(page, "objective") > 1, timeout=30), col_len(page, "objective")
    written = log.read_bytes()[start:].decode("utf-8", errors="replace")
    assert "Traceback" not in written and "RuntimeError" not in written, written[-4000:]
