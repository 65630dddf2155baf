"""The Bayesian GP-LVM (Titsias & Lawrence 2010).

q(X) = prod_n N(x_n | mu_n, diag S_n), the collapsed bound of eq. 14 with the
psi statistics of engine.psi, minus KL(q(X) || N(0, I)).  Parameters:
``X_mean`` (N, Q), ``X_variance`` (N, Q) > 0, ``Z`` (M, Q), the kernel's
parameters and ``noise_variance`` = 1 / beta.

Projection of new rows (section 4; driven by :func:`engine.infer.infer_latent`).
For row n, q(x*_n) = N(mu*, diag S*) maximises the augmented bound with only
that row added, minus the training bound:

    F_n(mu*, S*) = F_O(X, x*_n) - F_O(X) - KL(q(x*_n) || N(0, I)),

where F_O is the collapsed bound (eq. 14) restricted to the columns O_n that
the row observes (the other columns contribute the same to both terms).  The
difference approximates log p(y*_O | Y) (eq. 20) and is reported as
``log_density``.  With L = chol(Kmm), L_B = chol(I + beta L^-1 Psi2 L^-T) of
the training data and Lw = L L_B, the new point's statistics enter as
v = Lw^-1 psi1* and K = Lw^-1 Psi2* Lw^-T, B = I + beta K, E = B^-1, and

    F_O(X, x*) - F_O(X) = |O|/2 log(beta / 2 pi) - |O|/2 log|B| - beta/2 s
                          + beta^2/2 (tr(E Pi) - tr(G))
                          - beta |O|/2 (psi0* - tr(Kmm^-1 Psi2*)),

with P = Lw^-1 Psi1^T Y (training, M x D), G = P diag(o) P^T, h = P (o * y*),
s = sum_O y*^2 and Pi = G + h v^T + v h^T + s v v^T (o: the row's observed
mask).  G, h and s are fixed per row; each evaluation needs one batched
M x M Cholesky and inverse per row and the per-point psi statistics of the
new points (:class:`engine.psi.point.PointPsi`).  A model trained with
missing values has its bound summed over groups of columns with the same
observed training rows; so has the difference, one term per group.
"""
from __future__ import annotations

import numpy as np

from .. import psi
from ..bound import gaussian_kl
from ..linalg import lower_inverse, rows_dot, sandwich, spd_inverses, spd_solves, tri_solve
from ..missing import observation_groups
from ..psi.point import PointPsi
from ..transforms import POSITIVE, ParameterSpec
from .base import initial_X
from .collapsed import CollapsedModel, collapsed_cholesky, initial_Z
from .projection import QxProjection

LOG_2PI = np.log(2.0 * np.pi)


