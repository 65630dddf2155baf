"""The app in a real headless Chromium at 1k, 20k and 100k rows (not part of the tests).

For each size, against an in-process server with warmed-up kernels, with a
generated N x 30 data set (five labelled clusters on a curved 3-D sheet),
uploaded through the page, Bayesian GP-LVM with Q=10, M=50 (L-BFGS-B):

* Train click -> first objective point drawn (timestamps taken in the page:
  the pointer-down on Train and the animation frame that first has a point);
* click in the latent map -> reconstruction drawn: the first animation frame
  after the pointer-down in which the prediction's source (mean and ±2σ) has
  changed, median and slowest over 10 clicks at different places, while
  training and after it ended; clicks never answered are counted.  The page
  predicts the click itself where it holds the model's factors; the nearest
  training row comes from the server, and the time to its first frame is
  printed too ("nearest row");
* training speed in the app (iterations over the fit's own wall-clock time)
  against ``engine.fit`` alone on the same data and settings;
* bytes the server sends per page update while training (websocket frames
  counted with Playwright; one update = one Bokeh PATCH-DOC message).

Screenshots of the latent maps go to test-artifacts/bench/.

Usage: ``python benchmarks/bench_app.py [--sizes 1000 20000 100000] [--chromium PATH]``
"""
from __future__ import annotations

import argparse
import io
import re
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # the package first, then the browser kit beside the tests

from browserkit import CHROMIUM_ARGS, find_chromium, serve_in_process, wait_ready  # noqa: E402
ARTIFACTS = ROOT / "test-artifacts" / "bench"

PATCH = re.compile(r'"msgtype"\s*:\s*"PATCH-DOC"')
# the browser kit's probes (window.__gk: sources, column, figure ...) and this benchmark's watches
JS = """
window.__gx = Object.assign(Object.create(window.__gk), {
  // timestamps of the first objective point and of every frame in which the prediction's source
  // (column 'upper') or the nearest row's source (column 'nearest') has changed
  watch() {
    this.first = null; this.recon = []; this.near = []; this.down = null;
    const objective = () => this.sources('objective')[0];
    const named = (name) => { for (const doc of Bokeh.documents) { const m = doc.get_model_by_name(name);
      if (m) return m; } return null; };
    const changes = (name, col, stamps) => { let last = null;
      return (now) => { const s = named(name); const d = s ? this.column(s, col) : null;
        if (d !== last) { if (last !== null || (d && d.length)) stamps.push(now); last = d; } }; };
    const recon = changes('reconstruction-profile', 'upper', this.recon);
    const near = changes('reconstruction-nearest', 'nearest', this.near);
    const tick = () => {
      const now = performance.now();
      const o = objective();
      if (this.first === null && o && this.column(o, 'objective').length > 0) this.first = now;
      recon(now); near(now);
      requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
    document.addEventListener('pointerdown', () => { this.down = performance.now(); }, true);
  },
  rasterised() { const v = this.figure('Latent space'); if (!v) return null;
    const kinds = []; for (const r of v.model.renderers) kinds.push(r.glyph ? r.glyph.type : r.type);
    return kinds; },
});
"""


def generate(n: int, d: int = 30, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """n points near a curved 3-D sheet in d dimensions, five labelled clusters."""
    rng = np.random.default_rng(seed)
    label = rng.integers(0, 5, n)
    centres = rng.uniform(-2, 2, size=(5, 3))
    z = centres[label] + 0.45 * rng.standard_normal((n, 3))
    feats = np.c_[z, np.sin(z[:, :1]), np.cos(z[:, 1:2]), z[:, :1] * z[:, 2:3]]
    W = rng.standard_normal((feats.shape[1], d)) / np.sqrt(feats.shape[1])
    Y = feats @ W + 0.05 * rng.standard_normal((n, d))
    return Y.astype(np.float32), label


def npz_bytes(Y, labels) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, Y=Y, labels=np.array([f"cluster {c}" for c in labels]))
    return buf.getvalue()


