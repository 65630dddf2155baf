"""The app in a real headless Chromium at 1k, 20k and 100k rows (not part of the tests).

For each size, against an in-process server with warmed-up kernels, with a
generated N x 30 data set (five labelled clusters on a curved 3-D sheet),
uploaded through the page, Bayesian GP-LVM with Q=10, M=50 (L-BFGS):

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

Sizes above the upload limit (``--cli-above``, default 200,000 rows) take the route the
command line gives big data: the N x 30 array is saved as an ``.npy`` file in a temporary
directory and ``gplvm-explorer FILE`` serves it (a server process of its own, cold: it
starts as a user's does).  Printed for those:

* ready: seconds from the server's start to the page showing the data (its summary names
  the N rows) with Train enabled; whether the page proposes the stochastic model (SVI);
* memory: the server's anonymous resident memory (``RssAnon``: everything but the pages of
  mapped files, i.e. beyond the memmap), before, at its peak and after training, with
  ``VmRSS`` beside it;
* training (the proposed model, ``--cli-iters`` iterations): the rate and ETA the page's
  status line shows, sampled every second (steady: the spread of the rates shown after the
  first quarter), the time to the first objective point and to the map being an image;
* clicks in the latent map as above (page-side prediction and the server's nearest row),
  while training and after.

Screenshots of the latent maps go to test-artifacts/bench/.

Usage: ``python benchmarks/bench_app.py [--sizes 1000 20000 100000] [--chromium PATH]``;
``python benchmarks/bench_app.py --sizes 1000000`` for a million rows from the command line.
"""
from __future__ import annotations

import argparse
import io
import os
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # the package first, then the browser kit beside the tests

from browserkit import (CHROMIUM_ARGS, data_summary, find_chromium, page_text, serve_cli,  # noqa: E402
                        serve_in_process, wait_ready)
ARTIFACTS = ROOT / "test-artifacts" / "bench"

PATCH = re.compile(r'"msgtype"\s*:\s*"PATCH-DOC"')
# the browser kit's probes (window.__gk: sources, column, figure ...) and this benchmark's watches
JS = """
window.__gx = Object.assign(Object.create(window.__gk), {
  // timestamps of the first objective point and of every frame in which the prediction's source
  // (column 'upper') or the nearest row's source (column 'nearest') has changed (the server sends the
  // nearest row at every click, the same row as the previous click's too)
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
  // the latent map's renderers that draw something (a glyph renderer whose source has rows): 'ImageRGBA'
  // among them once the points' image is shown (the renderer itself is always there)
  rasterised() { const v = this.figure('Latent space'); if (!v) return null;
    const kinds = [];
    for (const r of v.model.renderers) {
      if (!r.glyph) { kinds.push(r.type); continue; }
      const s = r.data_source, first = s && s.data ? (s.data instanceof Map ? s.data.values().next().value
                                                                            : Object.values(s.data)[0]) : null;
      if (first && first.length > 0) kinds.push(r.glyph.type);
    }
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


def clicks(page, n=10, seed=0, go_on=None):
    """Click n places in the latent map (fewer if ``go_on()`` turns false before a click).

    Returns (seconds from pointer-down to the first frame with the new prediction,
    the same to the first frame with the new nearest row, clicks not answered within 10 s).
    """
    rng = np.random.default_rng(seed)
    lat, near, missed = [], [], 0
    for fx, fy in rng.uniform(0.1, 0.9, size=(n, 2)):
        if go_on is not None and not go_on():
            break
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


def click_figures(page, phase: str, seed: int, go_on=None) -> dict:
    """`clicks` as figures: click_{phase}_ms, nearest_{phase}_ms ((median, slowest) ms), missed_{phase},
    clicks_{phase} (clicks made)."""
    lat, near, missed = clicks(page, seed=seed, go_on=go_on)
    return {f"click_{phase}_ms": spread_ms(lat), f"nearest_{phase}_ms": spread_ms(near), f"missed_{phase}": missed,
            f"clicks_{phase}": len(lat) + missed}


def map_kind(page) -> dict:
    """The latent map's renderers and the points drawn as glyphs (0: the points are an image)."""
    return {"latent_renderers": page.evaluate("__gx.rasterised()"),
            "glyph_points": page.evaluate("() => { const s = __gx.sources('label'); "
                                          "return s.length ? __gx.column(s[0], 'x').length : 0; }")}


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
        out.update(click_figures(page, "training", seed=1))
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
    out.update(click_figures(page, "idle", seed=2))
    out.update(map_kind(page))
    page.screenshot(path=str(shot_dir / f"latent-{n}.png"), full_page=True)
    page.close()
    assert tr.status in (Status.FINISHED.value, Status.STOPPED.value), tr.status
    out["engine_rate"] = engine_rate(Y, tr.iteration, Q, M)
    return out


