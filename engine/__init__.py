"""GPLVM Explorer's compute engine: kernels, psi statistics, GP-LVM models, optimisers.

Pure numpy / scipy / numba; never imports a UI library.

>>> import engine
>>> model = engine.BayesianGPLVM(Y, latent_dim=10, num_inducing=50)   # doctest: +SKIP
>>> engine.fit(model, optimizer="lbfgs", max_iters=500)               # doctest: +SKIP

``engine.single_blas_thread()`` holds BLAS to one thread for a block of code of one's own
(the engine's entry points already do so while its numba threads work).
"""
from . import kernels
from .errors import (ConfigurationError, EngineError, NumericalError, OptimizationError, ParameterError, ShapeError,
                     UnsupportedKernelError, UnsupportedOperationError)
from .geometry import Geodesic
from .infer import LatentInference
from .models.bayesian import BayesianGPLVM
# the non-Gaussian models register with BayesianGPLVM and GPLVM (their likelihood= builds them)
from .models.bayesian_nongaussian import NonConjugateBayesianGPLVM
from .models.deep import DeepGP
from .models.dynamical import DynamicalBGPLVM
from .models.gplvm import GPLVM
from .models.gplvm_laplace import LaplaceGPLVM
from .models.mrd import MRD
from .models.sparse import SparseGPLVM
from .models.stochastic import StochasticBayesianGPLVM
from .models.stochastic_nongaussian import NonConjugateStochasticBGPLVM
from .backends.dask import DaskBackend
from .optimize import Convergence, FitResult, Snapshot, fit
from ._threads import single_blas_thread

__all__ = [
    "BayesianGPLVM", "ConfigurationError", "Convergence", "DeepGP", "DynamicalBGPLVM", "EngineError", "FitResult",
    "GPLVM", "Geodesic", "LaplaceGPLVM", "LatentInference", "MRD", "NonConjugateBayesianGPLVM", "NonConjugateStochasticBGPLVM",
    "NumericalError",
    "OptimizationError", "ParameterError", "ShapeError",
    "Snapshot", "SparseGPLVM", "UnsupportedKernelError", "UnsupportedOperationError", "fit", "kernels",
    "DaskBackend", "StochasticBayesianGPLVM", "single_blas_thread",
]
