"""One place for numba flags, so every compiled kernel is built the same way.

Hot loops are private ``_name`` functions over float64 C-contiguous arrays;
public wrappers validate and convert before calling them.
"""
import numba

#: Flags for serial compiled loops: cached on disk, releasing the GIL so a
#: training thread does not freeze the web server.
JIT = dict(cache=True, nogil=True, fastmath=True)

#: Flags for loops whose summation order is part of their contract (row-by-row products that
#: must give a row the same bits whatever the other rows): no fast-math reassociation.
STRICT = dict(cache=True, nogil=True)

#: Flags for loops that use ``numba.prange``.  A prange iteration writes only its own outputs:
#: a reduction across iterations (``total += ...`` over a prange) would sum in an order that depends
#: on the threads (tests/engine/test_determinism.py refuses one).  Sums over many rows split fixed
#: groups of work among threads instead (engine.psi.rbf).
PJIT = dict(JIT, parallel=True)

njit = numba.njit
prange = numba.prange
