"""Refusals of impossible inputs read as sentences about the user's input (the value, the name it was given)."""
from __future__ import annotations

import numpy as np
import pytest

import engine


def _Y():
    return np.random.default_rng(0).normal(size=(20, 3))


def test_a_negative_variance_is_named_and_shown_as_a_plain_number():
    model = engine.BayesianGPLVM(_Y(), 2, num_inducing=4)
    with pytest.raises(engine.ShapeError) as refused:
        model.set_parameters(noise_variance=-1.0)
    assert str(refused.value) == "Expected noise_variance above 1e-08, got -1 instead."


@pytest.mark.parametrize("cls", [engine.BayesianGPLVM, engine.SparseGPLVM, engine.StochasticBayesianGPLVM])
def test_inducing_points_of_the_wrong_width_are_called_z(cls):
    with pytest.raises(engine.ShapeError) as refused:
        cls(_Y(), 2, num_inducing=5, Z=np.zeros((5, 3)))
    assert str(refused.value) == "Expected Z with 2 columns, got shape (5, 3) instead."
    with pytest.raises(engine.ShapeError, match="^Z contains NaN"):
        cls(_Y(), 2, num_inducing=5, Z=np.full((5, 2), np.nan))
