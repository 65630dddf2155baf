"""The deep GP in the app: its catalog entry, the layers text, per-layer maps and a picked row.

Fits are tiny (a few iterations on a bundled sample): these check the plumbing, not the model's
quality (tests/engine and benchmarks/ do that).
"""
from __future__ import annotations

import numpy as np
import pytest

from gplvm_explorer.catalog import ModelConfig, check, parse_layer_dims, spec
from gplvm_explorer.data import load_sample
from gplvm_explorer.dispatch import Dispatcher
from gplvm_explorer.explorer import Explorer
from gplvm_explorer.state.deep import DeepLayers, has_layers, layer_maps
from gplvm_explorer.state.settings import ModelSettings
from gplvm_explorer.training import Limiter, ProgressEvent, ResultEvent, TrainingJob


@pytest.fixture(scope="module")
def flow():
    ds = load_sample("three-phase-flow")
    return ds.replace(values=np.ascontiguousarray(ds.values[::5]), labels=ds.labels[::5])


@pytest.fixture(scope="module")
def deep_run(flow):
    cfg = ModelConfig(model="deep", latent_dim=2, layer_dims=(4, 2), num_inducing=12, max_iters=12)
    job = TrainingJob(1, flow.values, cfg, dataset=flow, limiter=Limiter(1), publish_interval=0.0)
    job.start()
    assert job.join(240)
    events = job.drain()
    results = [e.result for e in events if isinstance(e, ResultEvent)]
    assert results and results[-1].final
    return events, results


# ---- catalog and settings ------------------------------------------------------------------------
def test_catalog_entry_takes_layers_and_has_its_own_panel():
    s = spec("deep")
    assert s.inputs == ("layers",) and s.panel == "deep" and s.objective_name == "ELBO"
    assert s.uses_inducing and s.uncertain_latents
    cfg = ModelConfig(model="deep", layer_dims=(5, 2), latent_dim=2)
    assert "layers=5, 2" in cfg.describe()


@pytest.mark.parametrize("text, dims", [("5, 2", (5, 2)), ("3", (3,)), (" 4,3 ,2 ", (4, 3, 2)), ("6;2", (6, 2))])
def test_layer_text_is_parsed(text, dims):
    assert parse_layer_dims(text) == dims


@pytest.mark.parametrize("text", ["", "5, x", "0, 2", "5,,2", "1,1,1,1,1", "2.5, 1", "<b>5</b>"])
def test_bad_layer_text_is_refused_with_a_reason(text):
    with pytest.raises(ValueError) as err:
        parse_layer_dims(text)
    assert str(err.value)


def test_settings_validate_the_layers_and_set_the_top_dims():
    s = ModelSettings()
    s.set_data_shape(200, 12)
    s.model = "deep"
    s.layers = "4, 3, 2"
    assert s.errors == []
    cfg = s.config()
    assert cfg.layer_dims == (4, 3, 2) and cfg.latent_dim == 2
    s.layers = "4, two"
    assert s.errors and "two" in s.errors[0]
    assert s.config().layer_dims == ()
    s.layers = "5, 2"
    assert s.errors == []
    s.model = "bayesian"  # other models ignore the text
    s.layers = "nonsense"
    assert s.errors == [] and s.config().layer_dims is None


def test_cost_grows_with_the_layers():
    one = spec("deep").config_cost(ModelConfig(model="deep", layer_dims=(2,), latent_dim=2), 1000, 12)
    two = spec("deep").config_cost(ModelConfig(model="deep", layer_dims=(5, 2), latent_dim=2), 1000, 12)
    assert two.memory_bytes > one.memory_bytes and two.seconds_per_iteration > one.seconds_per_iteration
    errors, _ = check(ModelConfig(model="deep", layer_dims=(), latent_dim=2), 100, 12)
    assert errors


# ---- training and the layers' maps ---------------------------------------------------------------
def test_worker_trains_a_two_layer_model_and_publishes_live(deep_run, flow):
    events, results = deep_run
    assert sum(isinstance(e, ProgressEvent) for e in events) >= 1
    final = results[-1]
    assert has_layers(final)
    assert final.X_mean.shape == (flow.n, 2)
    assert [layer.X_mean.shape[1] for layer in final.model.layers] == [4, 2]


def test_layer_maps_one_per_layer_with_variance(deep_run, flow):
    maps = layer_maps(deep_run[1][-1], grid=10)
    assert [m.latent_dim for m in maps] == [4, 2]
    for m in maps:
        assert m.points.shape == (flow.n, 2)
        assert m.variance is not None and m.variance.shape == (10, 10) and np.all(m.variance > 0)
        assert m.relevance.shape == (m.latent_dim,)
        xd, yd = m.dims
        assert m.relevance[xd] >= m.relevance[yd]


def test_per_layer_relevance_changes_during_training(deep_run):
    results = deep_run[1]
    first = [np.array(layer.relevance) for layer in results[0].model.layers]
    last = [np.array(layer.relevance) for layer in results[-1].model.layers]
    assert len(results) >= 2
    assert any(not np.allclose(a, b) for a, b in zip(first, last))


def test_picking_a_top_row_shows_it_in_every_layer_and_in_data_space(deep_run, flow):
    state = DeepLayers(Dispatcher())
    result = deep_run[1][-1]
    state.offer(result)
    assert state.wait(60)
    assert len(state.maps) == 2 and state.result is result
    x, y = state.maps[-1].points[7]
    row = state.nearest_top(x, y)
    assert row == 7
    sel = state.select(row)
    assert [loc.shape for loc in sel.locations] == [(4,), (2,)]
    np.testing.assert_allclose(sel.locations[0], result.model.layers[0].X_mean[7])
    mean, _ = result.predict(result.model.layers[-1].X_mean[7][None, :])
    np.testing.assert_allclose(sel.mean, flow.unstandardize(mean)[0])
    assert sel.mean.shape == sel.std.shape == sel.actual.shape == (flow.d,)
    with pytest.raises(ValueError):
        state.select(10**6)
    state.offer(None)  # a model without layers clears the maps
    assert state.maps == [] and state.selection is None


def test_explorer_trains_a_deep_model_and_fills_the_layer_maps():
    ex = Explorer(limiter=Limiter(1))
    ex.data.sample = "swiss-roll"
    ex.settings.model = "deep"
    ex.settings.layers = "3, 2"
    ex.settings.num_inducing = 10
    ex.settings.max_iters = 5
    assert ex.train()
    assert ex.training.join(240)
    ex.training.pump()
    assert ex.deep.wait(60)
    assert [m.latent_dim for m in ex.deep.maps] == [3, 2]
    ex.settings.model = "bayesian"
    ex.close()
