"""Fixtures for the browser tests: Debian's Chromium, served apps, artifacts.

Outside CI the tests skip when no Chromium is found; with CI=true they fail.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "e2e"
CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")
VIEWPORT = {"width": 1280, "height": 1000}


def _find_chromium() -> str | None:
    env = os.environ.get("GPLVM_EXPLORER_CHROMIUM")
    if env and Path(env).exists():
        return env
    for cand in CHROMIUM_CANDIDATES:
        if Path(cand).exists():
            return cand
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    return found


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture(scope="session")
def chromium_path():
    path = _find_chromium()
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
    return {
        **browser_type_launch_args,
        "executable_path": chromium_path,
        "headless": True,
        "args": [
            "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-dev-shm-usage",
        ],
    }


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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_http(url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except Exception as exc:  # noqa: BLE001
            last = exc
        time.sleep(0.25)
    raise RuntimeError(f"{url} did not answer within {timeout:.0f} s ({last})")


@pytest.fixture(scope="session")
def served_app(chromium_path):
    """The app in-process (``pn.serve`` of the factory): fast, one per test session."""
    import panel as pn

    from gplvm_explorer import warmup
    from gplvm_explorer.app import create_app
    from gplvm_explorer.serving import SERVER_OPTIONS

    warmup.start()
    port = free_port()
    server = pn.serve(
        {"app": create_app}, port=port, address="127.0.0.1", websocket_origin=[f"127.0.0.1:{port}"],
        threaded=True, show=False, liveness=True, **SERVER_OPTIONS,
    )
    try:
        _wait_http(f"http://127.0.0.1:{port}/liveness", 30)
        # the first Train should not wait for numba: let the warm-up finish
        warmup.wait(timeout=240)
        yield f"http://127.0.0.1:{port}/app"
    finally:
        server.stop()


class ServedURL(str):
    """The app's URL, carrying the server's process id (for CPU measurements)."""

    def __new__(cls, url: str, pid: int):
        self = super().__new__(cls, url)
        self.pid = pid
        return self


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
    port = free_port()
    cmd = [sys.executable, "-m", "panel", "serve", "gplvm_explorer/app.py", "--port", str(port),
           "--address", "127.0.0.1", f"--allow-websocket-origin=127.0.0.1:{port}", "--liveness"]
    cmd += ["--check-unused-sessions", "2000", "--unused-session-lifetime", "5000"]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    log = open(ARTIFACTS / "panel-serve.log", "wb")  # a pipe nobody reads would block the server
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_http(f"http://127.0.0.1:{port}/liveness", 90)
        yield ServedURL(f"http://127.0.0.1:{port}/app", proc.pid)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=15)
        except Exception:  # noqa: BLE001
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


@contextmanager
def serve_cli(args, log_dir: Path, timeout: float = 120):
    """``gplvm-explorer ARGS`` in its own process group on a free port; yields the page's URL.

    The server's output goes to ``log_dir/server.log`` and is shown when it does not come up.
    """
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    log = open(Path(log_dir) / "server.log", "w+")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gplvm_explorer.cli", *map(str, args), "--port", str(port), "--address", "127.0.0.1"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    try:
        try:
            _wait_http(f"http://127.0.0.1:{port}/liveness", timeout=timeout)
        except RuntimeError:
            log.seek(0)
            pytest.fail(f"the CLI did not serve: {log.read()[-3000:]}")
        yield f"http://127.0.0.1:{port}/"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
