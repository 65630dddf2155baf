"""Train with a start the numbers refuse: the page falls back, says so, and trains (never a failed run)."""
from __future__ import annotations

import io

import numpy as np
import pytest

import engine
from engine import kernels
from gplvm_explorer.explorer import Explorer
from gplvm_explorer.training import Limiter

pytestmark = pytest.mark.timeout(300)


def _csv(Y) -> bytes:
    buf = io.StringIO()
    np.savetxt(buf, Y, delimiter=",", header=",".join(f"c{j}" for j in range(Y.shape[1])), comments="")
    return buf.getvalue().encode()


def smooth_and_noiseless(Y, config):
    """The page's model with a kernel far smoother than the data and a tiny noise: at M=30 its start cannot
    be factorised even at the largest jitter (tests/engine/test_fit_start.py), at M=15 it can."""
    Q = int(config.latent_dim)
    return engine.BayesianGPLVM(Y, Q, num_inducing=int(config.num_inducing), init=config.init, noise_variance=2e-8,
                                kernel=kernels.RBF(Q, variance=1e4, lengthscales=[10.0] * Q))


@pytest.mark.parametrize("prepared", [True, False], ids=["prepared-start", "built-at-the-click"])
def test_a_refused_start_trains_from_a_fallback_with_a_note(pump, prepared):
    rng = np.random.default_rng(0)
    Y = rng.normal(size=(500, 2)) @ rng.normal(size=(2, 6))
    ex = Explorer(limiter=Limiter(2), build=smooth_and_noiseless)
    try:
        assert ex.data.load_upload(_csv(Y), "rank2.csv"), ex.data.error
        ex.settings.latent_dim, ex.settings.num_inducing, ex.settings.max_iters = 3, 30, 5
        if prepared:  # the page prepares the start in the background before the click
            assert pump(ex, lambda: ex.training._prepared is not None and ex.training._prepared.wait(0), timeout=120)
        else:
            ex.training.cancel_prepared()
        assert ex.train(), ex.training.message
        assert pump(ex, lambda: ex.training.status in ("finished", "stopped", "failed"), timeout=240)
        tr = ex.training
        assert tr.status == "finished", tr.message
        assert tr.message_kind == "warning" and "M=15 inducing points instead of 30" in tr.message
        assert tr.result.final and tr.result.config.num_inducing == 15 and tr.result.model.num_inducing == 15
        assert np.isfinite(tr.result.objective) and tr.iteration == 5
    finally:
        ex.close()
