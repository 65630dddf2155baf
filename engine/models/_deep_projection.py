"""Joint projection of new rows into every layer of a DeepGP, at fixed model parameters.

For one new row y* (observed entries O) the deep bound grows, when the row is
added with q(x*_l) = N(m_l, diag s_l) in every layer and everything else is
held fixed, by

    J = sum_l [F_l(stats_l + row) - F_l(stats_l)] + sum_{l<H-1} H(q(x*_l)) - KL(q(x*_top) || N(0, I)),

the same quantity as Titsias & Lawrence's (2010) eq. 20 for the deep bound.
F_l is the collapsed data term (:func:`engine.bound.collapsed_bound_stats`)
of layer l's sufficient statistics: the training rows' (N, T_l, psi0_l, P_l,
Psi2_l) plus the row's (1, |out|^2 + sum(s_{l-1}), psi0*, psi1*^T out,
Psi2*), where ``out`` is y*_O (bottom layer, observed columns only: the
other columns' terms do not change) or m_{l-1} (the layer below).  J is
maximised over all (m_l, log s_l) of the row together by L-BFGS, from the
layer-by-layer projection and from the training row nearest on the observed
entries (its q(x_n) in every layer), keeping the better optimum; ``J`` there
is the row's log density.
"""
from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

from .. import psi
from .._threads import blas_pinned
from ..bound import collapsed_bound_stats

LOG_2PI_E = np.log(2.0 * np.pi) + 1.0


class _Layer:
    """Training sufficient statistics of one layer and its fixed kernel pieces."""

    def __init__(self, kern, Z, mu, S, out_mean, out_var, beta, jitter):
        self.kern, self.Z, self.beta, self.jitter = kern, Z, beta, jitter
        stats = psi.compute(kern, Z, mu, S)
        self.N = mu.shape[0]
        self.psi0, self.Psi2 = stats.psi0, stats.Psi2
        self.P = stats.Psi1.T @ out_mean  # (M, D_l)
        self.T_cols = np.sum(out_mean * out_mean, axis=0) + (np.sum(out_var, axis=0) if out_var is not None else 0.0)
        self.Kmm = kern.K(Z)
        self.Q = mu.shape[1]
        self._base = {}

    def base_value(self, cols) -> float:
        """F_l of the training rows on output columns ``cols`` (cached per column set)."""
        key = cols.tobytes()
        if key not in self._base:
            self._base[key] = collapsed_bound_stats(self.N, cols.size, float(self.T_cols[cols].sum()), self.psi0,
                                                    self.P[:, cols], self.Psi2, self.Kmm, self.beta,
                                                    self.jitter).value
        return self._base[key]

    def augmented(self, cols, m, s, out, out_var_sum):
        """(F_l with the row added - F_l, d/dm (Q,), d/ds (Q,), d/d out (|cols|,))."""
        stats = psi.compute(self.kern, self.Z, m[None], s[None])
        T = float(self.T_cols[cols].sum()) + float(out @ out) + out_var_sum
        b = collapsed_bound_stats(self.N + 1, cols.size, T, self.psi0 + stats.psi0,
                                  self.P[:, cols] + stats.Psi1.T @ out[None], self.Psi2 + stats.Psi2,
                                  self.Kmm, self.beta, self.jitter)
        g = psi.gradients(self.kern, self.Z, m[None], s[None], b.dpsi0, out[None] @ b.dP.T, b.dPsi2)
        dout = stats.Psi1[0] @ b.dP - self.beta * out
        return b.value - self.base_value(cols), g.mu[0], g.S[0], dout


