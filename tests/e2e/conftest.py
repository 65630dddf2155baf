"""Fixtures for the browser tests: Debian's Chromium, served apps, artifacts.

Outside CI the tests skip when no Chromium is found; with CI=true they fail.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from browserkit import CHROMIUM_ARGS, find_chromium, serve_in_process, serve_panel

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "e2e"
VIEWPORT = {"width": 1280, "height": 1000}


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture(scope="session")
def chromium_path():
    path = find_chromium()
    if path is None:
        if _in_ci():
            pytest.fail("CI=true but no Chromium found (install Debian's `chromium` package).")
        pytest.skip("No Chromium found (install Debian's `chromium`); browser tests skipped outside CI.")
    try:
        import playwright  # noqa: F401
    except ImportError:
        if _in_ci():
            pytest.fail("CI=true but playwright is not installed.")
        pytest.skip("playwright is not installed; browser tests skipped outside CI.")
    return path


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args, chromium_path):
    return {**browser_type_launch_args, "executable_path": chromium_path, "headless": True,
            "args": list(CHROMIUM_ARGS)}


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    return {**browser_context_args, "viewport": VIEWPORT, "accept_downloads": True}


@pytest.fixture
def page(page):
    """pytest-playwright's page with a default timeout for actions and waits of 60 s instead of
    Playwright's 30 s: a freshly served page on a loaded 2-core CI machine can take longer to render a widget."""
    page.set_default_timeout(60_000)
    return page


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="session")
def served_app(chromium_path):
    """The app in-process (``pn.serve`` of the factory): fast, one per test session."""
    with serve_in_process() as url:
        yield url


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.fixture
def cpu_seconds():
    return process_cpu_seconds


@pytest.fixture(scope="session")
def panel_serve_subprocess(chromium_path):
    """``python -m panel serve gplvm_explorer/app.py`` in its own process group."""
    # compile the numerical kernels here first: numba caches them on disk, so the server loads them
    # in a second instead of compiling for a minute while the tests train and measure it
    from gplvm_explorer import warmup

    warmup.start()
    warmup.wait(timeout=600)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with serve_panel(ARTIFACTS / "panel-serve.log") as url:
        yield url
