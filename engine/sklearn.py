"""A scikit-learn transformer over the engine's models: ``GPLVMTransformer``.

>>> from engine.sklearn import GPLVMTransformer                       # doctest: +SKIP
>>> gplvm = GPLVMTransformer(n_components=2, model="bayesian")       # doctest: +SKIP
>>> X_latent = gplvm.fit_transform(Y)          # (N, Q) trained latent means   # doctest: +SKIP
>>> X_new = gplvm.transform(Y_new)             # (n, Q) projection of new rows # doctest: +SKIP
>>> Y_back = gplvm.inverse_transform(X_new)    # (n, D) predictive mean        # doctest: +SKIP

scikit-learn is an optional dependency (``pip install 'gplvm-explorer[sklearn]'``);
this is the only module of the package that imports it.  The engine itself
(``import engine``) never does.
"""
from __future__ import annotations

import numbers

import numpy as np

try:
    from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
    from sklearn.utils import check_array, check_random_state
    from sklearn.utils.validation import check_is_fitted
except ImportError as exc:  # pragma: no cover - exercised only without scikit-learn
    raise ImportError("engine.sklearn needs scikit-learn (>= 1.3): "
                      "pip install 'gplvm-explorer[sklearn]'") from exc

try:  # scikit-learn >= 1.6
    from sklearn.utils.validation import validate_data as _validate_data
    _FINITE = "ensure_all_finite"
except ImportError:  # pragma: no cover - scikit-learn < 1.6
    def _validate_data(estimator, X, **kwargs):
        return estimator._validate_data(X, **kwargs)
    _FINITE = "force_all_finite"

from . import kernels as _kernels
from .build import Settings, build
from .errors import ConfigurationError
from .models.bayesian import BayesianGPLVM
from .models.gplvm import GPLVM
from .models.sparse import SparseGPLVM
from .optimize import OPTIMIZERS, Convergence
from .optimize import fit as _fit
from .validation import integer

__all__ = ["GPLVMTransformer", "KERNELS", "MODELS"]

#: ``model=`` names and the engine classes they stand for.
MODELS = {"gplvm": GPLVM, "sparse": SparseGPLVM, "bayesian": BayesianGPLVM}

#: ``kernel=`` names and the engine kernels they stand for (ARD: one lengthscale or
#: variance per latent dimension).  The model is built by :func:`engine.build.build`,
#: as the app and the command line build theirs (same settings, same start).
KERNELS = {"rbf": _kernels.RBF, "linear": _kernels.Linear,
           "matern32": _kernels.Matern32, "matern52": _kernels.Matern52}

_INITS = ("pca", "random", "isomap")


def _flag(value, name):
    if not isinstance(value, (bool, np.bool_)):
        raise ConfigurationError(f"Expected {name} to be True or False, got {value!r} instead.")
    return bool(value)


def _choice(value, name, options):
    if not isinstance(value, str) or value.lower() not in options:
        raise ConfigurationError(f"Expected {name} to be one of {', '.join(map(repr, options))}, "
                                 f"got {value!r} instead.")
    return value.lower()


