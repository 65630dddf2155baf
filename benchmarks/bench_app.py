"""App latency benchmark in a real headless Chromium (not part of the tests).

Measures, against an in-process server with warmed-up kernels:

* time from the Train click to the first objective point drawn in the page;
* updates per second of the objective curve reaching the browser while a
  1000-point Bayesian GP-LVM fits;
* click-to-reconstruction latency (click in the latent map -> new text in the
  reconstruction panel), median over several clicks.

Usage: ``python benchmarks/bench_app.py [--n 1000] [--seconds 15] [--chromium PATH]``
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

READY = "window.Bokeh && Bokeh.documents.length > 0 && Object.keys(Bokeh.index).length > 0"
JS = """
window.__gx = {
  sources(col) { const out = [];
    for (const doc of Bokeh.documents) for (const m of doc.all_models) {
      if (m.type !== 'ColumnDataSource') continue;
      const d = m.data; const v = d instanceof Map ? d.get(col) : d[col];
      if (v !== undefined) out.push(m); }
    return out; },
  column(src, col) { const d = src.data; return d instanceof Map ? d.get(col) : d[col]; },
  len(col) { const s = this.sources(col); return s.length ? Math.max(...s.map(m => this.column(m, col).length)) : -1; },
  *walk(v) { yield v; if (v.children) { for (const c of v.children()) yield* this.walk(c); } },
  figure(title) { for (const root of Object.values(Bokeh.index)) for (const v of this.walk(root)) {
      const t = v.model && v.model.title; if (t && t.text === title && v.frame) return v; } return null; },
  watch(col) { this.changes = []; let last = this.len(col);
    const tick = () => { const n = this.len(col); if (n !== last) { this.changes.push([performance.now(), n]); last = n; }
                         if (!this.stopWatch) requestAnimationFrame(tick); };
    this.stopWatch = false; requestAnimationFrame(tick); },
};
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def synthetic_csv(n: int, path: Path, seed=0):
    """n points on a curved 2-D sheet in 12-D, three labelled regions."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, 3 * np.pi, n)
    h = rng.uniform(-1, 1, n)
    W = rng.standard_normal((4, 12))
    Y = np.c_[np.cos(t), np.sin(t), t / 3, h] @ W + 0.05 * rng.standard_normal((n, 12))
    label = np.digitize(t, [np.pi, 2 * np.pi])
    header = ",".join([f"f{i + 1}" for i in range(12)] + ["label"])
    rows = [",".join(f"{v:.5f}" for v in y) + f",{c}" for y, c in zip(Y, label)]
    path.write_text(header + "\n" + "\n".join(rows) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--clicks", type=int, default=7)
    ap.add_argument("--chromium", default=os.environ.get("GPLVM_EXPLORER_CHROMIUM") or shutil.which("chromium")
                    or "/usr/bin/chromium")
    args = ap.parse_args()

    import panel as pn
    from playwright.sync_api import sync_playwright

    from gplvm_explorer import warmup
    from gplvm_explorer.app import create_app

    t0 = time.perf_counter()
    warmup.start()
    warmup.wait()
    print(f"kernel warm-up: {time.perf_counter() - t0:.1f} s ({warmup.status()})")
    port = free_port()
    server = pn.serve({"app": create_app}, port=port, address="127.0.0.1",
                      websocket_origin=[f"127.0.0.1:{port}"], threaded=True, show=False)
    tmp = Path(tempfile.mkdtemp())
    csv = tmp / f"bench-{args.n}.csv"
    synthetic_csv(args.n, csv)
    results = {}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=args.chromium, args=[
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync"])
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.goto(f"http://127.0.0.1:{port}/app")
            page.wait_for_function(READY, timeout=120_000)
            page.evaluate(JS)
            page.locator("input[type=file]").set_input_files(str(csv))
            page.get_by_text(f"{args.n} points").first.wait_for(timeout=60_000)
            page.get_by_label("Label column (colours only)").select_option("label")
            page.get_by_text("3 distinct").first.wait_for(timeout=30_000)
            iters = page.get_by_label("Iterations")
            iters.fill("100000")
            iters.press("Enter")
            time.sleep(0.5)
            page.evaluate("__gx.watch('objective')")
            t_click = time.perf_counter()
            page.get_by_role("button", name="▶ Train", exact=True).click()
            try:
                page.wait_for_function("__gx.len('objective') > 0", timeout=120_000, polling=20)
            except Exception:
                page.screenshot(path=str(tmp / "bench-failure.png"))
                print(f"no objective point in the page; screenshot in {tmp}")
                raise
            results["first_point_s"] = time.perf_counter() - t_click
            time.sleep(args.seconds)
            changes = page.evaluate("() => { __gx.stopWatch = true; return __gx.changes; }")
            ts = [c[0] / 1000 for c in changes]
            if len(ts) >= 2:
                results["updates_per_s"] = (len(ts) - 1) / (ts[-1] - ts[0])
                results["points_per_s"] = (changes[-1][1] - changes[0][1]) / (ts[-1] - ts[0])
                gaps = np.diff(ts)
                results["max_gap_s"] = float(gaps.max())
            page.get_by_role("button", name="■ Stop", exact=True).click()
            page.get_by_text("Stopped after").first.wait_for(timeout=60_000)
            time.sleep(1.5)
            xs = page.evaluate("() => Array.from(__gx.column(__gx.sources('lx')[0], 'lx'))")
            ys = page.evaluate("() => Array.from(__gx.column(__gx.sources('ly')[0], 'ly'))")
            rng = np.random.default_rng(1)
            lat = []
            misses = 0
            picks = rng.choice(len(xs), size=min(args.clicks, len(xs)), replace=False)
            span_x = (max(xs) - min(xs)) or 1.0
            span_y = (max(ys) - min(ys)) or 1.0
            for j in map(int, picks):
                pos = page.evaluate("""([x, y]) => { const v = __gx.figure('Latent space');
                    const r = v.canvas_view.el.getBoundingClientRect();
                    return [r.left + v.frame.x_scale.compute(x), r.top + v.frame.y_scale.compute(y)]; }""",
                                    [xs[j], ys[j]])
                t = time.perf_counter()
                page.mouse.click(pos[0], pos[1])
                deadline = t + 20
                while time.perf_counter() < deadline:
                    # the text names the training point nearest the click: point j (or one on top of it)
                    now = page.get_by_text("Nearest training point #").all_inner_texts()
                    m = re.search(r"At x\d+ = (-?[\d.e+-]+), x\d+ = (-?[\d.e+-]+)", now[0]) if now else None
                    # within 1% of the data's span: a click lands on a whole pixel, not the exact coordinate
                    if m and abs(float(m.group(1)) - xs[j]) < 1e-2 * span_x \
                            and abs(float(m.group(2)) - ys[j]) < 1e-2 * span_y:
                        lat.append(time.perf_counter() - t)
                        break
                    time.sleep(0.005)
                else:
                    misses += 1
            results["click_to_reconstruction_median_s"] = statistics.median(lat)
            results["click_to_reconstruction_max_s"] = max(lat)
            results["clicks_without_update"] = misses
            browser.close()
    finally:
        server.stop()
    print(f"data: {args.n} points x 12 features, Bayesian GP-LVM (RBF+bias+white, Q=5, M=30, L-BFGS-B)")
    print(f"time to first objective point in the page after Train: {results.get('first_point_s', float('nan')):.2f} s")
    print(f"objective-curve updates reaching the browser: {results.get('updates_per_s', float('nan')):.2f} /s "
          f"({results.get('points_per_s', float('nan')):.1f} iterations/s drawn, "
          f"longest gap {results.get('max_gap_s', float('nan')):.2f} s)")
    print(f"click-to-reconstruction latency: median {results['click_to_reconstruction_median_s'] * 1000:.0f} ms, "
          f"max {results['click_to_reconstruction_max_s'] * 1000:.0f} ms over {len(lat)} clicks "
          f"({results['clicks_without_update']} clicks not answered within 20 s)")
    return results


if __name__ == "__main__":
    main()