def memory_mb(pid: int) -> dict:
    """The process's resident memory in MB: VmRSS, RssAnon (beyond mapped files), RssFile, VmHWM."""
    out = {}
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            key = line.split(":")[0]
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                out[key] = int(line.split()[1]) / 1024.0
    return out


class MemoryWatch:
    """Samples a process's memory every 0.1 s on a thread; ``peak``: the sample with the most RssAnon."""

    def __init__(self, pid: int):
        self.pid, self.peak, self._stop = pid, {"RssAnon": 0.0}, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                m = memory_mb(self.pid)
            except OSError:
                return
            if m.get("RssAnon", 0.0) > self.peak["RssAnon"]:
                self.peak = m
            time.sleep(0.1)

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=2)


def loadavg() -> str:
    with open("/proc/loadavg") as fh:
        return " ".join(fh.read().split()[:3])


STATUS_RATE = re.compile(r"([0-9.]+) it/s")
STATUS_ETA = re.compile(r"ETA (≤ )?([0-9][^·]*?)\s*(·|$)")


def status_line(page) -> str:
    """The status bar's progress line (the line with the run's iteration or epoch), or ''."""
    for line in page_text(page).splitlines():
        if ("Epoch " in line or "Iteration " in line) and "·" in line:
            return line.strip()
    return ""


RUNNING = re.compile(r"^Epoch [0-9.]+ / [0-9.]+ \(iteration .* elapsed$")


