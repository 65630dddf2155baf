"""Deep GP (Damianou & Lawrence 2013): gradients, the one-layer case, a dense loop reference,
moment-matched prediction, projection, fitting and files."""
import math

import numpy as np
import pytest

import engine
from engine import kernels
from engine.io import load_model, save_model
from modelcheck import model_gradient_errors


def curved_data(N=30, D=5, seed=0):
    rng = np.random.default_rng(seed)
    T = rng.uniform(-1.5, 1.5, size=(N, 2))
    return np.sin(T @ rng.normal(size=(2, D)) + rng.uniform(0, 6, D)) + 0.05 * rng.normal(size=(N, D))


def random_deep(dims=(3, 2), N=12, D=3, M=(4, 3), seed=0):
    """A deep GP at random, well-conditioned parameters (inducing inputs on a spread grid)."""
    rng = np.random.default_rng(seed)
    model = engine.DeepGP(rng.normal(size=(N, D)), list(dims), num_inducing=list(M), init="random", seed=seed)
    named = {}
    for l, (Q, m) in enumerate(zip(dims, M)):
        p = f"layer{l}."
        named.update({p + "X_mean": rng.normal(size=(N, Q)), p + "X_variance": rng.uniform(0.1, 0.9, size=(N, Q)),
                      p + "Z": rng.normal(size=(m, Q)) * 1.5, p + "variance": rng.uniform(0.5, 2.0),
                      p + "lengthscales": rng.uniform(0.8, 2.0, size=Q), p + "noise_variance": rng.uniform(0.2, 0.6)})
    model.set_parameters(**named)
    return model


# ------------------------------------------------------------------------------ gradients

def test_two_layer_gradients_match_finite_differences_entry_by_entry():
    model = random_deep()
    jitter = model.jitter
    errors = model_gradient_errors(model)
    assert set(errors) == set(model.parameter_names)
    assert max(errors.values()) < 1e-5, errors
    assert model.jitter == jitter > 0.0


def test_three_layers_and_other_kernels_have_exact_gradients():
    model = random_deep(dims=(3, 2, 2), M=(4, 3, 3), seed=1)
    assert model.checkgrad() < 1e-5
    rng = np.random.default_rng(2)
    Y = rng.normal(size=(10, 3))
    ks = [kernels.RBF(2) + kernels.Bias(2) + kernels.White(2, variance=0.05), kernels.Linear(2) + kernels.Bias(2)]
    model = engine.DeepGP(Y, [2, 2], num_inducing=[3, 2], kernels=ks, init="random", X_variance=[0.3, 0.6])
    errors = model_gradient_errors(model)
    assert max(errors.values()) < 1e-5, errors


# ------------------------------------------------------------------- one layer == Bayesian GP-LVM

