"""A lecture room of tabs: 30 opened and closed quickly leave no work behind on the server."""
import time

import pytest
from browserkit import READY


pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(600),
    pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning"),
]

TABS = 30


def _cpu_fraction(cpu_seconds, pid, window=4.0) -> float:
    c0, t0 = cpu_seconds(pid), time.monotonic()
    time.sleep(window)
    return (cpu_seconds(pid) - c0) / (time.monotonic() - t0)


def test_thirty_tabs_opened_and_closed_leave_the_server_idle(browser, panel_serve_subprocess, cpu_seconds):
    url, pid = panel_serve_subprocess, panel_serve_subprocess.pid
    context = browser.new_context(viewport={"width": 1000, "height": 800})
    pages = [context.new_page() for _ in range(TABS)]
    for page in pages:  # all at once, as a room full of students does
        page.goto(url, wait_until="commit", timeout=120_000)  # the server builds the pages one by one
    for page in pages:
        page.wait_for_function(READY, timeout=240_000)  # every session really started
    for page in pages:
        page.close()
    context.close()

    # the server forgets the closed sessions (unused-session check every 2 s, lifetime 5 s here) and
    # nothing keeps running for them: its CPU use drops to idle within a minute
    deadline = time.monotonic() + 60.0
    used = _cpu_fraction(cpu_seconds, pid)
    while used > 0.05 and time.monotonic() < deadline:
        used = _cpu_fraction(cpu_seconds, pid)
    assert used <= 0.05, f"the server still uses {used:.0%} of a core a minute after 30 tabs closed"

    # and a new visitor gets a working page
    fresh = browser.new_page()
    try:
        fresh.goto(url, timeout=120_000)  # a loaded machine: the server may still be building other pages
        fresh.wait_for_function(READY, timeout=120_000)
        fresh.get_by_text("rotating-glyph").first.wait_for(timeout=60_000)
    finally:
        fresh.close()
