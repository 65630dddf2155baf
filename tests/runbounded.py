"""Run a command in a subprocess with a time limit and a memory ceiling, and measure both.

The memory is read from ``/proc/PID/status`` while the process runs (VmHWM:
its peak resident set); a process that passes the ceiling is killed at once,
so a test of "refused before allocating" cannot take the machine down when
the refusal regresses.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclass
class Outcome:
    returncode: int | None  # None: killed (time or memory)
    stdout: str
    stderr: str
    seconds: float
    peak_rss_mb: float
    killed: str = ""  # "", "timeout" or "memory"


def _peak_rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def run_bounded(args, *, timeout: float = 90.0, max_rss_mb: float = 1500.0, env=None, cwd=None) -> Outcome:
    """Run ``args`` (a list; ``python`` means this interpreter); kill it past ``timeout`` s or ``max_rss_mb``."""
    args = [sys.executable if a == "python" else str(a) for a in args]
    environ = dict(os.environ if env is None else env)
    environ.setdefault("PYTHONUNBUFFERED", "1")
    t0 = time.monotonic()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environ,
                            cwd=str(cwd or REPO), start_new_session=True, text=True)
    peak, killed = 0.0, ""
    while proc.poll() is None:
        peak = max(peak, _peak_rss_mb(proc.pid))
        if peak > max_rss_mb:
            killed = "memory"
        elif time.monotonic() - t0 > timeout:
            killed = "timeout"
        if killed:
            os.killpg(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.02)
    out, err = proc.communicate()
    return Outcome(None if killed else proc.returncode, out, err, time.monotonic() - t0, peak, killed)
