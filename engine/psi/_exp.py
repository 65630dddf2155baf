"""A vectorisable ``exp`` for the psi-statistic loops.

pip's llvmlite ships without SVML, so ``np.exp`` inside an ``njit`` loop is a
scalar libm call and the loop around it does not vectorise.  :func:`_exp1`
is written so that a loop calling it vectorises: Cody-Waite range reduction
x = k ln2 + r with |r| <= ln2 / 2, a degree-13 Taylor polynomial for exp(r)
(truncation error < 5e-18 relative) evaluated by Estrin's scheme, and 2**k
built from its IEEE-754 bits by a bitcast (no memory round trip).

Accuracy: within a few ulp of libm (tests/engine/test_psi.py checks
< 1e-15 relative) for x >= -708; for x < -708 it returns 0.0 (the true value
is below 3e-308; subnormals are flushed).  Arguments above 709 are clamped
(exp would overflow); the psi statistics only ever pass x <= log of a
product of kernel values.  NaN inputs give unspecified finite output, so
callers validate their inputs first.

The psi-statistic loops call ``_exp1`` on a row while the row is in L1.
"""
import numpy as np
from numba.core import types
from numba.extending import intrinsic

from .._jit import JIT, njit

# Reassociation is the one fast-math flag this function must not have: it
# would fold the two-constant range reduction (ln2_hi, ln2_lo) into one
# rounded ln2 and lose ~k ulp.  The other flags (FMA contraction etc.) help.
_EXP_FLAGS = dict(JIT, fastmath={"nnan", "ninf", "nsz", "arcp", "contract", "afn"})

_C0 = 1.0
_C1 = 1.0
_C2 = 1.0 / 2.0
_C3 = 1.0 / 6.0
_C4 = 1.0 / 24.0
_C5 = 1.0 / 120.0
_C6 = 1.0 / 720.0
_C7 = 1.0 / 5040.0
_C8 = 1.0 / 40320.0
_C9 = 1.0 / 362880.0
_C10 = 1.0 / 3628800.0
_C11 = 1.0 / 39916800.0
_C12 = 1.0 / 479001600.0
_C13 = 1.0 / 6227020800.0

_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_XMIN = -708.0
_XMAX = 709.0


@intrinsic
def _bits_to_float(typingctx, bits):
    """Reinterpret the bits of an int64 as a float64 (an LLVM bitcast; vectorises)."""
    if not isinstance(bits, types.Integer) or bits.bitwidth != 64:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.float64))

    return types.float64(bits), codegen


@njit(**_EXP_FLAGS)
def _exp1(v):
    """exp(v) of one float64 (see the module docstring); inlined into the calling loop.
    """
    keep = v >= _XMIN
    v = min(max(v, _XMIN), _XMAX)
    kf = np.floor(v * _LOG2E + 0.5)
    r = (v - kf * _LN2_HI) - kf * _LN2_LO
    r2 = r * r
    r4 = r2 * r2
    r8 = r4 * r4
    b0 = (_C0 + _C1 * r) + (_C2 + _C3 * r) * r2
    b1 = (_C4 + _C5 * r) + (_C6 + _C7 * r) * r2
    b2 = (_C8 + _C9 * r) + (_C10 + _C11 * r) * r2
    b3 = _C12 + _C13 * r
    p = (b0 + b1 * r4) + (b2 + b3 * r4) * r8
    bits = (np.int64(kf) + 1023) << 52
    return p * _bits_to_float(bits if keep else np.int64(0))


@njit(**JIT)
def _exp_array(x):
    """exp of a 1-D float64 array through :func:`_exp1` (a copy); for tests and small callers."""
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        out[i] = _exp1(x[i])
    return out

