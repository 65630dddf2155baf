"""Checks shared by the model tests: gradients of every named block, dense references."""
import numpy as np
from scipy import stats

from gradcheck import check_grad


def model_gradient_errors(model) -> dict:
    """Relative FD error of the objective's gradient w.r.t. each named, constrained parameter."""
    base = model.parameters
    grads = model.objective_gradients()
    errors = {}
    for name, value in base.items():
        def f(v, name=name):
            model.set_parameters(**{name: v})
            return model.objective()

        errors[name] = check_grad(f, np.array(value, dtype=float), grads[name])
        model.set_parameters(**{name: value})
    return errors


def exact_log_marginal(Y, K, noise_variance):
    """sum_d log N(y_d | 0, K + noise I), with scipy's dense Gaussian density."""
    cov = K + noise_variance * np.eye(K.shape[0])
    return float(sum(stats.multivariate_normal(np.zeros(K.shape[0]), cov).logpdf(Y[:, d]) for d in range(Y.shape[1])))


def titsias_sparse_bound(Y, Knn, Knm, Kmm, noise_variance):
    """Titsias (2009) collapsed bound in its dense form:
    sum_d log N(y_d | 0, Qnn + s I) - D / (2 s) tr(Knn - Qnn), Qnn = Knm Kmm^-1 Kmn."""
    Qnn = Knm @ np.linalg.solve(Kmm, Knm.T)
    Qnn = 0.5 * (Qnn + Qnn.T)
    D = Y.shape[1]
    return exact_log_marginal(Y, Qnn, noise_variance) - 0.5 * D / noise_variance * np.trace(Knn - Qnn)


def dense_psi_bound(Y, psi0, Psi1, Psi2, Kmm, beta):
    """Eq. 14 of Titsias & Lawrence (2010) with determinants and solves (no Cholesky), without KL."""
    N, D = Y.shape
    W = beta * Psi2 + Kmm
    _, logdet_W = np.linalg.slogdet(W)
    _, logdet_K = np.linalg.slogdet(Kmm)
    P = Psi1.T @ Y
    return (D * (0.5 * N * np.log(beta) - 0.5 * N * np.log(2 * np.pi) + 0.5 * logdet_K - 0.5 * logdet_W)
            - 0.5 * beta * np.sum(Y * Y) + 0.5 * beta**2 * np.trace(P.T @ np.linalg.solve(W, P))
            - 0.5 * beta * D * psi0 + 0.5 * beta * D * np.trace(np.linalg.solve(Kmm, Psi2)))


def curved_data(n=120, d=6, seed=0):
    """(n, d) outputs of a 2-D latent square through a curved linear map, plus small noise, offset by 3."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(-2, 2, size=(n, 2))
    W = rng.standard_normal((4, d))
    return np.c_[t, np.sin(t[:, :1]), t[:, 1:] ** 2] @ W + 0.1 * rng.standard_normal((n, d)) + 3.0
