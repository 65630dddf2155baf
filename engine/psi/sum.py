"""Psi statistics of a sum of kernels k = sum_a k_a.

psi0 and Psi1 add.  Psi2 of the sum is

    Psi2 = sum_a Psi2_a + sum_{a != b} sum_n <k_a(z_m, x_n) k_b(x_n, z_m')>,

and the cross expectation factorises, <k_a k_b> = Psi1_a[n, m] Psi1_b[n, m'],
whenever one of the two kernels does not depend on x (Bias: a constant) or
vanishes off the data (White: k(x, z) = 0 for the inducing inputs z).  Then

    Psi2 = sum_a Psi2_a + sum_{a != b} Psi1_a^T Psi1_b        (exact).

Other pairs (RBF x Linear, RBF x RBF, ...) are not Psi1-separable and are
refused by :func:`cross_term_ok`.

Gradients: the cross terms only involve Psi1, so each part's gradient
function receives the effective Psi1 cotangent

    dL_dPsi1_a + sum_{b != a} Psi1_b (dL_dPsi2 + dL_dPsi2^T)

which carries, e.g., the Bias x RBF cross term into the RBF parameters, Z,
mu and S and into the bias variance.
"""
from __future__ import annotations

import numpy as np


def cross_term_ok(family_a, family_b) -> bool:
    """Whether <k_a k_b> = Psi1_a^T Psi1_b exactly (one of them is Bias or White)."""
    return getattr(family_a, "CROSS", None) is not None or getattr(family_b, "CROSS", None) is not None


def _args(family, params):
    return [params[name] for name in family.PARAMS]


def psi_stats(parts, Z, mu, S):
    """(psi0, Psi1 (N, M), Psi2 (M, M)) of a sum.

    parts: list of (family, params) with ``family`` a module such as
    :mod:`engine.psi.rbf` and ``params`` a dict holding ``family.PARAMS``.
    """
    psi0 = 0.0
    Psi1s = []
    Psi2 = None
    for family, params in parts:
        p0, P1, P2 = family.psi_stats(*_args(family, params), Z, mu, S)
        psi0 += p0
        Psi1s.append(P1)
        Psi2 = P2.copy() if Psi2 is None else Psi2 + P2
    Psi1 = Psi1s[0].copy()
    for P1 in Psi1s[1:]:
        Psi1 += P1
    for a in range(len(parts)):
        for b in range(a + 1, len(parts)):
            cross = Psi1s[a].T @ Psi1s[b]
            Psi2 += cross + cross.T
    return float(psi0), Psi1, Psi2


def psi_gradients(dL_dpsi0, dL_dPsi1, dL_dPsi2, parts, Z, mu, S):
    """Per-part gradient dicts (each as returned by ``family.psi_gradients``), in order of ``parts``."""
    G1 = np.asarray(dL_dPsi1, dtype=np.float64)
    G2 = np.asarray(dL_dPsi2, dtype=np.float64)
    G2pT = G2 + G2.T
    Psi1s = [family.psi1(*_args(family, params), Z, mu, S) for family, params in parts]
    out = []
    for a, (family, params) in enumerate(parts):
        G1a = G1
        for b, P1 in enumerate(Psi1s):
            if b != a and np.any(P1):
                G1a = G1a + P1 @ G2pT
        out.append(family.psi_gradients(dL_dpsi0, G1a, G2, *_args(family, params), Z, mu, S))
    return out
