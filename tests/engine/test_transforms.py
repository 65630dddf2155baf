"""The positive transforms: value, inverse and gradient factor against independent formulas."""
import math

import numpy as np
import pytest

from engine.transforms import LENGTHSCALE, POSITIVE


def softplus_reference(x: float) -> float:
    """log(1 + e^x) in Python's float arithmetic, branch by branch (no numpy)."""
    if x > 30.0:
        return x + math.exp(-x)  # log1p(e^-x) = e^-x to double precision there
    return math.log1p(math.exp(x))


@pytest.mark.parametrize("transform", [POSITIVE, LENGTHSCALE])
def test_softplus_forward_matches_the_formula_to_a_few_ulp_over_the_whole_range(transform):
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.standard_normal(2000) * s for s in (1e-12, 1e-3, 1.0, 10.0, 40.0, 300.0)])
    value = transform.forward(x)
    expected = np.array([softplus_reference(v) for v in x]) + transform.lower
    assert np.all(np.abs(value - expected) <= 4 * np.spacing(expected))


def test_softplus_forward_neither_overflows_nor_underflows_at_the_extremes():
    x = np.array([-1e308, -800.0, 0.0, 800.0, 1e308, np.inf, -np.inf])
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # e^-|x| underflows to 0: benign
        value = POSITIVE.forward(x)
    np.testing.assert_array_equal(value[[1, 0, 6]], POSITIVE.lower)
    assert value[2] == math.log(2.0) + POSITIVE.lower
    np.testing.assert_array_equal(value[[3, 4, 5]], x[[3, 4, 5]] + POSITIVE.lower)


def test_softplus_inverse_and_gradient_factor_agree_with_forward():
    x = np.linspace(-30.0, 30.0, 601)
    np.testing.assert_allclose(POSITIVE.inverse(POSITIVE.forward(x)), x, rtol=1e-9, atol=1e-6)
    h = 1e-6
    fd = (POSITIVE.forward(x + h) - POSITIVE.forward(x - h)) / (2 * h)
    np.testing.assert_allclose(POSITIVE.grad_factor(x), fd, rtol=1e-6, atol=1e-9)
