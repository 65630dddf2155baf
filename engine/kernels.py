"""Covariance functions over latent inputs X (N, Q) and their gradients.

Kernels are small objects holding named, constrained (positive) parameters.
They never store gradients: every gradient method is a pure function of its
arguments and returns fresh arrays.

Shapes: X (N, Q), X2 (N2, Q), K (N, N2), dL_dK (N, N2), dL_dKdiag (N,).

Gradient conventions
--------------------
``grad_params(dL_dK, X, X2)`` returns d/d(theta) of sum(dL_dK * K(X, X2)) for
each constrained parameter theta, as a dict with the same keys and shapes as
``params`` (python floats for scalars).  ``grad_X(dL_dK, X, X2)`` returns the
gradient of the same scalar w.r.t. X, shape (N, Q).  With ``X2=None`` both
argument slots of K(X, X) move with X, and dL_dK need not be symmetric.  When
an X2 is given -- even the very same array as X -- it is held fixed and only
the first slot moves.

Available kernels: :class:`RBF`, :class:`Linear`, :class:`Matern32`,
:class:`Matern52`, :class:`MLP`, :class:`Bias`, :class:`White`, and
:class:`Sum` (built with ``+``).
"""
from __future__ import annotations

import copy as _copy
import math

import numpy as np

from . import _kernel_loops as _loops
from .errors import ConfigurationError, ShapeError
from .linalg import rows_dot
from .transforms import POSITIVE, ParameterSpec
from .validation import integer

__all__ = [
    "Kernel",
    "RBF",
    "Linear",
    "Matern32",
    "Matern52",
    "MLP",
    "Bias",
    "White",
    "Sum",
    "kernel_from_spec",
    "warmup",
]


# ----------------------------------------------------------------------------
# validation helpers


def _as_inputs(X, input_dim: int, name: str = "X") -> np.ndarray:
    """Validate and convert latent inputs to a float64 C-contiguous (N, Q) array."""
    try:
        arr = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ShapeError(f"Expected {name} as a numeric array of shape (N, {input_dim}), got {type(X).__name__} instead.") from exc
    if arr.ndim != 2:
        raise ShapeError(
            f"Expected {name} as a 2-D array of shape (N, {input_dim}), got shape {arr.shape} instead; "
            f"reshape it to (-1, {input_dim})."
        )
    if arr.shape[1] != input_dim:
        raise ShapeError(f"Expected {name} with {input_dim} columns, got {arr.shape[1]} instead.")
    if not np.all(np.isfinite(arr)):
        raise ShapeError(f"Expected finite values in {name}, got NaN or inf instead.")
    return np.ascontiguousarray(arr)


