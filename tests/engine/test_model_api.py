"""The public API every model shares (API.md, "Every model"), exercised on all three models.

Also the numerics behind it: exact gradients when Kmm is (near-)singular, one
jitter per fit, fixed parameters that stay put, and stop requests that reach
inside one evaluation.
"""
import logging
import threading

import numpy as np
import pytest

import engine
from engine import kernels
from engine.io import load_model, save_model


def curved_data(N=60, D=6, seed=0):
    rng = np.random.default_rng(seed)
    T = rng.uniform(-1.5, 1.5, size=(N, 2))
    return np.sin(T @ rng.normal(size=(2, D)) + rng.uniform(0, 6, D)) + 0.05 * rng.normal(size=(N, D))


def make(kind, Y=None, Q=2, **kwargs):
    Y = curved_data() if Y is None else Y
    if kind == "gplvm":
        return engine.GPLVM(Y, Q, **kwargs)
    if kind == "sparse":
        return engine.SparseGPLVM(Y, Q, num_inducing=kwargs.pop("num_inducing", 8), **kwargs)
    return engine.BayesianGPLVM(Y, Q, num_inducing=kwargs.pop("num_inducing", 8), **kwargs)


KINDS = ["gplvm", "sparse", "bayesian"]


@pytest.mark.parametrize("kind", KINDS)
def test_objective_name_and_gradients_follow_the_api(kind):
    model = make(kind)
    assert model.objective_name == ("log-likelihood" if kind == "gplvm" else "ELBO")
    value = model.objective()
    assert isinstance(value, float) and np.isfinite(value)
    grads = model.objective_gradients()
    params = model.parameters
    assert set(grads) == set(params)
    for name in params:
        assert np.shape(grads[name]) == np.shape(params[name]), name
    assert model.checkgrad() < 1e-4


@pytest.mark.parametrize("kind", KINDS)
def test_set_parameters_and_parameters_round_trip(kind):
    model = make(kind)
    model.set_parameters(noise_variance=0.123, X_mean=model.X_mean + 0.5)
    assert model.parameters["noise_variance"] == pytest.approx(0.123)
    assert model.noise_variance == pytest.approx(0.123)
    before = model.objective()
    model.set_parameters(noise_variance=0.3)
    assert model.objective() != before


@pytest.mark.parametrize("kind", KINDS)
def test_fixed_parameters_stay_put_through_fit(kind):
    model = make(kind)
    model.fix("noise_variance", "lengthscales")
    assert model.fixed == {"noise_variance", "lengthscales"}
    noise, ell = model.noise_variance, model.lengthscales.copy()
    x_before = model.X_mean.copy()
    result = engine.fit(model, max_iters=15)
    assert result.iterations > 0
    assert model.noise_variance == noise
    np.testing.assert_array_equal(model.lengthscales, ell)
    assert not np.allclose(model.X_mean, x_before)  # the rest did move
    model.unfix("lengthscales")
    assert model.fixed == {"noise_variance"}
    engine.fit(model, max_iters=10)
    assert model.noise_variance == noise
    assert not np.array_equal(model.lengthscales, ell)
    model.unfix()
    assert model.fixed == frozenset()


@pytest.mark.parametrize("kind", KINDS)
def test_predict_gives_per_output_variances(kind):
    model = make(kind)
    Xnew = np.random.default_rng(1).normal(size=(7, 2))
    mean, var = model.predict(Xnew)
    assert mean.shape == var.shape == (7, model.output_dim)
    assert np.all(var >= 0)
    _, noisy = model.predict(Xnew, include_noise=True)
    np.testing.assert_allclose(noisy - var, model.noise_variance, rtol=1e-10)


@pytest.mark.parametrize("kind", KINDS)
def test_infer_latent_exists_on_every_model(kind):
    model = make(kind)
    Y = curved_data()
    result = model.infer_latent(Y[:3])
    assert result.mean.shape == (3, 2)
    assert result.variance.shape == (3, 2)
    assert result.prediction.shape == result.prediction_variance.shape == (3, model.output_dim)
    assert np.shape(result.log_density) == (3,)


@pytest.mark.parametrize("kind", KINDS)
def test_bad_input_raises_typed_engine_errors(kind):
    model = make(kind)
    with pytest.raises(engine.ParameterError, match="lengthscale_typo"):
        model.set_parameters(lengthscale_typo=1.0)
    with pytest.raises(engine.ParameterError, match="nope"):
        model.fix("nope")
    with pytest.raises(engine.ShapeError, match="2 columns"):
        model.predict(np.zeros((3, 5)))
    with pytest.raises(engine.ShapeError, match="finite"):
        model.set_parameters(noise_variance=np.nan)
    with pytest.raises(engine.ConfigurationError, match="optimizer"):
        engine.fit(model, optimizer="newton")
    with pytest.raises(engine.ConfigurationError, match="max_iters"):
        engine.fit(model, max_iters=-3)
    for exc in (engine.ParameterError, engine.ShapeError, engine.ConfigurationError):
        assert issubclass(exc, engine.EngineError)


