"""Tests of engine.init: PCA, random and Isomap initial latents."""
import re
import warnings

import numpy as np
import pytest
from scipy.stats import spearmanr

from engine import init
from engine.errors import ShapeError
from engine.init import IsomapConnectivityWarning, initial_latents


# ------------------------------------------------------------------ helpers

def low_rank_data(N, D, rank, seed=0, noise=0.05):
    """Y = Z W + noise with distinct component scales (well separated spectrum)."""
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((N, rank)) * np.linspace(3.0, 1.0, rank)
    W = np.linalg.qr(rng.standard_normal((D, rank)))[0].T          # (rank, D)
    return Z @ W + noise * rng.standard_normal((N, D)) + rng.standard_normal(D)


def reference_pca_scores(Y, Q):
    """Standardised scores from the eigenvectors of the sample covariance."""
    Yc = Y - Y.mean(axis=0)
    cov = np.cov(Y, rowvar=False)
    w, V = np.linalg.eigh(cov)
    V = V[:, np.argsort(w)[::-1][:Q]]
    S = Yc @ V
    return S / S.std(axis=0)


def projector(A):
    """Orthogonal projector onto the column span of A (N, Q)."""
    Qm, _ = np.linalg.qr(A)
    return Qm @ Qm.T


def swiss_roll(N, seed=0):
    rng = np.random.default_rng(seed)
    t = 1.5 * np.pi * (1.0 + 2.0 * rng.random(N))
    h = 21.0 * rng.random(N)
    return np.column_stack([t * np.cos(t), h, t * np.sin(t)]), t


def assert_standardised(X):
    N = X.shape[0]
    np.testing.assert_allclose(X.mean(axis=0), 0.0, atol=1e-10)
    np.testing.assert_allclose(X.T @ X / N, np.eye(X.shape[1]), atol=1e-8)


# ---------------------------------------------------------------------- PCA

@pytest.mark.parametrize("N, D", [(200, 20), (30, 100)])   # covariance / Gram path
def test_pca_columns_orthogonal_unit_variance(N, D):
    Y = low_rank_data(N, D, rank=4)
    X = initial_latents(Y, 3, "pca")
    assert X.shape == (N, 3) and X.dtype == np.float64
    assert_standardised(X)


# Covariance path, Gram path, and a covariance large enough for the sparse
# (ARPACK) eigensolver.
@pytest.mark.parametrize("N, D", [(200, 20), (30, 100), (700, 600)])
def test_pca_span_is_top_principal_subspace(N, D):
    Y = low_rank_data(N, D, rank=4, seed=3)
    Q = 3
    X = initial_latents(Y, Q, "pca")
    ref = reference_pca_scores(Y, Q)
    assert np.linalg.norm(projector(X) - projector(ref), 2) < 1e-8
    # Distinct eigenvalues: columns match one by one, up to sign.
    for q in range(Q):
        c = np.corrcoef(X[:, q], ref[:, q])[0, 1]
        assert abs(c) > 1 - 1e-10


def test_pca_span_differs_from_a_wrong_subspace():
    # Guard against a vacuous projector comparison.
    Y = low_rank_data(200, 20, rank=4, seed=3)
    X = initial_latents(Y, 3, "pca")
    ref = reference_pca_scores(Y, 4)[:, 1:4]
    # Spectral norm = sine of the largest principal angle between the spans.
    assert np.linalg.norm(projector(X) - projector(ref), 2) > 0.5


@pytest.mark.parametrize("N, D", [(100, 10), (700, 600)])
def test_pca_deterministic_with_sign_convention(N, D):
    Y = low_rank_data(N, D, rank=3, seed=5)
    X1 = initial_latents(Y, 3, "pca", seed=0)
    X2 = initial_latents(Y.copy(), 3, "pca", seed=7)
    np.testing.assert_array_equal(X1, X2)
    # Flipping the data's sign flips the scores; the convention flips them back.
    X3 = initial_latents(-Y, 3, "pca")
    np.testing.assert_allclose(X1, X3, atol=1e-8)
    for q in range(3):
        assert X1[np.argmax(np.abs(X1[:, q])), q] > 0


