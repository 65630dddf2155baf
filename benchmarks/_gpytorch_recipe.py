"""The GPyTorch tutorial's SVI recipe for the Bayesian GP-LVM, as a reference for ``bench_svi.py --gpytorch``.

What the GPyTorch GP-LVM tutorial (Lalchand 2021, oil flow) runs, through
GPyTorch's own classes: one sparse variational GP per output column (its own
inducing inputs Z_d (M, Q), q(u_d) with a full Cholesky factor, a shared ARD
RBF kernel with a scale), a Gaussian likelihood with one noise variance per
column, q(x_n) = N(mu_n, diag(sigma_n^2)) for every row with a N(0, I) prior,
X initialised at random (the tutorial's default), and Adam at 0.01 on
everything, 100 rows per minibatch.  The expectation over q(X) is estimated by
one reparameterised sample per iteration (no psi statistics).

Only the benchmark imports this module, and only when torch and gpytorch are
importable (they are not project dependencies; see ``benchmarks/README.md``).
"""
from __future__ import annotations

import time

import numpy as np


def import_gpytorch():
    """(torch, gpytorch) if importable (versions printed), else ``None``."""
    try:
        import gpytorch
        import torch
    except Exception as exc:  # ImportError, or a broken binary
        print(f"gpytorch not importable: skipped the GPyTorch recipe ({type(exc).__name__}: {exc})")
        return None
    print(f"torch {torch.__version__}, gpytorch {gpytorch.__version__} importable: the GPyTorch recipe runs "
          "in the same run")
    return torch, gpytorch


def fit_recipe(Y, latent_dim, num_inducing, iterations, seed, batch_size=100, learning_rate=0.01, report_every=None):
    """Fit the recipe to Y (N, D); returns (X_mean (N, Q), relevance (Q,) = 1/lengthscale^2, wall seconds).

    ``report_every``: a callable ``(iteration, X_mean, relevance)`` called every 2500 iterations and at the end.
    Torch runs on one thread (the machine's other core is left to whatever runs beside it).
    """
    import torch
    from gpytorch.distributions import MultivariateNormal
    from gpytorch.kernels import RBFKernel, ScaleKernel
    from gpytorch.likelihoods import GaussianLikelihood
    from gpytorch.means import ZeroMean
    from gpytorch.mlls import VariationalELBO
    from gpytorch.models.gplvm.bayesian_gplvm import BayesianGPLVM
    from gpytorch.models.gplvm.latent_variable import VariationalLatentVariable
    from gpytorch.priors import NormalPrior
    from gpytorch.variational import CholeskyVariationalDistribution, VariationalStrategy

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    Yt = torch.tensor(np.asarray(Y), dtype=torch.float32)
    N, D = Yt.shape
    Q, M = int(latent_dim), int(num_inducing)
    per_output = torch.Size([D])

    class RecipeGPLVM(BayesianGPLVM):
        def __init__(self):
            q_u = CholeskyVariationalDistribution(M, batch_shape=per_output)
            strategy = VariationalStrategy(self, torch.randn(D, M, Q), q_u, learn_inducing_locations=True)
            prior_mean = torch.zeros(N, Q)
            q_x = VariationalLatentVariable(N, D, Q, torch.nn.Parameter(torch.randn(N, Q)),
                                            NormalPrior(prior_mean, torch.ones_like(prior_mean)))
            super().__init__(q_x, strategy)
            self.mean_module = ZeroMean(ard_num_dims=Q)
            self.covar_module = ScaleKernel(RBFKernel(ard_num_dims=Q))

        def forward(self, X):
            return MultivariateNormal(self.mean_module(X), self.covar_module(X))

    model = RecipeGPLVM()
    likelihood = GaussianLikelihood(batch_shape=per_output)
    elbo = VariationalELBO(likelihood, model, num_data=N)
    adam = torch.optim.Adam([{"params": model.parameters()}, {"params": likelihood.parameters()}],
                            lr=learning_rate)

    def state():
        lengthscale = model.covar_module.base_kernel.lengthscale.detach().numpy().ravel()
        return model.X.q_mu.detach().numpy().astype(float), 1.0 / lengthscale.astype(float) ** 2

    t0 = time.perf_counter()
    for it in range(1, int(iterations) + 1):
        rows = np.sort(rng.choice(N, int(batch_size), replace=False))
        adam.zero_grad()
        sample = model.sample_latent_variable()[rows]
        loss = -elbo(model(sample), Yt[rows].T).sum()
        loss.backward()
        adam.step()
        if report_every is not None and (it % 2500 == 0 or it == iterations):
            report_every(it, *state())
    wall = time.perf_counter() - t0
    return (*state(), wall)