def test_exact_model_refuses_uncertain_inputs_with_a_typed_error():
    model = make("gplvm")
    with pytest.raises(engine.UnsupportedOperationError, match="BayesianGPLVM"):
        model.predict(np.zeros((1, 2)), np.ones((1, 2)))
    assert issubclass(engine.UnsupportedOperationError, engine.EngineError)


# ---- gradients where Kmm is (near-)singular ---------------------------------------


def linear_data(N=100, D=6, Q=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(N, Q)) @ rng.normal(size=(Q, D)) + 0.1 * rng.normal(size=(N, D))


def test_linear_ard_with_more_inducing_points_than_dims_has_exact_gradients():
    # Kmm = Z diag(variances) Z^T has rank Q = 3 < M = 20: singular but for the jitter
    model = engine.BayesianGPLVM(linear_data(), 3, num_inducing=20, kernel=kernels.Linear(3, ard=True))
    Kmm = model.kernel.K(model.Z)
    assert np.linalg.matrix_rank(Kmm) == 3
    assert model.checkgrad() < 1e-4


def test_rbf_with_duplicated_inducing_points_has_exact_gradients():
    model = engine.BayesianGPLVM(linear_data(), 3, num_inducing=10)
    Z = model.Z
    Z[1] = Z[0] + 1e-9
    model.set_parameters(Z=Z)
    assert np.linalg.cond(model.kernel.K(Z)) > 1e12
    assert model.checkgrad() < 1e-4


@pytest.mark.parametrize("lengthscale", [1e-2, 1e3])
def test_extreme_lengthscales_have_exact_gradients(lengthscale):
    model = engine.BayesianGPLVM(linear_data(), 3, num_inducing=10)
    model.set_parameters(lengthscales=lengthscale)
    assert model.checkgrad() < 1e-4


def test_linear_fit_with_singular_kmm_reaches_the_well_conditioned_bound():
    # With a linear kernel, any Z spanning R^Q gives Qnn = Knn: the bound with M = 20 inducing
    # points equals the bound with M = Q = 3.  An independent oracle for the singular case.
    Y = linear_data(seed=4)
    singular = engine.BayesianGPLVM(Y, 3, num_inducing=20, kernel=kernels.Linear(3, ard=True))
    square = engine.BayesianGPLVM(Y, 3, num_inducing=3, kernel=kernels.Linear(3, ard=True))
    engine.fit(singular, max_iters=400)
    engine.fit(square, max_iters=400)
    assert singular.objective() == pytest.approx(square.objective(), rel=1e-2)
    assert singular.objective() > square.objective() - 0.01 * abs(square.objective())


# ---- one jitter per fit ------------------------------------------------------------


def test_jitter_is_chosen_once_per_fit_from_the_scale_of_kmm():
    model = make("bayesian")
    model.set_parameters(variance=50.0)
    model.begin_fit()
    expected = 1e-8 * np.mean(model.kernel.K_diag(model.Z))
    assert model.jitter == pytest.approx(expected)
    seen = []
    engine.fit(model, max_iters=20, callback=lambda s: seen.append(model.jitter), warm_up_iters=0)
    chosen = 1e-8 * 50.0
    assert seen and all(j == seen[0] for j in seen)
    assert seen[0] == pytest.approx(chosen)
    # the same parameters give the same value: the objective is one function during a fit
    x = model.get_free()
    assert model.objective_and_gradient(x)[0] == model.objective_and_gradient(x)[0]


def test_a_failed_factorisation_raises_the_jitter_and_says_so(caplog):
    # crowded latent points, huge signal variance, vanishing noise: K + noise I is singular
    rng = np.random.default_rng(0)
    model = engine.GPLVM(rng.normal(size=(30, 3)), 1, init="random")
    assert model.jitter == 0.0
    model.set_parameters(X_mean=np.linspace(0, 0.5, 30)[:, None], noise_variance=2e-8, variance=1e10)
    with caplog.at_level(logging.WARNING, logger="engine.linalg"):
        value = model.objective()
    assert np.isfinite(value)
    assert model.jitter > 0.0
    assert any("raising it" in r.getMessage() for r in caplog.records)


