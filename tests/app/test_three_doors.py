"""The three doors -- the page, ``gplvm-explorer fit`` and scikit-learn's ``GPLVMTransformer`` --
build their models with the engine's one factory (:mod:`engine.build`): the same settings on the
same data start from the same point, so the starting objective agrees to 1e-12."""
from __future__ import annotations

import re

import numpy as np
import pytest

from engine.build import Settings, build
from engine.sklearn import GPLVMTransformer
from gplvm_explorer import cli
from gplvm_explorer.explorer import Explorer
from gplvm_explorer.training import Limiter

pytestmark = pytest.mark.timeout(300)

OBJECTIVE = re.compile(r"\((?:ELBO|log-likelihood) (-?[0-9.e+-]+)\)")


def rows(N=60, seed=3):
    """Columns of similar scale (the page has no reason to rescale them), curved in 2-D."""
    rng = np.random.default_rng(seed)
    t, s = rng.uniform(-1, 1, N), rng.uniform(-1, 1, N)
    Y = np.c_[t, s, t * s, np.sin(2 * t), np.cos(2 * s), t**2 - s]
    return Y + 0.05 * rng.standard_normal(Y.shape)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    Y = rows()
    path = tmp_path_factory.mktemp("doors") / "mine.csv"
    header = ",".join(f"f{j + 1}" for j in range(Y.shape[1]))
    np.savetxt(path, Y, delimiter=",", header=header, comments="", fmt="%.17g")  # exact round trip
    return Y, path


def page_start(path, settings: Settings) -> float:
    """The starting objective the page prepares for the next Train click."""
    ex = Explorer(limiter=Limiter(1))
    try:
        assert ex.data.load_upload(path.read_bytes(), path.name), ex.data.error
        np.testing.assert_array_equal(ex.data.dataset.values, np.loadtxt(path, delimiter=",", skiprows=1))
        for name in ("model", "kernel", "bias", "white", "latent_dim", "num_inducing", "init", "seed"):
            setattr(ex.settings, name, getattr(settings, name))
        assert ex.settings.errors == [], ex.settings.errors
        ex.dispatcher.flush()  # the page's update: prepares the start of these settings
        prepared = ex.training.prepared
        assert prepared is not None and prepared.config.settings() == settings
        assert prepared.wait(120) and prepared.ready
        return prepared.value
    finally:
        ex.close()


def cli_start(path, settings: Settings, tmp_path, capsys) -> float:
    flags = ["--model", settings.model, "--kernel", settings.kernel, "--latent-dim", settings.latent_dim,
             "--num-inducing", settings.num_inducing, "--init", settings.init, "--seed", settings.seed,
             "--bias" if settings.bias else "--no-bias", "--white" if settings.white else "--no-white"]
    code = cli.main(["fit", str(path), "-o", str(tmp_path / "m.npz"), "--max-iters", "0", "--quiet",
                     *map(str, flags)])
    err = capsys.readouterr().err
    assert code == 0, err
    match = OBJECTIVE.search(err.strip().splitlines()[-1])
    assert match, err
    return float(match.group(1))


def sklearn_start(Y, settings: Settings) -> float:
    est = GPLVMTransformer(n_components=settings.latent_dim, model=settings.model, kernel=settings.kernel,
                           num_inducing=settings.num_inducing, init=settings.init, random_state=settings.seed,
                           bias=settings.bias, white=settings.white, max_iters=0).fit(Y)
    return est.objective_


@pytest.mark.parametrize("settings", [
    Settings(model="bayesian", kernel="rbf", latent_dim=3, num_inducing=10),  # the example
    Settings(model="bayesian", kernel="linear", latent_dim=2, num_inducing=8, bias=False, white=True, seed=4),
    Settings(model="sparse", kernel="rbf", latent_dim=3, num_inducing=12, bias=False, white=False, init="random",
             seed=1),
    Settings(model="gplvm", kernel="matern52", latent_dim=2, bias=True, white=False),
], ids=["bayesian-rbf", "bayesian-linear", "sparse-random", "gplvm-matern"])
def test_the_three_doors_start_from_the_same_objective(data, settings, tmp_path, capsys):
    Y, path = data
    starts = {"page": page_start(path, settings), "cli": cli_start(path, settings, tmp_path, capsys),
              "sklearn": sklearn_start(Y, settings)}
    reference = build(Y, settings)
    reference.begin_fit()  # the jitter a fit starts with, as every door's fit chooses it
    expected = reference.objective()
    for door, value in starts.items():
        assert value == pytest.approx(expected, rel=1e-12, abs=0.0), (door, starts, expected)


def test_the_factory_starts_stationary_kernels_from_the_principal_components():
    """With a PCA start the lengthscales are 1 / (each component's variance over the largest);
    a random start has no such information (lengthscales 1); the bias and white terms are added."""
    rng = np.random.default_rng(0)
    scales = np.array([3.0, 1.0, 0.1])
    Y = (rng.standard_normal((400, 3)) * scales) @ np.linalg.qr(rng.standard_normal((3, 3)))[0]
    model = build(Y, Settings(model="bayesian", latent_dim=3, num_inducing=10))
    rbf, bias, white = model.kernel.parts
    fractions = scales**2 / scales[0] ** 2
    np.testing.assert_allclose(rbf.params["lengthscales"], 1 / fractions, rtol=0.1)
    assert (bias.params["variance"], white.params["variance"]) == pytest.approx((0.1, 1e-3), rel=1e-12)
    plain = build(Y, Settings(model="bayesian", latent_dim=3, num_inducing=10, init="random", bias=False,
                              white=False))
    np.testing.assert_array_equal(plain.kernel.params["lengthscales"], np.ones(3))


def test_the_factory_refuses_unknown_settings_with_typed_errors():
    import engine

    Y = rows(20)
    for bad, match in (({"model": "umap"}, "model"), ({"kernel": "cosine"}, "kernel"),
                       ({"init": "tsne"}, "init"), ({"likelihood": "student"}, "likelihood"),
                       ({"model": "sparse", "likelihood": "bernoulli"}, "takes only the Gaussian likelihood")):
        with pytest.raises(engine.ConfigurationError, match=match):
            build(Y, Settings(**bad))
    with pytest.raises(engine.UnsupportedKernelError):
        build(Y, Settings(model="bayesian", kernel="matern32"))


def test_the_factory_passes_a_likelihood_to_the_models_that_take_one():
    Y = (rows(30) > 0).astype(float)
    model = build(Y, Settings(model="bayesian", likelihood="bernoulli", num_inducing=6))
    assert model.likelihood == "bernoulli" and np.isfinite(model.objective())
    assert build(Y, Settings(model="gplvm", likelihood="poisson")).likelihood == "poisson"
