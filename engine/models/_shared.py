"""Helpers shared by the models built from several collapsed terms (GPDS, MRD).

- :func:`static_bayesian` freezes a trained q(X) = prod_n N(mu_n, diag S_n)
  with one kernel, Z and noise into a plain :class:`BayesianGPLVM`, so that
  prediction with uncertain inputs and the projection of new rows
  (:mod:`engine.infer`) are the Bayesian GP-LVM's own code, not copies.
- :func:`view_forward` / :func:`view_backward`: one collapsed data term
  (Titsias & Lawrence 2010, eq. 14 without the KL) of outputs Y under q(X),
  and its gradients, as :class:`engine.models.collapsed.CollapsedModel`
  evaluates it.
"""
from __future__ import annotations

import json

import numpy as np

from .. import psi
from ..bound import collapsed_bound
from ..errors import ShapeError
from ..kernels import kernel_from_spec
from ..validation import real_array
from .bayesian import BayesianGPLVM
from .collapsed import add_grads


def static_bayesian(Y, kernel, mu, S, Z, noise_variance, jitter):
    """A :class:`BayesianGPLVM` of Y (N, D, uncentred) at the given q(X), Z, kernel and noise.

    ``jitter`` is the owner's fixed jitter, so the returned model's bound and
    predictions use the same Kmm factorisation as the owner's.
    """
    model = BayesianGPLVM(Y, mu.shape[1], num_inducing=Z.shape[0], kernel=kernel, X=mu,
                          X_variance=np.maximum(S, 1e-300), Z=Z, noise_variance=noise_variance)
    model.jitter = float(jitter)
    return model


def view_forward(Y, kern, Z, mu, S, beta, jitter):
    """(psi statistics, CollapsedBound) of the data term of centred Y (N, D) under q(X)."""
    stats = psi.compute(kern, Z, mu, S)
    bound = collapsed_bound(Y, stats.psi0, stats.Psi1, stats.Psi2, kern.K(Z), beta, jitter)
    return stats, bound


def view_backward(kern, Z, mu, S, bound) -> dict:
    """Gradients of one data term: ``X_mean``, ``X_variance``, ``Z``, ``noise_variance`` and the kernel's."""
    g = psi.gradients(kern, Z, mu, S, bound.dpsi0, bound.dPsi1, bound.dPsi2)
    dKmm_params, dKmm_Z = kern.grad_params_and_X(bound.dKmm, Z)
    grads = {"X_mean": g.mu, "X_variance": g.S, "Z": g.Z + dKmm_Z,
             "noise_variance": -bound.posterior.beta**2 * bound.dbeta}
    add_grads(grads, g.params)
    return add_grads(grads, dKmm_params)


def as_times(t, N=None, name="t") -> np.ndarray:
    """Times as a finite float (N, 1) array; ``t`` may be (N,) or (N, 1)."""
    arr = np.array(real_array(t, name), dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.shape[1] != 1 or arr.shape[0] < 1:
        raise ShapeError(f"Expected {name} of shape (n,) or (n, 1), got shape {np.shape(t)} instead.")
    if N is not None and arr.shape[0] != N:
        raise ShapeError(f"Expected one time per row of Y ({N}), got {arr.shape[0]} instead.")
    if not np.all(np.isfinite(arr)):
        raise ShapeError(f"Expected finite values in {name}, got NaN or infinite entries instead.")
    return np.ascontiguousarray(arr)


def kernel_json(kernel) -> np.ndarray:
    """A kernel as a 0-d string array (JSON of its spec), for the .npz model files."""
    return np.array(json.dumps(kernel.to_spec()))


def kernel_from_json(arr):
    """The kernel of a model file's JSON entry (its size and nesting checked before parsing)."""
    from ..model_file import spec_from_json

    return kernel_from_spec(spec_from_json(arr))
