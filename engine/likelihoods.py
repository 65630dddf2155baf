"""Noise models p(y | f) of the GP-LVM (Lawrence 2005, section 5), one output entry at a time.

Every model's latent functions f are Gaussian processes; the likelihood says
how an observed entry y_nd comes from f_nd.  Three are offered:

``Gaussian(variance)``
    y = f + noise, noise ~ N(0, variance): the models' closed forms (Y centred).
``Bernoulli()``
    y in {0, 1}, p(y = 1 | f) = Phi(f), the probit link.  Probit rather than
    logit because its predictive probability under a Gaussian f is closed form,
    P(y = 1) = int Phi(f) N(f | mu, v) df = Phi(mu / sqrt(1 + v)), so a click
    on the latent map (and the page's own predictor) gives P(y = 1) without
    quadrature; log Phi is concave, so the Laplace mode of the GP-LVM is unique.
``Poisson()``
    counts y in {0, 1, 2, ...}, y ~ Poisson(exp(f)), the exp link.

What the variational and Laplace machinery needs of a likelihood, for
elementwise arrays of observations y (N, D) and a Gaussian marginal
q(f_nd) = N(mean_nd, var_nd):

* :meth:`Likelihood.expected_log_density`: E_q[log p(y | f)] and its
  derivatives with respect to ``mean`` and ``var`` (the data term of a
  variational bound).  Gauss-Hermite quadrature with H nodes,
  E[g(f)] ~ sum_i w_i / sqrt(pi) g(mean + sqrt(2 var) t_i); the derivative in
  ``var`` is that of the quadrature rule itself (so finite differences of the
  value agree with it to rounding): sum_i w_i / sqrt(pi) g'(f_i) t_i / sqrt(2 var),
  summed over the pairs of symmetric nodes as differences g'(mean + s t) - g'(mean - s t)
  to keep it accurate for small variances, and 1/2 E[g''(f)] below ``s`` = 1e-7.
  Gaussian and Poisson have closed forms and use them
  (E[exp f] = exp(mean + var / 2)); the tests check them against the quadrature.
* :meth:`Likelihood.predictive_moments`: mean and variance of y itself,
  y ~ int p(y | f) q(f) df (Bernoulli: P(y = 1), P(1 - P)).
* :meth:`Likelihood.log_predictive_density`: log int p(y | f) q(f) df and its
  derivatives (projection of new rows into the GP-LVM, held-out likelihoods).
* :meth:`Likelihood.log_density_derivatives`: log p(y | f) and its first three
  derivatives in f at a point (the Laplace approximation of the GP-LVM).
* :meth:`Likelihood.check`: the data lie in the support, else a ShapeError
  naming the first bad cell (row, column, value).

Entries that are not observed (``mask`` False) contribute exactly 0 and get
zero derivatives.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy import special

from ._jit import JIT, njit
from .errors import ConfigurationError, ShapeError

#: Names accepted by the models' ``likelihood=`` argument.
LIKELIHOODS = ("gaussian", "bernoulli", "poisson")

#: Gauss-Hermite nodes of the expectations (GPflow's default; the error of a smooth
#: log-likelihood is far below 1e-10 at unit variance).
NUM_QUADRATURE = 20

#: Below this spread s = sqrt(2 var) the variance derivative is 1/2 E[g''] (the limit of
#: the quadrature rule's own derivative, which would be a cancelling difference quotient).
_SMALL_SPREAD = 1e-7

#: Nodes of :meth:`Likelihood.log_predictive_density` (a count's tilted density is skewed: 48 nodes
#: put its log within ~1e-9 of the integral, 20 within ~1e-6).
_LPD_QUADRATURE = 48

_LOG_2PI = math.log(2.0 * math.pi)
_SQRT2 = math.sqrt(2.0)


class ExpectedLogDensity(NamedTuple):
    """E_q[log p(y | f)] per entry and its derivatives.

    value, dmean, dvar: (N, D), zero where not observed; dparams: dict of the
    likelihood's parameters (Gaussian: ``variance``) -> derivative of value.sum().
    """

    value: np.ndarray
    dmean: np.ndarray
    dvar: np.ndarray
    dparams: dict


def gauss_hermite(num_points: int = NUM_QUADRATURE):
    """(nodes t (H,), weights w (H,)) with int exp(-t^2) g(t) dt ~ sum_i w_i g(t_i)."""
    if isinstance(num_points, bool) or not isinstance(num_points, (int, np.integer)) or num_points < 2:
        raise ConfigurationError(f"Expected num_points as an integer >= 2, got {num_points!r} instead.")
    t, w = np.polynomial.hermite.hermgauss(int(num_points))
    return t, w


def _observed(mask, shape):
    if mask is None:
        return np.ones(shape, dtype=bool)
    mask = np.asarray(mask, dtype=bool)
    if mask.shape != shape:
        raise ShapeError(f"Expected mask of shape {shape}, got {mask.shape} instead.")
    return mask


def first_bad_cell(bad: np.ndarray, Y: np.ndarray):
    """(row, column, value) of the first True entry of ``bad`` in row-major order, or None."""
    flat = np.flatnonzero(bad.ravel())
    if flat.size == 0:
        return None
    r, c = np.unravel_index(int(flat[0]), bad.shape)
    return int(r), int(c), float(Y[r, c])


class Likelihood:
    """Base class: a per-entry log density log p(y | f) and its expectations.

    Subclasses define ``name``, :meth:`logpdf` (with :meth:`dlogpdf`,
    :meth:`d2logpdf`, :meth:`d3logpdf`), :meth:`check` and
    :meth:`predictive_moments`; the quadrature is here once.
    """

    name = "likelihood"
    #: Whether the models centre Y before fitting (only the Gaussian does).
    centres_data = False
    #: Named parameters of the likelihood (constrained values).
    params: dict = {}

    def __init__(self, num_quadrature: int = NUM_QUADRATURE):
        self.nodes, self.weights = gauss_hermite(num_quadrature)
        self._lpd_nodes = gauss_hermite(max(int(num_quadrature), _LPD_QUADRATURE))

    @property
    def num_quadrature(self) -> int:
        return int(self.nodes.size)

    # ---- per-entry log density -------------------------------------------------
    def logpdf(self, y, f):
        raise NotImplementedError

    def dlogpdf(self, y, f):
        raise NotImplementedError

    def d2logpdf(self, y, f):
        raise NotImplementedError

    def d3logpdf(self, y, f):
        raise NotImplementedError

    def log_density_derivatives(self, Y, F, mask=None):
        """(log p, d/df, d2/df2, d3/df3), each (N, D), at f = F; zero where not observed."""
        mask = _observed(mask, np.shape(Y))
        Yo = np.where(mask, Y, self._fill)
        out = [self.logpdf(Yo, F), self.dlogpdf(Yo, F), self.d2logpdf(Yo, F), self.d3logpdf(Yo, F)]
        return tuple(np.where(mask, a, 0.0) for a in out)

    #: A value in the support that stands in for unobserved entries (never contributes).
    _fill = 0.0

    def check(self, Y, mask=None, name="Y", row_offset=0):
        """Raise ShapeError unless every observed entry of Y is in the support (the message names the
        first bad cell; ``row_offset``: the row number of Y's first row, for Y read in chunks)."""
        return None

    # ---- expectations under a Gaussian marginal ---------------------------------------
    def expected_log_density(self, Y, mean, var, mask=None) -> ExpectedLogDensity:
        """E_{N(f | mean, var)}[log p(y | f)] by Gauss-Hermite quadrature (module docstring).

        Y, mean, var: (N, D); var >= 0.  Rows are taken in chunks, so the
        temporaries are (chunk, D, H).
        """
        Y, mean, var, mask = self._arrays(Y, mean, var, mask)
        value = np.zeros(Y.shape)
        dmean = np.zeros(Y.shape)
        dvar = np.zeros(Y.shape)
        t, w = self.nodes, self.weights / math.sqrt(math.pi)
        chunk = max(1, 2**18 // max(1, Y.shape[1] * t.size))
        for lo in range(0, Y.shape[0], chunk):
            sl = slice(lo, lo + chunk)
            y = np.where(mask[sl], Y[sl], self._fill)[..., None]
            s = np.sqrt(2.0 * var[sl])[..., None]
            m = mean[sl][..., None]
            F = m + s * t
            g1 = self.dlogpdf(y, F)
            value[sl] = self.logpdf(y, F) @ w
            dmean[sl] = g1 @ w
            # d/dvar of sum_i w_i g(m + s t_i), s = sqrt(2 var): sum_i w_i g'(f_i) t_i / s
            half = t.size // 2  # hermgauss's nodes are sorted and symmetric: t[-1-i] = -t[i]
            tp, wp = t[t.size - half:], w[t.size - half:]
            g1n = g1[..., :half][..., ::-1]  # g'(m - s t) for the positive nodes tp
            with np.errstate(divide="ignore", invalid="ignore"):
                quad = ((g1[..., t.size - half:] - g1n) @ (wp * tp)) / s[..., 0]
            small = s[..., 0] < _SMALL_SPREAD
            if np.any(small):
                quad = np.where(small, 0.5 * (self.d2logpdf(y, F) @ w), quad)
            dvar[sl] = quad
        return ExpectedLogDensity(np.where(mask, value, 0.0), np.where(mask, dmean, 0.0),
                                  np.where(mask, dvar, 0.0), {})

    def _arrays(self, Y, mean, var, mask):
        Y = np.asarray(Y, dtype=float)
        mean = np.asarray(mean, dtype=float)
        var = np.asarray(var, dtype=float)
        if mean.shape != Y.shape or var.shape != Y.shape:
            raise ShapeError(f"Expected mean and var of the shape of Y {Y.shape}, got {mean.shape} and "
                             f"{var.shape} instead.")
        return Y, mean, np.maximum(var, 0.0), _observed(mask, Y.shape)

    #: Newton steps for the mode of p(y | f) N(f | mean, var) in :meth:`log_predictive_density`.
    _MODE_STEPS = 30

    def log_predictive_density(self, Y, mean, var, mask=None):
        """(log int p(y | f) N(f | mean, var) df, d/dmean, d/dvar), each (N, D); zero where not observed.

        Adaptive Gauss-Hermite: p(y | f) N(f | mean, var) is often much narrower
        than N(f | mean, var) (a count of 50 pins f near log 50), so the nodes are
        placed around its mode f* (Newton; unique for the log-concave
        likelihoods here) with the spread sigma* = (1/var - g''(f*))^-1/2 of a
        Laplace approximation.  The derivatives are moments of the tilted
        density under the same nodes: d/dmean = E[f - mean] / var,
        d/dvar = (E[(f - mean)^2] - var) / (2 var^2), with the limits g'(mean)
        and (g'' + g'^2) / 2 as var -> 0.
        """
        Y, mean, var, mask = self._arrays(Y, mean, var, mask)
        y = np.where(mask, Y, self._fill)
        small = var < 0.5 * _SMALL_SPREAD**2
        v = np.where(small, 1.0, var)
        f = mean.copy()
        for _ in range(self._MODE_STEPS):
            g1 = self.dlogpdf(y, f) - (f - mean) / v
            g2 = self.d2logpdf(y, f) - 1.0 / v
            step = -g1 / g2
            f = f + np.clip(step, -5.0, 5.0)
            if np.max(np.abs(step), initial=0.0) < 1e-12:
                break
        sig = 1.0 / np.sqrt(1.0 / v - self.d2logpdf(y, f))
        t, w = self._lpd_nodes
        F = f[..., None] + _SQRT2 * sig[..., None] * t
        d = F - mean[..., None]
        log_terms = (np.log(w) + t * t + self.logpdf(y[..., None], F)
                     - 0.5 * d * d / v[..., None] - 0.5 * np.log(2.0 * np.pi * v)[..., None])
        top = log_terms.max(axis=-1, keepdims=True)
        r = np.exp(log_terms - top)
        total = r.sum(axis=-1)
        value = np.log(total) + top[..., 0] + np.log(_SQRT2 * sig)
        r /= total[..., None]  # the tilted density's weights on the nodes
        Ed = np.sum(r * d, axis=-1)
        Ed2 = np.sum(r * d * d, axis=-1)
        dmean = Ed / v
        dvar = (Ed2 - v) / (2.0 * v * v)
        if np.any(small):
            g1m, g2m = self.dlogpdf(y, mean), self.d2logpdf(y, mean)
            value = np.where(small, self.logpdf(y, mean), value)
            dmean = np.where(small, g1m, dmean)
            dvar = np.where(small, 0.5 * (g2m + g1m * g1m), dvar)
        return tuple(np.where(mask, a, 0.0) for a in (value, dmean, dvar))

    def predictive_moments(self, mean, var):
        """Mean and variance of y under f ~ N(mean, var), each of mean's shape."""
        raise NotImplementedError

    def __repr__(self):
        return f"{type(self).__name__}()"


class Gaussian(Likelihood):
    """y = f + N(0, variance); E_q[log p] = -1/2 log(2 pi variance) - ((y - mean)^2 + var) / (2 variance)."""

    name = "gaussian"
    centres_data = True

    def __init__(self, variance: float = 1.0, num_quadrature: int = NUM_QUADRATURE):
        super().__init__(num_quadrature)
        if not (np.isfinite(variance) and variance > 0):
            raise ConfigurationError(f"Expected a positive noise variance, got {variance!r} instead.")
        self.variance = float(variance)

    @property
    def params(self):
        return {"variance": self.variance}

    def logpdf(self, y, f):
        r = y - f
        return -0.5 * (_LOG_2PI + math.log(self.variance)) - 0.5 * r * r / self.variance

    def dlogpdf(self, y, f):
        return (y - f) / self.variance

    def d2logpdf(self, y, f):
        return np.full(np.broadcast(y, f).shape, -1.0 / self.variance)

    def d3logpdf(self, y, f):
        return np.zeros(np.broadcast(y, f).shape)

    def expected_log_density(self, Y, mean, var, mask=None) -> ExpectedLogDensity:
        """Closed form (module docstring)."""
        Y, mean, var, mask = self._arrays(Y, mean, var, mask)
        s2 = self.variance
        r = np.where(mask, Y - mean, 0.0)
        v = np.where(mask, var, 0.0)
        value = np.where(mask, -0.5 * (_LOG_2PI + math.log(s2)) - 0.5 * (r * r + v) / s2, 0.0)
        dvariance = float(np.sum(np.where(mask, -0.5 / s2, 0.0)) + 0.5 * np.sum(r * r + v) / s2**2)
        return ExpectedLogDensity(value, r / s2, np.where(mask, -0.5 / s2, 0.0), {"variance": dvariance})

    def log_predictive_density(self, Y, mean, var, mask=None):
        Y, mean, var, mask = self._arrays(Y, mean, var, mask)
        total = var + self.variance
        r = np.where(mask, Y - mean, 0.0)
        value = -0.5 * (_LOG_2PI + np.log(total)) - 0.5 * r * r / total
        dvar = -0.5 / total + 0.5 * r * r / total**2
        return tuple(np.where(mask, a, 0.0) for a in (value, r / total, dvar))

    def predictive_moments(self, mean, var):
        return np.array(mean, dtype=float), np.asarray(var, dtype=float) + self.variance

    def __repr__(self):
        return f"Gaussian(variance={self.variance:g})"


# ----------------------------------------------------------------- probit, compiled

@njit(**JIT)
def _asymptotic(z):
    """1 - 1/z^2 + 3/z^4 - 15/z^6 + 105/z^8: Phi(z) ~ phi(z) / (-z) times it, for z << 0."""
    iz2 = 1.0 / (z * z)
    return 1.0 - iz2 * (1.0 - iz2 * (3.0 - iz2 * (15.0 - 105.0 * iz2)))


@njit(**JIT)
def _log_ndtr1(z):
    """log Phi(z) for one z: erfc where it is accurate, the asymptotic series below z = -30."""
    if z > 3.0:
        return math.log1p(-0.5 * math.erfc(z / _SQRT2))
    if z > -30.0:
        return math.log(0.5 * math.erfc(-z / _SQRT2))
    return -0.5 * z * z - math.log(-z) - 0.5 * _LOG_2PI + math.log(_asymptotic(z))


@njit(**JIT)
def _mills1(z):
    """phi(z) / Phi(z), the derivative of log Phi (the inverse Mills ratio of -z)."""
    if z > -30.0:
        return math.exp(-0.5 * z * z - 0.5 * _LOG_2PI) / (0.5 * math.erfc(-z / _SQRT2))
    return -z / _asymptotic(z)


# log Phi on a grid, with its derivative phi / Phi: the quadrature's nodes read a cubic Hermite
# interpolant of it (libm's erfc costs ~30 ns, and every entry of Y needs H of them per
# evaluation).  The interpolant's derivative is returned as the derivative, so values and
# gradients agree exactly; it is within ~1e-10 of log Phi (step^4 max|4th derivative| / 384).
_TABLE_LO, _TABLE_HI, _TABLE_STEPS = -40.0, 10.0, 64


def _probit_table():
    z = _TABLE_LO + np.arange(int((_TABLE_HI - _TABLE_LO) * _TABLE_STEPS) + 2) / _TABLE_STEPS
    F = special.log_ndtr(z)
    G = np.exp(-0.5 * z * z - 0.5 * _LOG_2PI - F)
    return np.ascontiguousarray(F), np.ascontiguousarray(G / _TABLE_STEPS)  # G in units of the grid step


_TABLE_F, _TABLE_G = _probit_table()


@njit(**JIT)
def _probit_node(z, F, G):
    """(log Phi(z), d/dz of it) from the table F, G (cubic Hermite), the asymptotic series below it."""
    if z >= _TABLE_HI:
        return 0.0, 0.0  # |log Phi| < 1e-23 there
    if z < _TABLE_LO:
        a = _asymptotic(z)
        return -0.5 * z * z - math.log(-z) - 0.5 * _LOG_2PI + math.log(a), -z / a
    u = (z - _TABLE_LO) * _TABLE_STEPS
    k = int(u)
    t = u - k
    f0 = F[k]
    f1 = F[k + 1]
    g0 = G[k]
    g1 = G[k + 1]
    t2 = t * t
    # H(t) = (2t^3 - 3t^2 + 1) f0 + (t^3 - 2t^2 + t) g0 + (3t^2 - 2t^3) f1 + (t^3 - t^2) g1
    value = f0 + t * g0 + t2 * (3.0 * (f1 - f0) - 2.0 * g0 - g1) + t2 * t * (2.0 * (f0 - f1) + g0 + g1)
    slope = g0 + t * (6.0 * (f1 - f0) - 4.0 * g0 - 2.0 * g1) + t2 * (6.0 * (f0 - f1) + 3.0 * g0 + 3.0 * g1)
    return value, slope * _TABLE_STEPS


@njit(**JIT)
def _probit_expectations(Y, mean, var, mask, t, w, F, G, value, dmean, dvar, small, lo, hi):
    """E_{N(mean, var)}[log Phi((2y - 1) f)] and its derivatives for rows lo..hi-1 (quadrature as in
    :meth:`Likelihood.expected_log_density`); every array (N, D) except t, w (H,) (w includes
    1/sqrt(pi)).  Entries are independent, so any split of the rows gives the same numbers."""
    D = Y.shape[1]
    H = t.shape[0]
    half = H // 2
    lam = np.empty(H)
    for n in range(lo, hi):
        for d in range(D):
            if not mask[n, d]:
                value[n, d] = 0.0
                dmean[n, d] = 0.0
                dvar[n, d] = 0.0
                continue
            sgn = 2.0 * Y[n, d] - 1.0
            m = mean[n, d]
            s = math.sqrt(2.0 * var[n, d])
            v0 = 0.0
            g0 = 0.0
            c0 = 0.0
            for i in range(H):
                z = sgn * (m + s * t[i])
                lp, li = _probit_node(z, F, G)
                lam[i] = li
                v0 += w[i] * lp
                g0 += w[i] * li
                c0 -= w[i] * li * (z + li)
            h0 = 0.0
            if s < small:
                h0 = 0.5 * c0
            else:
                for i in range(half):  # the pairs t[H-1-i] = -t[i] > 0
                    h0 += w[H - 1 - i] * t[H - 1 - i] * (lam[H - 1 - i] - lam[i])
                h0 *= sgn / s
            value[n, d] = v0
            dmean[n, d] = sgn * g0
            dvar[n, d] = h0


@njit(**JIT)
def _log_ndtr_array(z, out):
    flat = z.ravel()
    o = out.ravel()
    for i in range(flat.size):
        o[i] = _log_ndtr1(flat[i])


@njit(**JIT)
def _mills_array(z, out):
    flat = z.ravel()
    o = out.ravel()
    for i in range(flat.size):
        o[i] = _mills1(flat[i])


#: Entries per thread below which the compiled loops run on the calling thread alone.
_ROWS_PER_THREAD = 4096


def run_rows(fn, num_rows, args, row_cost=1):
    """fn(*args, lo, hi) over contiguous shares of range(num_rows), one per thread of the psi pool.

    For compiled loops that release the GIL and whose rows are independent
    (so the split never changes a number).  ``row_cost``: entries per row.
    """
    import numba

    from .psi.rbf import _pool

    nthread = max(1, min(numba.get_num_threads(), (num_rows * row_cost) // _ROWS_PER_THREAD, num_rows))
    bounds = [t * num_rows // nthread for t in range(nthread + 1)]
    futures = [_pool().submit(fn, *args, bounds[t], bounds[t + 1]) for t in range(1, nthread)]
    fn(*args, bounds[0], bounds[1])
    for f in futures:
        f.result()


def log_ndtr(z):
    """log Phi(z), elementwise (the compiled version used by the Bernoulli likelihood)."""
    z = np.ascontiguousarray(z, dtype=np.float64)
    out = np.empty_like(z)
    _log_ndtr_array(z, out)
    return out


def mills(z):
    """phi(z) / Phi(z) = d log Phi(z) / dz, elementwise."""
    z = np.ascontiguousarray(z, dtype=np.float64)
    out = np.empty_like(z)
    _mills_array(z, out)
    return out


class Bernoulli(Likelihood):
    """y in {0, 1}, p(y = 1 | f) = Phi(f) (probit; see the module docstring for why)."""

    name = "bernoulli"

    def check(self, Y, mask=None, name="Y", row_offset=0):
        Y = np.asarray(Y, dtype=float)
        mask = _observed(mask, Y.shape)
        bad = first_bad_cell(mask & (Y != 0.0) & (Y != 1.0), Y)
        if bad is not None:
            r, c, v = bad
            r += row_offset
            raise ShapeError(f"likelihood='bernoulli' needs every observed value of {name} to be 0 or 1; "
                             f"row {r}, column {c} holds {v!r}. Threshold or recode the data, or use "
                             "likelihood='gaussian'.")

    @staticmethod
    def _sign(y):
        return 2.0 * np.asarray(y, dtype=float) - 1.0

    def logpdf(self, y, f):
        return log_ndtr(self._sign(y) * f)

    def dlogpdf(self, y, f):
        s = self._sign(y)
        return s * mills(s * f)

    def d2logpdf(self, y, f):
        z = self._sign(y) * f
        lam = mills(z)
        return -lam * (z + lam)

    def d3logpdf(self, y, f):
        s = self._sign(y)
        z = s * f
        lam = mills(z)
        return s * lam * ((z + lam) * (z + 2.0 * lam) - 1.0)

    def expected_log_density(self, Y, mean, var, mask=None) -> ExpectedLogDensity:
        """The quadrature of the base class, compiled (log Phi and its derivatives per node)."""
        Y, mean, var, mask = self._arrays(Y, mean, var, mask)
        out = [np.empty(Y.shape) for _ in range(3)]
        args = (np.ascontiguousarray(Y), np.ascontiguousarray(mean), np.ascontiguousarray(var),
                np.ascontiguousarray(mask), self.nodes, self.weights / math.sqrt(math.pi), _TABLE_F, _TABLE_G, *out,
                _SMALL_SPREAD)
        run_rows(_probit_expectations, Y.shape[0], args, row_cost=Y.shape[1])
        return ExpectedLogDensity(*out, {})

    def log_predictive_density(self, Y, mean, var, mask=None):
        """log Phi(s mean / sqrt(1 + var)), s = 2y - 1 (closed form)."""
        Y, mean, var, mask = self._arrays(Y, mean, var, mask)
        s = self._sign(np.where(mask, Y, 0.0))
        root = np.sqrt(1.0 + var)
        z = s * mean / root
        lam = mills(z)
        dmean = s * lam / root
        dvar = -0.5 * lam * z / (1.0 + var)
        return tuple(np.where(mask, a, 0.0) for a in (log_ndtr(z), dmean, dvar))

    def predictive_moments(self, mean, var):
        """P(y = 1) = Phi(mean / sqrt(1 + var)) and P (1 - P)."""
        p = special.ndtr(np.asarray(mean, dtype=float) / np.sqrt(1.0 + np.asarray(var, dtype=float)))
        return p, p * (1.0 - p)


class Poisson(Likelihood):
    """Counts y ~ Poisson(exp(f)); E_q[log p] = y mean - exp(mean + var / 2) - log y! (closed form)."""

    name = "poisson"

    #: Largest exponent taken: beyond it the rate is held (an overflow guard, far outside any fit).
    _MAX_LOG_RATE = 700.0

    def check(self, Y, mask=None, name="Y", row_offset=0):
        Y = np.asarray(Y, dtype=float)
        mask = _observed(mask, Y.shape)
        bad = first_bad_cell(mask & ((Y < 0.0) | (Y != np.floor(Y))), Y)
        if bad is not None:
            r, c, v = bad
            r += row_offset
            raise ShapeError(f"likelihood='poisson' needs every observed value of {name} to be a count "
                             f"(0, 1, 2, ...); row {r}, column {c} holds {v!r}. Use likelihood='gaussian' for "
                             "other values.")

    def _rate(self, f):
        return np.exp(np.minimum(f, self._MAX_LOG_RATE))

    def logpdf(self, y, f):
        return y * f - self._rate(f) - special.gammaln(y + 1.0)

    def dlogpdf(self, y, f):
        return y - self._rate(f)

    def d2logpdf(self, y, f):
        return -self._rate(f) + 0.0 * y

    def d3logpdf(self, y, f):
        return -self._rate(f) + 0.0 * y

    def expected_log_density(self, Y, mean, var, mask=None) -> ExpectedLogDensity:
        Y, mean, var, mask = self._arrays(Y, mean, var, mask)
        y = np.where(mask, Y, 0.0)
        rate = self._rate(mean + 0.5 * var)
        value = y * mean - rate - special.gammaln(y + 1.0)
        return ExpectedLogDensity(np.where(mask, value, 0.0), np.where(mask, y - rate, 0.0),
                                  np.where(mask, -0.5 * rate, 0.0), {})

    def predictive_moments(self, mean, var):
        """E[y] = exp(mean + var / 2); Var[y] = E[y] + (exp(var) - 1) E[y]^2."""
        mean = np.asarray(mean, dtype=float)
        var = np.asarray(var, dtype=float)
        Ey = self._rate(mean + 0.5 * var)
        return Ey, Ey + np.expm1(np.minimum(var, self._MAX_LOG_RATE)) * Ey * Ey


def get_likelihood(likelihood, **options) -> Likelihood:
    """A :class:`Likelihood` from its name ("gaussian", "bernoulli", "poisson") or itself."""
    if isinstance(likelihood, Likelihood):
        return likelihood
    key = str(likelihood).lower() if isinstance(likelihood, str) else None
    if key == "gaussian":
        return Gaussian(**options)
    if key == "bernoulli":
        return Bernoulli(**options)
    if key == "poisson":
        return Poisson(**options)
    raise ConfigurationError(f"Expected likelihood as one of {LIKELIHOODS}, got {likelihood!r} instead.")


#: The models that take ``likelihood="bernoulli"`` / ``"poisson"``.
MODELS_WITH_LIKELIHOODS = "BayesianGPLVM, StochasticBayesianGPLVM or GPLVM"


def require_gaussian(likelihood, model: str) -> None:
    """ConfigurationError unless ``likelihood`` is Gaussian, for the models built on the Gaussian closed forms."""
    name = likelihood_name(likelihood)
    if name != "gaussian":
        raise ConfigurationError(
            f"{model} takes likelihood='gaussian' only, got {name!r}; for binary or count data use "
            f"{MODELS_WITH_LIKELIHOODS} with likelihood={name!r}.")


def likelihood_name(likelihood) -> str:
    """The canonical name of a likelihood given by name or object (ConfigurationError if unknown)."""
    if isinstance(likelihood, Likelihood):
        return likelihood.name
    return get_likelihood(likelihood).name


__all__ = ["Bernoulli", "ExpectedLogDensity", "Gaussian", "LIKELIHOODS", "Likelihood", "MODELS_WITH_LIKELIHOODS",
           "NUM_QUADRATURE", "Poisson", "gauss_hermite", "get_likelihood", "likelihood_name", "log_ndtr", "mills",
           "require_gaussian"]
