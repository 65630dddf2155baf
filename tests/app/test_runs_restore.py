"""Every model of the catalog comes back from the runs table: its model built again from the data and
the run's kept parameters is the same model (same objective, same predictions)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import engine
from gplvm_explorer.catalog import CATALOG, ModelConfig
from gplvm_explorer.dispatch import Dispatcher
from gplvm_explorer.state.runs import RunsTable
from gplvm_explorer.training import TrainedResult

pytestmark = pytest.mark.timeout(300)

N, D = 40, 6


class _Training:
    active = False

    @staticmethod
    def build_model(Y, config):
        return config.spec.build(Y, config)


class _Explorer:
    training = _Training()


def config_for(key: str) -> ModelConfig:
    extra = {}
    spec = CATALOG[key]
    if "time" in spec.inputs:
        extra["times"] = tuple(np.linspace(0, 1, N))
    if "views" in spec.inputs:
        extra["view_sizes"] = (3, 3)
    if "layers" in spec.inputs:
        extra["layer_dims"] = (3, 2)
    return ModelConfig(model=key, kernel=spec.kernels[0], latent_dim=2, num_inducing=8, max_iters=4,
                       optimizer=spec.optimizers[0], batch_size=16, **extra)


@pytest.mark.parametrize("key", sorted(CATALOG))
def test_a_kept_run_rebuilds_to_the_same_model(key):
    rng = np.random.default_rng(1)
    t = rng.uniform(-1, 1, size=(N, 2))
    Y = np.sin(t @ rng.normal(size=(2, D))) + 0.05 * rng.normal(size=(N, D))
    config = config_for(key)
    model = config.spec.build(Y, config)
    engine.fit(model, optimizer=config.optimizer, max_iters=4)

    class _Data:
        values, name, labels, n = Y, "toy", None, N

    result = TrainedResult.from_model(model.copy(), run_id=1, config=config, dataset=_Data(), iteration=4)
    runs = RunsTable(Dispatcher())
    runs._explorer = _Explorer()
    record = runs.add(result, "finished", 1.0)
    assert record.result.model is None
    again = runs.rebuilt(record).model
    assert again is not model
    np.testing.assert_array_equal(again.get_free(), model.get_free())
    assert again.objective() == pytest.approx(model.objective(), rel=1e-9, abs=1e-9)
    Xnew = np.asarray(result.X_mean[:5], dtype=float)
    mean0, var0 = model.predict(Xnew)
    mean1, var1 = again.predict(Xnew)
    np.testing.assert_allclose(mean1, mean0, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(var1, var0, rtol=1e-9, atol=1e-12)
