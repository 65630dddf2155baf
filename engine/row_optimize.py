"""Many small independent minimisations at once: one L-BFGS per row, batched evaluations.

:func:`minimize_rows` is what the projection of new data runs (one problem per
new row and start, :mod:`engine.infer`): each row has its own memory, line
search and stopping test, so its iterates are those of minimising it alone,
while every call of the objective evaluates all rows that still move.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RowsResult:
    """x (k, d) minimisers, f (k,) values, iterations (k,), converged (k,) bool."""

    x: np.ndarray
    f: np.ndarray
    iterations: np.ndarray
    converged: np.ndarray
    evaluations: int


def minimize_rows(fun, x0, max_iters=200, memory=10, gtol=1e-5, ftol=1e-12, max_backtracks=20):
    """Minimise k independent functions f_i(x_i), x_i in R^d, at once.

    ``fun(rows, X) -> (f (r,), g (r, d))`` evaluates the functions ``rows``
    (indices into 0..k-1) at X (r, d).  Each row runs its own L-BFGS (own
    memory, own backtracking Armijo line search, own stopping test), so a row's
    iterates are those of minimising it alone; every call evaluates all rows
    that still move, in one batch.  A row stops when max|g| <= gtol, when one
    step lowers f by less than ftol * max(|f|, 1), when its line search fails
    or after ``max_iters`` iterations.
    """
    x = np.array(x0, dtype=float)
    k, d = x.shape
    f, g = fun(np.arange(k), x)
    f = np.array(f, dtype=float)
    g = np.array(g, dtype=float)
    evaluations = 1
    m = max(1, int(memory))
    S = np.zeros((k, m, d))
    Yh = np.zeros((k, m, d))
    rho = np.zeros((k, m))
    iters = np.zeros(k, int)
    converged = np.max(np.abs(g), axis=1) <= gtol
    active = ~converged & np.isfinite(f)
    for _ in range(int(max_iters)):
        rows = np.flatnonzero(active)
        if rows.size == 0:
            break
        gr = g[rows]
        # two-loop recursion, newest pair last; empty slots have rho = 0
        q = gr.copy()
        alpha = np.zeros((rows.size, m))
        Sr, Yr, rr = S[rows], Yh[rows], rho[rows]
        for j in range(m - 1, -1, -1):
            alpha[:, j] = rr[:, j] * np.einsum("ij,ij->i", Sr[:, j], q)
            q -= alpha[:, j, None] * Yr[:, j]
        yy = np.einsum("ij,ij->i", Yr[:, -1], Yr[:, -1])
        has = rr[:, -1] > 0
        gamma = np.where(has, np.einsum("ij,ij->i", Sr[:, -1], Yr[:, -1]) / np.where(has, yy, 1.0),
                         1.0 / np.maximum(1.0, np.sqrt(np.einsum("ij,ij->i", gr, gr))))
        q *= gamma[:, None]
        for j in range(m):
            b = rr[:, j] * np.einsum("ij,ij->i", Yr[:, j], q)
            q += Sr[:, j] * (alpha[:, j] - b)[:, None]
        p = -q
        slope = np.einsum("ij,ij->i", gr, p)
        bad = ~(slope < 0) | ~np.all(np.isfinite(p), axis=1)
        if np.any(bad):  # not a descent direction: forget the memory, scaled steepest descent
            scale = 1.0 / np.maximum(1.0, np.sqrt(np.einsum("ij,ij->i", gr[bad], gr[bad])))
            p[bad] = -gr[bad] * scale[:, None]
            slope[bad] = np.einsum("ij,ij->i", gr[bad], p[bad])
            S[rows[bad]] = 0.0
            Yh[rows[bad]] = 0.0
            rho[rows[bad]] = 0.0
        # backtracking Armijo line search, per row
        t = np.ones(rows.size)
        f_new = np.full(rows.size, np.nan)
        g_new = np.zeros((rows.size, d))
        searching = np.ones(rows.size, bool)
        for _ in range(int(max_backtracks)):
            idx = np.flatnonzero(searching)
            if idx.size == 0:
                break
            ft, gt = fun(rows[idx], x[rows[idx]] + t[idx, None] * p[idx])
            evaluations += 1
            ft = np.asarray(ft, dtype=float)
            ok = np.isfinite(ft) & np.all(np.isfinite(gt), axis=1) & (
                ft <= f[rows[idx]] + 1e-4 * t[idx] * slope[idx])
            f_new[idx[ok]] = ft[ok]
            g_new[idx[ok]] = gt[ok]
            searching[idx[ok]] = False
            no = idx[~ok]
            if no.size:
                # minimiser of the quadratic through f(0), f'(0), f(t), kept within [0.1 t, 0.5 t]
                ftn = ft[~ok]
                tn = t[no]
                denom = 2.0 * (ftn - f[rows[no]] - slope[no] * tn)
                with np.errstate(invalid="ignore", divide="ignore"):
                    tq = -slope[no] * tn * tn / denom
                tq = np.where(np.isfinite(tq) & np.isfinite(ftn), tq, 0.1 * tn)
                t[no] = np.clip(tq, 0.1 * tn, 0.5 * tn)
        failed = searching
        moved = ~failed
        mr = rows[moved]
        s_vec = t[moved, None] * p[moved]
        y_vec = g_new[moved] - g[mr]
        sy = np.einsum("ij,ij->i", s_vec, y_vec)
        keep = sy > 1e-10 * np.einsum("ij,ij->i", y_vec, y_vec)
        upd = mr[keep]
        if upd.size:
            S[upd, :-1] = S[upd, 1:]
            Yh[upd, :-1] = Yh[upd, 1:]
            rho[upd, :-1] = rho[upd, 1:]
            S[upd, -1] = s_vec[keep]
            Yh[upd, -1] = y_vec[keep]
            rho[upd, -1] = 1.0 / sy[keep]
        decrease = f[mr] - f_new[moved]
        x[mr] += s_vec
        f[mr] = f_new[moved]
        g[mr] = g_new[moved]
        iters[rows] += 1
        done_g = np.max(np.abs(g[mr]), axis=1) <= gtol
        done_f = decrease <= ftol * np.maximum(np.abs(f[mr]), 1.0)
        converged[mr[done_g | done_f]] = True
        active[mr[done_g | done_f]] = False
        active[rows[failed]] = False
        converged[rows[failed]] = np.max(np.abs(g[rows[failed]]), axis=1) <= 1e3 * gtol
    return RowsResult(x=x, f=f, iterations=iters, converged=converged, evaluations=evaluations)
