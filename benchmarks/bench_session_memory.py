"""Does the server give memory back when sessions close?

Starts ``gplvm-explorer`` on a free port, then SESSIONS times: opens the page
in headless Chromium, uploads a CSV of ROWS x 20 numbers (about 17 MB at the
default 50,000 rows), presses Train, waits TRAIN seconds and closes the tab.
The server's resident memory (VmRSS, and its peak VmHWM) is read from /proc
before the first session (idle, after one warm page), after every close, and
every five seconds for SETTLE seconds after the last one (memory is released
5 s and 30 s after the last session's end, `gplvm_explorer.memory`).

    python benchmarks/bench_session_memory.py [--sessions 8] [--rows 50000] [--train 6] [--settle 60]

Prints one line per reading and a summary: idle, peak, last, last - idle (MB),
with the load average.  Needs Chromium and playwright (the e2e extras).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # the package first, then the browser kit beside the tests

from browserkit import CHROMIUM_ARGS, READY, click_train, find_chromium, serve_cli, vm_rss_mb, wait_loaded  # noqa: E402


def write_csv(path: Path, rows: int, seed: int = 0) -> int:
    import numpy as np

    rng = np.random.default_rng(seed)
    t = rng.normal(size=(rows, 2))
    Y = t @ rng.normal(size=(2, 20)) + 0.1 * rng.normal(size=(rows, 20))
    np.savetxt(path, Y, delimiter=",", fmt="%.12f", header=",".join(f"f{j}" for j in range(20)), comments="")
    return path.stat().st_size


def one_session(browser, url: str, csv: Path, train_seconds: float) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(180_000)
    page.goto(url)
    page.wait_for_function(READY, timeout=180_000)
    page.locator("input[type=file]").first.set_input_files(str(csv))
    wait_loaded(page, csv.name, timeout=180)
    click_train(page, timeout=180)
    time.sleep(train_seconds)
    context.close()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sessions", type=int, default=8)
    p.add_argument("--rows", type=int, default=50_000)
    p.add_argument("--train", type=float, default=6.0, help="seconds of training per session")
    p.add_argument("--settle", type=float, default=60.0, help="seconds to watch after the last close")
    args = p.parse_args(argv)
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "big.csv"
        size = write_csv(csv, args.rows)
        readings = []
        with serve_cli([], tmp, timeout=180) as url:
            def read(label):
                rss, hwm = vm_rss_mb(url.pid)
                readings.append((label, rss, hwm))
                print(f"{label:>24}: RSS {rss:7.1f} MB  peak {hwm:7.1f} MB", flush=True)

            print(f"CSV {args.rows} x 20, {size / 1e6:.1f} MB; {args.sessions} sessions, {args.train:g} s of "
                  f"training each; load {os.getloadavg()}", flush=True)
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=find_chromium(), headless=True, args=CHROMIUM_ARGS)
                warm = browser.new_page()  # one page without upload: the server's own idle level
                warm.goto(url, timeout=180_000)
                warm.wait_for_function(READY, timeout=180_000)
                warm.close()
                time.sleep(40)  # its session ends (unused-session lifetime 5 s) and memory is released
                read("idle")
                for i in range(args.sessions):
                    one_session(browser, url, csv, args.train)
                    read(f"after session {i + 1}")
                browser.close()
            for s in range(int(args.settle)):
                time.sleep(1.0)
                if s % 5 == 4:
                    read(f"{s + 1} s after the last")
            log_tail = (Path(tmp) / "server.log").read_text()[-2000:]
    idle, last = readings[0][1], readings[-1][1]
    peak = max(r[2] for r in readings)
    print(f"idle {idle:.0f} MB, peak {peak:.0f} MB, last {last:.0f} MB, last - idle {last - idle:+.0f} MB; "
          f"load {os.getloadavg()}")
    if "Traceback" in log_tail:
        print("server log tail:\n" + log_tail)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
