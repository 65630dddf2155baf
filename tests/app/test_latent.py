"""LatentSlice: the KD-tree lookup, the variance grid computed once per (result, slice), reconstructions."""
from __future__ import annotations

import numpy as np
import pytest

from gplvm_explorer.catalog import ModelConfig
from gplvm_explorer.data import Dataset
from gplvm_explorer.dispatch import Dispatcher
from gplvm_explorer.state.latent import LatentSlice, NearestIndex, most_relevant, padded_extent
from gplvm_explorer.training import TrainedResult

pytestmark = pytest.mark.timeout(60)


def test_kdtree_lookup_matches_brute_force():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((5000, 2))
    index = NearestIndex(X)
    for q in rng.uniform(-3, 3, size=(200, 2)):
        brute = int(np.argmin(((X - q) ** 2).sum(1)))
        j, dist = index.nearest(*q)
        assert j == brute and dist == pytest.approx(np.sqrt(((X[brute] - q) ** 2).sum()))
    assert index.within(10.0, 10.0, radius=0.1) is None
    assert index.within(*X[17], radius=1e-9) == 17
    with pytest.raises(ValueError):
        NearestIndex(np.zeros((3, 3)))


def test_most_relevant_and_extent():
    assert most_relevant([0.1, 5.0, 0.2, 3.0]) == [1, 3]
    x0, y0, x1, y1 = padded_extent(np.array([[0.0, 0.0], [1.0, 2.0]]))
    assert x0 < 0 < 1 < x1 and y0 < 0 < 2 < y1


def result_for(fake_build, n=300, Q=3, run_id=1, labels=True):
    Y = np.random.default_rng(2).standard_normal((n, 5))
    ds = Dataset(Y, labels=np.arange(n) % 3 if labels else None, name="t")
    model = fake_build()(Y, ModelConfig(model="gplvm", latent_dim=Q))
    X = model.X_mean.copy()
    return TrainedResult(run_id=run_id, iteration=1, objective=0.0, objective_name="log-likelihood", model=model,
                         X_mean=X, X_variance=None, relevance=model.relevance, parameters={},
                         config=ModelConfig(model="gplvm", latent_dim=Q), dataset=ds, final=True)


def test_grid_is_computed_once_per_result_and_slice(fake_build):
    lat = LatentSlice(Dispatcher())
    r = result_for(fake_build)
    lat.offer(r)
    assert lat.wait()
    v = lat.view
    assert v is not None and v.dims == (0, 1)  # relevance 3, 2, 1: the two most relevant
    assert v.grid.values.shape == (128, 128) and v.grid.kind == "variance" and v.grid.resolution >= 100
    assert r.model.predict_calls == [128 * 128]  # one predict for the whole grid
    lat.offer(r)  # the same result again: nothing to recompute
    lat.wait()
    assert r.model.predict_calls == [128 * 128] and lat.view.index is v.index
    lat.fixed = [0.0, 0.0, 1.5]  # another slice of the same result: one more grid, same KD-tree
    lat.wait()
    assert r.model.predict_calls == [128 * 128] * 2 and lat.view.index is v.index
    lat.auto_dims = False
    lat.x_dim, lat.y_dim = 2, 0
    lat.wait()
    assert lat.view.dims == (2, 0) and lat.view.index is not v.index


def test_reconstruction_is_one_predict_and_one_lookup(fake_build):
    lat = LatentSlice(Dispatcher())
    r = result_for(fake_build)
    lat.offer(r)
    lat.wait()
    calls = len(r.model.predict_calls)
    pts = lat.view.points
    rec = lat.reconstruct_at(*pts[42])
    assert r.model.predict_calls[calls:] == [1]
    assert rec.nearest_index == 42 and rec.nearest_label == "0"
    assert rec.mean.shape == rec.std.shape == rec.nearest_values.shape == (5,)
    np.testing.assert_allclose(rec.nearest_values, r.dataset.values[42])
    assert lat.reconstruction is rec
    assert lat.set_fixed_from_nearest() and lat.fixed == pytest.approx(list(r.X_mean[42]))


def test_no_result_clears_the_view(fake_build):
    lat = LatentSlice(Dispatcher())
    lat.offer(result_for(fake_build))
    lat.wait()
    lat.offer(None)
    assert lat.view is None and lat.reconstruct_at(0.0, 0.0) is None