def _as_cotangent(G, shape: tuple, name: str) -> np.ndarray:
    """Validate and convert a cotangent (dL_dK or dL_dKdiag) to float64 of ``shape``."""
    try:
        arr = np.asarray(G, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ShapeError(f"Expected {name} as a numeric array of shape {shape}, got {type(G).__name__} instead.") from exc
    if arr.shape != shape:
        raise ShapeError(f"Expected {name} of shape {shape}, got {arr.shape} instead.")
    return np.ascontiguousarray(arr)


def _to_python(value: np.ndarray):
    """Constrained value as shown to people: float for scalars, array copy otherwise."""
    return float(value) if value.ndim == 0 else value.copy()


def _to_json(value: np.ndarray):
    return float(value) if value.ndim == 0 else [float(v) for v in value]


# ----------------------------------------------------------------------------
# base class


class Kernel:
    """Base class: named positive parameters plus K, K_diag and their gradients.

    Subclasses set ``name`` and ``_shapes`` (parameter name -> shape, in order)
    and implement ``K``, ``K_diag``, ``grad_params``, ``grad_params_diag``,
    ``grad_X``, ``grad_X_diag``.
    """

    name = "kernel"

    def __init__(self, input_dim: int, **values):
        input_dim = integer(input_dim, "input_dim")
        self.input_dim = int(input_dim)
        self._values: dict[str, np.ndarray] = {}
        self.set_params(**values)

    # --- parameters ---------------------------------------------------------

    @property
    def _shapes(self) -> dict:
        """Parameter name -> shape of its constrained value, in order."""
        raise NotImplementedError

    @property
    def param_names(self) -> tuple:
        """Ordered parameter names."""
        return tuple(self._shapes)

    @property
    def params(self) -> dict:
        """Name -> constrained value (float for scalars, (Q,) array copy for ARD)."""
        return {k: _to_python(self._values[k]) for k in self.param_names}

    def set_params(self, **values) -> None:
        """Set constrained parameter values by name.

        ARD vectors accept a (Q,) array or a scalar (broadcast).  Raises
        ShapeError for a wrong shape, ValueError for an unknown name or a
        value that is not finite and positive.  Nothing is changed if any
        value is rejected.
        """
        shapes = self._shapes
        new = {}
        for key, value in values.items():
            if key not in shapes:
                raise ConfigurationError(f"Expected a parameter of {self.name} among {list(shapes)}, got {key!r} instead.")
            shape = shapes[key]
            try:
                arr = np.array(value, dtype=np.float64)
            except (TypeError, ValueError) as exc:
                raise ShapeError(f"Expected {key} as a number or array of shape {shape}, got {value!r} instead.") from exc
            if arr.shape != shape:
                if arr.ndim == 0:
                    arr = np.full(shape, float(arr))
                else:
                    raise ShapeError(f"Expected {key} of shape {shape}, got {arr.shape} instead.")
            if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
                raise ConfigurationError(f"Expected {key} finite and positive, got {_to_json(arr)!r} instead.")
            new[key] = arr
        self._values.update(new)

    def param_specs(self, prefix: str = "") -> list:
        """One ``ParameterSpec`` per parameter, named ``prefix + name`` (prefix is prepended as is)."""
        return [ParameterSpec(prefix + k, tuple(s), POSITIVE) for k, s in self._shapes.items()]

    def copy(self) -> "Kernel":
        """An independent kernel with the same settings and parameter values."""
        return kernel_from_spec(self.to_spec())

    def with_params(self, values: dict) -> "Kernel":
        """An independent copy with the parameters of ``values`` (name -> value) set, checked as by
        :meth:`set_params`; ``self`` is unchanged.

        What a model does once per evaluation: the copy shares the settings and replaces the
        values dict (values are never changed in place), instead of rebuilding the kernel
        from its spec as :meth:`copy` does.
        """
        k = _copy.copy(self)
        k._values = dict(self._values)
        k.set_params(**values)
        return k

    # --- description ----------------------------------------------------------

    def _settings(self) -> dict:
        """Constructor arguments other than input_dim and parameter values."""
        return {}

    def to_spec(self) -> dict:
        """JSON-serialisable description; ``kernel_from_spec`` rebuilds the kernel."""
        return {
            "type": self.name,
            "input_dim": self.input_dim,
            **self._settings(),
            "params": {k: _to_json(self._values[k]) for k in self.param_names},
        }

    def __repr__(self) -> str:
        parts = [f"input_dim={self.input_dim}"]
        for k in self.param_names:
            v = self._values[k]
            parts.append(f"{k}={float(v):.6g}" if v.ndim == 0 else f"{k}=[{', '.join(f'{x:.6g}' for x in v)}]")
        parts += [f"{k}={v!r}" for k, v in self._settings().items()]
        return f"{type(self).__name__}({', '.join(parts)})"

    def __add__(self, other):
        if not isinstance(other, Kernel):
            return NotImplemented
        return Sum([self, other])

    @property
    def relevance(self) -> np.ndarray:
        """(Q,) relevance of each input dimension (zeros unless the kernel defines it)."""
        return np.zeros(self.input_dim)

    # --- helpers for subclasses ---------------------------------------------

    def _inputs(self, X, X2=None):
        X = _as_inputs(X, self.input_dim, "X")
        X2 = None if X2 is None else _as_inputs(X2, self.input_dim, "X2")
        return X, X2

    def _grad_inputs(self, dL_dK, X, X2=None):
        X, X2 = self._inputs(X, X2)
        n2 = X.shape[0] if X2 is None else X2.shape[0]
        G = _as_cotangent(dL_dK, (X.shape[0], n2), "dL_dK")
        return G, X, X2

    def _diag_inputs(self, dL_dKdiag, X):
        X = _as_inputs(X, self.input_dim, "X")
        g = _as_cotangent(dL_dKdiag, (X.shape[0],), "dL_dKdiag")
        return g, X

    def _scalar(self, key: str) -> float:
        return float(self._values[key])

    # --- interface ------------------------------------------------------------

    def K(self, X, X2=None) -> np.ndarray:
        """Covariance matrix (N, N2) between X (N, Q) and X2 (N2, Q) (X2=None: X)."""
        raise NotImplementedError

    def K_diag(self, X) -> np.ndarray:
        """Diagonal of K(X), shape (N,)."""
        raise NotImplementedError

    def grad_params(self, dL_dK, X, X2=None) -> dict:
        """Gradients of sum(dL_dK * K(X, X2)) w.r.t. the constrained parameters."""
        raise NotImplementedError

    def grad_params_diag(self, dL_dKdiag, X) -> dict:
        """Gradients of sum(dL_dKdiag * K_diag(X)) w.r.t. the constrained parameters."""
        raise NotImplementedError

    def grad_X(self, dL_dK, X, X2=None) -> np.ndarray:
        """Gradient (N, Q) of sum(dL_dK * K(X, X2)) w.r.t. X (X2=None: both slots move)."""
        raise NotImplementedError

    def grad_X_diag(self, dL_dKdiag, X) -> np.ndarray:
        """Gradient (N, Q) of sum(dL_dKdiag * K_diag(X)) w.r.t. X."""
        raise NotImplementedError

    def grad_params_and_X(self, dL_dK, X, X2=None) -> tuple:
        """``(grad_params(...), grad_X(...))`` in one call; stationary kernels share the work."""
        return self.grad_params(dL_dK, X, X2), self.grad_X(dL_dK, X, X2)

    # --- derivatives w.r.t. the inputs (latent geometry) -----------------------------

    def _dims(self, dims) -> np.ndarray:
        """(q,) validated input dimensions: all Q for None, else distinct indices in [0, Q)."""
        if dims is None:
            return np.arange(self.input_dim)
        try:
            d = np.array(dims, dtype=np.int64).reshape(-1)
        except (TypeError, ValueError) as exc:
            raise ShapeError(f"Expected dims as a sequence of input dimensions, got {dims!r} instead.") from exc
        if d.size == 0 or np.any(d < 0) or np.any(d >= self.input_dim) or np.unique(d).size != d.size:
            raise ShapeError(f"Expected dims as distinct indices between 0 and {self.input_dim - 1}, "
                             f"got {dims!r} instead.")
        return d

    def dK_dX(self, X, X2, dims=None) -> np.ndarray:
        """Derivatives of K(X, X2) w.r.t. its first argument, (N, q, N2).

        out[n, a, m] = d k(x_n, x2_m) / d x_{n, dims[a]} with X2 held fixed
        (X2 None: the same points as X, still held fixed; ``dims`` None: all
        Q inputs, q = Q).  Laid out for a contraction over
        the N2 points.  White noise has no derivative (its cross-covariance
        is zero).
        """
        X, X2 = self._inputs(X, X2)
        return self._dK_dX(X, X if X2 is None else X2, self._dims(dims))

    def d2K_dXdX2_diag(self, X, dims=None) -> np.ndarray:
        """Mixed second derivatives d^2 k(x, x') / dx dx'^T at x' = x, (N, q, q).

        The covariance of the derivative of a process with this kernel at each
        x_n (``dims`` None: all Q inputs).  White noise contributes nothing: it
        is no part of a differentiable function.
        """
        X = _as_inputs(X, self.input_dim)
        return self._d2K_dXdX2_diag(X, self._dims(dims))

    def _dK_dX(self, X, X2, dims) -> np.ndarray:
        raise NotImplementedError

    def _d2K_dXdX2_diag(self, X, dims) -> np.ndarray:
        raise NotImplementedError


# ----------------------------------------------------------------------------
# stationary kernels: k(x, x') = variance * f(r2), r2 = sum_q (x_q - x'_q)^2 / l_q^2


class _Stationary(Kernel):
    """Shared machinery of RBF and Matérn kernels (ARD or one shared lengthscale).

    k = variance * f(r2) with f(0) = 1.  Subclasses implement ``_f`` (the
    matrix f(r2)) and ``_weights`` (what the gradient loop contracts against);
    every gradient follows from dL/dr2 through one compiled pass.
    """

    def __init__(self, input_dim: int, variance=1.0, lengthscales=1.0, ard: bool = True):
        self.ard = bool(ard)
        super().__init__(input_dim, variance=variance, lengthscales=lengthscales)

    @property
    def _shapes(self):
        return {"variance": (), "lengthscales": (self.input_dim,) if self.ard else ()}

    def _settings(self):
        return {"ard": self.ard}

    @property
    def _lengthscales(self) -> np.ndarray:
        """(Q,) lengthscales, broadcast when shared."""
        return np.broadcast_to(self._values["lengthscales"], (self.input_dim,))

    @property
    def relevance(self) -> np.ndarray:
        """(Q,) inverse squared lengthscales."""
        return 1.0 / self._lengthscales**2

    def _scaled_T(self, X) -> np.ndarray:
        """(Q, N) C-contiguous X / lengthscales, transposed."""
        return np.ascontiguousarray((X / self._lengthscales).T)

    def _sqdist(self, XsT, X2sT, scale=1.0, offset=0.0, root=False) -> np.ndarray:
        """(N, N2) offset + scale * r2 (or * r with ``root``) from scaled, transposed inputs."""
        out = np.empty((XsT.shape[1], X2sT.shape[1]))
        _loops._scaled_sqdist(XsT, X2sT, scale, offset, out, root)
        return out

    def _f(self, XsT, X2sT) -> np.ndarray:
        """Unit-variance profile f(r2), (N, N2), from scaled, transposed inputs."""
        raise NotImplementedError

    def K(self, X, X2=None):
        X, X2 = self._inputs(X, X2)
        XsT = self._scaled_T(X)
        X2sT = XsT if X2 is None else self._scaled_T(X2)
        return self._K_scaled(XsT, X2sT)

    def _K_scaled(self, XsT, X2sT):
        f = self._f(XsT, X2sT)
        f *= self._scalar("variance")
        return f

    def K_diag(self, X):
        X = _as_inputs(X, self.input_dim)
        return np.full(X.shape[0], self._scalar("variance"))

    def _weights(self, G, XsT, X2sT):
        """(B, c, grad_variance) such that dL/dr2 = c * G * B elementwise, B (N, N2).

        grad_variance None means sum(G * B) / variance (B is K itself).
        """
        raise NotImplementedError

    def grad_params_and_X(self, dL_dK, X, X2=None):
        G, X, X2 = self._grad_inputs(dL_dK, X, X2)
        ls = self._lengthscales
        XsT = self._scaled_T(X)
        X2sT = XsT if X2 is None else self._scaled_T(X2)
        B, c, grad_variance = self._weights(G, XsT, X2sT)
        total, wsq, gXsT = _loops._sqdist_grads(G, B, XsT, X2sT, X2 is None)
        if grad_variance is None:
            grad_variance = total / self._scalar("variance")
        # r2 = sum_q d_q^2 / l_q^2  =>  dr2/dl_q = -2 (d_q / l_q)^2 / l_q
        grad_ls = -2.0 * c * wsq / ls
        grads = {
            "variance": grad_variance,
            "lengthscales": grad_ls if self.ard else float(np.sum(grad_ls)),
        }
        grad_X = (c * gXsT).T / ls
        return grads, np.ascontiguousarray(grad_X)

    def grad_params(self, dL_dK, X, X2=None):
        return self.grad_params_and_X(dL_dK, X, X2)[0]

    def grad_X(self, dL_dK, X, X2=None):
        return self.grad_params_and_X(dL_dK, X, X2)[1]

    def grad_params_diag(self, dL_dKdiag, X):
        g, X = self._diag_inputs(dL_dKdiag, X)
        zero = np.zeros(self.input_dim) if self.ard else 0.0
        return {"variance": float(np.sum(g)), "lengthscales": zero}

    def grad_X_diag(self, dL_dKdiag, X):
        g, X = self._diag_inputs(dL_dKdiag, X)
        return np.zeros_like(X)

    #: -2 f'(0), f the unit profile of r2: the curvature of k at r = 0, in units of variance / l^2.
    _curvature = 1.0

    def _dk_dr2(self, XsT, X2sT) -> np.ndarray:
        """dk/dr2 (N, N2) from scaled, transposed inputs."""
        raise NotImplementedError

    def _dK_dX(self, X, X2, dims):
        # dk/dx_q = dk/dr2 * 2 (x_q - x2_q) / l_q^2
        dk = self._dk_dr2(self._scaled_T(X), self._scaled_T(X2))
        out = np.empty((X.shape[0], dims.size, X2.shape[0]))
        weights = np.ascontiguousarray(2.0 / self._lengthscales[dims] ** 2)
        _loops._scaled_differences(dk, X, X2, np.ascontiguousarray(dims, dtype=np.int64), weights, out)
        return out

    def _d2K_dXdX2_diag(self, X, dims):
        # k = variance f(r2) of tau = x - x': d2k/dx dx' = -d2k/dtau2 = -2 variance f'(0) / l^2 on the diagonal
        diag = self._curvature * self._scalar("variance") / self._lengthscales[dims] ** 2
        return np.broadcast_to(np.diag(diag), (X.shape[0], dims.size, dims.size)).copy()


class RBF(_Stationary):
    """Exponentiated quadratic: k = variance * exp(-1/2 sum_q (x_q - x'_q)^2 / lengthscales_q^2).

    ``ard=True``: lengthscales has shape (Q,); ``ard=False``: one shared
    lengthscale, shape ().
    """

    name = "rbf"

    def _K_scaled(self, XsT, X2sT):
        out = self._sqdist(XsT, X2sT, -0.5)
        np.exp(out, out=out)
        # multiplied afterwards (not exp(log variance - r2/2)) so diag K(X) == K_diag(X) exactly
        out *= self._scalar("variance")
        return out

    def _weights(self, G, XsT, X2sT):
        # dL/dr2 = G * (-K / 2), and sum(G * K) / variance comes out of the same loop
        return self._K_scaled(XsT, X2sT), -0.5, None

    def _dk_dr2(self, XsT, X2sT):
        out = self._K_scaled(XsT, X2sT)
        out *= -0.5
        return out


_SQRT3 = math.sqrt(3.0)
_SQRT5 = math.sqrt(5.0)


class _Matern(_Stationary):
    """Matérn 3/2 and 5/2: exp on numpy's SIMD path, the rest in one compiled pass."""

    _five_halves = False

    def _profile_from_scaled(self, XsT, X2sT):
        c = _SQRT5 if self._five_halves else _SQRT3
        R = self._sqdist(XsT, X2sT, root=True)  # r, (N, N2)
        E = np.multiply(R, -c)
        np.exp(E, out=E)
        _loops._matern_profile(R, E, self._five_halves)
        return R, E  # f, df/dr2

    def _f(self, XsT, X2sT):
        return self._profile_from_scaled(XsT, X2sT)[0]

    def _weights(self, G, XsT, X2sT):
        f, df = self._profile_from_scaled(XsT, X2sT)
        return df, self._scalar("variance"), float(np.vdot(G, f))

    def _dk_dr2(self, XsT, X2sT):
        df = self._profile_from_scaled(XsT, X2sT)[1]
        df *= self._scalar("variance")
        return df


class Matern32(_Matern):
    """Matérn 3/2: k = variance * (1 + sqrt(3) r) exp(-sqrt(3) r), r^2 = sum_q (x_q - x'_q)^2 / l_q^2.

    d k / d r^2 = -3/2 variance exp(-sqrt(3) r) is finite at r = 0, so the
    gradient w.r.t. X at coincident points is exactly zero, never 0/0.
    """

    name = "matern32"
    _five_halves = False
    _curvature = 3.0  # k = variance (1 - 3/2 r^2 + O(r^3))


class Matern52(_Matern):
    """Matérn 5/2: k = variance * (1 + sqrt(5) r + 5/3 r^2) exp(-sqrt(5) r)."""

    name = "matern52"
    _five_halves = True
    _curvature = 5.0 / 3.0  # k = variance (1 - 5/6 r^2 + O(r^3))


# ----------------------------------------------------------------------------
# dot-product kernels


class Linear(Kernel):
    """Linear: k = sum_q variances_q x_q x'_q (ARD) or variances * x.x' (ard=False)."""

    name = "linear"

    def __init__(self, input_dim: int, variances=1.0, ard: bool = True):
        self.ard = bool(ard)
        super().__init__(input_dim, variances=variances)

    @property
    def _shapes(self):
        return {"variances": (self.input_dim,) if self.ard else ()}

    def _settings(self):
        return {"ard": self.ard}

    @property
    def _variances(self) -> np.ndarray:
        return np.broadcast_to(self._values["variances"], (self.input_dim,))

    @property
    def relevance(self):
        """(Q,) variances."""
        return np.array(self._variances)

    def K(self, X, X2=None):
        X, X2 = self._inputs(X, X2)
        if X2 is None:
            # A @ A.T goes to BLAS syrk: half the work and an exactly symmetric result
            XS = X * np.sqrt(self._variances)
            return XS @ XS.T
        return rows_dot(X * self._variances, X2.T)  # row by row: a point's k does not depend on the others

    def K_diag(self, X):
        X = _as_inputs(X, self.input_dim)
        return np.einsum("nq,q->n", X * X, self._variances)

    def _pack(self, g):
        return g if self.ard else float(np.sum(g))

    def grad_params(self, dL_dK, X, X2=None):
        G, X, X2 = self._grad_inputs(dL_dK, X, X2)
        X2 = X if X2 is None else X2
        # d/dv_q sum_ij G_ij x_iq x2_jq = sum_i x_iq (G X2)_iq
        return {"variances": self._pack(np.einsum("iq,iq->q", X, G @ X2))}

    def grad_params_diag(self, dL_dKdiag, X):
        g, X = self._diag_inputs(dL_dKdiag, X)
        return {"variances": self._pack(g @ (X * X))}

    def grad_X(self, dL_dK, X, X2=None):
        G, X, X2 = self._grad_inputs(dL_dK, X, X2)
        v = self._variances
        if X2 is None:
            return (G @ X + G.T @ X) * v
        return rows_dot(G, X2) * v

    def grad_X_diag(self, dL_dKdiag, X):
        g, X = self._diag_inputs(dL_dKdiag, X)
        return 2.0 * g[:, None] * X * self._variances

    def _dK_dX(self, X, X2, dims):
        # dk(x, x2)/dx_q = v_q x2_q, the same for every x
        row = (X2[:, dims] * self._variances[dims]).T
        return np.broadcast_to(row, (X.shape[0],) + row.shape).copy()

    def _d2K_dXdX2_diag(self, X, dims):
        return np.broadcast_to(np.diag(self._variances[dims]), (X.shape[0], dims.size, dims.size)).copy()


class MLP(Kernel):
    """Multi-layer perceptron (arc-sine) kernel, Lawrence 2005 section 7.1.3 / Williams 1998.

    k = variance * (2/pi) * asin( (w x.x' + b) / sqrt((w x.x + b + 1)(w x'.x' + b + 1)) )
    with w = weight_variance, b = bias_variance (scalars).
    """

    name = "mlp"

    def __init__(self, input_dim: int, variance=1.0, weight_variance=1.0, bias_variance=1.0):
        super().__init__(input_dim, variance=variance, weight_variance=weight_variance, bias_variance=bias_variance)

    @property
    def _shapes(self):
        return {"variance": (), "weight_variance": (), "bias_variance": ()}

    def _parts(self, X, X2):
        """Shared intermediates: inner products, normalisers and the asin argument s."""
        w, b = self._scalar("weight_variance"), self._scalar("bias_variance")
        sym = X2 is None
        X2 = X if sym else X2
        xx = np.einsum("ij,ij->i", X, X)
        x2x2 = xx if sym else np.einsum("ij,ij->i", X2, X2)
        d1 = w * xx + b + 1.0  # (N,)
        d2 = w * x2x2 + b + 1.0  # (N2,)
        inner = X @ X2.T if sym else rows_dot(X, X2.T)  # (N, N2); a cross term row by row
        rs = np.outer(1.0 / np.sqrt(d1), 1.0 / np.sqrt(d2))  # (N, N2)
        s = w * inner
        s += b
        s *= rs
        np.clip(s, -1.0, 1.0, out=s)
        return w, b, X2, xx, x2x2, d1, d2, inner, rs, s

    def K(self, X, X2=None):
        X, X2 = self._inputs(X, X2)
        s = self._parts(X, X2)[-1]
        return (self._scalar("variance") * 2.0 / np.pi) * np.arcsin(s)

    def K_diag(self, X):
        X = _as_inputs(X, self.input_dim)
        w, b = self._scalar("weight_variance"), self._scalar("bias_variance")
        u = w * np.einsum("ij,ij->i", X, X) + b
        return (self._scalar("variance") * 2.0 / np.pi) * np.arcsin(u / (u + 1.0))

    def _dL_ds(self, G, s):
        """G * dk/ds, (N, N2)."""
        return G * ((self._scalar("variance") * 2.0 / np.pi) / np.sqrt(1.0 - s * s))

    def grad_params(self, dL_dK, X, X2=None):
        G, X, X2 = self._grad_inputs(dL_dK, X, X2)
        w, b, X2, xx, x2x2, d1, d2, inner, rs, s = self._parts(X, X2)
        A = self._dL_ds(G, s)
        As = A * s
        As_row, As_col = As.sum(axis=1), As.sum(axis=0)  # (N,), (N2,)
        Ars = A * rs
        # ds/dw = x.x' rs - s/2 (x.x/d1 + x'.x'/d2); ds/db = rs - s/2 (1/d1 + 1/d2)
        g_w = np.vdot(Ars, inner) - 0.5 * (As_row @ (xx / d1) + As_col @ (x2x2 / d2))
        g_b = Ars.sum() - 0.5 * (As_row @ (1.0 / d1) + As_col @ (1.0 / d2))
        g_var = np.vdot(G, np.arcsin(s)) * 2.0 / np.pi
        return {"variance": float(g_var), "weight_variance": float(g_w), "bias_variance": float(g_b)}

    def grad_params_diag(self, dL_dKdiag, X):
        g, X = self._diag_inputs(dL_dKdiag, X)
        w, b = self._scalar("weight_variance"), self._scalar("bias_variance")
        xx = np.einsum("ij,ij->i", X, X)
        u = w * xx + b
        s = u / (u + 1.0)
        c = self._scalar("variance") * 2.0 / np.pi
        dk_du = c / np.sqrt(1.0 - s * s) / (u + 1.0) ** 2
        return {
            "variance": float(g @ np.arcsin(s)) * 2.0 / np.pi,
            "weight_variance": float(g @ (dk_du * xx)),
            "bias_variance": float(g @ dk_du),
        }

    def grad_X(self, dL_dK, X, X2=None):
        G, X, X2in = self._grad_inputs(dL_dK, X, X2)
        w, b, X2, xx, x2x2, d1, d2, inner, rs, s = self._parts(X, X2in)
        A = self._dL_ds(G, s)
        Ars = A * rs
        As = A * s
        # first slot: ds/dx_i = w x'_j rs - s w x_i / d1_i
        grad = w * (Ars @ X2 if X2in is None else rows_dot(Ars, X2)) - (w * As.sum(axis=1) / d1)[:, None] * X
        if X2in is None:
            # second slot: ds/dx'_j = w x_i rs - s w x'_j / d2_j, here x' = x
            grad += w * (Ars.T @ X) - (w * As.sum(axis=0) / d2)[:, None] * X
        return grad

    def grad_X_diag(self, dL_dKdiag, X):
        g, X = self._diag_inputs(dL_dKdiag, X)
        w, b = self._scalar("weight_variance"), self._scalar("bias_variance")
        u = w * np.einsum("ij,ij->i", X, X) + b
        s = u / (u + 1.0)
        dk_du = (self._scalar("variance") * 2.0 / np.pi) / np.sqrt(1.0 - s * s) / (u + 1.0) ** 2
        return (2.0 * w * g * dk_du)[:, None] * X

    def _dK_dX(self, X, X2, dims):
        w, b, X2, xx, x2x2, d1, d2, inner, rs, s = self._parts(X, X2)
        dk_ds = (self._scalar("variance") * 2.0 / np.pi) / np.sqrt(1.0 - s * s)  # (N, N2)
        # ds/dx_q = w x2_q rs - s w x_q / d1
        out = np.empty((X.shape[0], dims.size, X2.shape[0]))
        for a, q in enumerate(dims):
            out[:, a, :] = w * (rs * X2[:, q] - s * (X[:, q] / d1)[:, None])
            out[:, a, :] *= dk_ds
        return out

    def _d2K_dXdX2_diag(self, X, dims):
        # at x' = x (d = w x.x + b + 1, s = (d - 1) / d, 1 - s^2 = (2d - 1) / d^2):
        # d2s/dx dx' = w/d I - w^2 (d + 1)/d^3 x x^T and ds/dx = ds/dx' = w x / d^2, so
        # d2k/dx dx' = c (d2s/dx dx' / sqrt(1 - s^2) + s (1 - s^2)^(-3/2) ds/dx ds/dx'^T)
        w, b = self._scalar("weight_variance"), self._scalar("bias_variance")
        c = self._scalar("variance") * 2.0 / np.pi
        d = w * np.einsum("ij,ij->i", X, X) + b + 1.0  # (N,)
        s = (d - 1.0) / d
        one_minus = (2.0 * d - 1.0) / d**2
        Xd = X[:, dims]
        outer = Xd[:, :, None] * Xd[:, None, :]  # (N, q, q)
        root = np.sqrt(one_minus)
        coef_outer = c * (-w**2 * (d + 1.0) / d**3 / root + s / (one_minus * root) * w**2 / d**4)
        out = outer * coef_outer[:, None, None]
        out += (c * w / d / root)[:, None, None] * np.eye(dims.size)
        return out


# ----------------------------------------------------------------------------
# constant and noise kernels


class _ConstantVariance(Kernel):
    """Kernels with one scalar ``variance`` whose diagonal does not depend on x (Bias, White)."""

    def __init__(self, input_dim: int, variance=1.0):
        super().__init__(input_dim, variance=variance)

    @property
    def _shapes(self):
        return {"variance": ()}

    def K_diag(self, X):
        X = _as_inputs(X, self.input_dim)
        return np.full(X.shape[0], self._scalar("variance"))

    def grad_params_diag(self, dL_dKdiag, X):
        g, X = self._diag_inputs(dL_dKdiag, X)
        return {"variance": float(np.sum(g))}

    def grad_X(self, dL_dK, X, X2=None):
        G, X, X2 = self._grad_inputs(dL_dK, X, X2)
        return np.zeros_like(X)

    def grad_X_diag(self, dL_dKdiag, X):
        g, X = self._diag_inputs(dL_dKdiag, X)
        return np.zeros_like(X)

    def _dK_dX(self, X, X2, dims):
        return np.zeros((X.shape[0], dims.size, X2.shape[0]))

    def _d2K_dXdX2_diag(self, X, dims):
        return np.zeros((X.shape[0], dims.size, dims.size))


class Bias(_ConstantVariance):
    """Constant kernel: k(x, x') = variance."""

    name = "bias"

    def K(self, X, X2=None):
        X, X2 = self._inputs(X, X2)
        n2 = X.shape[0] if X2 is None else X2.shape[0]
        return np.full((X.shape[0], n2), self._scalar("variance"))

    def grad_params(self, dL_dK, X, X2=None):
        G, X, X2 = self._grad_inputs(dL_dK, X, X2)
        return {"variance": float(np.sum(G))}


class White(_ConstantVariance):
    """White noise: K(X) = variance * I; K(X, X2) = 0.

    The cross-covariance K(X, X2) is zero whenever X2 is passed, even if X2
    holds the same points as X (or is the same array): noise is independent
    between the training set and any second set.  Pass X2=None for the
    noisy K(X).
    """

    name = "white"

    def K(self, X, X2=None):
        X, X2 = self._inputs(X, X2)
        if X2 is None:
            return self._scalar("variance") * np.eye(X.shape[0])
        return np.zeros((X.shape[0], X2.shape[0]))

    def grad_params(self, dL_dK, X, X2=None):
        G, X, X2 = self._grad_inputs(dL_dK, X, X2)
        return {"variance": float(np.trace(G)) if X2 is None else 0.0}


# ----------------------------------------------------------------------------
# sums


class Sum(Kernel):
    """Sum of kernels over the same inputs: K = sum_p K_p.

    Nested sums are flattened and every part is copied, so the sum owns its
    parts.  Parts get unique names from their kernel names ("rbf", "bias",
    "rbf_1", ...), listed in ``part_names``; parameters are keyed
    "part.param" (e.g. "rbf.lengthscales").
    """

    name = "sum"

    def __init__(self, parts):
        flat = []
        for p in parts:
            if not isinstance(p, Kernel):
                raise ConfigurationError(f"Expected Kernel parts, got {type(p).__name__} instead.")
            flat.extend(p.parts if isinstance(p, Sum) else [p])
        if not flat:
            raise ConfigurationError("Expected at least one kernel in a Sum, got none instead.")
        dims = {p.input_dim for p in flat}
        if len(dims) != 1:
            raise ShapeError(f"Expected kernels with the same input_dim, got {[p.input_dim for p in flat]} instead.")
        self.parts = [p.copy() for p in flat]
        names, counts = [], {}
        for p in self.parts:
            n = counts.get(p.name, 0)
            counts[p.name] = n + 1
            names.append(p.name if n == 0 else f"{p.name}_{n}")
        self.part_names = tuple(names)
        self.input_dim = flat[0].input_dim
        self._values = {}

    @property
    def _shapes(self):
        return {f"{n}.{k}": s for n, p in zip(self.part_names, self.parts) for k, s in p._shapes.items()}

    @property
    def params(self):
        return {f"{n}.{k}": v for n, p in zip(self.part_names, self.parts) for k, v in p.params.items()}

    def with_params(self, values: dict) -> "Sum":
        by_part = self._by_part(values)
        k = _copy.copy(self)
        k.parts = [p.with_params(by_part[n])
                   for n, p in zip(self.part_names, self.parts)]
        return k

    def _by_part(self, values: dict) -> dict:
        """Part name -> {parameter name within the part: value}; unknown names refused."""
        shapes = self._shapes
        by_part = {n: {} for n in self.part_names}
        for key, value in values.items():
            if key not in shapes:
                raise ConfigurationError(f"Expected a parameter of the sum among {list(shapes)}, got {key!r} instead.")
            part, _, pname = key.partition(".")
            by_part[part][pname] = value
        return by_part

    def set_params(self, **values):
        by_part = self._by_part(values)
        # validate on copies first so a rejected value changes nothing
        trial = {n: p.copy() for n, p in zip(self.part_names, self.parts) if by_part[n]}
        for n, k in trial.items():
            k.set_params(**by_part[n])
        self.parts = [trial.get(n, p) for n, p in zip(self.part_names, self.parts)]

    def to_spec(self):
        return {"type": "sum", "input_dim": self.input_dim, "parts": [p.to_spec() for p in self.parts]}

    def __repr__(self):
        return " + ".join(repr(p) for p in self.parts)

    @property
    def relevance(self):
        """(Q,) sum of the parts' relevances."""
        return np.sum([p.relevance for p in self.parts], axis=0)

    def _merge(self, dicts):
        return {f"{n}.{k}": v for n, d in zip(self.part_names, dicts) for k, v in d.items()}

    def K(self, X, X2=None):
        X, X2 = self._inputs(X, X2)
        out = self.parts[0].K(X, X2)
        for p in self.parts[1:]:
            out += p.K(X, X2)
        return out

    def K_diag(self, X):
        X = _as_inputs(X, self.input_dim)
        return np.sum([p.K_diag(X) for p in self.parts], axis=0)

    def grad_params_and_X(self, dL_dK, X, X2=None):
        G, X, X2 = self._grad_inputs(dL_dK, X, X2)
        results = [p.grad_params_and_X(G, X, X2) for p in self.parts]
        return self._merge([r[0] for r in results]), np.sum([r[1] for r in results], axis=0)

    def grad_params(self, dL_dK, X, X2=None):
        G, X, X2 = self._grad_inputs(dL_dK, X, X2)
        return self._merge([p.grad_params(G, X, X2) for p in self.parts])

    def grad_params_diag(self, dL_dKdiag, X):
        g, X = self._diag_inputs(dL_dKdiag, X)
        return self._merge([p.grad_params_diag(g, X) for p in self.parts])

    def grad_X(self, dL_dK, X, X2=None):
        G, X, X2 = self._grad_inputs(dL_dK, X, X2)
        return np.sum([p.grad_X(G, X, X2) for p in self.parts], axis=0)

    def grad_X_diag(self, dL_dKdiag, X):
        g, X = self._diag_inputs(dL_dKdiag, X)
        return np.sum([p.grad_X_diag(g, X) for p in self.parts], axis=0)

    def _dK_dX(self, X, X2, dims):
        out = self.parts[0]._dK_dX(X, X2, dims)
        for p in self.parts[1:]:
            out += p._dK_dX(X, X2, dims)
        return out

    def _d2K_dXdX2_diag(self, X, dims):
        out = self.parts[0]._d2K_dXdX2_diag(X, dims)
        for p in self.parts[1:]:
            out += p._d2K_dXdX2_diag(X, dims)
        return out


# ----------------------------------------------------------------------------
# (de)serialisation

_KERNEL_TYPES = {cls.name: cls for cls in (RBF, Linear, Matern32, Matern52, MLP, Bias, White)}


def kernel_from_spec(spec: dict) -> Kernel:
    """Rebuild a kernel from ``Kernel.to_spec()`` output (plain dicts, lists and numbers)."""
    try:
        kind = spec["type"]
        input_dim = int(spec["input_dim"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigurationError(f"Expected a kernel spec with 'type' and 'input_dim', got {spec!r} instead.") from exc
    if kind == "sum":
        return Sum([kernel_from_spec(p) for p in spec["parts"]])
    if kind not in _KERNEL_TYPES:
        raise ConfigurationError(f"Expected a kernel type among {sorted(_KERNEL_TYPES) + ['sum']}, got {kind!r} instead.")
    settings = {k: v for k, v in spec.items() if k not in ("type", "input_dim", "params")}
    kernel = _KERNEL_TYPES[kind](input_dim, **settings)
    kernel.set_params(**spec.get("params", {}))
    return kernel


def warmup() -> None:
    """Compile the numba loops (or load them from the on-disk cache) on tiny inputs.

    Call it once in the background at start-up so the first kernel
    evaluation does not wait for the JIT.
    """
    _loops.warmup()
