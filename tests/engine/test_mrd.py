"""Manifold relevance determination (MRD): gradients, per-view references, shared/private dims, views, files."""
import io

import numpy as np
import pytest

import engine
from engine import kernels, psi
from engine.io import load_model, save_model
from modelcheck import dense_psi_bound, model_gradient_errors


def two_views(N=60, D=(6, 5), noise=0.05, seed=0):
    """Views driven by a shared factor s and one private factor each: Y1 = f1(s, p1), Y2 = f2(s, p2)."""
    rng = np.random.default_rng(seed)
    s, p1, p2 = (rng.uniform(-1.5, 1.5, N) for _ in range(3))

    def view(a, b, d):
        W = 0.5 * rng.normal(size=(2, d))
        return np.sin(np.c_[a, b] @ W + rng.uniform(0, 2 * np.pi, d)) + noise * rng.normal(size=(N, d))

    return view(s, p1, D[0]), view(s, p2, D[1]), np.c_[s, p1, p2]


def random_mrd(make_kernels=None, N=14, Q=3, M=(4, 3), seed=0):
    rng = np.random.default_rng(seed)
    views = [rng.normal(size=(N, 4)), rng.normal(size=(N, 3))]
    model = engine.MRD(views, Q, kernels=None if make_kernels is None else make_kernels(Q), init="random", seed=seed,
                       Z=[rng.normal(size=(m, Q)) for m in M])
    model.set_parameters(X_variance=rng.uniform(0.1, 0.9, size=(N, Q)), **{"view0.noise_variance": 0.3,
                                                                           "view1.noise_variance": 0.5})
    return model


KERNEL_SETS = {
    "rbf": None,
    "rbf+bias | linear": lambda Q: [kernels.RBF(Q) + kernels.Bias(Q), kernels.Linear(Q)],
}


@pytest.mark.parametrize("name", sorted(KERNEL_SETS))
def test_gradients_match_finite_differences(name):
    M = (4, 1) if name != "rbf" else (4, 3)  # a linear kernel over Q inputs: keep M_v < Q so Kmm is invertible
    model = random_mrd(KERNEL_SETS[name], M=M)
    errors = model_gradient_errors(model)
    assert set(errors) == set(model.parameter_names)
    assert max(errors.values()) < 1e-5, errors
    assert model.checkgrad() < 1e-5


def test_bound_is_the_sum_of_view_data_terms_minus_one_kl():
    model = random_mrd(seed=3)
    v = model.parameters
    mu, S = v["X_mean"], v["X_variance"]
    total = -model.kl()
    dense_total = -0.5 * np.sum(mu**2 + S - np.log(S) - 1)
    for w in range(model.num_views):
        p = f"view{w}."
        k = model.kernels[w]
        single = engine.BayesianGPLVM(model.view_data(w), model.latent_dim, kernel=k, X=mu, X_variance=S,
                                      Z=v[p + "Z"], noise_variance=v[p + "noise_variance"])
        single.jitter = model.jitter
        total += single.objective() + single.kl()  # its data term
        stats = psi.compute(k, v[p + "Z"], mu, S)
        Kmm = k.K(v[p + "Z"]) + model.jitter * np.eye(v[p + "Z"].shape[0])
        dense_total += dense_psi_bound(model.Y[:, model.view_slices[w]], *stats, Kmm, 1.0 / v[p + "noise_variance"])
    assert model.objective() == pytest.approx(total, rel=1e-12)
    assert model.objective() == pytest.approx(dense_total, rel=1e-9)
    np.testing.assert_allclose(model.data_terms().sum() - model.kl(), model.objective(), rtol=1e-12)


def test_views_predict_and_infer():
    Y1, Y2, _ = two_views(N=30)
    model = engine.MRD([Y1, Y2], 3, num_inducing=8)
    assert model.objective_name == "ELBO"
    assert model.relevance.shape == (2, 3)
    Xs = model.X_mean[:4]
    m1, v1 = model.predict(Xs, view=1)
    assert m1.shape == v1.shape == (4, Y2.shape[1])
    m_all, v_all = model.predict(Xs)
    assert m_all.shape == (4, Y1.shape[1] + Y2.shape[1])
    np.testing.assert_allclose(m_all[:, model.view_slices[1]], m1)
    # a view's model carries the same data term as the MRD
    assert model.view_model(0).objective() + model.view_model(0).kl() == pytest.approx(model.data_terms()[0],
                                                                                       rel=1e-12)
    res = model.infer_latent(Y1[:3], view=0)
    assert isinstance(res, engine.LatentInference)
    assert res.mean.shape == res.variance.shape == (3, 3)
    assert res.prediction.shape == (3, Y1.shape[1])
    other, other_var = model.predict(res.mean, res.variance, view=1)
    assert other.shape == other_var.shape == (3, Y2.shape[1])
    with pytest.raises(engine.ConfigurationError):
        model.predict(Xs, view=2)


