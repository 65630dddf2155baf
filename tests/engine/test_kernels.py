"""Tests of engine.kernels: values against slow references, finite-difference
gradients through a random cotangent, PSD, sums, validation, (de)serialisation."""
import json
import math

import numpy as np
import pytest
from gradcheck import check_grad

from engine import kernels as kern
from engine.errors import ConfigurationError, ShapeError
from engine.transforms import POSITIVE, ParameterPacker

Q = 3
TOL = 1e-5


def make_kernels():
    """name -> factory of a kernel with non-default, distinct parameter values (Q = 3)."""
    ls = np.array([0.8, 1.3, 2.1])
    return {
        "rbf_ard": lambda: kern.RBF(Q, variance=1.7, lengthscales=ls),
        "rbf_iso": lambda: kern.RBF(Q, variance=0.9, lengthscales=1.4, ard=False),
        "linear_ard": lambda: kern.Linear(Q, variances=np.array([0.5, 1.2, 2.0])),
        "linear_iso": lambda: kern.Linear(Q, variances=0.7, ard=False),
        "matern32_ard": lambda: kern.Matern32(Q, variance=1.3, lengthscales=ls),
        "matern32_iso": lambda: kern.Matern32(Q, variance=0.8, lengthscales=1.1, ard=False),
        "matern52_ard": lambda: kern.Matern52(Q, variance=1.1, lengthscales=ls[::-1].copy()),
        "matern52_iso": lambda: kern.Matern52(Q, variance=1.5, lengthscales=0.9, ard=False),
        "mlp": lambda: kern.MLP(Q, variance=1.3, weight_variance=0.7, bias_variance=0.4),
        "bias": lambda: kern.Bias(Q, variance=0.6),
        "white": lambda: kern.White(Q, variance=0.3),
        "sum_all": lambda: (
            kern.RBF(Q, lengthscales=ls) + kern.Linear(Q, variances=0.4) + kern.Bias(Q, 0.5) + kern.White(Q, 0.2)
        ),
        "sum_dup": lambda: kern.Matern32(Q, lengthscales=1.2, ard=False) + kern.MLP(Q) + kern.RBF(Q, 0.5, ls),
    }


KERNELS = make_kernels()
KERNEL_IDS = sorted(KERNELS)


@pytest.fixture
def data():
    rng = np.random.default_rng(1234)
    X = rng.standard_normal((7, Q))
    X2 = rng.standard_normal((5, Q))
    return X, X2, rng


def objective(kernel, G, X, X2):
    return float(np.sum(G * kernel.K(X, X2)))


# ----------------------------------------------------------------------------
# gradients by finite differences through a random, non-symmetric cotangent


@pytest.mark.parametrize("cross", [False, True], ids=["K(X)", "K(X,X2)"])
@pytest.mark.parametrize("name", KERNEL_IDS)
def test_grad_params_matches_finite_differences(name, cross, data):
    X, X2, rng = data
    X2 = X2 if cross else None
    k = KERNELS[name]()
    G = rng.standard_normal((X.shape[0], X.shape[0] if X2 is None else X2.shape[0]))
    grads = k.grad_params(G, X, X2)
    assert list(grads) == list(k.param_names)
    for pname, value in k.params.items():
        assert np.shape(grads[pname]) == np.shape(value)
        if np.ndim(value) == 0:
            assert isinstance(grads[pname], float)

        def f(v, pname=pname):
            k2 = k.copy()
            k2.set_params(**{pname: v})
            return objective(k2, G, X, X2)

        assert check_grad(f, value, grads[pname]) < TOL, pname


@pytest.mark.parametrize("cross", [False, True], ids=["K(X)", "K(X,X2)"])
@pytest.mark.parametrize("name", KERNEL_IDS)
def test_grad_X_matches_finite_differences(name, cross, data):
    X, X2, rng = data
    X2 = X2 if cross else None
    k = KERNELS[name]()
    G = rng.standard_normal((X.shape[0], X.shape[0] if X2 is None else X2.shape[0]))
    gX = k.grad_X(G, X, X2)
    assert gX.shape == X.shape
    assert check_grad(lambda Xp: objective(k, G, Xp, X2), X, gX) < TOL