def engine_rate(Y, iters: int, Q: int, M: int) -> float:
    """Iterations per second of engine.fit alone (no callback, no UI)."""
    import engine
    from gplvm_explorer.catalog import ModelConfig, spec

    cfg = ModelConfig(model="bayesian", latent_dim=Q, num_inducing=M, max_iters=iters)
    model = spec("bayesian").build(np.asarray(Y, dtype=float), cfg)
    t = time.perf_counter()
    result = engine.fit(model, optimizer="lbfgs", max_iters=iters)
    return result.iterations / (time.perf_counter() - t)


class Traffic:
    """Bytes the server sends, from Playwright's websocket frame events."""

    def __init__(self, page):
        self.frames = []  # (time, bytes, is_header_of_patch)
        page.on("websocket", self._on_ws)

    def _on_ws(self, ws):
        ws.on("framereceived", self._on_frame)

    def _on_frame(self, payload):
        size = len(payload) if payload is not None else 0
        patch = isinstance(payload, str) and PATCH.search(payload[:200]) is not None
        self.frames.append((time.perf_counter(), size, patch))

    def window(self, t0, t1):
        sel = [f for f in self.frames if t0 <= f[0] <= t1]
        total = sum(f[1] for f in sel)
        patches = sum(1 for f in sel if f[2])
        return total, patches


def latent_pixel(page, fx, fy):
    """Page pixel of a point at fractions (fx, fy) of the latent map's frame."""
    return page.evaluate("""([fx, fy]) => { const v = __gx.figure('Latent space'); if (!v) return null;
        const r = v.canvas_view.el.getBoundingClientRect(), f = v.frame.bbox;
        return [r.left + f.left + fx * f.width, r.top + f.top + fy * f.height]; }""", [fx, fy])


def clicks(page, n=10, seed=0):
    """Click n places in the latent map.

    Returns (seconds from pointer-down to the first frame with the new prediction,
    the same to the first frame with the new nearest row, clicks not answered).
    """
    rng = np.random.default_rng(seed)
    lat, near, missed = [], [], 0
    for fx, fy in rng.uniform(0.1, 0.9, size=(n, 2)):
        before = page.evaluate("[__gx.recon.length, __gx.near.length]")
        pos = latent_pixel(page, fx, fy)
        page.mouse.click(pos[0], pos[1])
        deadline = time.perf_counter() + 10
        got = None
        while time.perf_counter() < deadline:
            got = page.evaluate("""([k, j]) => __gx.recon.length > k && __gx.near.length > j
                                   ? [__gx.recon[k] - __gx.down, __gx.near[j] - __gx.down] : null""", before)
            if got is not None:
                break
            time.sleep(0.01)
        if got is None:
            missed += 1
        else:
            lat.append(got[0] / 1000.0)
            near.append(got[1] / 1000.0)
        time.sleep(0.15)
    return lat, near, missed


def spread_ms(seconds):
    """(median, slowest) in milliseconds, or None."""
    return (statistics.median(seconds) * 1e3, max(seconds) * 1e3) if seconds else None


