"""gplvm_explorer.interpreter: a serving process hands the interpreter lock from a training thread to the
page's threads within a millisecond (the served app's import sets it; a lower interval is kept)."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import sys
    assert sys.getswitchinterval() == 0.005, sys.getswitchinterval()   # Python's default before the app
    import gplvm_explorer.app                                           # what `panel serve` and the CLI import
    from gplvm_explorer.interpreter import SWITCH_INTERVAL, share_interpreter
    assert sys.getswitchinterval() == SWITCH_INTERVAL <= 0.001, sys.getswitchinterval()
    sys.setswitchinterval(0.0002)
    assert round(share_interpreter(), 7) == 0.0002                      # never raised
    print("ok")
""")


def test_the_served_app_switches_threads_within_a_millisecond():
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok")
