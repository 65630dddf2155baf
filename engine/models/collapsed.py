"""Models built on the collapsed bound: shared evaluation and prediction.

A subclass supplies the psi statistics of its latent representation
(``_psi_forward``), their backward pass (``_psi_backward``) and the latent
term (prior or KL, ``_latent_term``).  Everything else - the bound, the noise
and Kmm gradients, predictions - is here once.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import psi
from .._threads import blas_pinned
from .._cancel import checkpoint
from ..backends.local import LocalBackend
from ..bound import CollapsedPosterior, StatsBound, collapsed_bound_stats, collapsed_factors
from ..errors import ConfigurationError, ShapeError, UnsupportedOperationError
from ..imputation import candidate_rows, check_method, mixture_moments
from ..linalg import escalate_jitter, start_jitter
from ..missing import observation_groups
from ..predictor import Predictor, PredictorGroup
from ..validation import integer, latent_points
from .base import LatentVariableModel


def add_grads(total: dict, extra: dict) -> dict:
    """total[k] += extra[k] for every key of ``extra`` (in place; returns total)."""
    for key, value in extra.items():
        total[key] = total[key] + value if key in total else value
    return total


def inducing_subset(X: np.ndarray, num_inducing: int, seed: int) -> np.ndarray:
    """Z as a random subset of the rows of X, (M, Q)."""
    N = X.shape[0]
    num_inducing = integer(num_inducing, "num_inducing", error=ShapeError)
    if num_inducing > N:
        raise ShapeError(f"Expected at most N={N} inducing points, got num_inducing={num_inducing} instead; "
                         "use fewer inducing points.")
    rng = np.random.default_rng(seed)
    return X[np.sort(rng.choice(N, size=num_inducing, replace=False))].copy()


def collapsed_cholesky(Kmm, jitter, beta, Psi2, owner=""):
    """(L, LB) = (chol(Kmm + jitter I), chol(I + beta L^-1 Psi2 L^-T)) of fixed statistics, the
    jitter escalated from ``jitter`` by the one policy (:func:`engine.linalg.escalate_jitter`)."""
    zeros = np.zeros((Kmm.shape[0], 1))
    eye = np.eye(Kmm.shape[0])

    def factorise(jit):
        return collapsed_factors(zeros, Psi2, Kmm + jit * eye if jit else Kmm, beta)[:2]

    scale = float(np.mean(np.diag(Kmm)))
    return escalate_jitter(factorise, jitter, scale, "inducing-point kernel matrix Kmm", owner)[0]


def initial_Z(X0: np.ndarray, num_inducing: int, seed: int, Z=None) -> np.ndarray:
    """Inducing points (M, Q): ``Z`` as given (checked: finite, Q columns), else a random subset of X0's rows."""
    if Z is None:
        return inducing_subset(X0, num_inducing, seed)
    return np.array(latent_points(Z, X0.shape[1], name="Z"), dtype=float)


class GroupBound(NamedTuple):
    """The collapsed bound of one group of columns (all columns when nothing is missing)."""

    cols: np.ndarray  # (D_g,) column indices
    bound: StatsBound