class BayesianGPLVM(CollapsedModel):
    """Bayesian GP-LVM; ``BayesianGPLVM(Y, latent_dim=10, num_inducing=50)`` is the paper's set-up.

    Defaults as in the paper: means from PCA, variances 0.5, Z a random subset
    of the initial means, an ARD RBF kernel over ``latent_dim`` inputs.
    ``likelihood``: "gaussian" (this collapsed model), or "bernoulli" / "poisson"
    (binary data, counts): then the model is built with an explicit q(u)
    instead (:mod:`engine.models.bayesian_nongaussian`), still an instance of
    this class.
    ``backend`` (e.g. ``engine.DaskBackend(client)``): where the psi statistics'
    row sums and their gradients are computed (:mod:`engine.backends`; with
    missing outputs only for kernels with weighted psi sums, RBF); None: here.
    """

    objective_name = "ELBO"

    _row_params = ("X_mean", "X_variance")

    def __init__(self, Y, latent_dim, num_inducing=30, kernel=None, init="pca", seed=0, X=None,
                 X_variance=0.5, Z=None, noise_variance=None, observed=None, backend=None, likelihood="gaussian"):
        super().__init__(Y, latent_dim, kernel, noise_variance=noise_variance, init=init, observed=observed)
        psi.check_supported(self._kernel)
        X0 = initial_X(self.Y, self.latent_dim, init, seed, X)
        S0 = np.broadcast_to(np.asarray(X_variance, dtype=float), X0.shape).copy()
        Z0 = initial_Z(X0, num_inducing, seed, Z)
        self.num_inducing = Z0.shape[0]
        specs = [self._free_spec("X_mean", X0.shape), ParameterSpec("X_variance", X0.shape, POSITIVE),
                 self._free_spec("Z", Z0.shape), *self._kernel_specs(self._kernel), self._noise_spec()]
        values = {"X_mean": X0, "X_variance": S0, "Z": Z0,
                  "noise_variance": self._initial_noise_variance, **self._kernel.params}
        self._build_packer(specs, values)
        self._attach_backend(backend)

    def _psi_forward(self, kern, values):
        return psi.compute(kern, values["Z"], values["X_mean"], values["X_variance"])

    def _psi_backward(self, kern, values, dpsi0, dPsi1, dPsi2):
        g = psi.gradients(kern, values["Z"], values["X_mean"], values["X_variance"], dpsi0, dPsi1, dPsi2)
        return {**g.params, "X_mean": g.mu, "X_variance": g.S, "Z": g.Z}

    def _grouped_psi(self, kern) -> bool:
        """The missing-data groups' psi statistics come from one weighted pass over the rows
        (:func:`engine.psi.compute_grouped`) when the psi hooks are this class's own (a subclass
        overriding them takes the generic path) and the kernel is supported."""
        cls = type(self)
        return (cls._psi_forward is BayesianGPLVM._psi_forward and cls._psi_backward is BayesianGPLVM._psi_backward
                and psi.supports_grouped(kern))

    def _latent_term(self, values):
        mu, S = values["X_mean"], values["X_variance"]
        return -gaussian_kl(mu, S), {"X_mean": -mu, "X_variance": -0.5 * (1.0 - 1.0 / S)}

    # ---- names used in the paper ------------------------------------------------------
    def kl(self) -> float:
        """KL(q(X) || N(0, I)) at the current parameters, nats."""
        values = self.parameters
        return gaussian_kl(values["X_mean"], values["X_variance"])

    def elbo(self) -> float:
        """The bound F (eq. 14 minus the KL), nats, with all constants."""
        return self.objective()

    def elbo_gradients(self) -> dict:
        """Gradients of the ELBO w.r.t. the named, constrained parameters."""
        return self.objective_gradients()


    # ---- projection of new rows (module docstring) -------------------------------------
    def projection_problem(self, Yc, mask):
        """The rows' bound differences minus their KL (:class:`~engine.models.projection.QxProjection`)
        for centred new rows Yc (n, D) (0 where unobserved) and their mask (n, D)."""
        values = self.parameters
        return QxProjection([CollapsedRowTerm(self, values, Yc, mask)], values["X_mean"], values["X_variance"])


class _ColumnGroup:
    """The training side of the bound on one group of columns (all columns when Y was complete)."""

    def __init__(self, kern, Z, Kmm, jitter, beta, mu, S, Ytrain, cols, rows, mask, Yo, owner):
        train = psi.compute(kern, Z, mu[rows], S[rows])
        L, LB = collapsed_cholesky(Kmm, jitter, beta, train.Psi2, owner)
        Li = lower_inverse(L)
        self.Kinv = Li.T @ Li
        self.Lwi = tri_solve(LB, Li)  # (L L_B)^-1
        D = Ytrain.shape[1]
        P = np.zeros((Z.shape[0], D))
        P[:, cols] = self.Lwi @ (train.Psi1.T @ Ytrain[np.ix_(rows, cols)])  # (M, D), 0 off the group
        colmask = np.zeros(D, bool)
        colmask[cols] = True
        mask_f = (mask & colmask).astype(float)
        self.Dn = mask_f.sum(axis=1)
        self.P, self.mask_f = P, mask_f
        M = P.shape[0]
        self.use_R = len(cols) < M  # G_n = R_n R_n^T with R_n = P diag(o_n), (M, |cols|)
        self.cols = np.asarray(cols)
        if self.use_R:
            self.P_cols = np.ascontiguousarray(P[:, self.cols])
            self.mask_cols = np.ascontiguousarray(mask_f[:, self.cols])
        else:
            self.G = np.matmul(P[None, :, :] * mask_f[:, None, :], P.T)
        # per new row, row by row (engine.linalg.rows_dot): a row's terms never depend on the other rows
        self.trG = np.einsum("nd,d->n", mask_f, np.sum(P * P, axis=0))
        Yg = Yo * mask_f
        self.s = np.sum(Yg * Yg, axis=1)
        self.h = rows_dot(Yg, P.T)