def test_saved_model_keeps_its_jitter_and_fixed_parameters(tmp_path):
    model = make("bayesian")
    model.set_parameters(variance=7.0)  # the jitter no longer matches the kernel's scale
    model.fix("Z")
    path = tmp_path / "m.npz"
    save_model(model, path)
    loaded = load_model(path)
    assert loaded.jitter == model.jitter
    assert loaded.fixed == {"Z"}
    assert loaded.objective() == model.objective()


# ---- the warm-up that holds the noise ---------------------------------------------


def test_warm_up_holds_the_noise_then_releases_it():
    model = make("bayesian", init="random")
    noise0 = model.noise_variance
    seen = []
    result = engine.fit(model, max_iters=40, warm_up_iters=10,
                        callback=lambda s: seen.append((s.iteration, s.parameters["noise_variance"])))
    iterations = [i for i, _ in seen]
    assert iterations == list(range(1, result.iterations + 1))  # one numbering across both phases
    assert all(v == noise0 for i, v in seen if i <= 10)
    assert any(v != noise0 for i, v in seen if i > 10)
    assert model.fixed == frozenset()  # released afterwards
    assert [h[0] for h in result.history] == iterations


def test_warm_up_leaves_parameters_the_user_fixed_alone():
    model = make("sparse")
    model.fix("noise_variance")
    engine.fit(model, max_iters=10, warm_up_iters=4)
    assert model.fixed == {"noise_variance"}


# ---- stop requests reach inside an evaluation -------------------------------------


def test_stop_set_during_an_evaluation_ends_the_fit_before_its_gradient():
    model = make("bayesian")
    stop = threading.Event()
    calls = {"forward": 0, "backward": 0}
    rows = model.backend  # where the model's sums over rows are computed (engine.backends.LocalBackend)
    forward, backward = rows.forward, rows.backward

    def slow_forward(*args):
        calls["forward"] += 1
        if calls["forward"] == 3:
            stop.set()  # as if the user pressed Stop while this evaluation runs
        return forward(*args)

    def counting_backward(*args):
        calls["backward"] += 1
        return backward(*args)

    rows.forward, rows.backward = slow_forward, counting_backward
    start = model.get_free()
    result = engine.fit(model, max_iters=50, stop=stop, warm_up_iters=0)
    assert result.stopped
    assert calls["forward"] == 3 and calls["backward"] == 2  # the third evaluation was abandoned
    assert np.isfinite(result.objective)
    assert not np.array_equal(model.get_free(), start) or result.iterations == 0


def test_lengthscales_stay_where_the_psi_statistics_are_accurate():
    # Below ~1e-3 the expanded RBF psi exponents lose every digit to cancellation (a line
    # search once landed there on a bound of +4.5e30); the parameterisation keeps them above.
    model = engine.BayesianGPLVM(linear_data(), 3, num_inducing=10)
    model.set_parameters(Z=model.Z * 10.0)  # widely spread inducing inputs
    with pytest.raises(engine.ShapeError, match="above 0.001"):
        model.set_parameters(lengthscales=1e-4)
    model.set_parameters(lengthscales=1.001e-3)
    tiny = model.objective()
    model.set_parameters(lengthscales=1.0)
    assert np.isfinite(tiny) and tiny < model.objective()
    free = model.get_free()
    free[:] = -50.0  # the far end of the unconstrained space
    model.set_free(free)
    assert np.all(model.lengthscales >= 1e-3)


def test_a_factorisation_that_never_succeeds_names_the_matrix_that_failed():
    from engine.bound import collapsed_factors
    from engine.linalg import FactorisationError, escalate_jitter

    # Psi2 with a negative eigenvalue (as rounding gives when Kmm is ill-conditioned): Kmm factorises,
    # I + beta A does not
    M = 3
    Kmm = np.eye(M)
    Psi2 = np.diag([1.0, 1.0, -1e-3])
    with pytest.raises(FactorisationError) as failed:
        collapsed_factors(np.ones((M, 2)), Psi2, Kmm, beta=1e4)
    assert "I + beta A" in failed.value.matrix

    def factorise(jitter):
        return collapsed_factors(np.ones((M, 2)), Psi2, Kmm + jitter * np.eye(M), beta=1e4)

    with pytest.raises(engine.NumericalError) as final:
        escalate_jitter(factorise, 0.0, 1.0, "inducing-point kernel matrix Kmm")
    message = str(final.value)
    assert message.startswith("The matrix I + beta A") and "added to the inducing-point kernel matrix Kmm" in message

    def kmm_fails(jitter):
        raise FactorisationError("not positive definite")

    with pytest.raises(engine.NumericalError, match=r"^The inducing-point kernel matrix Kmm could not be factorised "
                                                     r"even with jitter [0-9.e-]+ \("):
        escalate_jitter(kmm_fails, 0.0, 1.0, "inducing-point kernel matrix Kmm")
