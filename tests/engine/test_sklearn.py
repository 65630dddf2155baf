"""engine.sklearn.GPLVMTransformer: scikit-learn's common checks, pipelines, round trips."""
import logging
import pickle
import subprocess
import sys

import numpy as np
import pytest

sklearn = pytest.importorskip("sklearn", minversion="1.3")

from sklearn.model_selection import GridSearchCV  # noqa: E402
from sklearn.neighbors import KNeighborsClassifier  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

import engine  # noqa: E402
from engine import kernels  # noqa: E402
from engine.sklearn import GPLVMTransformer  # noqa: E402
from busy import another_session_pinning_blas, cpu_hog  # noqa: E402


@pytest.fixture(autouse=True)
def _quiet_jitter_warnings():
    """Tiny check_estimator data make Kmm near-singular; the engine logs its jitter escalation."""
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


# ---- scikit-learn's common checks ---------------------------------------------------------------

ESTIMATOR = dict(max_iters=20, num_inducing=10, random_state=0)


@parametrize_with_checks([GPLVMTransformer(**ESTIMATOR)])
def test_sklearn_common_checks(estimator, check):
    check(estimator)  # every check at its first attempt: the engine's fits and projections are deterministic


def test_every_common_check_passes_first_time_five_times_under_load():
    """check_estimator five times in a row while a busy process competes for the cores and another
    thread keeps changing the process's BLAS thread count (as a second session's fit does): the checks
    that fit twice and compare at rtol=1e-7 (check_fit_idempotent, check_pipeline_consistency) and
    check_methods_subset_invariance need the same bits from the same call and from a row in any batch."""
    from sklearn.utils.estimator_checks import check_estimator

    with cpu_hog(), another_session_pinning_blas():
        for _ in range(5):
            check_estimator(GPLVMTransformer(**ESTIMATOR))


def _minor(version):
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


# ---- data -----------------------------------------------------------------------------------------

def curve(t):
    """A 1-D manifold in 5-D: (N,) -> (N, 5)."""
    return np.c_[t, t**2 - 0.3, np.sin(2 * t), np.cos(3 * t) - 0.5, 0.5 * t**3]


@pytest.fixture(scope="module")
def manifold():
    rng = np.random.default_rng(0)
    Y = curve(np.linspace(-1, 1, 40)) + 1e-3 * rng.standard_normal((40, 5))
    Ynew = curve(rng.uniform(-0.95, 0.95, 10)) + 1e-3 * rng.standard_normal((10, 5))
    return Y, Ynew


@pytest.fixture(scope="module")
def fitted(manifold):
    Y, _ = manifold
    logging.disable(logging.WARNING)
    try:
        return GPLVMTransformer(n_components=2, num_inducing=15, max_iters=300, random_state=0).fit(Y)
    finally:
        logging.disable(logging.NOTSET)


def relative_error(Yhat, Y, Yref):
    return np.linalg.norm(Yhat - Y) / np.linalg.norm(Y - Yref.mean(axis=0))


# ---- round trips on a low-noise manifold ------------------------------------------------------------

def test_inverse_transform_of_transform_reconstructs_training_and_new_rows(manifold, fitted):
    Y, Ynew = manifold
    assert relative_error(fitted.inverse_transform(fitted.transform(Y)), Y, Y) < 0.02
    assert relative_error(fitted.inverse_transform(fitted.transform(Ynew)), Ynew, Y) < 0.02


def test_transform_of_training_rows_is_close_to_the_fitted_latents(manifold, fitted):
    Y, _ = manifold
    X = fitted.transform(Y)
    Xtrain = fitted.embedding_
    assert X.shape == Xtrain.shape == (40, 2)
    # the dimension the model uses: within 1% of the latent range
    q = int(np.argmax(fitted.relevance_))
    span = np.ptp(Xtrain[:, q])
    assert np.max(np.abs(X[:, q] - Xtrain[:, q])) < 0.01 * span


@pytest.mark.parametrize("model", ["sparse", "gplvm"])
def test_point_models_reconstruct_new_rows(manifold, model):
    Y, Ynew = manifold
    est = GPLVMTransformer(n_components=2, model=model, num_inducing=15, max_iters=200, random_state=0).fit(Y)
    assert relative_error(est.inverse_transform(est.transform(Ynew)), Ynew, Y) < 0.02


