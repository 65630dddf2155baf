"""Noise models: quadrature against closed forms and Monte Carlo, derivatives against finite
differences, predictive moments, support checks."""
import numpy as np
import pytest
from scipy import integrate, special, stats

from engine import likelihoods as lk
from engine.errors import ConfigurationError, ShapeError


def _moments(seed=0, shape=(12, 5), spread=1.5, var=(0.01, 2.0)):
    rng = np.random.default_rng(seed)
    return rng.normal(size=shape) * spread, rng.uniform(*var, size=shape)


def _data(name, mean, seed=1):
    rng = np.random.default_rng(seed)
    if name == "bernoulli":
        return (rng.uniform(size=mean.shape) < special.ndtr(mean)).astype(float)
    if name == "poisson":
        return rng.poisson(np.exp(np.clip(mean, -3, 3))).astype(float)
    return mean + rng.normal(size=mean.shape)


LIKELIHOODS = [lk.Gaussian(0.3), lk.Bernoulli(), lk.Poisson()]


@pytest.mark.parametrize("lik", [lk.Gaussian(0.3), lk.Poisson()], ids=["gaussian", "poisson"])
def test_closed_forms_equal_the_quadrature(lik):
    mean, var = _moments()
    Y = _data(lik.name, mean)
    closed = lik.expected_log_density(Y, mean, var)
    quad = lk.Likelihood.expected_log_density(lik, Y, mean, var)
    for a, b in zip(closed[:3], quad[:3]):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9)


def test_compiled_probit_equals_the_generic_quadrature_of_log_phi():
    mean, var = _moments(spread=3.0, var=(1e-6, 3.0))
    Y = _data("bernoulli", mean)
    lik = lk.Bernoulli()
    fast = lik.expected_log_density(Y, mean, var)
    generic = lk.Likelihood.expected_log_density(lik, Y, mean, var)  # scipy-free log Phi of the base class
    for a, b in zip(fast[:3], generic[:3]):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("lik", LIKELIHOODS, ids=lambda l: l.name)
def test_expectation_agrees_with_monte_carlo(lik):
    mean, var = _moments(seed=3, shape=(6, 4), spread=1.0, var=(0.05, 1.0))
    Y = _data(lik.name, mean, seed=4)
    exp = lik.expected_log_density(Y, mean, var).value
    rng = np.random.default_rng(5)
    draws = mean[..., None] + np.sqrt(var)[..., None] * rng.standard_normal(mean.shape + (200_000,))
    logp = lik.logpdf(Y[..., None], draws)
    mc, se = logp.mean(axis=-1), logp.std(axis=-1) / np.sqrt(draws.shape[-1])
    assert np.all(np.abs(exp - mc) < 5 * se + 1e-9)


@pytest.mark.parametrize("lik", LIKELIHOODS, ids=lambda l: l.name)
@pytest.mark.parametrize("var_range", [(0.01, 2.0), (1e-18, 1e-16)], ids=["var", "tiny-var"])
def test_expectation_derivatives_match_finite_differences(lik, var_range):
    mean, var = _moments(seed=7, var=var_range)
    Y = _data(lik.name, mean, seed=8)
    e = lik.expected_log_density(Y, mean, var)
    h = 1e-6
    dm = (lik.expected_log_density(Y, mean + h, var).value - lik.expected_log_density(Y, mean - h, var).value) / (2 * h)
    np.testing.assert_allclose(e.dmean, dm, rtol=1e-6, atol=1e-6)
    hv = 1e-6 * var_range[1] if var_range[1] > 1e-6 else 1e-17
    dv = (lik.expected_log_density(Y, mean, var + hv).value
          - lik.expected_log_density(Y, mean, var - hv).value) / (2 * hv)
    if var_range[1] > 1e-6:
        np.testing.assert_allclose(e.dvar, dv, rtol=1e-5, atol=1e-5)
    # the variance derivative is 1/2 E[g''] (Price): at a tiny variance, g''(mean) / 2
    np.testing.assert_allclose(e.dvar, lk.Likelihood.expected_log_density(lik, Y, mean, var).dvar,
                               rtol=1e-6, atol=1e-6)
    if var_range[1] < 1e-6:
        np.testing.assert_allclose(e.dvar, 0.5 * lik.d2logpdf(Y, mean), rtol=1e-6, atol=1e-8)


def test_gaussian_variance_gradient():
    mean, var = _moments(seed=9)
    Y = _data("gaussian", mean)
    s2, h = 0.4, 1e-7
    g = lk.Gaussian(s2).expected_log_density(Y, mean, var).dparams["variance"]
    num = (lk.Gaussian(s2 + h).expected_log_density(Y, mean, var).value.sum()
           - lk.Gaussian(s2 - h).expected_log_density(Y, mean, var).value.sum()) / (2 * h)
    assert abs(g - num) < 1e-5 * max(1.0, abs(num))


