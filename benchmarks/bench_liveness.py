"""Does one session's heavy work stall the server for the others?

Starts ``gplvm-explorer`` on a free port and opens the page in headless
Chromium.  A thread polls ``/liveness`` every 0.1 s (what a second user's page
or a load balancer sees) while the page:

1. opens a saved exact GP-LVM of ROWS rows (its start is evaluated and the
   latent map's variance grid computed in background threads: O(N^3)
   factorisations and O(N^2) solves), then
2. trains it for TRAIN seconds.

Prints the worst and the 99th-percentile /liveness latency in each phase,
with the load average.  Before the engine's LAPACK calls released the GIL,
opening a 3,000-row exact model stalled /liveness for 3.8 s.

    python benchmarks/bench_liveness.py [--rows 3000] [--train 20]

Needs Chromium and playwright (the e2e extras).
"""
from __future__ import annotations

import argparse
import re
import io
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # the package first, then the browser kit beside the tests

from browserkit import CHROMIUM_ARGS, READY, click_train, find_chromium, serve_cli  # noqa: E402


def saved_exact_model(rows: int, seed: int = 0) -> bytes:
    """An exact GP-LVM (Q = 2) of a noisy 1-D curve in 8 dims, as the page's model file."""
    import numpy as np

    import engine
    from engine.io import save_model

    rng = np.random.default_rng(seed)
    t = rng.uniform(-3, 3, (rows, 1))
    Y = np.hstack([np.sin(t * (j + 1)) + 0.05 * rng.normal(size=(rows, 1)) for j in range(8)])
    buf = io.BytesIO()
    save_model(engine.GPLVM(Y, 2), buf)
    return buf.getvalue()


class LivenessProbe:
    """Polls a URL every ``every`` seconds on a thread; records (phase, latency in s)."""

    def __init__(self, url: str, every: float = 0.1):
        self.url, self.every = url, every
        self.phase = "idle"
        self.latencies: list[tuple[str, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            began = time.perf_counter()
            phase = self.phase
            try:
                urllib.request.urlopen(self.url, timeout=120).read()
            except OSError as exc:
                print(f"  /liveness failed: {exc}", flush=True)
            self.latencies.append((phase, time.perf_counter() - began))
            self._stop.wait(self.every)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def summary(latencies: list[tuple[str, float]], phase: str) -> str:
    import numpy as np

    seen = np.array([t for p, t in latencies if p == phase])
    if not seen.size:
        return f"{phase:8s} no probes"
    return (f"{phase:8s} {seen.size:4d} probes   worst {seen.max() * 1e3:7.0f} ms   "
            f"99th percentile {np.percentile(seen, 99) * 1e3:6.0f} ms   median {np.median(seen) * 1e3:5.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=3000, help="rows of the saved exact GP-LVM")
    parser.add_argument("--train", type=float, default=20.0, help="seconds of training after opening")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    model = saved_exact_model(args.rows)
    print(f"saved exact GP-LVM: {args.rows} rows, {len(model) / 1e3:.0f} kB; load {open('/proc/loadavg').read().strip()}")
    with tempfile.TemporaryDirectory() as tmp, serve_cli([], Path(tmp)) as url:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=find_chromium(), args=CHROMIUM_ARGS, headless=True)
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(url)
            page.wait_for_function(READY, timeout=120_000)
            with LivenessProbe(url.rstrip("/") + "/liveness") as probe:
                time.sleep(2)
                probe.phase = "opening"
                began = time.perf_counter()
                page.locator("input[type=file]").first.set_input_files(
                    files=[{"name": "exact.npz", "mimeType": "application/octet-stream", "buffer": model}])
                page.get_by_text("exact.npz opened").first.wait_for(timeout=300_000)
                time.sleep(10)  # the prepared start and the map's grid run after the message
                print(f"opened in {time.perf_counter() - began:.1f} s (+10 s watched)")
                probe.phase = "training"
                click_train(page)
                time.sleep(args.train)
                page.get_by_role("button", name=re.compile(r"Stop$")).first.click()
                time.sleep(2)
            browser.close()
    for phase in ("idle", "opening", "training"):
        print(summary(probe.latencies, phase))
    print(f"load {open('/proc/loadavg').read().strip()}")


if __name__ == "__main__":
    main()