def training_shown(page) -> bool:
    """The status line is a running minibatch model's (epochs, iterations, '... elapsed')."""
    return RUNNING.match(status_line(page)) is not None


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) the process has used."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_quiet(pid: int, below: float = 0.1, timeout: float = 120.0) -> float:
    """Wait until the process uses less than ``below`` of a core over a second (what a run leaves
    after it ends: the map of the final result, the runs table's row, ...); seconds waited."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        c0 = cpu_seconds(pid)
        time.sleep(1.0)
        if cpu_seconds(pid) - c0 < below:
            break
    return time.perf_counter() - t0


def run_cli_size(browser, n, iters, shot_dir, tmp_root=None):
    """A million rows (or any n) as ``gplvm-explorer FILE.npy`` serves them; the figures (module doc)."""
    out = {"n": n, "route": "cli"}
    tmp = Path(tempfile.mkdtemp(prefix="bench-app-", dir=tmp_root))
    try:
        Y, _ = generate(n)
        path = tmp / f"bench-{n}.npy"
        np.save(path, Y.astype(np.float64))
        del Y
        out["file_mb"] = path.stat().st_size / 1e6
        t0 = time.perf_counter()
        with serve_cli([path], tmp, timeout=300) as url:
            watch = MemoryWatch(url.pid)
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.goto(url, timeout=300_000)
            wait_ready(page, timeout=300_000)
            page.evaluate(JS)
            page.evaluate("__gx.watch()")
            train = page.get_by_role("button", name="▶ Train", exact=True)
            use = page.get_by_role("button", name="Use the proposed model")
            while time.perf_counter() - t0 < 300:
                if f"N = {n} points" in data_summary(page) and use.is_visible():
                    break
                time.sleep(0.1)
            out["ready_s"] = time.perf_counter() - t0
            out["ready_load"] = loadavg()
            out["rss_ready"] = memory_mb(url.pid)
            text = page_text(page)
            out["proposed_svi"] = "Proposed model: Bayesian GP-LVM, stochastic" in text
            page.screenshot(path=str(shot_dir / f"ready-{n}.png"), full_page=True)
            use.click()
            while not train.is_enabled() and time.perf_counter() - t0 < 600:
                time.sleep(0.1)
            out["trainable_s"] = time.perf_counter() - t0
            box = page.get_by_label("Iterations")
            box.fill(str(iters))
            box.press("Enter")
            time.sleep(1.0)
            t_train = time.perf_counter()
            train.click()
            page.wait_for_function("__gx.first !== null", timeout=300_000, polling="raf")
            out["first_point_ms"] = page.evaluate("__gx.first - __gx.down")
            samples = []  # (seconds since Train, rate shown, ETA shown)

            def sample():
                line = status_line(page)
                rate, eta = STATUS_RATE.search(line), STATUS_ETA.search(line)
                if rate:
                    samples.append((time.perf_counter() - t_train, float(rate.group(1)),
                                    eta.group(2).strip() if eta else ""))
                return line

            page.wait_for_function("__gx.rasterised() && __gx.rasterised().includes('ImageRGBA')",
                                   timeout=300_000)
            out["map_s"] = time.perf_counter() - t_train
            line = sample()
            if training_shown(page):  # clicks while the status line shows the run going on
                out.update(click_figures(page, "training", seed=1, go_on=lambda: training_shown(page)))
                out["rss_training"] = memory_mb(url.pid)
            while True:
                line = sample()
                if re.search(r"(Finished|Converged|Stopped) after", page_text(page)):
                    break
                if time.perf_counter() - t_train > 900:
                    break
                time.sleep(1.0)
            out["train_s"] = time.perf_counter() - t_train
            out["train_load"] = loadavg()
            out["final_line"] = next((ln for ln in page_text(page).splitlines() if " after " in ln), "")
            out["rates"] = samples
            out["quiet_s"] = wait_quiet(url.pid)  # idle: the server has done what the run's end set off
            out.update(click_figures(page, "idle", seed=2))
            out.update(map_kind(page))
            out["rss_after"] = memory_mb(url.pid)
            page.screenshot(path=str(shot_dir / f"latent-{n}.png"), full_page=True)
            page.close()
            watch.stop()
            out["rss_peak"] = watch.peak
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def print_cli(r):
    mb = lambda m: f"{m['RssAnon']:.0f} MB (VmRSS {m['VmRSS']:.0f} MB)"  # noqa: E731
    fmt = lambda c, m=0: f"{c[0]:.0f} / {c[1]:.0f} ms ({m} missed)" if c else "–"  # noqa: E731
    rates = [rate for t, rate, _ in r["rates"]]
    steady = rates[len(rates) // 4:] or rates
    print(f"\n{r['n']:,} x 30 from the command line (.npy, {r['file_mb']:.0f} MB, memory-mapped), "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')}")
    print(f"  ready (server start -> data and the proposal shown): {r['ready_s']:.1f} s, Train enabled on the "
          f"proposed model at {r['trainable_s']:.1f} s   load {r['ready_load']}")
    print(f"  SVI proposed: {'yes' if r['proposed_svi'] else 'NO'}")
    print(f"  memory beyond the memmap (RssAnon): ready {mb(r['rss_ready'])}, peak {mb(r['rss_peak'])}, "
          f"after training {mb(r['rss_after'])}")
    print(f"  Train -> first objective point {r['first_point_ms']:.0f} ms; -> map an image {r['map_s']:.1f} s")
    if steady:
        print(f"  rate shown (it/s) after the first quarter: median {statistics.median(steady):.2f}, "
              f"min {min(steady):.2f}, max {max(steady):.2f} over {len(steady)} samples; "
              f"ETA shown e.g. {', '.join(e for _, _, e in r['rates'][len(rates) // 4::max(1, len(rates) // 5)])}")
    print(f"  {r['final_line']}   load {r['train_load']}")
    kinds = set(r["latent_renderers"] or [])
    print(f"  map: {'raster image' if 'ImageRGBA' in kinds and not r['glyph_points'] else str(r['glyph_points']) + ' glyphs'}")
    print(f"  click -> reconstruction drawn, median / slowest: training {fmt(r.get('click_training_ms'), r.get('missed_training', 0))} "
          f"over {r.get('clicks_training', 0)} clicks, idle {fmt(r.get('click_idle_ms'), r['missed_idle'])}")
    nt, ni = r.get("nearest_training_ms"), r.get("nearest_idle_ms")
    print(f"  click -> nearest training row drawn: training {fmt(nt)}, idle {fmt(ni)}   (idle: after the server "
          f"went quiet, {r['quiet_s']:.0f} s after the run ended)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 20000, 100000])
    ap.add_argument("--chromium", default=find_chromium())
    ap.add_argument("--cli-above", type=int, default=200_000,
                    help="sizes above this are served from an .npy file on the command line")
    ap.add_argument("--cli-iters", type=int, default=1500,
                    help="iterations of the proposed model (command line): at 10^6 rows enough for 10 clicks "
                         "between the first latent view and the end of the run")
    args = ap.parse_args()
    big = [n for n in args.sizes if n > args.cli_above]
    small = [n for n in args.sizes if n <= args.cli_above]
    if big:
        from playwright.sync_api import sync_playwright

        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=args.chromium, args=CHROMIUM_ARGS)
            for n in big:
                r = run_cli_size(browser, n, args.cli_iters, ARTIFACTS)
                print({k: v for k, v in r.items() if k != "rates"}, flush=True)
                print_cli(r)
            browser.close()
    if not small:
        return

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
            for n in small:
                r = run_size(browser, url, registry, n, 10, 50, iters.get(n, 20), ARTIFACTS)
                rows.append(r)
                print(r, flush=True)
            browser.close()
    print("\nN x 30, Bayesian GP-LVM (RBF+bias+white, Q=10, M=50, L-BFGS), headless Chromium, 2 cores")
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