def run_size(browser, url, registry, n, Q, M, iters, shot_dir):
    from gplvm_explorer.training import Status

    Y, labels = generate(n)
    data = npz_bytes(Y, labels)
    out = {"n": n}
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    traffic = Traffic(page)
    page.goto(url)
    wait_ready(page)
    page.evaluate(JS)
    page.evaluate("__gx.watch()")
    doc, ex = registry[-1]
    page.locator("input[type=file]").first.set_input_files(
        files=[{"name": f"bench-{n}.npz", "mimeType": "application/octet-stream", "buffer": data}])
    page.get_by_text(f"N = {n} points").first.wait_for(timeout=180_000)

    def settings():
        ex.settings.latent_dim, ex.settings.num_inducing, ex.settings.max_iters = Q, M, iters
    ex.dispatcher.soon(settings)
    deadline = time.time() + 30
    while (ex.settings.latent_dim, ex.settings.num_inducing) != (Q, M) and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    page.get_by_role("button", name="▶ Train", exact=True).click()
    page.wait_for_function("__gx.first !== null", timeout=300_000, polling="raf")
    out["first_point_ms"] = page.evaluate("__gx.first - __gx.down")
    # while training: wait for the map, then click
    page.wait_for_function("__gx.rasterised() && __gx.rasterised().length > 0", timeout=300_000)
    while ex.latent.view is None and ex.training.active:
        time.sleep(0.1)
    t_train0 = time.perf_counter()
    if ex.training.active:
        lat, near, missed = clicks(page, seed=1)
        out["click_training_ms"], out["nearest_training_ms"] = spread_ms(lat), spread_ms(near)
        out["missed_training"] = missed
    while ex.training.active:
        time.sleep(0.2)
    t_train1 = time.perf_counter()
    total, patches = traffic.window(t_train0, t_train1)
    out["bytes_per_update"] = total / max(1, patches)
    out["updates"] = patches
    out["status"] = ex.training.status
    tr = ex.training
    out["app_rate"] = tr.rate
    out["iterations"] = tr.iteration
    time.sleep(1.0)
    lat, near, missed = clicks(page, seed=2)
    out["click_idle_ms"], out["nearest_idle_ms"] = spread_ms(lat), spread_ms(near)
    out["missed_idle"] = missed
    out["latent_renderers"] = page.evaluate("__gx.rasterised()")
    out["glyph_points"] = page.evaluate("() => { const s = __gx.sources('label'); "
                                        "return s.length ? __gx.column(s[0], 'x').length : 0; }")
    page.screenshot(path=str(shot_dir / f"latent-{n}.png"), full_page=True)
    page.close()
    assert tr.status in (Status.FINISHED.value, Status.STOPPED.value), tr.status
    out["engine_rate"] = engine_rate(Y, tr.iteration, Q, M)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 20000, 100000])
    ap.add_argument("--chromium", default=find_chromium())
    args = ap.parse_args()

    import panel as pn
    from playwright.sync_api import sync_playwright

    from gplvm_explorer import warmup
    from gplvm_explorer.app import create_app

    t0 = time.perf_counter()
    warmup.start()
    warmup.wait()
    print(f"kernel warm-up: {time.perf_counter() - t0:.1f} s ({warmup.status()})", flush=True)
    registry = []

    def factory():
        page = create_app()
        registry.append((pn.state.curdoc, page.explorer))
        return page

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    iters = {1000: 150, 20000: 40, 100000: 8}
    rows = []
    with serve_in_process(factory, warm=False) as url:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=args.chromium, args=CHROMIUM_ARGS)
            for n in args.sizes:
                r = run_size(browser, url, registry, n, 10, 50, iters.get(n, 20), ARTIFACTS)
                rows.append(r)
                print(r, flush=True)
            browser.close()
    print("\nN x 30, Bayesian GP-LVM (RBF+bias+white, Q=10, M=50, L-BFGS-B), headless Chromium, 2 cores")
    print(f"{'rows':>8} | {'Train->1st pt':>13} | {'click->recon training':>22} | {'click->recon idle':>18} | "
          f"{'app it/s':>8} | {'engine it/s':>11} | {'ratio':>5} | {'bytes/update':>12} | map")
    for r in rows:
        ct = r.get("click_training_ms")
        ci = r.get("click_idle_ms")
        fmt = lambda c, m: f"{c[0]:.0f} / {c[1]:.0f} ms ({m} missed)" if c else "–"  # noqa: E731
        kinds = set(r["latent_renderers"] or [])
        kind = "raster image" if "ImageRGBA" in kinds and not r["glyph_points"] else f"{r['glyph_points']} glyphs"
        print(f"{r['n']:>8} | {r['first_point_ms']:>10.0f} ms | {fmt(ct, r.get('missed_training', 0)):>22} | "
              f"{fmt(ci, r['missed_idle']):>18} | {r['app_rate']:>8.2f} | {r['engine_rate']:>11.2f} | "
              f"{r['app_rate'] / r['engine_rate']:>5.0%} | {r['bytes_per_update'] / 1e3:>9.1f} kB | {kind}")
    print("\nclick -> nearest training row drawn (the server's answer), median / slowest:")
    for r in rows:
        nt, ni = r.get("nearest_training_ms"), r.get("nearest_idle_ms")
        fmt = lambda c: f"{c[0]:.0f} / {c[1]:.0f} ms" if c else "–"  # noqa: E731
        print(f"{r['n']:>8} | while training {fmt(nt):>16} | idle {fmt(ni):>16}")


if __name__ == "__main__":
    main()