@pytest.mark.parametrize("model", ["sparse", "gplvm"])
def test_point_models_reconstruct_and_reproduce_their_training_latents(manifold, model):
    Y, _ = manifold
    est = GPLVMTransformer(n_components=2, model=model, num_inducing=15, max_iters=200, random_state=0)
    Xtrain = est.fit_transform(Y)
    assert isinstance(est.model_, {"sparse": engine.SparseGPLVM, "gplvm": engine.GPLVM}[model])
    assert est.embedding_variance_ is None
    X = est.transform(Y)
    assert np.max(np.abs(X - Xtrain)) < 0.01 * np.max(np.ptp(Xtrain, axis=0))
    assert relative_error(est.inverse_transform(X), Y, Y) < 0.02


def test_fit_transform_projects_the_training_rows_and_keeps_the_trained_means(manifold, fitted):
    Y, _ = manifold
    est = GPLVMTransformer(n_components=2, num_inducing=15, max_iters=300, random_state=0)
    X = est.fit_transform(Y)
    np.testing.assert_array_equal(X, est.transform(Y))  # scikit-learn's contract
    np.testing.assert_array_equal(est.embedding_, est.model_.parameters["X_mean"])
    np.testing.assert_array_equal(est.embedding_, fitted.embedding_)  # deterministic given random_state
    assert est.objective_ == est.model_.objective()
    assert est.n_iter_ == est.fit_result_.iterations > 0
    assert est.num_inducing_ == 15
    assert list(est.get_feature_names_out()) == ["gplvmtransformer0", "gplvmtransformer1"]


def test_missing_entries_are_trained_on_and_predicted(manifold):
    Y, Ynew = manifold
    rng = np.random.default_rng(2)
    Ymiss = Y.copy()
    Ymiss[rng.random(Y.shape) < 0.1] = np.nan
    est = GPLVMTransformer(n_components=2, num_inducing=15, max_iters=300, random_state=0).fit(Ymiss)
    assert est.model_.observed is not None and not est.model_.observed.all()
    # a new row with two of its five entries unobserved: projected from the other three
    partial = Ynew.copy()
    partial[:, [1, 3]] = np.nan
    filled = est.inverse_transform(est.transform(partial))
    err = np.abs(filled[:, [1, 3]] - Ynew[:, [1, 3]]) / Y[:, [1, 3]].std(axis=0)
    assert np.max(err) < 0.05


def test_exact_gplvm_refuses_missing_values(manifold):
    Y, _ = manifold
    Ymiss = Y.copy()
    Ymiss[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        GPLVMTransformer(model="gplvm", max_iters=2).fit(Ymiss)
    est = GPLVMTransformer(model="gplvm", max_iters=2).fit(Y)
    with pytest.raises(ValueError, match="NaN"):
        est.transform(Ymiss[:3])
    if _minor(sklearn.__version__) >= (1, 6):
        assert not est.__sklearn_tags__().input_tags.allow_nan
        assert GPLVMTransformer().__sklearn_tags__().input_tags.allow_nan


def test_infinite_values_are_refused(manifold):
    Y, _ = manifold
    Yinf = Y.copy()
    Yinf[3, 2] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        GPLVMTransformer(max_iters=2).fit(Yinf)
    est = GPLVMTransformer(num_inducing=10, max_iters=2).fit(Y)
    with pytest.raises(ValueError, match="infinity"):
        est.transform(Yinf[:5])


# ---- pipelines ---------------------------------------------------------------------------------------

def test_pipeline_and_grid_search():
    rng = np.random.default_rng(1)
    labels = np.repeat([0, 1, 2], 20)
    centres = rng.normal(scale=3.0, size=(3, 2))
    T = centres[labels] + 0.3 * rng.standard_normal((60, 2))
    Y = np.tanh(T @ rng.normal(size=(2, 6))) + 0.02 * rng.standard_normal((60, 6))
    pipe = Pipeline([("scale", StandardScaler()),
                     ("gplvm", GPLVMTransformer(n_components=2, num_inducing=10, max_iters=30, random_state=0)),
                     ("knn", KNeighborsClassifier(n_neighbors=1))])
    search = GridSearchCV(pipe, {"gplvm__model": ["sparse", "bayesian"], "gplvm__n_components": [1, 2]}, cv=2)
    search.fit(Y, labels)
    assert search.best_params_["gplvm__model"] in ("sparse", "bayesian")
    assert search.best_score_ > 0.8  # chance is 1/3
    assert search.predict(Y[:5]).shape == (5,)
    assert search.best_estimator_.named_steps["gplvm"].transform(StandardScaler().fit_transform(Y)).shape[1] \
        == search.best_params_["gplvm__n_components"]


# ---- settings ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, cls", [("linear", kernels.Linear), ("matern32", kernels.Matern32),
                                       ("matern52", kernels.Matern52), ("rbf", kernels.RBF)])