class CollapsedRowTerm:
    """F_O(X, x*_n) - F_O(X) of new rows under a collapsed model's fixed q(X), Z, kernel and noise.

    A data term of :class:`~engine.models.projection.QxProjection` (KL not
    included); see the module docstring.  ``model``: a Bayesian GP-LVM (its
    missing-data column groups each give one term); ``values``: its parameters;
    Yc (n, D) the centred new rows, 0 where ``mask`` (n, D) is False.
    """

    def __init__(self, model, values, Yc, mask):
        kern = model.kernel_at(values)
        Z = np.asarray(values["Z"], dtype=float)
        self.beta = beta = 1.0 / float(values["noise_variance"])
        mu, S = values["X_mean"], values["X_variance"]
        Kmm = kern.K(Z)
        train_mask = model.observed
        N, D = model.Y.shape
        if train_mask is None:
            parts = [(np.arange(D), np.arange(N))]
        else:
            parts = [(g.cols, np.flatnonzero(g.rows)) for g in observation_groups(np.asarray(train_mask, bool))]
        Yo = Yc * mask
        owner = type(model).__name__
        self.groups = [_ColumnGroup(kern, Z, Kmm, model.jitter, beta, mu, S, model.Y, cols, rows, mask, Yo, owner)
                       for cols, rows in parts]
        self.point_psi = PointPsi(kern, Z)
        self.M = Z.shape[0]

    def value_and_grad(self, rows, mu, S, with_grad=True):
        beta = self.beta
        psi0, Psi1, Psi2 = self.point_psi.forward(mu, S)
        value = np.zeros(mu.shape[0])
        dpsi0 = np.zeros(mu.shape[0])
        dPsi1 = np.zeros_like(Psi1)
        dPsi2 = np.zeros_like(Psi2) if with_grad else None
        for g in self.groups:
            Dn = g.Dn[rows]
            if not np.any(Dn):
                continue
            v_, dp1, dp2 = self._group_terms(g, rows, psi0, Psi1, Psi2, with_grad)
            value += v_
            if with_grad:
                dpsi0 += -0.5 * beta * Dn
                dPsi1 += dp1
                dPsi2 += dp2
        if not with_grad:
            return value, None, None
        dmu, dS = self.point_psi.backward(dpsi0, dPsi1, 0.5 * (dPsi2 + dPsi2.transpose(0, 2, 1)))
        return value, dmu, dS

    def _group_terms(self, g, rows, psi0, Psi1, Psi2, with_grad):
        """One column group's F_O(X, x*) - F_O(X) (r,), and its gradients w.r.t. Psi1 and Psi2."""
        M, beta = self.M, self.beta
        Dn, s, h = g.Dn[rows], g.s[rows], g.h[rows]
        v = rows_dot(Psi1, g.Lwi.T)  # (r, M)
        B = beta * sandwich(g.Lwi, Psi2)
        B[:, np.arange(M), np.arange(M)] += 1.0
        if g.use_R:
            R = g.P_cols[None, :, :] * g.mask_cols[rows][:, None, :]  # (r, M, |cols|)
        if with_grad or not g.use_R:
            logdet, E = spd_inverses(B)
            Ev = np.einsum("nmk,nk->nm", E, v)
            Eh = np.einsum("nmk,nk->nm", E, h)
            if g.use_R:
                ER = np.matmul(E, R)
                trEG = np.einsum("nmd,nmd->n", R, ER)
            else:
                G = g.G[rows]
                trEG = np.einsum("nmk,nmk->n", E, G)
        else:  # the value alone: solves instead of the inverse
            logdet, sol = spd_solves(B, np.concatenate([R, v[:, :, None], h[:, :, None]], axis=2))
            ER, Ev, Eh = sol[:, :, :-2], sol[:, :, -2], sol[:, :, -1]
            trEG = np.einsum("nmd,nmd->n", R, ER)
        data = trEG - g.trG[rows] + 2.0 * np.einsum("nm,nm->n", v, Eh) + s * np.einsum("nm,nm->n", v, Ev)
        trKP = np.einsum("nmk,mk->n", Psi2, g.Kinv)
        value = (0.5 * Dn * (np.log(beta) - LOG_2PI) - 0.5 * Dn * logdet - 0.5 * beta * s
                 + 0.5 * beta**2 * data - 0.5 * beta * Dn * (psi0 - trKP))
        if not with_grad:
            return value, None, None
        # d/dK = -(beta |O| / 2) E - (beta^3 / 2) E Pi E
        if g.use_R:
            EPE = np.matmul(ER, ER.transpose(0, 2, 1))
        else:
            EPE = np.matmul(np.matmul(E, G), E)
        outer = Eh[:, :, None] * Ev[:, None, :]
        EPE += outer + outer.transpose(0, 2, 1) + s[:, None, None] * Ev[:, :, None] * Ev[:, None, :]
        dK = (-0.5 * beta * Dn)[:, None, None] * E - 0.5 * beta**3 * EPE
        dPsi2 = sandwich(g.Lwi.T, dK) + (0.5 * beta * Dn)[:, None, None] * g.Kinv
        dPsi1 = rows_dot(beta**2 * (Eh + s[:, None] * Ev), g.Lwi)
        return value, dPsi1, dPsi2
