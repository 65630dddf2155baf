"""Tests of engine.metrics: leave-one-out 1-NN errors and relevance ranking."""
import numpy as np
import pytest

from engine import metrics
from engine.errors import ShapeError
from engine.metrics import most_relevant_dims, one_nn_error_rate, one_nn_errors


def reference_one_nn_errors(X, labels):
    """Slow double loop: nearest other point, lowest index on ties."""
    N = len(X)
    errors = 0
    for i in range(N):
        best, best_j = np.inf, -1
        for j in range(N):
            if j == i:
                continue
            d = 0.0
            for q in range(X.shape[1]):
                d += (X[i, q] - X[j, q]) ** 2
            if d < best:
                best, best_j = d, j
        if labels[best_j] != labels[i]:
            errors += 1
    return errors


NAMES = np.array(["setosa", "versicolor", "virginica", "x"])


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("as_strings", [False, True])
def test_matches_brute_force_on_random_data(seed, as_strings):
    rng = np.random.default_rng(seed)
    N, Q = 60 + 10 * seed, 1 + seed % 3
    X = rng.standard_normal((N, Q))
    labels = rng.integers(0, 3, N)
    if as_strings:
        labels = list(NAMES[labels])
    expected = reference_one_nn_errors(X, labels)
    assert one_nn_errors(X, labels) == expected
    assert one_nn_error_rate(X, labels) == pytest.approx(expected / N)


@pytest.mark.parametrize("seed", range(3))
def test_matches_brute_force_with_many_ties(seed):
    # Points on a small integer grid: many equidistant neighbours and duplicates.
    rng = np.random.default_rng(100 + seed)
    X = rng.integers(0, 4, size=(80, 2)).astype(float)
    labels = rng.integers(0, 2, 80)
    assert one_nn_errors(X, labels) == reference_one_nn_errors(X, labels)


def test_chunked_rows_match_brute_force(monkeypatch):
    monkeypatch.setattr(metrics, "_BLOCK_ENTRIES", 7 * 50)     # 7-row blocks
    rng = np.random.default_rng(9)
    X = rng.integers(0, 3, size=(50, 2)).astype(float)
    labels = rng.integers(0, 3, 50)
    assert one_nn_errors(X, labels) == reference_one_nn_errors(X, labels)


def test_separated_clusters_give_zero():
    rng = np.random.default_rng(0)
    X = np.vstack([rng.standard_normal((30, 2)) + c for c in ([0, 0], [50, 0], [0, 50])])
    labels = np.repeat(["a", "b", "c"], 30)
    assert one_nn_errors(X, labels) == 0
    assert one_nn_error_rate(X, labels) == 0.0


def test_hand_made_case_with_a_tie():
    # x = 0, 1, 2, 5 with labels 0, 1, 1, 1:
    #   0 -> 1 (label 1): error;  1 -> tie between 0 and 2, lowest index 0: error;
    #   2 -> 1: right;  5 -> 2: right.   Two errors (one if ties went upwards).
    X = np.array([[0.0], [1.0], [2.0], [5.0]])
    labels = [0, 1, 1, 1]
    assert one_nn_errors(X, labels) == 2
    assert one_nn_error_rate(X, labels) == 0.5
    # Labels 0, 0, 1, 1: the tie at point 1 goes to point 0 (same label), so
    # the only error is point 2 -> 1; ties broken upwards would give two.
    assert one_nn_errors(X, [0, 0, 1, 1]) == 1


def test_self_is_excluded_and_duplicates_count():
    X = np.array([[0.0, 0.0], [0.0, 0.0], [10.0, 0.0]])
    # Points 0 and 1 coincide; each is the other's nearest neighbour.
    assert one_nn_errors(X, ["a", "b", "b"]) == 3
    assert one_nn_errors(X, ["a", "a", "b"]) == 1


def test_returns_python_types():
    X = np.random.default_rng(0).standard_normal((10, 2))
    assert type(one_nn_errors(X, np.arange(10) % 2)) is int
    assert type(one_nn_error_rate(X, np.arange(10) % 2)) is float


@pytest.mark.parametrize(
    "X, labels, pattern",
    [
        (np.zeros(4), [0, 1, 0, 1], r"shape \(N, Q\)"),
        (np.zeros((1, 2)), [0], "N >= 2"),
        (np.array([[0.0], [np.nan]]), [0, 1], "finite"),
        (np.array([["a"], ["b"]]), [0, 1], "real numeric"),
        (np.zeros((3, 2)), [0, 1], r"labels with shape \(3,\)"),
        (np.zeros((3, 2)), [[0, 1, 2]], r"labels with shape \(3,\)"),
        (np.zeros((3, 2)), [0.0, np.nan, 1.0], "NaN labels"),
    ],
)
def test_validation(X, labels, pattern):
    with pytest.raises(ShapeError, match=pattern):
        one_nn_errors(X, labels)
    with pytest.raises(ShapeError, match=pattern):
        one_nn_error_rate(X, labels)


# ------------------------------------------------------- most_relevant_dims

def test_most_relevant_dims_order_and_stable_ties():
    r = np.array([0.1, 5.0, 3.0, 5.0, 0.0])
    np.testing.assert_array_equal(most_relevant_dims(r), [1, 3])
    np.testing.assert_array_equal(most_relevant_dims(r, k=5), [1, 3, 2, 0, 4])
    np.testing.assert_array_equal(most_relevant_dims(np.zeros(3), k=3), [0, 1, 2])
    out = most_relevant_dims([2, 7, 1], k=1)
    assert out.shape == (1,) and np.issubdtype(out.dtype, np.integer) and out[0] == 1


def test_most_relevant_dims_matches_sorting_reference():
    rng = np.random.default_rng(1)
    r = rng.integers(0, 4, 12).astype(float)          # plenty of ties
    expected = sorted(range(12), key=lambda q: (-r[q], q))[:6]
    np.testing.assert_array_equal(most_relevant_dims(r, k=6), expected)


@pytest.mark.parametrize(
    "relevance, k, exc, pattern",
    [
        ([1.0, 2.0], 3, ValueError, "k between 1 and 2"),
        ([1.0, 2.0], 0, ValueError, "k between 1 and 2"),
        ([1.0, 2.0], 1.0, TypeError, "k to be an integer"),
        ([[1.0, 2.0]], 1, ShapeError, r"shape \(Q,\)"),
        ([], 1, ShapeError, r"shape \(Q,\)"),
        ([1.0, np.nan], 1, ShapeError, "finite"),
        (["a", "b"], 1, ShapeError, "real numeric"),
    ],
)
def test_most_relevant_dims_validation(relevance, k, exc, pattern):
    with pytest.raises(exc, match=pattern):
        most_relevant_dims(relevance, k=k)
