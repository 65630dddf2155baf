"""The likelihood the page proposes for a data set's values."""
import numpy as np

from gplvm_explorer.data.value_kind import propose_likelihood


def test_binary_values_propose_bernoulli_and_say_why():
    Y = np.array([[0, 1, 1], [1, 0, np.nan], [0, 0, 1]], dtype=float)
    got = propose_likelihood(Y)
    assert got.likelihood == "bernoulli"
    assert "0 or 1" in got.reason and "\n" not in got.reason


def test_counts_propose_poisson():
    Y = np.array([[0, 3, 12], [1, np.nan, 7], [4, 0, 2]], dtype=float)
    got = propose_likelihood(Y)
    assert got.likelihood == "poisson" and "whole number" in got.reason


def test_other_values_keep_the_gaussian():
    for Y in (np.array([[0.0, 1.0], [0.5, 1.0]]), np.array([[0.0, -1.0], [2.0, 3.0]]),
              np.array([[0.0, 1e7], [2.0, 3.0]]), np.full((2, 2), np.nan)):
        got = propose_likelihood(Y)
        assert got == ("gaussian", "")