def test_pca_does_not_modify_input():
    Y = low_rank_data(50, 6, rank=2)
    Y0 = Y.copy()
    initial_latents(Y, 2, "pca")
    np.testing.assert_array_equal(Y, Y0)


def test_pca_more_latent_dims_than_features():
    Y = low_rank_data(100, 3, rank=3, noise=0.0)
    X = initial_latents(Y, 5, "pca", seed=1)
    assert X.shape == (100, 5) and np.all(np.isfinite(X))
    assert_standardised(X[:, :3])
    assert np.linalg.norm(projector(X[:, :3]) - projector(Y - Y.mean(0)), 2) < 1e-8
    extra_std = X[:, 3:].std(axis=0)
    assert np.all(extra_std > 0.5 * init.EXTRA_DIM_STD)
    assert np.all(extra_std < 2.0 * init.EXTRA_DIM_STD)
    # The noise columns are seeded.
    np.testing.assert_array_equal(X, initial_latents(Y, 5, "pca", seed=1))
    assert not np.array_equal(X[:, 3:], initial_latents(Y, 5, "pca", seed=2)[:, 3:])


def test_pca_more_latent_dims_than_points():
    # N = 4 points span at most 3 directions once centred.
    Y = np.random.default_rng(0).standard_normal((4, 10))
    X = initial_latents(Y, 6, "pca")
    assert X.shape == (4, 6) and np.all(np.isfinite(X))
    assert_standardised(X[:, :3])
    assert np.all(X[:, 3:].std(axis=0) < 5 * init.EXTRA_DIM_STD)


def test_pca_rank_deficient_data():
    rng = np.random.default_rng(2)
    base = rng.standard_normal((80, 2))
    Y = np.column_stack([base, base @ [[1.0], [2.0]], base[:, :1] - base[:, 1:]])  # rank 2
    X = initial_latents(Y, 3, "pca")
    assert_standardised(X[:, :2])
    assert X[:, 2].std() < 2 * init.EXTRA_DIM_STD


# ------------------------------------------------------------------- random

def test_random_seeded_reproducible_and_seeds_differ():
    Y = np.zeros((40, 5))
    X1 = initial_latents(Y, 3, "random", seed=4)
    X2 = initial_latents(Y, 3, "random", seed=4)
    X3 = initial_latents(Y, 3, "random", seed=5)
    assert X1.shape == (40, 3)
    np.testing.assert_array_equal(X1, X2)
    assert not np.allclose(X1, X3)
    np.testing.assert_array_equal(X1, np.random.default_rng(4).standard_normal((40, 3)))


# ------------------------------------------------------------------- isomap

def test_isomap_unrolls_swiss_roll_better_than_pca():
    Y, t = swiss_roll(800, seed=1)
    X_iso = initial_latents(Y, 2, "isomap", n_neighbors=10)
    X_pca = initial_latents(Y, 2, "pca")
    rho_iso = abs(spearmanr(X_iso[:, 0], t)[0])
    rho_pca = abs(spearmanr(X_pca[:, 0], t)[0])
    assert rho_iso > 0.9
    assert rho_iso > rho_pca + 0.2
    assert_standardised(X_iso)


def test_isomap_landmark_path_on_larger_roll():
    N = init.ISOMAP_EXACT_MAX + 500
    Y, t = swiss_roll(N, seed=2)
    X = initial_latents(Y, 2, "isomap")
    assert X.shape == (N, 2)
    assert abs(spearmanr(X[:, 0], t)[0]) > 0.9
    assert_standardised(X)


def test_isomap_deterministic():
    Y, _ = swiss_roll(300, seed=3)
    np.testing.assert_array_equal(
        initial_latents(Y, 2, "isomap"), initial_latents(Y, 2, "isomap")
    )


def test_isomap_disconnected_clusters_warns_and_works():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((40, 3))
    B = rng.standard_normal((30, 3)) + [200.0, 0.0, 0.0]
    Y = np.vstack([A, B])
    with pytest.warns(IsomapConnectivityWarning, match="2 disconnected components"):
        X = initial_latents(Y, 2, "isomap", n_neighbors=5)
    assert X.shape == (70, 2) and np.all(np.isfinite(X))
    assert_standardised(X)
    # The clusters end up on opposite sides of the first coordinate.
    assert (X[:40, 0].max() < X[40:, 0].min()) or (X[40:, 0].max() < X[:40, 0].min())