@pytest.mark.parametrize("lik", [lk.Gaussian(0.3), lk.Bernoulli()], ids=["gaussian", "bernoulli"])
def test_log_predictive_closed_forms_equal_adaptive_quadrature(lik):
    mean, var = _moments(seed=11, var=(1e-3, 3.0))
    Y = _data(lik.name, mean)
    closed = lik.log_predictive_density(Y, mean, var)
    quad = lk.Likelihood.log_predictive_density(lik, Y, mean, var)
    for a, b in zip(closed, quad):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_poisson_log_predictive_density_equals_numerical_integration():
    mean, var = _moments(seed=12, shape=(5, 4), spread=1.5, var=(0.01, 2.0))
    mean += 1.0
    Y = _data("poisson", mean, seed=13)
    lik = lk.Poisson()
    value, dmean, dvar = lik.log_predictive_density(Y, mean, var)
    ref = np.empty_like(value)
    for i, j in np.ndindex(Y.shape):
        def integrand(f):
            return np.exp(Y[i, j] * f - np.exp(f) - special.gammaln(Y[i, j] + 1)) * stats.norm.pdf(
                f, mean[i, j], np.sqrt(var[i, j]))
        ref[i, j] = np.log(integrate.quad(integrand, -30, 30, epsabs=0, epsrel=1e-13, limit=500)[0])
    np.testing.assert_allclose(value, ref, atol=1e-8)
    h = 1e-6
    num_m = (lik.log_predictive_density(Y, mean + h, var)[0] - lik.log_predictive_density(Y, mean - h, var)[0]) / (2 * h)
    num_v = (lik.log_predictive_density(Y, mean, var + h)[0] - lik.log_predictive_density(Y, mean, var - h)[0]) / (2 * h)
    np.testing.assert_allclose(dmean, num_m, atol=1e-6)
    np.testing.assert_allclose(dvar, num_v, atol=1e-6)


def test_predictive_moments_agree_with_monte_carlo():
    rng = np.random.default_rng(14)
    mean, var = np.array([[-1.0, 0.3, 2.0]]), np.array([[0.5, 2.0, 0.1]])
    f = mean[..., None] + np.sqrt(var)[..., None] * rng.standard_normal((1, 3, 400_000))
    p, pv = lk.Bernoulli().predictive_moments(mean, var)
    np.testing.assert_allclose(p, special.ndtr(f).mean(axis=-1), atol=3e-3)
    np.testing.assert_allclose(pv, p * (1 - p))
    f = f[:, [0, 2]]  # a log-normal rate with variance 2 is too heavy-tailed for a Monte Carlo variance
    mean, var = mean[:, [0, 2]], var[:, [0, 2]]
    rate = np.exp(f)
    y = rng.poisson(rate)
    Ey, Vy = lk.Poisson().predictive_moments(mean, var)
    np.testing.assert_allclose(Ey, rate.mean(axis=-1), rtol=1e-2)
    np.testing.assert_allclose(Vy, y.var(axis=-1), rtol=3e-2)
    gm, gv = lk.Gaussian(0.2).predictive_moments(mean, var)
    np.testing.assert_allclose(gm, mean)
    np.testing.assert_allclose(gv, var + 0.2)


def test_unobserved_entries_contribute_nothing():
    mean, var = _moments(seed=15)
    Y = _data("bernoulli", mean)
    mask = np.random.default_rng(16).uniform(size=Y.shape) < 0.7
    Yw = np.where(mask, Y, 0.5)  # outside the support, but never read
    for lik in LIKELIHOODS:
        e = lik.expected_log_density(Yw if lik.name == "bernoulli" else Y, mean, var, mask)
        for a in e[:3]:
            assert np.all(a[~mask] == 0.0)
        full = lik.expected_log_density(Y, mean, var)
        np.testing.assert_allclose(e.value[mask], full.value[mask])


def test_log_ndtr_and_mills_over_the_whole_range():
    z = np.concatenate([np.linspace(-200, -30.5, 500), np.linspace(-30, 40, 20001)])
    np.testing.assert_allclose(lk.log_ndtr(z), special.log_ndtr(z), rtol=1e-12, atol=1e-300)
    ref = np.exp(stats.norm.logpdf(z) - special.log_ndtr(z))
    np.testing.assert_allclose(lk.mills(z), ref, rtol=1e-9, atol=1e-300)


def test_support_errors_name_the_first_bad_cell():
    Y = np.array([[0.0, 1.0, 1.0], [1.0, 0.5, 2.0]])
    with pytest.raises(ShapeError, match=r"row 1, column 1 holds 0\.5"):
        lk.Bernoulli().check(Y)
    lk.Bernoulli().check(Y, mask=np.array([[1, 1, 1], [1, 0, 0]], bool))  # the bad cells are missing
    with pytest.raises(ShapeError, match=r"row 0, column 2 holds -1\.0"):
        lk.Poisson().check(np.array([[0.0, 3.0, -1.0], [2.5, 1.0, 0.0]]))
    with pytest.raises(ShapeError, match=r"row 1, column 0 holds 2\.5"):
        lk.Poisson().check(np.array([[0.0, 3.0, 1.0], [2.5, 1.0, 0.0]]))
    lk.Poisson().check(np.array([[0.0, 3.0], [17.0, 1.0]]))


def test_names():
    assert [lk.get_likelihood(n).name for n in lk.LIKELIHOODS] == list(lk.LIKELIHOODS)
    assert lk.likelihood_name("Bernoulli") == "bernoulli"
    with pytest.raises(ConfigurationError, match="likelihood"):
        lk.get_likelihood("logistic")
    with pytest.raises(ConfigurationError):
        lk.get_likelihood(3)