@pytest.mark.parametrize("name", KERNEL_IDS)
def test_grad_diag_matches_finite_differences(name, data):
    X, _, rng = data
    k = KERNELS[name]()
    g = rng.standard_normal(X.shape[0])
    grads = k.grad_params_diag(g, X)
    assert list(grads) == list(k.param_names)
    for pname, value in k.params.items():
        assert np.shape(grads[pname]) == np.shape(value)

        def f(v, pname=pname):
            k2 = k.copy()
            k2.set_params(**{pname: v})
            return float(g @ k2.K_diag(X))

        assert check_grad(f, value, grads[pname]) < TOL, pname
    gX = k.grad_X_diag(g, X)
    assert gX.shape == X.shape
    assert check_grad(lambda Xp: float(g @ k.K_diag(Xp)), X, gX) < TOL


@pytest.mark.parametrize("cross", [False, True], ids=["K(X)", "K(X,X2)"])
@pytest.mark.parametrize("name", KERNEL_IDS)
def test_grad_params_and_X_agrees_with_separate_calls(name, cross, data):
    X, X2, rng = data
    X2 = X2 if cross else None
    k = KERNELS[name]()
    G = rng.standard_normal((X.shape[0], X.shape[0] if X2 is None else X2.shape[0]))
    gp, gX = k.grad_params_and_X(G, X, X2)
    gp_ref = k.grad_params(G, X, X2)
    assert gp.keys() == gp_ref.keys()
    for key in gp:
        np.testing.assert_allclose(gp[key], gp_ref[key], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gX, k.grad_X(G, X, X2), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["matern32_ard", "matern52_ard", "rbf_ard", "mlp"])
def test_gradients_finite_at_coincident_points(name, data):
    X, X2, rng = data
    X = np.vstack([X, X[:2]])  # duplicate rows: r = 0 off the diagonal
    X2 = np.vstack([X2, X[:1]])  # a cross point equal to a point of X
    k = KERNELS[name]()
    for other in (None, X2):
        G = rng.standard_normal((X.shape[0], X.shape[0] if other is None else other.shape[0]))
        gp, gX = k.grad_params_and_X(G, X, other)
        assert np.all(np.isfinite(gX))
        assert all(np.all(np.isfinite(v)) for v in gp.values())
        assert check_grad(lambda Xp, other=other, G=G: objective(k, G, Xp, other), X, gX) < TOL


# ----------------------------------------------------------------------------
# derivatives w.r.t. the inputs (latent geometry)


@pytest.mark.parametrize("name", KERNEL_IDS)
def test_dK_dX_matches_finite_differences(name, data):
    X, X2, _ = data
    k = KERNELS[name]()
    J = k.dK_dX(X, X2)
    assert J.shape == (X.shape[0], Q, X2.shape[0])
    h = 1e-6
    for q in range(Q):
        e = np.zeros(Q)
        e[q] = h
        numeric = (k.K(X + e, X2) - k.K(X - e, X2)) / (2 * h)
        np.testing.assert_allclose(J[:, q, :], numeric, rtol=1e-6, atol=1e-7)
    # a subset of dims, in the order asked; X2 None means the same points, held fixed
    np.testing.assert_array_equal(k.dK_dX(X, X2, dims=(2, 0)), J[:, [2, 0], :])
    np.testing.assert_allclose(k.dK_dX(X, None, dims=[1])[:, 0, :], k.dK_dX(X, X.copy())[:, 1, :], rtol=1e-12)


def mixed_second_difference(k, X, h):
    """(N, Q, Q) central differences of k(x + h e_a, x' + h e_b) at x' = x (independent points)."""
    out = np.empty((X.shape[0], Q, Q))
    for n in range(X.shape[0]):
        x = X[n:n + 1]
        for a in range(Q):
            for b in range(Q):
                ea, eb = np.eye(Q)[a] * h, np.eye(Q)[b] * h
                out[n, a, b] = (k.K(x + ea, x + eb) - k.K(x + ea, x - eb) - k.K(x - ea, x + eb)
                                + k.K(x - ea, x - eb))[0, 0] / (4 * h * h)
    return out


