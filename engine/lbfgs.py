"""L-BFGS for large unconstrained problems: each direction in two passes over the memory.

scipy's L-BFGS-B (``setulb``) serves bounded problems, and its bookkeeping
with 50 stored pairs costs about as much as the bound's evaluation at 50k
rows (Q=5, 5 x 10^5 parameters; two calls per iteration, each a few passes
over the pairs).  The latent variable models' parameters are unconstrained
(transforms, :mod:`engine.transforms`), so this module computes the L-BFGS
direction of Nocedal (1980) the cheapest way memory allows.

The stored pairs s_i = x_{i+1} - x_i and y_i = g_{i+1} - g_i are the rows of
one array ``W`` (m, 2, P).  The direction ``-H g`` (the two-loop recursion,
here in its compact form) only needs the products of the pairs with g
(``a_i = s_i.g``, ``b_i = y_i.g``) and the Gram entries ``SY[i, j] = s_i.y_j``
and ``YY[i, j] = y_i.y_j``; it is ``d = -gamma g + sum_i (cs_i s_i + cy_i y_i)``.
An iteration therefore reads the memory twice, both times as one GEMV:
``W @ g`` for the products and ``coef @ W`` for the direction.  The Gram
entries of a new pair come from numbers already at hand: ``y.s_j`` and
``y.y_j`` are differences of the products with the new and the old gradient,
and ``s.y_j`` follows from the direction's coefficients (s = step * d), so no
pass computes them.

The line search (strong Wolfe, :func:`wolfe_search`) and the stopping rules
are those of ``minimize(method="L-BFGS-B")`` without bounds: stop when
max|g| <= gtol, or when an iteration lowers f by at most
``ftol * max(|f_k|, |f_k+1|, 1)``.  A direction that is not one of descent,
or a line search that fails, forgets the memory and steps along -g; a second
failure in a row ends the run.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.linalg import solve_triangular

#: A pair is stored only when its curvature s.y exceeds this share of y.y (as L-BFGS-B does).
CURVATURE_EPS = 2.2e-16


class PairMemory:
    """The last ``m`` pairs (s_i, y_i) of P-vectors, their Gram entries and their products with g.

    Slots 0..m-1 hold pairs; ``order`` lists the occupied slots oldest first.
    ``a`` and ``b`` (m,) are s_i.g and y_i.g for the current gradient g (set by
    :meth:`products`).
    """

    def __init__(self, n_params: int, m: int):
        self.m = int(m)
        self.W = np.empty((self.m, 2, int(n_params)))  # W[i, 0] = s_i, W[i, 1] = y_i
        self.SY = np.zeros((self.m, self.m))  # SY[i, j] = s_i . y_j
        self.YY = np.zeros((self.m, self.m))  # YY[i, j] = y_i . y_j
        self.a = np.zeros(self.m)
        self.b = np.zeros(self.m)
        self.order: list[int] = []

    def __len__(self) -> int:
        return len(self.order)

    def reset(self):
        self.order = []

    def _rows(self) -> np.ndarray:
        """The occupied slots as one (2k, P) array; slots fill 0, 1, ... so they are W[:k]."""
        k = len(self.order)
        return self.W[:k].reshape(2 * k, -1)

    def products(self, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(s_i.g, y_i.g) over all slots (unoccupied ones 0): one pass over the memory."""
        a, b = np.zeros(self.m), np.zeros(self.m)
        k = len(self.order)
        if k:
            ab = self._rows() @ g
            a[:k], b[:k] = ab[0::2], ab[1::2]
        return a, b

    def direction(self, g: np.ndarray) -> tuple[np.ndarray, tuple]:
        """d = -H g with H the L-BFGS inverse Hessian of the stored pairs; needs ``a, b`` for this g.

        H in the compact form of Byrd, Nocedal & Schnabel (1994), eq. (3.1), pairs in
        age order: H = gamma I + [S gamma Y] [[R^-T (D + gamma Y^T Y) R^-1, -R^-T],
        [-R^-1, 0]] [S^T; gamma Y^T], with R the upper triangle of S^T Y, D its
        diagonal and gamma = s.y / y.y of the newest pair.  With v = R^-1 S^T g:
        H g = gamma g + S R^-T ((D + gamma Y^T Y) v - gamma Y^T g) - gamma Y v.

        Returns d (P,) and its coefficients (gamma, cs (m,), cy (m,)) by slot,
        d = -gamma g + sum_i cs_i s_i + cy_i y_i, which :meth:`add` needs.
        """
        cs, cy = np.zeros(self.m), np.zeros(self.m)
        if not self.order:
            gamma = 1.0 / max(float(np.linalg.norm(g)), 1e-300)
            return -gamma * g, (gamma, cs, cy)
        idx = np.array(self.order)
        SY = self.SY[np.ix_(idx, idx)]
        R = np.triu(SY)
        newest = idx[-1]
        gamma = self.SY[newest, newest] / self.YY[newest, newest]
        a, b = self.a[idx], self.b[idx]
        v = solve_triangular(R, a)
        w = np.diag(SY) * v + gamma * (self.YY[np.ix_(idx, idx)] @ v) - gamma * b
        top = solve_triangular(R, w, trans="T")
        cs[idx], cy[idx] = -top, gamma * v
        k = idx.size  # occupied slots are 0..k-1 (see _rows)
        coef = np.empty((k, 2))
        coef[:, 0], coef[:, 1] = cs[:k], cy[:k]
        d = coef.reshape(-1) @ self._rows()
        d -= gamma * g
        return d, (gamma, cs, cy)

    def add(self, s, y, g_new, a_new, b_new, coefficients, step) -> bool:
        """Store the pair (s, y) = (step * d, g_new - g), d from :meth:`direction` at g.

        ``a_new, b_new``: :meth:`products` of the memory *before* the pair with
        g_new; ``self.a, self.b`` still hold those with g.  Leaves ``a, b`` for
        g_new (the new pair's included).  Returns False (memory unchanged but for
        a, b) when the pair's curvature s.y is not positive enough.
        """
        sy, yy = float(s @ y), float(y @ y)
        if not (sy > CURVATURE_EPS * yy and math.isfinite(sy)):
            self.a, self.b = a_new, b_new
            return False
        gamma, cs, cy = coefficients
        ys = a_new - self.a  # y . s_j
        yy_j = b_new - self.b  # y . y_j
        sy_j = step * (-gamma * self.b + cs @ self.SY + cy @ self.YY)  # s . y_j = step * d . y_j
        if len(self.order) == self.m:
            slot = self.order.pop(0)
        else:
            slot = len(self.order)
        for M_ in (self.SY, self.YY):
            M_[slot, :] = 0.0
            M_[:, slot] = 0.0
        kept = np.array(self.order, dtype=int)
        self.SY[slot, kept] = sy_j[kept]
        self.SY[kept, slot] = ys[kept]
        self.YY[slot, kept] = yy_j[kept]
        self.YY[kept, slot] = yy_j[kept]
        self.SY[slot, slot], self.YY[slot, slot] = sy, yy
        self.W[slot, 0] = s
        self.W[slot, 1] = y
        a_new, b_new = a_new.copy(), b_new.copy()
        a_new[slot], b_new[slot] = float(s @ g_new), float(y @ g_new)
        self.order.append(slot)
        self.a, self.b = a_new, b_new
        return True