class CollapsedModel(LatentVariableModel):
    """Base of SparseGPLVM and BayesianGPLVM (Titsias & Lawrence 2010, eq. 14).

    With missing outputs (NaN in Y, or ``observed``) the bound is the sum over
    column groups of the collapsed bound on each group's observed rows
    (:mod:`engine.missing`).  For the Bayesian GP-LVM with an RBF kernel (and
    its sums with Bias and White) the groups' psi statistics are weighted sums
    from one pass over the rows (:func:`engine.psi.compute_grouped`);
    otherwise each group's come from the full sums minus its missing rows (or
    from its observed rows).
    """

    handles_missing = True
    #: Per-row parameters, sliced to evaluate the psi statistics of a subset of rows.
    _row_params = ("X_mean",)

    def _psi_forward(self, kern, values):
        """(psi0, Psi1 (N, M), Psi2 (M, M)) at the current latents."""
        raise NotImplementedError

    def _psi_backward(self, kern, values, dpsi0, dPsi1, dPsi2) -> dict:
        """Gradients through the psi statistics, keyed by parameter name."""
        raise NotImplementedError

    def _latent_term(self, values) -> tuple[float, dict]:
        """log prior of X (sparse) or -KL (Bayesian), and its gradients."""
        raise NotImplementedError

    #: Where the row sums are computed (:mod:`engine.backends`); None: here, by the model's psi hooks.
    backend = None

    def _attach_backend(self, backend) -> None:
        """Hand Y (and, with missing outputs, the column groups' row weights) to ``backend`` once.

        The backend computes the row sums of this model's latents: q(x_n) for the
        Bayesian GP-LVM, points for the sparse GP-LVM (``X_variance`` absent).
        With missing outputs it needs one weighted pass per evaluation, which the
        Bayesian GP-LVM's psi statistics offer only for some kernels
        (:func:`engine.psi.supports_grouped`); otherwise a ConfigurationError.
        None: a :class:`~engine.backends.LocalBackend` wherever a backend could be
        given (so that a DaskBackend adds the same chunks' sums in the same order),
        else the model's own psi hooks.
        """
        if backend is not None and not (callable(getattr(backend, "setup", None))
                                        and callable(getattr(backend, "forward", None))
                                        and callable(getattr(backend, "backward", None))):
            raise ConfigurationError(f"Expected backend to be an engine backend (e.g. engine.DaskBackend(client)), "
                                     f"got {type(backend).__name__} instead.")
        grouped_needed = self.observed is not None and "X_variance" in self.parameter_names
        if grouped_needed and not self._grouped_psi(self._kernel):
            if backend is not None:
                raise ConfigurationError(
                    f"Missing outputs with a backend need a kernel whose psi statistics have weighted sums "
                    f"(RBF, alone or with Bias and White); got {self._kernel!r}. Drop backend= or use an RBF "
                    "kernel.")
            self.backend = None
            return
        self.backend = LocalBackend() if backend is None else backend
        if self.observed is None:
            self.backend.setup(self.Y)
            return
        W, _ = self._group_constants()
        self.backend.setup(self.Y, weights=W)

    def _backend_grads(self, g) -> dict:
        """A backend's PsiGradients keyed by parameter name."""
        out = {**g.params, "X_mean": g.mu, "Z": g.Z}
        if g.S is not None:
            out["X_variance"] = g.S
        return out

    def _data_forward(self, kern, values):
        """Sufficient statistics of the complete data: (psi0, P = Psi1^T Y (M, D), Psi2, context)."""
        if self.backend is not None:
            psi0, P, Psi2 = self.backend.forward(kern, values["Z"], values["X_mean"], values.get("X_variance"))
            return psi0, P, Psi2, None
        psi0, Psi1, Psi2 = self._psi_forward(kern, values)
        return psi0, Psi1.T @ self.Y, Psi2, None

    def _data_backward(self, kern, values, context, dpsi0, dP, dPsi2) -> dict:
        """Gradients through the statistics of :meth:`_data_forward`."""
        if self.backend is not None:
            return self._backend_grads(self.backend.backward(kern, values["Z"], values["X_mean"],
                                                             values.get("X_variance"), dpsi0, dP, dPsi2))
        return self._psi_backward(kern, values, dpsi0, self.Y @ dP.T, dPsi2)

    def _base_jitter(self, values):
        """GPy's constant: 1e-8 of the mean diagonal of Kmm."""
        Kdiag = self.kernel_at(values).K_diag(values["Z"])
        return start_jitter(np.mean(Kdiag))

    # ---- missing outputs ----------------------------------------------------------------
    @property
    def observation_groups(self) -> list | None:
        """Column groups of the missing-data bound (:func:`engine.missing.observation_groups`), or None."""
        if self.observed is None:
            return None
        groups = self.__dict__.get("_groups")
        if groups is None:
            groups = self.__dict__["_groups"] = observation_groups(self.observed)
        return groups

    def _restrict(self, values, rows):
        """``values`` with the per-row parameters cut to ``rows``."""
        out = dict(values)
        for name in self._row_params:
            out[name] = values[name][rows]
        return out

    def _grouped_psi(self, kern) -> bool:
        """Whether the groups' psi statistics come from one weighted pass over the rows
        (:func:`engine.psi.compute_grouped`); the Bayesian GP-LVM says when (its own psi hooks,
        a supported kernel); here: never."""
        return False

    def _group_constants(self):
        """(W (N, G): 1.0 where group g observes row n, [(N_g, trYY_g)]), fixed for the model."""
        consts = self.__dict__.get("_group_consts")
        if consts is None:
            groups = self.observation_groups
            W = np.ascontiguousarray(np.stack([g.rows for g in groups], axis=1), dtype=np.float64)
            sizes = []
            for g in groups:
                Y_g = self.Y[np.ix_(g.rows, g.cols)]
                sizes.append((int(g.rows.sum()), float(np.sum(Y_g * Y_g))))
            consts = self.__dict__["_group_consts"] = (W, sizes)
        return consts

    def _group_statistics(self, kern, values):
        """Per group: (psi0_g, P_g, Psi2_g, N_g, trYY_g), and the full Psi1 (N, M) (None with a backend)."""
        if self.backend is not None:  # weighted sums over row chunks (engine.backends)
            _, sizes = self._group_constants()
            psi0, P, Psi2 = self.backend.forward(kern, values["Z"], values["X_mean"], values.get("X_variance"))
            stats = [(float(psi0[i]), P[:, g.cols], Psi2[i], n, trYY)
                     for i, (g, (n, trYY)) in enumerate(zip(self.observation_groups, sizes))]
            return stats, None
        if self._grouped_psi(kern):
            # one pass: every Psi2_n enters the sums of the groups observing row n
            W, sizes = self._group_constants()
            st = psi.compute_grouped(kern, values["Z"], values["X_mean"], values["X_variance"], W)
            P = st.Psi1.T @ self.Y  # (M, D); Y is 0 where missing, so column d sums its observed rows
            stats = [(float(st.psi0[i]), P[:, g.cols], st.Psi2[i], n, trYY)
                     for i, (g, (n, trYY)) in enumerate(zip(self.observation_groups, sizes))]
            return stats, st.Psi1
        subsets = []
        for g in self.observation_groups:
            checkpoint()
            subsets.append(self._psi_forward(kern, self._restrict(values, g.subset)) if g.subset.size else None)
        # the full pass last: the psi module keeps its last forward pass for the backward pass
        psi0, Psi1, Psi2 = self._psi_forward(kern, values)
        stats = []
        for g, sub in zip(self.observation_groups, subsets):
            s0, s2 = (0.0, np.zeros_like(Psi2)) if sub is None else (sub[0], sub[2])
            psi0_g, Psi2_g = (psi0 - s0, Psi2 - s2) if g.complement else (s0, s2)
            Y_g = self.Y[np.ix_(g.rows, g.cols)]
            stats.append((psi0_g, Psi1[g.rows].T @ Y_g, Psi2_g, int(g.rows.sum()), float(np.sum(Y_g * Y_g))))
        return stats, Psi1

    # ---- the bound ------------------------------------------------------------------------
    def _bounds(self, values):
        """(kernel, [GroupBound], context) at ``values``; one group unless outputs are missing."""
        kern = self.kernel_at(values)
        beta = 1.0 / float(values["noise_variance"])
        Kmm = kern.K(values["Z"])
        if self.observed is None:
            psi0, P, Psi2, context = self._data_forward(kern, values)
            stats = [(psi0, P, Psi2, self.num_data, self._trYY)]
            cols = [np.arange(self.output_dim)]
        else:
            stats, context = self._group_statistics(kern, values)
            cols = [g.cols for g in self.observation_groups]
        checkpoint()

        def factorise(jitter):  # every group at the same jitter: one function
            return [GroupBound(c, collapsed_bound_stats(n, len(c), trYY, psi0, P, Psi2, Kmm, beta, jitter))
                    for c, (psi0, P, Psi2, n, trYY) in zip(cols, stats)]

        groups = self._with_jitter(factorise, float(np.mean(np.diag(Kmm))), "inducing-point kernel matrix Kmm")
        checkpoint()
        return kern, groups, context

    @property
    def _trYY(self) -> float:
        trYY = self.__dict__.get("_trYY_value")
        if trYY is None:
            trYY = self.__dict__["_trYY_value"] = float(np.sum(self.Y * self.Y))
        return trYY

    def _group_backward(self, kern, values, groups, Psi1) -> dict:
        """Gradients of the summed group bounds through the psi statistics."""
        if self.backend is not None or self._grouped_psi(kern):
            W, _ = self._group_constants()
            dP = np.empty((values["Z"].shape[0], self.output_dim))
            for g, gb in zip(self.observation_groups, groups):
                dP[:, g.cols] = gb.bound.dP
            dpsi0 = np.array([gb.bound.dpsi0 for gb in groups], dtype=np.float64)
            dPsi2 = np.stack([gb.bound.dPsi2 for gb in groups])
            if self.backend is not None:
                return self._backend_grads(self.backend.backward(kern, values["Z"], values["X_mean"],
                                                                 values.get("X_variance"), dpsi0, dP, dPsi2))
            # Y is 0 where missing: row n of Y dP^T only collects the groups observing it
            grad = psi.gradients_grouped(kern, values["Z"], values["X_mean"], values["X_variance"], W,
                                         dpsi0, self.Y @ dP.T, dPsi2)
            return {**grad.params, "X_mean": grad.mu, "X_variance": grad.S, "Z": grad.Z}
        dPsi1 = np.zeros_like(Psi1)
        dpsi0_full, dPsi2_full = 0.0, np.zeros_like(groups[0].bound.dPsi2)
        for g, gb in zip(self.observation_groups, groups):
            dPsi1[g.rows] += self.Y[np.ix_(g.rows, g.cols)] @ gb.bound.dP.T
            if g.complement:
                dpsi0_full += gb.bound.dpsi0
                dPsi2_full += gb.bound.dPsi2
        grads = self._psi_backward(kern, values, dpsi0_full, dPsi1, dPsi2_full)
        for g, gb in zip(self.observation_groups, groups):
            if not g.subset.size:
                continue
            checkpoint()
            sign = -1.0 if g.complement else 1.0
            sub = self._restrict(values, g.subset)
            zero = np.zeros((g.subset.size, Psi1.shape[1]))
            part = self._psi_backward(kern, sub, sign * gb.bound.dpsi0, zero, sign * gb.bound.dPsi2)
            for name in self._row_params:
                grads[name][g.subset] += part.pop(name)
            add_grads(grads, part)
        return grads

    def _evaluate(self, values):
        kern, groups, context = self._bounds(values)
        # q(u)'s factors come with the bound: kept, so that posteriors() at these values costs no pass
        # over the rows (a fit's snapshot is taken at the point it evaluated last)
        self._evaluated = (values, [(gb.cols, gb.bound.posterior) for gb in groups])
        Z = values["Z"]
        if self.observed is None:
            b = groups[0].bound
            grads = self._data_backward(kern, values, context, b.dpsi0, b.dP, b.dPsi2)
        else:
            grads = self._group_backward(kern, values, groups, context)
        checkpoint()
        dKmm = sum(gb.bound.dKmm for gb in groups)
        dKmm_params, dKmm_Z = kern.grad_params_and_X(dKmm, Z)
        grads["Z"] = grads["Z"] + dKmm_Z
        add_grads(grads, dKmm_params)
        beta = groups[0].bound.posterior.beta
        grads["noise_variance"] = -beta**2 * sum(gb.bound.dbeta for gb in groups)
        latent_value, latent_grads = self._latent_term(values)
        add_grads(grads, latent_grads)
        return sum(gb.bound.value for gb in groups) + latent_value, grads

    # ---- prediction -----------------------------------------------------------------
    def _posteriors_at(self, values) -> list:
        evaluated = self.__dict__.get("_evaluated")
        if evaluated is not None and _same_values(evaluated[0], values):
            return evaluated[1]
        return [(gb.cols, gb.bound.posterior) for gb in self._bounds(values)[1]]

    def posteriors(self) -> list:
        """[(cols (D_g,), CollapsedPosterior)] per column group (one unless outputs are missing);
        cached until the parameters change."""
        return self._cached(self._posteriors_at)

    def posterior(self) -> CollapsedPosterior:
        """Factors of q(u) at the current parameters (models trained on complete data)."""
        groups = self.posteriors()
        if len(groups) != 1:
            raise UnsupportedOperationError(
                "With missing outputs every column group has its own posterior; use posteriors().")
        return groups[0][1]

    @blas_pinned
    def predictor(self) -> Predictor:
        """The :class:`~engine.predictor.Predictor` of q(u) per column group (paper section 4): the
        kernel, Z and each group's L, LW = L LB and alpha (cached until the parameters change).

        A model last evaluated at its current parameters (a fit's snapshot) hands over the
        factors of that evaluation; otherwise this costs one pass over the rows."""
        def build(values):
            groups = [PredictorGroup(cols, post.L, post.alpha, LW=post.LW, LB=post.LB,
                                     noise_variance=1.0 / post.beta)
                      for cols, post in self._posteriors_at(values)]
            return Predictor(self.kernel_at(values), values["Z"], groups, self.Y_mean)

        return self._cached(build, key="predictor")

    def _imputation_candidates(self, values):
        """(rows (K,), predictive mean (K, D), variance (K, D)) of the candidates of impute's mixture."""
        cand = candidate_rows(self.num_data)
        S = values.get("X_variance")
        mean, var = self.predict(values["X_mean"][cand], None if S is None else S[cand], include_noise=True)
        return cand, mean, var

    def impute(self, method: str = "mixture", rows=None):
        """(Y_filled, Y_std), each (N, D) (or (len(rows), D)), in data units.

        Observed entries are unchanged with std 0; missing ones get a
        prediction with its std, noise included (:mod:`engine.imputation`):
        ``"mixture"`` (default) the posterior mean under the other rows'
        q(x_m) weighted by how well each predicts the row's observed entries;
        ``"latent"`` the prediction at the row's own q(x_n) (its latent point
        for the sparse GP-LVM).  ``rows`` (int indices) limits the result to
        those rows.
        """
        check_method(method)
        Y = self._Y_data
        idx = np.arange(Y.shape[0]) if rows is None else np.asarray(rows, dtype=np.intp).reshape(-1)
        if idx.size and (idx.min() < 0 or idx.max() >= Y.shape[0]):
            raise ShapeError(f"Expected row indices between 0 and {Y.shape[0] - 1}.")
        Y_rows = Y[idx]
        if self.observed is None:
            return Y_rows.copy(), np.zeros_like(Y_rows)
        observed = self.observed[idx]
        mean = np.zeros(Y_rows.shape)
        var = np.zeros(Y_rows.shape)
        todo = np.flatnonzero(~observed.all(axis=1))
        if todo.size:
            if method == "latent":
                values = self.parameters
                S = values.get("X_variance")
                mean[todo], var[todo] = self.predict(values["X_mean"][idx[todo]],
                                                     None if S is None else S[idx[todo]], include_noise=True)
            else:
                mean[todo], var[todo] = self._mixture_moments(idx[todo])
        filled = np.where(observed, Y_rows, mean)
        std = np.where(observed, 0.0, np.sqrt(var))
        return filled, std

    def _mixture_moments(self, rows):
        """Mean and variance (len(rows), D) of impute's mixture for the training rows ``rows``."""
        cand, cand_mean, cand_var = self._cached(self._imputation_candidates, key="imputation")
        return mixture_moments(self._Y_data, self.observed, rows, cand, cand_mean, cand_var)


def _same_values(a: dict, b: dict) -> bool:
    """True if two parameter dicts (name -> constrained value) hold equal values."""
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