def test_one_layer_is_the_bayesian_gplvm_exactly():
    Y = curved_data()
    deep = engine.DeepGP(Y, [3], num_inducing=6)
    bayes = engine.BayesianGPLVM(Y, 3, num_inducing=6)
    assert deep.objective() == bayes.objective()  # same defaults, same arithmetic
    rng = np.random.default_rng(3)
    values = {"X_mean": rng.normal(size=(30, 3)), "X_variance": rng.uniform(0.05, 1.0, size=(30, 3)),
              "Z": rng.normal(size=(6, 3)), "variance": 1.7, "lengthscales": np.array([0.7, 1.3, 2.5]),
              "noise_variance": 0.21}
    bayes.set_parameters(**values)
    deep.set_parameters(**{"layer0." + k: v for k, v in values.items()})
    assert deep.objective() == bayes.objective()
    gd, gb = deep.objective_gradients(), bayes.objective_gradients()
    for name in values:
        np.testing.assert_array_equal(gd["layer0." + name], gb[name])
    grid = rng.normal(size=(5, 3))
    for a, b in zip(deep.predict(grid), bayes.predict(grid)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    rows = Y[:3] + 0.1
    d, b = deep.infer_latent(rows), bayes.infer_latent(rows)
    for name in ("mean", "variance", "prediction", "prediction_variance"):
        np.testing.assert_allclose(getattr(d, name), getattr(b, name), rtol=1e-10, atol=1e-12)


# ------------------------------------------------------------------- dense loop reference

def rbf_psi_loops(variance, ell, Z, mu, S):
    """psi0, Psi1, Psi2 of the ARD RBF kernel, term by term (Titsias & Lawrence 2010, eqs. 15-17)."""
    N, Q = mu.shape
    M = Z.shape[0]
    psi0 = N * variance
    Psi1 = np.zeros((N, M))
    Psi2 = np.zeros((M, M))
    for n in range(N):
        for m in range(M):
            v = variance
            for q in range(Q):
                a = ell[q] ** 2
                v *= (1.0 + S[n, q] / a) ** -0.5 * math.exp(-0.5 * (mu[n, q] - Z[m, q]) ** 2 / (a + S[n, q]))
            Psi1[n, m] = v
        for m in range(M):
            for k in range(M):
                v = variance**2
                for q in range(Q):
                    a = ell[q] ** 2
                    zbar = 0.5 * (Z[m, q] + Z[k, q])
                    v *= (1.0 + 2.0 * S[n, q] / a) ** -0.5 * math.exp(
                        -(Z[m, q] - Z[k, q]) ** 2 / (4.0 * a) - (mu[n, q] - zbar) ** 2 / (a + 2.0 * S[n, q]))
                Psi2[m, k] += v
    return psi0, Psi1, Psi2


def rbf_loops(variance, ell, Z):
    M, Q = Z.shape
    K = np.zeros((M, M))
    for m in range(M):
        for k in range(M):
            K[m, k] = variance * math.exp(-0.5 * sum((Z[m, q] - Z[k, q]) ** 2 / ell[q] ** 2 for q in range(Q)))
    return K


def dense_layer_term(mu_out, S_out, psi0, Psi1, Psi2, Kmm, beta):
    """Collapsed data term with outputs N(mu_out, S_out), determinants and solves only:
    -N D/2 log 2pi + N D/2 log beta + D/2 log|K| - D/2 log|K + beta Psi2| - beta/2 sum(mu^2 + S)
    + beta^2/2 tr(P^T (K + beta Psi2)^-1 P) - beta D/2 psi0 + beta D/2 tr(K^-1 Psi2),  P = Psi1^T mu."""
    N, D = mu_out.shape
    W = Kmm + beta * Psi2
    P = Psi1.T @ mu_out
    _, logdetK = np.linalg.slogdet(Kmm)
    _, logdetW = np.linalg.slogdet(W)
    trOO = sum(mu_out[n, d] ** 2 + S_out[n, d] for n in range(N) for d in range(D))
    return (-0.5 * N * D * math.log(2 * math.pi) + 0.5 * N * D * math.log(beta) + 0.5 * D * logdetK
            - 0.5 * D * logdetW - 0.5 * beta * trOO + 0.5 * beta**2 * np.trace(P.T @ np.linalg.solve(W, P))
            - 0.5 * beta * D * psi0 + 0.5 * beta * D * np.trace(np.linalg.solve(Kmm, Psi2)))


def test_two_layer_bound_matches_a_dense_loop_reference():
    model = random_deep(N=10, D=4, M=(4, 3), seed=5)
    values = model.parameters
    jitter = model.jitter
    Y = model.Y  # centred data
    total = 0.0
    for l in range(2):
        p = f"layer{l}."
        mu, S, Z = values[p + "X_mean"], values[p + "X_variance"], values[p + "Z"]
        var, ell = float(values[p + "variance"]), values[p + "lengthscales"]
        psi0, Psi1, Psi2 = rbf_psi_loops(var, ell, Z, mu, S)
        Kmm = rbf_loops(var, ell, Z) + jitter * np.eye(Z.shape[0])
        if l == 0:
            mu_out, S_out = Y, np.zeros_like(Y)
        else:
            mu_out, S_out = values["layer0.X_mean"], values["layer0.X_variance"]
        total += dense_layer_term(mu_out, S_out, psi0, Psi1, Psi2, Kmm, 1.0 / float(values[p + "noise_variance"]))
    S0 = values["layer0.X_variance"]
    total += sum(0.5 * math.log(2 * math.pi * math.e * s) for s in S0.ravel())  # entropy of q(X_0)
    mu1, S1 = values["layer1.X_mean"], values["layer1.X_variance"]
    total -= 0.5 * sum(m * m + s - math.log(s) - 1.0 for m, s in zip(mu1.ravel(), S1.ravel()))  # KL of the top
    assert model.objective() == pytest.approx(total, rel=1e-10, abs=0.0)


# ------------------------------------------------------------------------------ prediction

@pytest.fixture(scope="module")
def trained():
    model = engine.DeepGP(curved_data(N=40, D=6), [3, 2], num_inducing=[10, 8])
    model.fit(max_iters=60)
    return model


def test_predict_shapes_and_variance_growing_away_from_the_data(trained):
    near = trained.X_mean[:4]
    far = near + 8.0
    mean, var = trained.predict(np.vstack([near, far]))
    assert mean.shape == var.shape == (8, 6)
    assert np.all(var > 0)
    assert np.all(var[4:] > var[:4])
    layers = trained.predict_layers(near)
    assert [m.shape for m, _ in layers] == [(4, 3), (4, 6)]
    # a single point is one row; top-layer uncertainty adds variance
    m1, v1 = trained.predict(near[0])
    assert m1.shape == v1.shape == (1, 6)
    _, v2 = trained.predict(near[:1], np.full((1, 2), 0.5))
    assert np.all(v2 >= v1 - 1e-12)


def test_moment_matching_agrees_with_sampling_through_the_layers(trained):
    """For one top point: x0 ~ the top layer's Gaussian, then y ~ N(mean0(x0), var0(x0)) per output;
    the moment-matched mean and variance are that mixture's exact moments."""
    x = trained.X_mean[:1] + 0.3
    (m0, v0), (my, vy) = trained.predict_layers(x, include_noise=True)
    rng = np.random.default_rng(0)
    draws = m0 + np.sqrt(v0) * rng.standard_normal((20000, m0.shape[1]))
    mean_d, var_d = trained.predict(draws, layer=0, include_noise=True)
    samples_mean = mean_d.mean(axis=0)
    samples_var = var_d.mean(axis=0) + mean_d.var(axis=0)
    se = np.sqrt(vy[0] / draws.shape[0])
    assert np.all(np.abs(samples_mean - my[0]) < 5 * se)
    np.testing.assert_allclose(samples_var, vy[0], rtol=0.05)


# ------------------------------------------------------------------------------ projection

def test_infer_latent_projects_training_rows_near_their_own_top_latents(trained):
    rows = np.arange(0, 40, 5)
    result = trained.infer_latent(trained.Y[rows] + trained.Y_mean)
    assert result.mean.shape == result.variance.shape == (rows.size, 2)
    assert result.prediction.shape == result.prediction_variance.shape == (rows.size, 6)
    assert np.all(np.isfinite(result.log_density))
    X = trained.X_mean
    spread = np.median(np.linalg.norm(X[:, None] - X[None], axis=2))
    assert np.all(np.linalg.norm(result.mean - X[rows], axis=1) < 0.25 * spread)
    np.testing.assert_allclose(result.prediction, trained.Y[rows] + trained.Y_mean,
                               atol=3 * np.sqrt(result.prediction_variance).max())
    # a row unlike the data has a lower density than the data's own rows
    odd = trained.infer_latent(trained.Y_mean + 3.0 * trained.Y.std(axis=0))
    assert odd.log_density[0] < result.log_density.min()


@pytest.fixture(scope="module")
def small_fitted():
    Y = curved_data(N=20, D=4, seed=3)
    Y = Y - Y.mean(axis=0)  # so that appending the mean row (zeros) keeps the centring
    model = engine.DeepGP(Y, [2, 2], num_inducing=[6, 5])
    model.fit(max_iters=30)
    return model


@pytest.mark.parametrize("joint", [False, True])
def test_log_density_is_the_increase_of_the_deep_bound_when_the_row_is_added(small_fitted, joint):
    """F(Y + row, with q(x*_l) at the projection) - F(Y) at fixed parameters, computed by a second model."""
    model = small_fitted
    Y = model.Y
    projection = model.project(np.zeros(4), joint=joint)
    values = model.parameters
    named = dict(values)
    for l in range(2):
        named[f"layer{l}.X_mean"] = np.vstack([values[f"layer{l}.X_mean"], projection.means[l]])
        named[f"layer{l}.X_variance"] = np.vstack([values[f"layer{l}.X_variance"], projection.variances[l]])
    bigger = engine.DeepGP(np.vstack([Y, np.zeros((1, 4))]), [2, 2], kernels=[l.kernel for l in model.layers],
                           X=[named["layer0.X_mean"], named["layer1.X_mean"]],
                           Z=[values["layer0.Z"], values["layer1.Z"]])
    bigger.set_parameters(**named)
    bigger.jitter = model.jitter
    assert projection.log_density.shape == (1,)
    assert projection.log_density[0] == pytest.approx(bigger.objective() - model.objective(), rel=1e-8, abs=1e-8)


def test_joint_projection_has_exact_gradients_and_never_lowers_the_density(small_fitted):
    from engine.models._deep_projection import RowObjective, training_layers
    from gradcheck import check_grad

    model = small_fitted
    layers = training_layers(model, model.parameters)
    rng = np.random.default_rng(4)
    cols = np.array([0, 2, 3])  # a partly observed row
    objective = RowObjective(layers, rng.normal(size=3), cols)
    theta = objective.pack([rng.normal(size=2), rng.normal(size=2)], [rng.uniform(0.1, 1, 2), rng.uniform(0.1, 1, 2)])
    # J is a difference of two bounds of the training size: a larger step keeps round-off out of the check
    assert check_grad(lambda t: objective(t)[0], theta, objective(theta)[1], eps=1e-4) < 1e-6
    rows = np.vstack([model.Y[:2] + model.Y_mean, np.full((1, 4), 2.0)])
    rows[1, 2] = np.nan
    greedy = model.project(rows, joint=False)
    joint = model.project(rows, joint=True)
    assert np.all(joint.log_density >= greedy.log_density - 1e-9)
    assert np.any(joint.log_density > greedy.log_density + 1e-3)
    assert joint.prediction.shape == (3, 4) and [m.shape for m in joint.means] == [(3, 2), (3, 2)]
    np.testing.assert_array_equal(joint.observed, ~np.isnan(rows))


# ---------------------------------------------------------------------- fitting and the API

def test_fit_raises_the_bound_and_reports_the_top_layer():
    model = engine.DeepGP(curved_data(), [3, 2], num_inducing=[8, 6])
    start = model.objective()
    shots = []
    result = engine.fit(model, max_iters=12, callback=shots.append, warm_up_fixed=model.noise_names)
    assert result.objective > start
    assert model.objective() == pytest.approx(result.objective, rel=1e-12)
    assert shots[-1].X_mean.shape == (30, 2) and shots[-1].relevance.shape == (2,)
    assert set(shots[-1].parameters) == set(model.parameter_names)
    assert model.objective_name == "ELBO"
    assert [layer.X_mean.shape for layer in model.layers] == [(30, 3), (30, 2)]
    assert [layer.relevance.shape for layer in model.layers] == [(3,), (2,)]


def test_fixed_parameters_stay_put_and_the_warm_up_holds_every_noise():
    model = engine.DeepGP(curved_data(), [3, 2], num_inducing=[8, 6])
    model.fix("layer1.Z", "layer0.lengthscales")
    Z, ell = model.parameters["layer1.Z"], model.parameters["layer0.lengthscales"]
    noises = [model.parameters[n] for n in model.noise_names]
    model.fit(max_iters=10, warm_up_iters=5)  # 5 held iterations, then 5 free ones
    np.testing.assert_array_equal(model.parameters["layer1.Z"], Z)
    np.testing.assert_array_equal(model.parameters["layer0.lengthscales"], ell)
    assert model.fixed == {"layer1.Z", "layer0.lengthscales"}
    held = engine.DeepGP(curved_data(), [3, 2], num_inducing=[8, 6])
    shots = []
    held.fit(max_iters=8, warm_up_iters=4, callback=shots.append)  # DeepGP.fit: every layer's noise held
    seen = [[shot.parameters[n] for n in held.noise_names] for shot in shots]
    assert seen[:4] == [noises] * 4
    assert seen[-1][0] != noises[0] and seen[-1][1] != noises[1]


def test_save_and_load_round_trip_with_an_equal_bound(tmp_path, trained):
    model = trained.copy()
    model.fix("layer0.noise_variance")
    path = tmp_path / "deep.npz"
    save_model(model, path)
    loaded = load_model(path)
    assert type(loaded) is engine.DeepGP and loaded.layer_dims == model.layer_dims
    assert loaded.objective() == pytest.approx(model.objective(), rel=1e-12)
    assert loaded.fixed == {"layer0.noise_variance"}
    grid = np.random.default_rng(1).normal(size=(5, 2))
    for a, b in zip(loaded.predict(grid), model.predict(grid)):
        np.testing.assert_allclose(a, b, rtol=1e-9)  # the saved values re-packed: last-bit differences


def test_bad_settings_are_refused_with_typed_errors():
    Y = curved_data()
    with pytest.raises(engine.EngineError):
        engine.DeepGP(Y, [])
    with pytest.raises(engine.EngineError):
        engine.DeepGP(Y, [3, 0])
    with pytest.raises(engine.ShapeError):
        engine.DeepGP(Y, [3, 2], kernels=[kernels.RBF(3), kernels.RBF(3)])
    with pytest.raises(engine.ShapeError):
        engine.DeepGP(Y, [3, 2], num_inducing=[5, 5, 5])
    with pytest.raises(engine.UnsupportedKernelError):
        engine.DeepGP(Y, [3, 2], kernels=[kernels.RBF(3), kernels.Matern32(2)])
    model = engine.DeepGP(Y, [3, 2], num_inducing=5)
    with pytest.raises(engine.ShapeError):
        model.predict(np.zeros((2, 3)))
    with pytest.raises(engine.ParameterError):
        model.fix("Z")