@pytest.mark.parametrize("name", KERNEL_IDS)
def test_d2K_dXdX2_diag_matches_mixed_finite_differences(name, data):
    X, _, _ = data
    k = KERNELS[name]()
    H = k.d2K_dXdX2_diag(X)
    assert H.shape == (X.shape[0], Q, Q)
    np.testing.assert_allclose(H, H.transpose(0, 2, 1), rtol=0, atol=1e-14)
    numeric = mixed_second_difference(k, X, 1e-4)
    scale = max(1.0, float(np.max(np.abs(numeric))))
    # Matern 3/2 has an r^3 term at r = 0: its differences converge only as O(h)
    tol = 2e-3 if "matern32" in name or name == "sum_dup" else 1e-6
    assert float(np.max(np.abs(H - numeric))) < tol * scale
    np.testing.assert_array_equal(k.d2K_dXdX2_diag(X, dims=(2, 0)), H[:, [2, 0]][:, :, [2, 0]])


def test_d2K_dXdX2_diag_is_the_derivative_covariance_of_a_stationary_process():
    ls = np.array([0.5, 2.0, 1.0])
    X = np.zeros((1, Q))
    np.testing.assert_allclose(kern.RBF(Q, 2.0, ls).d2K_dXdX2_diag(X)[0], np.diag(2.0 / ls**2))
    np.testing.assert_allclose(kern.Matern32(Q, 2.0, ls).d2K_dXdX2_diag(X)[0], np.diag(6.0 / ls**2))
    np.testing.assert_allclose(kern.Matern52(Q, 2.0, ls).d2K_dXdX2_diag(X)[0], np.diag(10.0 / 3.0 / ls**2))
    np.testing.assert_array_equal(kern.White(Q, 5.0).d2K_dXdX2_diag(X), np.zeros((1, Q, Q)))


def test_input_derivatives_check_dims_and_shapes(data):
    X, X2, _ = data
    k = kern.RBF(Q)
    for bad in ((0, 0), (0, 3), (-1,), (), "x"):
        with pytest.raises(ShapeError, match="dims"):
            k.dK_dX(X, X2, dims=bad)
        with pytest.raises(ShapeError, match="dims"):
            k.d2K_dXdX2_diag(X, dims=bad)
    with pytest.raises(ShapeError, match="X2 with 3 columns"):
        k.dK_dX(X, X2[:, :2])
    with pytest.raises(ShapeError, match="finite"):
        k.d2K_dXdX2_diag(np.full((2, Q), np.inf))


# ----------------------------------------------------------------------------
# values


def slow_reference_K(k, X, X2):
    """Independent, loop-by-loop kernel values for the leaf kernels."""
    p = k.params
    out = np.empty((X.shape[0], X2.shape[0]))
    for i, x in enumerate(X):
        for j, y in enumerate(X2):
            if k.name in ("rbf", "matern32", "matern52"):
                ls = np.broadcast_to(p["lengthscales"], (Q,))
                r = math.sqrt(sum(((x[q] - y[q]) / ls[q]) ** 2 for q in range(Q)))
                if k.name == "rbf":
                    f = math.exp(-0.5 * r * r)
                elif k.name == "matern32":
                    f = (1 + math.sqrt(3) * r) * math.exp(-math.sqrt(3) * r)
                else:
                    f = (1 + math.sqrt(5) * r + 5 * r * r / 3) * math.exp(-math.sqrt(5) * r)
                out[i, j] = p["variance"] * f
            elif k.name == "linear":
                v = np.broadcast_to(p["variances"], (Q,))
                out[i, j] = sum(v[q] * x[q] * y[q] for q in range(Q))
            elif k.name == "mlp":
                w, b = p["weight_variance"], p["bias_variance"]
                num = w * x @ y + b
                den = math.sqrt((w * x @ x + b + 1) * (w * y @ y + b + 1))
                out[i, j] = p["variance"] * 2 / math.pi * math.asin(num / den)
            elif k.name == "bias":
                out[i, j] = p["variance"]
            else:
                raise AssertionError(k.name)
    return out


