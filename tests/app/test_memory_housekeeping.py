"""gplvm_explorer.memory: the imported libraries' objects are frozen once, before any session, so that
the full collections after sessions end scan only the sessions' objects; those are still collected."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import gc, weakref
    import gplvm_explorer.app                     # the served app's import freezes what it imported
    from gplvm_explorer import memory
    frozen = gc.get_freeze_count()
    assert frozen > 0, frozen
    assert memory.freeze_imports() is False        # once per process: a later session freezes nothing
    assert gc.get_freeze_count() <= frozen         # (frozen objects still die by reference count)

    class Page:                                    # a session's objects: a reference cycle
        pass
    page = Page(); page.me = page
    alive = weakref.ref(page)
    del page
    memory.release()
    assert alive() is None                         # collected: not frozen
    print("frozen", frozen)
""")


def test_imports_are_frozen_once_and_session_cycles_still_collected():
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("frozen ")