def _cubic_step(a, fa, da, b, fb, db) -> float:
    """The minimiser of the cubic through (a, fa, da) and (b, fb, db), kept inside the
    middle 80% of [a, b]; the midpoint when the cubic has none there."""
    lo, hi = min(a, b), max(a, b)
    d1 = da + db - 3.0 * (fa - fb) / (a - b)
    disc = d1 * d1 - da * db
    t = math.nan
    if disc >= 0:
        d2 = math.copysign(math.sqrt(disc), b - a)
        denom = db - da + 2.0 * d2
        if denom != 0:
            t = b - (b - a) * (db + d2 - d1) / denom
    if not (lo + 0.1 * (hi - lo) <= t <= hi - 0.1 * (hi - lo)):
        t = 0.5 * (lo + hi)
    return t


def wolfe_search(evaluate, x, f0, d, slope0, *, step=1.0, c1=1e-4, c2=0.9, max_evals=20):
    """A step along d meeting the strong Wolfe conditions (Nocedal & Wright, 2006, Alg. 3.5-3.6).

    ``evaluate(x) -> (f, g)``; ``slope0 = g0.d < 0``.  The first trial is ``step``;
    steps double until the minimum is bracketed, then cubic interpolation zooms
    in.  Returns (step, f, g), or None when ``max_evals`` evaluations found no
    step that lowers f enough (Armijo with ``c1``).
    """
    lo, f_lo, dphi_lo, g_lo = 0.0, f0, slope0, None
    hi = f_hi = dphi_hi = None
    for _ in range(int(max_evals)):
        f, g = evaluate(x + step * d)
        dphi = float(g @ d)
        if not (math.isfinite(f) and math.isfinite(dphi)):
            hi, f_hi, dphi_hi = step, math.inf, math.nan
        elif f > f0 + c1 * step * slope0 or (f >= f_lo and step != lo):
            hi, f_hi, dphi_hi = step, f, dphi  # too far: the minimum lies between lo and step
        elif abs(dphi) <= -c2 * slope0:
            return step, f, g
        else:
            if hi is not None and dphi * (hi - lo) >= 0:
                hi, f_hi, dphi_hi = lo, f_lo, dphi_lo
            elif hi is None and dphi >= 0:
                hi, f_hi, dphi_hi = lo, f_lo, dphi_lo
            lo, f_lo, dphi_lo, g_lo = step, f, dphi, g
        if hi is None:
            step = 2.0 * step  # still descending steeply: go further
        elif math.isfinite(f_hi) and math.isfinite(dphi_hi):
            step = _cubic_step(lo, f_lo, dphi_lo, hi, f_hi, dphi_hi)
        else:
            step = 0.5 * (lo + hi)
    if lo > 0:  # out of evaluations: the best step so far lowers f enough
        return lo, f_lo, g_lo
    return None