@pytest.mark.parametrize("name", [n for n in KERNEL_IDS if not n.startswith(("sum", "white"))])
def test_K_matches_slow_reference(name, data):
    X, X2, _ = data
    k = KERNELS[name]()
    np.testing.assert_allclose(k.K(X, X2), slow_reference_K(k, X, X2), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(k.K(X), slow_reference_K(k, X, X), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", KERNEL_IDS)
def test_K_diag_is_diagonal_of_K(name, data):
    X, _, _ = data
    k = KERNELS[name]()
    np.testing.assert_allclose(k.K_diag(X), np.diag(k.K(X)), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", KERNEL_IDS)
def test_K_is_symmetric_psd(name):
    rng = np.random.default_rng(7)
    X = 1.5 * rng.standard_normal((60, Q))
    k = KERNELS[name]()
    Kmat = k.K(X)
    assert Kmat.shape == (60, 60)
    np.testing.assert_array_equal(Kmat, Kmat.T)
    assert np.linalg.eigvalsh(Kmat).min() > -1e-10 * np.trace(Kmat)


def test_sum_K_is_sum_of_parts(data):
    X, X2, _ = data
    s = KERNELS["sum_all"]()
    for other in (None, X2):
        np.testing.assert_allclose(s.K(X, other), sum(p.K(X, other) for p in s.parts))
    np.testing.assert_allclose(s.K_diag(X), sum(p.K_diag(X) for p in s.parts))


def test_white_cross_covariance_is_zero_even_for_same_points(data):
    X, X2, rng = data
    w = kern.White(Q, variance=0.3)
    np.testing.assert_array_equal(w.K(X), 0.3 * np.eye(X.shape[0]))
    np.testing.assert_array_equal(w.K(X, X2), np.zeros((X.shape[0], X2.shape[0])))
    np.testing.assert_array_equal(w.K(X, X), np.zeros((X.shape[0], X.shape[0])))
    G = rng.standard_normal((X.shape[0], X.shape[0]))
    assert w.grad_params(G, X, X) == {"variance": 0.0}
    assert w.grad_params(G, X) == {"variance": pytest.approx(np.trace(G))}


def test_stationary_diagonal_is_exactly_the_variance():
    rng = np.random.default_rng(3)
    X = 1e3 + rng.standard_normal((50, Q))  # far from the origin: no cancellation
    for k in (kern.RBF(Q, variance=1.7, lengthscales=0.5), kern.Matern52(Q, variance=0.3, lengthscales=0.5)):
        np.testing.assert_array_equal(np.diag(k.K(X)), k.K_diag(X))
        np.testing.assert_array_equal(np.diag(k.K(X)), np.full(50, k.params["variance"]))


# ----------------------------------------------------------------------------
# parameters, sums, relevance


def test_ard_and_shared_parameter_shapes():
    k = kern.RBF(Q, lengthscales=2.0)
    assert k.param_names == ("variance", "lengthscales")
    assert isinstance(k.params["variance"], float)
    np.testing.assert_array_equal(k.params["lengthscales"], [2.0, 2.0, 2.0])
    iso = kern.RBF(Q, lengthscales=2.0, ard=False)
    assert isinstance(iso.params["lengthscales"], float)
    np.testing.assert_allclose(iso.relevance, np.full(Q, 0.25))
    lin = kern.Linear(Q, variances=[1.0, 2.0, 3.0])
    np.testing.assert_array_equal(lin.relevance, [1.0, 2.0, 3.0])
    assert kern.Linear(Q, ard=False).params == {"variances": 1.0}
    for k in (kern.MLP(Q), kern.Bias(Q), kern.White(Q)):
        np.testing.assert_array_equal(k.relevance, np.zeros(Q))
    np.testing.assert_allclose(kern.Matern52(Q, lengthscales=[1.0, 2.0, 4.0]).relevance, [1.0, 0.25, 0.0625])


def test_names():
    expected = {
        kern.RBF: "rbf", kern.Linear: "linear", kern.Matern32: "matern32", kern.Matern52: "matern52",
        kern.MLP: "mlp", kern.Bias: "bias", kern.White: "white",
    }
    for cls, name in expected.items():
        assert cls(2).name == name
    assert (kern.RBF(2) + kern.Bias(2)).name == "sum"


def test_params_are_copies_and_copy_is_independent():
    k = kern.RBF(Q, lengthscales=[1.0, 2.0, 3.0])
    k.params["lengthscales"][0] = 99.0
    assert k.params["lengthscales"][0] == 1.0
    c = k.copy()
    c.set_params(lengthscales=[4.0, 5.0, 6.0], variance=3.0)
    np.testing.assert_array_equal(k.params["lengthscales"], [1.0, 2.0, 3.0])
    assert k.params["variance"] == 1.0


@pytest.mark.parametrize("name", list(KERNELS))
def test_with_params_is_an_independent_copy_at_the_new_values(name):
    """with_params (what a model calls once per evaluation) equals copy() + set_params(): the same
    kernel matrix and spec, the original unchanged, and no parameter shared with it."""
    k = KERNELS[name]()
    before = k.to_spec()
    new = {key: np.asarray(v) * 1.3 + 0.1 for key, v in k.params.items()}
    fast = k.with_params(new)
    slow = k.copy()
    slow.set_params(**new)
    assert fast.to_spec() == slow.to_spec()
    assert k.to_spec() == before
    X = np.random.default_rng(3).standard_normal((5, Q))
    np.testing.assert_array_equal(fast.K(X), slow.K(X))
    fast.set_params(**{key: np.asarray(v) * 2.0 for key, v in new.items()})  # the copy's own values
    assert k.to_spec() == before
    if name.startswith("sum"):
        assert all(a is not b for a, b in zip(fast.parts, k.parts))


def test_with_params_refuses_what_set_params_refuses():
    k = kern.RBF(Q, lengthscales=[1.0, 2.0, 3.0]) + kern.Bias(Q, 0.5)
    with pytest.raises(ConfigurationError, match="finite and positive"):
        k.with_params({"rbf.variance": float("nan")})
    with pytest.raises(ShapeError):
        k.with_params({"rbf.lengthscales": np.ones(2)})
    with pytest.raises(ConfigurationError, match="among"):
        k.with_params({"rbf.period": 1.0})
    assert k.params["rbf.variance"] == 1.0


def test_param_specs_pack_and_unpack():
    s = kern.RBF(Q, lengthscales=[1.0, 2.0, 3.0]) + kern.Bias(Q, 0.5)
    specs = s.param_specs(prefix="kern.")
    assert [sp.name for sp in specs] == ["kern.rbf.variance", "kern.rbf.lengthscales", "kern.bias.variance"]
    assert [sp.shape for sp in specs] == [(), (Q,), ()]
    assert all(sp.transform is POSITIVE for sp in specs)
    packer = ParameterPacker(s.param_specs())
    x = packer.pack(s.params)
    assert x.shape == (5,)
    back = packer.unpack(x)
    for key, value in s.params.items():
        np.testing.assert_allclose(back[key], value)
    s.set_params(**back)


def test_sum_flattens_and_names_parts_uniquely():
    a = kern.RBF(Q) + kern.Bias(Q)
    b = kern.RBF(Q, lengthscales=2.0) + kern.White(Q)
    s = a + (b + kern.RBF(Q, ard=False))
    assert isinstance(s, kern.Sum)
    assert all(not isinstance(p, kern.Sum) for p in s.parts)
    assert s.part_names == ("rbf", "bias", "rbf_1", "white", "rbf_2")
    assert list(s.params)[:3] == ["rbf.variance", "rbf.lengthscales", "bias.variance"]
    assert "rbf_2.lengthscales" in s.params and isinstance(s.params["rbf_2.lengthscales"], float)
    np.testing.assert_array_equal(s.params["rbf_1.lengthscales"], [2.0, 2.0, 2.0])
    s.set_params(**{"rbf_1.lengthscales": [1.0, 3.0, 5.0], "bias.variance": 0.25})
    np.testing.assert_array_equal(s.parts[2].params["lengthscales"], [1.0, 3.0, 5.0])
    assert s.params["bias.variance"] == 0.25
    # the sum owns copies: the original kernels are untouched, and k + k is safe
    np.testing.assert_array_equal(b.params["rbf.lengthscales"], [2.0, 2.0, 2.0])
    k = kern.RBF(Q)
    kk = k + k
    kk.set_params(**{"rbf.variance": 2.0})
    assert kk.params["rbf_1.variance"] == 1.0 and k.params["variance"] == 1.0
    np.testing.assert_allclose(s.relevance, 1.0 + 1.0 + np.array([1.0, 1 / 9, 1 / 25]))


def test_sum_set_params_is_atomic():
    s = kern.RBF(Q) + kern.Bias(Q)
    with pytest.raises(ValueError):
        s.set_params(**{"rbf.variance": 2.0, "bias.variance": -1.0})
    assert s.params["rbf.variance"] == 1.0
    with pytest.raises(ValueError, match="among"):
        s.set_params(variance=2.0)


@pytest.mark.parametrize("name", KERNEL_IDS)
def test_spec_round_trip_through_json(name, data):
    X, X2, _ = data
    k = KERNELS[name]()
    spec = json.loads(json.dumps(k.to_spec()))
    k2 = kern.kernel_from_spec(spec)
    assert type(k2) is type(k)
    assert repr(k2) == repr(k)
    np.testing.assert_array_equal(k2.K(X, X2), k.K(X, X2))
    for key, value in k.params.items():
        np.testing.assert_array_equal(k2.params[key], value)


def test_repr_is_readable():
    assert repr(kern.RBF(2, variance=1.5, lengthscales=[1.0, 2.0])) == (
        "RBF(input_dim=2, variance=1.5, lengthscales=[1, 2], ard=True)"
    )
    assert repr(kern.Bias(2) + kern.White(2, 0.1)) == "Bias(input_dim=2, variance=1) + White(input_dim=2, variance=0.1)"


# ----------------------------------------------------------------------------
# validation


def test_wrong_number_of_columns_raises_shape_error():
    k = kern.RBF(3)
    with pytest.raises(ShapeError, match=r"Expected X with 3 columns, got 2 instead"):
        k.K(np.zeros((4, 2)))
    with pytest.raises(ShapeError, match=r"Expected X2 with 3 columns, got 2 instead"):
        k.K(np.zeros((4, 3)), np.zeros((5, 2)))
    with pytest.raises(ShapeError, match=r"2-D"):
        k.K_diag(np.zeros(3))
    with pytest.raises(ShapeError, match="finite"):
        k.K(np.full((2, 3), np.nan))


@pytest.mark.parametrize("name", KERNEL_IDS)
def test_cotangent_shape_is_checked(name, data):
    X, X2, _ = data
    k = KERNELS[name]()
    with pytest.raises(ShapeError, match="dL_dK"):
        k.grad_params(np.zeros((X.shape[0], X2.shape[0])), X)
    with pytest.raises(ShapeError, match="dL_dK"):
        k.grad_X(np.zeros((X.shape[0], X.shape[0])), X, X2)
    with pytest.raises(ShapeError, match="dL_dKdiag"):
        k.grad_X_diag(np.zeros(X.shape[0] + 1), X)


def test_parameter_validation():
    with pytest.raises(ShapeError, match="lengthscales"):
        kern.RBF(3, lengthscales=[1.0, 2.0])
    k = kern.RBF(3)
    with pytest.raises(ValueError, match="positive"):
        k.set_params(variance=-1.0)
    with pytest.raises(ValueError, match="positive"):
        k.set_params(lengthscales=[1.0, np.nan, 1.0])
    with pytest.raises(ValueError, match="among"):
        k.set_params(lengthscale=1.0)
    with pytest.raises(ShapeError):
        kern.RBF(3, ard=False).set_params(lengthscales=[1.0, 2.0, 3.0])
    with pytest.raises(ShapeError, match="input_dim"):
        kern.RBF(3) + kern.Bias(2)
    with pytest.raises(ValueError, match="input_dim"):
        kern.RBF(0)
    with pytest.raises(ValueError, match="kernel type"):
        kern.kernel_from_spec({"type": "periodic", "input_dim": 2})