class GPLVMTransformer(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Non-linear dimensionality reduction with a GP-LVM, as a scikit-learn transformer.

    Parameters
    ----------
    n_components : int, default=2
        Number of latent dimensions Q.
    model : {"bayesian", "sparse", "gplvm"}, default="bayesian"
        Bayesian GP-LVM (Titsias & Lawrence 2010), sparse GP-LVM with latent
        points, or the exact GP-LVM (Lawrence 2005; O(N^3) per iteration).
    num_inducing : int, default=30
        Inducing points M of the "bayesian" and "sparse" models; at most
        n_samples are used (``num_inducing_`` holds the number used).
        Ignored by "gplvm".
    kernel : {"rbf", "linear", "matern32", "matern52"} or engine.kernels.Kernel, default="rbf"
        Covariance over the latent space, with ARD.  The Bayesian GP-LVM
        needs closed-form psi statistics ("rbf", "linear"); a Matérn kernel
        with it raises :class:`engine.UnsupportedKernelError` in ``fit``.
        A kernel object must have ``input_dim == n_components``.  With a
        PCA start the stationary kernels' lengthscales start from the
        principal components' variances (:mod:`engine.build`).
    max_iters : int, default=1000
        Most optimiser iterations of ``fit``.
    until_converged : bool, default=True
        End ``fit`` sooner once the bound has converged (:class:`engine.Convergence`),
        as the app and ``gplvm-explorer fit`` do.
    optimizer : {"lbfgs", "scg", "adam"}, default="lbfgs"
    init : {"pca", "random", "isomap"}, default="pca"
        Initialisation of the latent points.
    random_state : int, RandomState instance or None, default=None
        Seed of the initialisation and of the choice of inducing points.
    bias, white : bool, default=True
        Add a constant (bias) and a white-noise term to the kernel named by
        ``kernel``, as the app and ``gplvm-explorer fit`` do by default (a
        kernel object is used as given).

    Attributes
    ----------
    model_ : engine.GPLVM, engine.SparseGPLVM or engine.BayesianGPLVM
        The trained model.
    embedding_ : ndarray of shape (n_samples, n_components)
        Latent means of the training rows (what ``fit_transform`` returns).
    embedding_variance_ : ndarray of shape (n_samples, n_components) or None
        Latent variances of the training rows (Bayesian model only).
    relevance_ : ndarray of shape (n_components,)
        ARD relevance of each latent dimension.
    objective_ : float
        The trained model's objective (log-likelihood or ELBO, nats), ``model_.objective()``.
    n_iter_ : int
        Optimiser iterations run.
    fit_result_ : engine.FitResult
    num_inducing_ : int or None
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Defined when X has column names that are all strings.

    Notes
    -----
    ``transform`` projects each new row into the latent space with the model
    held fixed (:meth:`engine.BayesianGPLVM.infer_latent`): the mean of
    q(x*) for the Bayesian model, the MAP point for the others.  A training
    row projected this way lands near, not exactly at, its trained latent
    mean, since it is treated as one more observation.
    ``inverse_transform`` is the model's predictive mean at latent points.
    """

    def __init__(self, n_components=2, model="bayesian", num_inducing=30, kernel="rbf", max_iters=1000,
                 optimizer="lbfgs", init="pca", random_state=None, bias=True, white=True, until_converged=True):
        self.n_components = n_components
        self.model = model
        self.num_inducing = num_inducing
        self.kernel = kernel
        self.max_iters = max_iters
        self.optimizer = optimizer
        self.init = init
        self.random_state = random_state
        self.bias = bias
        self.white = white
        self.until_converged = until_converged

    # ---- validation (the one place) ------------------------------------------------------
    def _settings(self) -> dict:
        Q = integer(self.n_components, "n_components")
        model = _choice(self.model, "model", tuple(MODELS))
        kernel = self.kernel
        if isinstance(kernel, _kernels.Kernel):
            if kernel.input_dim != Q:
                raise ConfigurationError(f"Expected a kernel with input_dim={Q} (n_components), "
                                         f"got input_dim={kernel.input_dim} instead.")
            kernel = kernel.copy()
        else:
            kernel = _choice(kernel, "kernel", tuple(KERNELS))
        return {
            "latent_dim": Q,
            "model": model,
            "num_inducing": integer(self.num_inducing, "num_inducing"),
            "kernel": kernel,
            "max_iters": integer(self.max_iters, "max_iters", minimum=0),
            "optimizer": _choice(self.optimizer, "optimizer", OPTIMIZERS),
            "init": _choice(self.init, "init", _INITS),
            "bias": _flag(self.bias, "bias"),
            "white": _flag(self.white, "white"),
            "until_converged": _flag(self.until_converged, "until_converged"),
        }

    def _handles_missing(self) -> bool:
        """Whether the chosen model trains with NaN entries as missing values (Bayesian, sparse)."""
        cls = MODELS.get(self.model.lower()) if isinstance(self.model, str) else None
        return bool(getattr(cls, "handles_missing", False))

    def _check_X(self, X, reset):
        # NaN (missing) entries are accepted when the model to train (fit) or the trained model
        # (transform) handles them
        allow_nan = self._handles_missing() if reset else getattr(self.model_, "handles_missing", False)
        return _validate_data(self, X, reset=reset, dtype=np.float64, ensure_min_samples=2 if reset else 1,
                              **{_FINITE: "allow-nan" if allow_nan else True})

    def __sklearn_tags__(self):  # scikit-learn >= 1.6
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = self._handles_missing()
        return tags

    def _seed(self) -> int:
        if isinstance(self.random_state, numbers.Integral) and not isinstance(self.random_state, bool):
            if self.random_state >= 0:
                return int(self.random_state)
        return int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))

    # ---- scikit-learn API -------------------------------------------------------------------
    def fit(self, X, y=None):
        """Train the model on X (n_samples, n_features); y is ignored.

        NaN entries of X are missing values for the "bayesian" and "sparse" models
        (trained on the observed entries only); the "gplvm" model refuses them.
        """
        s = self._settings()
        X = self._check_X(X, reset=True)
        seed = self._seed()
        self.num_inducing_ = None if s["model"] == "gplvm" else min(s["num_inducing"], X.shape[0])
        model = build(X, Settings(model=s["model"], latent_dim=s["latent_dim"], kernel=s["kernel"], bias=s["bias"],
                                  white=s["white"], num_inducing=self.num_inducing_ or s["num_inducing"], init=s["init"], seed=seed))
        result = _fit(model, optimizer=s["optimizer"], max_iters=s["max_iters"],
                      convergence=Convergence() if s["until_converged"] else None)
        self.model_ = model
        self.fit_result_ = result
        self.n_iter_ = result.iterations
        # the model's own value at the point it was left at (the fit's jitter included)
        self.objective_ = model.objective()
        self.embedding_ = np.array(model.parameters["X_mean"], dtype=float)
        variance = model.X_variance
        self.embedding_variance_ = None if variance is None else np.array(variance, dtype=float)
        self.relevance_ = model.relevance
        self._n_features_out = s["latent_dim"]
        return self

    def fit_transform(self, X, y=None):
        """Train on X and return ``transform(X)``, (n_samples, n_components).

        As scikit-learn requires, this equals ``fit(X).transform(X)``: the rows
        projected into the trained model.  The latent means the fit itself
        trained are ``embedding_``; for the Bayesian model a training row
        projected as a new observation counts twice and lands slightly further
        from the prior (about 0.2 posterior standard deviations).
        """
        return self.fit(X, y).transform(X)

    def transform(self, X):
        """Project new rows X (n, n_features) into the latent space: (n, n_components) means.

        With the "bayesian" and "sparse" models a row may have NaN entries: it is projected
        from its observed entries (``inverse_transform`` of the result then predicts the others).
        """
        check_is_fitted(self, "model_")
        X = self._check_X(X, reset=False)
        return np.array(self.model_.infer_latent(X).mean, dtype=float)

    def inverse_transform(self, X):
        """Predictive mean (n, n_features) at latent points X (n, n_components)."""
        check_is_fitted(self, "model_")
        X = _check_latent(X, self._n_features_out)
        mean, _ = self.model_.predict(X)
        return np.array(mean, dtype=float)


def _check_latent(X, Q):
    X = check_array(X, dtype=np.float64)
    if X.shape[1] != Q:
        raise ValueError(f"X has {X.shape[1]} features, but GPLVMTransformer.inverse_transform "
                         f"is expecting {Q} (n_components) features as input.")
    return X