def test_kernel_names_map_to_ard_engine_kernels(name, cls):
    Y = curve(np.linspace(-1, 1, 20))
    model = "sparse" if name.startswith("matern") else "bayesian"
    est = GPLVMTransformer(n_components=2, model=model, kernel=name, num_inducing=5, max_iters=2).fit(Y)
    kern = est.model_.kernel  # by default with a bias and a white-noise term, as the app and the CLI
    assert [type(p) for p in kern.parts] == [cls, kernels.Bias, kernels.White]
    assert kern.parts[0].ard
    assert est.relevance_.shape == (2,)
    plain = GPLVMTransformer(n_components=2, model=model, kernel=name, num_inducing=5, max_iters=2, bias=False,
                             white=False).fit(Y)
    assert type(plain.model_.kernel) is cls


def test_kernel_object_is_used_and_not_modified():
    Y = curve(np.linspace(-1, 1, 20))
    kern = kernels.RBF(2, ard=True, lengthscales=[2.0, 3.0])
    est = GPLVMTransformer(kernel=kern, num_inducing=5, max_iters=3, random_state=0).fit(Y)
    np.testing.assert_array_equal(kern.params["lengthscales"], [2.0, 3.0])
    assert type(est.model_.kernel) is kernels.RBF


@pytest.mark.parametrize("settings, match", [
    ({"model": "pca"}, "Expected model to be one of 'gplvm', 'sparse', 'bayesian', got 'pca'"),
    ({"kernel": "cosine"}, "Expected kernel to be one of"),
    ({"n_components": 0}, "Expected n_components as a positive integer, got 0"),
    ({"num_inducing": 2.5}, "Expected num_inducing as a positive integer"),
    ({"max_iters": -1}, "Expected max_iters as a non-negative integer"),
    ({"optimizer": "newton"}, "Expected optimizer to be one of"),
    ({"init": "umap"}, "Expected init to be one of"),
    ({"kernel": kernels.RBF(3)}, "Expected a kernel with input_dim=2"),
    ({"bias": "yes"}, "Expected bias to be True or False"),
    ({"white": 1}, "Expected white to be True or False"),
])
def test_impossible_settings_raise_typed_errors_in_fit(settings, match):
    est = GPLVMTransformer(**settings)  # the constructor only stores settings
    with pytest.raises(engine.ConfigurationError, match=match) as info:
        est.fit(curve(np.linspace(-1, 1, 10)))
    assert isinstance(info.value, ValueError)


def test_bayesian_model_refuses_kernels_without_psi_statistics():
    with pytest.raises(engine.UnsupportedKernelError, match="psi statistics"):
        GPLVMTransformer(kernel="matern32", max_iters=1).fit(curve(np.linspace(-1, 1, 10)))


def test_num_inducing_is_capped_at_the_number_of_rows():
    est = GPLVMTransformer(num_inducing=30, max_iters=2).fit(curve(np.linspace(-1, 1, 12)))
    assert est.num_inducing_ == 12 == est.model_.num_inducing


def test_pickle_restores_an_identical_model(fitted, manifold):
    _, Ynew = manifold
    clone = pickle.loads(pickle.dumps(fitted))
    assert clone.model_ is not fitted.model_
    assert clone.model_.objective() == fitted.model_.objective()
    np.testing.assert_array_equal(clone.transform(Ynew), fitted.transform(Ynew))
    clone.model_.set_parameters(noise_variance=1.0)  # independent of the original
    assert fitted.model_.noise_variance != 1.0


def test_inverse_transform_checks_the_latent_width(fitted):
    with pytest.raises(ValueError, match="expecting 2"):
        fitted.inverse_transform(np.zeros((3, 3)))


def test_import_engine_does_not_import_sklearn():
    code = "import sys, engine; assert 'sklearn' not in sys.modules, 'engine imported sklearn'"
    subprocess.run([sys.executable, "-c", code], check=True)