class RowObjective:
    """J and its gradient for one row, over theta = [m_0, log s_0, ..., m_top, log s_top]."""

    def __init__(self, layers, y, cols):
        self.layers, self.y, self.cols = layers, y, cols
        self.dims = [layer.Q for layer in layers]
        self.offsets = np.cumsum([0] + [2 * q for q in self.dims])

    def pack(self, means, variances) -> np.ndarray:
        return np.concatenate([np.concatenate([m, np.log(v)]) for m, v in zip(means, variances)])

    def unpack(self, theta):
        out = []
        for l, q in enumerate(self.dims):
            block = theta[self.offsets[l]:self.offsets[l + 1]]
            out.append((block[:q], np.exp(block[q:])))
        return out

    def __call__(self, theta):
        q = self.unpack(theta)
        H = len(self.layers)
        value = 0.0
        grad = np.zeros_like(theta)
        all_cols = None
        for l, layer in enumerate(self.layers):
            m, s = q[l]
            if l == 0:
                cols, out, var_sum = self.cols, self.y, 0.0
            else:
                if all_cols is None:
                    all_cols = np.arange(self.dims[l - 1])
                cols, (out, out_var) = all_cols, q[l - 1]
                var_sum = float(out_var.sum())
            v, dm, ds, dout = layer.augmented(cols, m, s, out, var_sum)
            value += v
            o = self.offsets[l]
            grad[o:o + m.size] += dm
            grad[o + m.size:o + 2 * m.size] += ds * s
            if l > 0:  # the outputs of layer l are the row's q(x*_{l-1})
                ob = self.offsets[l - 1]
                qb = self.dims[l - 1]
                grad[ob:ob + qb] += dout
                grad[ob + qb:ob + 2 * qb] += -0.5 * layer.beta * q[l - 1][1]
            if l < H - 1:
                value += 0.5 * float(np.sum(np.log(s))) + 0.5 * s.size * LOG_2PI_E
                grad[o + m.size:o + 2 * m.size] += 0.5
            else:
                value -= 0.5 * float(np.sum(m * m + s - np.log(s) - 1.0))
                grad[o:o + m.size] -= m
                grad[o + m.size:o + 2 * m.size] -= 0.5 * (s - 1.0)
        return value, grad


@blas_pinned
def training_layers(model, values) -> list:
    """The per-layer training statistics of a DeepGP at ``values``."""
    layers = []
    for l in range(model.num_layers):
        v = model.layer_values(values, l)
        if l == 0:
            out_mean, out_var = model.Y, None
        else:
            below = model.layer_values(values, l - 1)
            out_mean, out_var = below["X_mean"], below["X_variance"]
        layers.append(_Layer(model.kernel_at(values, l), v["Z"], v["X_mean"], v["X_variance"], out_mean, out_var,
                             1.0 / float(v["noise_variance"]), model.jitter))
    return layers


@blas_pinned
def refine_rows(layers, Yc, mask, start_sets, max_iters=200):
    """Maximise J row by row from every start set; keep each row's best optimum.

    ``start_sets``: a list of starts, each [(means (n, Q_l), variances (n, Q_l))]
    per layer.  Returns ([means], [variances], log_density (n,)); an
    optimisation that ends below its start keeps the start (J never decreases).
    """
    n = Yc.shape[0]
    H = len(layers)
    means = [np.array(m, dtype=float) for m, _ in start_sets[0]]
    variances = [np.array(v, dtype=float) for _, v in start_sets[0]]
    density = np.full(n, -np.inf)
    for i in range(n):
        cols = np.flatnonzero(mask[i])
        objective = RowObjective(layers, Yc[i, cols], cols)
        for starts in start_sets:
            theta0 = objective.pack([starts[l][0][i] for l in range(H)], [starts[l][1][i] for l in range(H)])
            f0, _ = objective(theta0)
            res = minimize(lambda t: tuple(-x for x in objective(t)), theta0, jac=True, method="L-BFGS-B",
                           options={"maxiter": max_iters})
            theta, f = (res.x, -res.fun) if np.isfinite(res.fun) and -res.fun >= f0 else (theta0, f0)
            if f > density[i]:
                for l, (m, v) in enumerate(objective.unpack(theta)):
                    means[l][i], variances[l][i] = m, v
                density[i] = f
    return means, variances, density