def test_isomap_connected_graph_does_not_warn():
    Y, _ = swiss_roll(300, seed=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", IsomapConnectivityWarning)
        initial_latents(Y, 2, "isomap")


def test_isomap_many_components_and_duplicates():
    # Five far-apart pairs of identical points: five components, zero distances.
    centres = np.arange(5)[:, None] * [[50.0, 0.0]]
    Y = np.repeat(centres, 2, axis=0)
    with pytest.warns(IsomapConnectivityWarning, match="5 disconnected components"):
        X = initial_latents(Y, 1, "isomap", n_neighbors=1)
    assert np.all(np.isfinite(X))
    # Along a line, geodesic = Euclidean: the order of the centres is kept.
    order = X[::2, 0]
    assert np.all(np.diff(order) > 0) or np.all(np.diff(order) < 0)


def test_isomap_more_latent_dims_than_supported():
    Y, _ = swiss_roll(200, seed=0)
    X = initial_latents(Y, 250, "isomap")
    assert X.shape == (200, 250) and np.all(np.isfinite(X))


def test_isomap_too_many_points(monkeypatch):
    monkeypatch.setattr(init, "ISOMAP_MAX_POINTS", 50)
    Y = np.random.default_rng(0).standard_normal((51, 3))
    with pytest.raises(ShapeError, match="at most 50 points.*got 51.*Subsample"):
        initial_latents(Y, 2, "isomap")
    initial_latents(Y[:50], 2, "isomap")                 # at the limit: fine


# --------------------------------------------------------------- validation

def test_unknown_method_message():
    msg = "Expected method in ('pca', 'random', 'isomap'), got 'foo' instead."
    with pytest.raises(ValueError, match=re.escape(msg)) as info:
        initial_latents(np.zeros((5, 2)), 2, method="foo")
    assert not isinstance(info.value, ShapeError)


@pytest.mark.parametrize(
    "Y, pattern",
    [
        (np.zeros(5), "2-D"),
        (np.zeros((2, 3, 4)), "2-D"),
        (np.zeros((1, 3)), "at least 2 rows"),
        (np.zeros((4, 0)), "at least 2 rows and 1 column"),
        (np.array([[1.0, np.nan], [0.0, 1.0]]), "finite, got 1 NaN"),
        (np.array([[1.0, np.inf], [0.0, -np.inf]]), "finite, got 2 NaN"),
        (np.array([["a", "b"], ["c", "d"]]), "real numeric"),
        (np.ones((3, 2), dtype=bool), "real numeric"),
        (np.ones((3, 2), dtype=complex), "real numeric"),
    ],
)
@pytest.mark.parametrize("method", ["pca", "random", "isomap"])
def test_bad_data_raises_shape_error(Y, pattern, method):
    with pytest.raises(ShapeError, match=pattern):
        initial_latents(Y, 1, method)


def test_integer_data_accepted():
    Y = np.arange(20).reshape(10, 2) ** 2
    X = initial_latents(Y, 1, "pca")
    np.testing.assert_allclose(X, initial_latents(Y.astype(float), 1, "pca"))


@pytest.mark.parametrize("bad, exc", [(0, ValueError), (-2, ValueError),
                                      (2.0, TypeError), (True, TypeError),
                                      ("2", TypeError)])
def test_bad_latent_dim(bad, exc):
    with pytest.raises(exc, match="latent_dim"):
        initial_latents(np.zeros((5, 2)), bad)


def test_numpy_integer_latent_dim_accepted():
    assert initial_latents(np.random.default_rng(0).random((6, 3)), np.int64(2)).shape == (6, 2)


@pytest.mark.parametrize("bad, exc", [(0, ValueError), (1.5, TypeError)])
def test_bad_n_neighbors(bad, exc):
    Y, _ = swiss_roll(30)
    with pytest.raises(exc, match="n_neighbors"):
        initial_latents(Y, 2, "isomap", n_neighbors=bad)
