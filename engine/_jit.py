"""One place for numba flags, so every compiled kernel is built the same way.

Hot loops are private ``_name`` functions over float64 C-contiguous arrays;
public wrappers validate and convert before calling them.
"""
import numba

#: Flags for serial compiled loops: cached on disk, releasing the GIL so a
#: training thread does not freeze the web server.
JIT = dict(cache=True, nogil=True, fastmath=True)

#: Flags for loops that use ``numba.prange``.
PJIT = dict(JIT, parallel=True)

njit = numba.njit
prange = numba.prange