def minimize_compact(run, x0, f0, g0, max_iters, *, maxcor, ftol, gtol, maxfun, maxls):
    """Minimise ``run.evaluate`` from (x0, f0, g0); every iteration goes through ``run.record``.

    Returns (converged, message) as the optimisers of :mod:`engine.optimize` do.
    """
    x = np.array(x0, dtype=float)
    f, g = float(f0), np.array(g0, dtype=float)
    memory = PairMemory(x.size, maxcor)
    if np.max(np.abs(g), initial=0.0) <= gtol:
        return True, "CONVERGENCE: NORM OF PROJECTED GRADIENT <= PGTOL"
    failed_before = False
    for _ in range(int(max_iters)):
        d, coefficients = memory.direction(g)
        slope = float(g @ d)
        if not (slope < 0 and math.isfinite(slope)):  # not a descent direction: forget, go along -g
            memory.reset()
            d, coefficients = memory.direction(g)
            slope = float(g @ d)
        found = wolfe_search(run.evaluate, x, f, d, slope, max_evals=maxls)
        if found is None:
            if failed_before or not len(memory):
                return False, "ABNORMAL: the line search found no acceptable step"
            failed_before = True
            memory.reset()
            continue
        failed_before = False
        step, f_new, g_new = found
        s = step * d
        x_new = x + s
        a_new, b_new = memory.products(g_new)
        memory.add(s, g_new - g, g_new, a_new, b_new, coefficients, step)
        run.record(x_new, f_new, g_new)
        reduction = f - f_new
        x, f, g = x_new, f_new, g_new
        if np.max(np.abs(g), initial=0.0) <= gtol:
            return True, "CONVERGENCE: NORM OF PROJECTED GRADIENT <= PGTOL"
        if reduction <= ftol * max(abs(f), abs(f + reduction), 1.0):
            return True, "CONVERGENCE: RELATIVE REDUCTION OF F <= FACTR*EPSMCH"
        if run.n_evaluations >= maxfun:
            return False, "STOP: TOTAL NO. OF F,G EVALUATIONS EXCEEDS LIMIT"
    return False, "STOP: TOTAL NO. OF ITERATIONS REACHED LIMIT"
