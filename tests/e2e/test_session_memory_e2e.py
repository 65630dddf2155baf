"""The server gives memory back when sessions close: after sessions that each upload a 16 MB CSV and train,
its resident memory returns to within 100 MB of its idle level (`gplvm_explorer.memory`; eight sessions:
benchmarks/bench_session_memory.py)."""
from __future__ import annotations

import time

import numpy as np
import pytest

from browserkit import READY, click_train, poll, serve_cli, vm_rss_mb, wait_loaded


pytestmark = [
    pytest.mark.e2e,
    pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning"),
]

SESSIONS = 3
ROWS = 50_000  # x 20 columns: a 17 MB CSV
RETURN_MB = 100.0


def _big_csv(path):
    rng = np.random.default_rng(0)
    Y = rng.normal(size=(ROWS, 2)) @ rng.normal(size=(2, 20)) + 0.1 * rng.normal(size=(ROWS, 20))
    np.savetxt(path, Y, delimiter=",", fmt="%.14f", header=",".join(f"f{j}" for j in range(20)), comments="")
    return path


def _session(browser, url, csv=None, train_seconds=0.0):
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(120_000)
    page.goto(url)
    page.wait_for_function(READY, timeout=120_000)
    if csv is not None:
        page.locator("input[type=file]").first.set_input_files(str(csv))
        assert f"N = {ROWS} points" in wait_loaded(page, csv.name, timeout=180)
        click_train(page, timeout=120)
        page.get_by_text("it/s").first.wait_for(timeout=120_000)
        time.sleep(train_seconds)
    context.close()  # the session ends within the server's unused-session lifetime (5 s)


@pytest.mark.timeout(1200)
def test_memory_returns_after_sessions_with_big_uploads_close(browser, tmp_path, chromium_path):
    csv = _big_csv(tmp_path / "big.csv")
    assert csv.stat().st_size > 15e6
    with serve_cli([], tmp_path) as url:
        _session(browser, url)  # one page without data: the server's own idle level, its modules loaded
        time.sleep(40)  # its session's end, and the releases that follow it
        idle = vm_rss_mb(url.pid)[0]
        during = []
        for _ in range(SESSIONS):
            _session(browser, url, csv, train_seconds=4.0)
            during.append(vm_rss_mb(url.pid)[0])
        # released 5 s and 30 s after the last session's end (which follows its close by ~5 s)
        settled = poll(lambda: (lambda rss: rss if rss <= idle + RETURN_MB else 0.0)(vm_rss_mb(url.pid)[0]),
                       timeout=90, every=2.0)
        last = vm_rss_mb(url.pid)[0]
    print(f"idle {idle:.0f} MB, after each session {[round(v) for v in during]} MB, settled {last:.0f} MB")
    assert max(during) > idle + RETURN_MB  # the sessions did take memory (else this test proves nothing)
    assert settled, f"{last:.0f} MB 90 s after the last session closed; idle {idle:.0f} MB"