def test_projection_from_all_views_sums_the_view_terms():
    Y1, Y2, _ = two_views(N=40, seed=2)
    model = engine.MRD([Y1, Y2], 3, num_inducing=8)
    engine.fit(model, max_iters=100)
    # all columns side by side, only view 0 observed: the view-0 projection (its terms alone)
    Yall = np.hstack([Y1[:3], np.full((3, Y2.shape[1]), np.nan)])
    joint, single = model.infer_latent(Yall), model.infer_latent(Y1[:3], view=0)
    np.testing.assert_allclose(joint.mean, single.mean, atol=1e-4)
    np.testing.assert_allclose(joint.log_density, single.log_density, rtol=1e-5)
    assert joint.prediction.shape == (3, Y1.shape[1] + Y2.shape[1])
    # both views observed: training rows land at their q(x_n), overall tighter than from either view alone
    both = model.infer_latent(np.hstack([Y1[:5], Y2[:5]]))
    sd = np.sqrt(model.X_variance[:5] + both.variance)
    assert np.all(np.abs(both.mean - model.X_mean[:5]) < 4 * sd)
    for v, Yv in enumerate((Y1, Y2)):
        alone = model.infer_latent(Yv[:5], view=v)
        assert np.sum(both.variance) < np.sum(alone.variance)


def test_view_errors():
    Y1, Y2, _ = two_views(N=20)
    model = engine.MRD([Y1, Y2], 2, num_inducing=5)
    Xs = model.X_mean[:2]
    with pytest.raises(engine.ConfigurationError):
        model.predict(Xs, view=2)


def test_input_errors():
    rng = np.random.default_rng(0)
    with pytest.raises(engine.ShapeError):
        engine.MRD([rng.normal(size=(10, 2)), rng.normal(size=(9, 2))], 2, num_inducing=3)
    with pytest.raises(engine.ShapeError):
        engine.MRD(rng.normal(size=(10, 2)), 2, num_inducing=3)
    with pytest.raises(engine.ConfigurationError):
        engine.MRD([rng.normal(size=(10, 2))] * 2, 2, num_inducing=3, kernels=[kernels.RBF(2)])
    with pytest.raises(engine.UnsupportedKernelError):
        engine.MRD([rng.normal(size=(10, 2))] * 2, 2, num_inducing=3, kernels=[kernels.RBF(2), kernels.Matern32(2)])


def test_fit_separates_shared_and_private_dimensions():
    """One shared and one private factor per view: after fitting, one dimension is relevant in both
    views and one in each view alone (relevance above 10% of the view's largest)."""
    Y1, Y2, truth = two_views(N=80, D=(8, 8), seed=3)
    model = engine.MRD([Y1, Y2], 4, num_inducing=12)
    result = engine.fit(model, max_iters=300)
    assert np.isfinite(result.objective)
    R = model.relevance
    on = R > 0.1 * R.max(axis=1, keepdims=True)
    shared = on[0] & on[1]
    private = on & ~on[::-1]
    assert shared.sum() == 1, R
    assert private[0].sum() == 1 and private[1].sum() == 1, R
    # the shared dimension carries the shared factor
    d = int(np.flatnonzero(shared)[0])
    assert abs(np.corrcoef(model.X_mean[:, d], truth[:, 0])[0, 1]) > 0.8


def test_save_load_round_trip():
    model = random_mrd(lambda Q: [kernels.RBF(Q), kernels.RBF(Q) + kernels.White(Q, variance=0.1)], seed=4)
    model.fix("view1.Z")
    buf = io.BytesIO()
    save_model(model, buf)
    buf.seek(0)
    loaded = load_model(buf)
    assert isinstance(loaded, engine.MRD)
    assert loaded.objective() == model.objective()
    assert loaded.fixed == {"view1.Z"}
    assert loaded.view_dims == model.view_dims
    np.testing.assert_array_equal(loaded.relevance, model.relevance)
