"""GPDS and MRD in the app: catalog entries, model inputs (time, views), NPZ views, trajectory, cross-view.

Fits are tiny (few iterations on the bundled samples, subsampled where it helps): these check the
plumbing, not the models' quality (tests/engine and benchmarks/ do that).
"""
from __future__ import annotations

import io

import numpy as np
import pytest

from gplvm_explorer.catalog import CATALOG, ModelConfig, check, spec, view_split
from gplvm_explorer.data import load_file, load_sample
from gplvm_explorer.dispatch import Dispatcher
from gplvm_explorer.explorer import Explorer
from gplvm_explorer.state.dynamics import Dynamics, find_gaps, frame_at, trajectory
from gplvm_explorer.state.model_inputs import LABEL, ROW_ORDER, ModelInputs, column_key
from gplvm_explorer.state.multiview import MultiView, cross_predict, split, view_layout
from gplvm_explorer.training import Limiter, ResultEvent, TrainingJob


def fit(ds, config):
    job = TrainingJob(1, ds.values, config, dataset=ds, limiter=Limiter(1), publish_interval=1e9)
    job.start()
    assert job.join(180)
    results = [e.result for e in job.drain() if isinstance(e, ResultEvent)]
    assert results and results[-1].final
    return results[-1]


@pytest.fixture(scope="module")
def gpds_result():
    ds = load_sample("walking-gap")
    inputs = ModelInputs()
    inputs.set_dataset(ds)
    cfg = ModelConfig(model="gpds", latent_dim=2, num_inducing=10, max_iters=15)
    ds2, cfg = inputs.apply(ds, spec("gpds"), cfg)
    return fit(ds2, cfg)


@pytest.fixture(scope="module")
def mrd_result():
    ds = load_sample("two-views")
    inputs = ModelInputs()
    inputs.set_dataset(ds)
    cfg = ModelConfig(model="mrd", latent_dim=3, num_inducing=10, max_iters=15)
    ds2, cfg = inputs.apply(ds, spec("mrd"), cfg)
    return fit(ds2, cfg)


# ---- catalog ---------------------------------------------------------------------------------
def test_catalog_entries_say_what_extra_inputs_and_view_they_need():
    assert spec("gpds").inputs == ("time",) and spec("gpds").panel == "dynamics"
    assert spec("mrd").inputs == ("views",) and spec("mrd").panel == "views"
    assert all(s.inputs == () and s.panel == "" for k, s in CATALOG.items() if k not in ("gpds", "mrd", "deep"))
    assert not spec("gpds").handles_missing and not spec("mrd").handles_missing
    cfg = ModelConfig(model="mrd", view_sizes=(100, 8), view_names=("image", "sensor"))
    assert "views=image (100) + sensor (8)" in cfg.describe()
    assert "time=row order" in ModelConfig(model="gpds").describe()
    errors, _ = check(ModelConfig(model="gpds", num_inducing=10), 131, 13)
    assert errors == []


def test_builders_work_with_defaults_row_order_and_two_halves():
    Y = np.random.default_rng(0).standard_normal((12, 5))
    g = spec("gpds").build(Y, ModelConfig(model="gpds", latent_dim=2, num_inducing=4))
    np.testing.assert_array_equal(np.ravel(g.t), np.arange(12.0))
    m = spec("mrd").build(Y, ModelConfig(model="mrd", latent_dim=2, num_inducing=4))
    assert m.view_dims == [2, 3] and m.relevance.shape == (2, 2)
    m = spec("mrd").build(Y, ModelConfig(model="mrd", latent_dim=2, num_inducing=4, view_sizes=(1, 4),
                                         kernel="linear"))
    assert m.view_dims == [1, 4]
    assert view_split(5, (2, 2)) == [2, 3]  # sizes that do not cover the columns: halves


# ---- model inputs -----------------------------------------------------------------------------
def test_time_defaults_to_a_time_label_and_a_time_column_leaves_the_data():
    inputs = ModelInputs()
    ds = load_sample("walking-gap")
    inputs.set_dataset(ds)
    assert inputs.time_source == LABEL
    assert "Label: time (s)" in inputs.time_options()
    d2, cfg = inputs.apply(ds, spec("gpds"), ModelConfig(model="gpds"))
    assert d2 is ds and cfg.times == tuple(float(t) for t in ds.labels) and cfg.time_name == "time (s)"
    # a CSV with a column named "t": chosen by default and taken out of the outputs
    csv = "t,a,b,c\n" + "\n".join(f"{0.5 * i},{np.sin(i)},{np.cos(i)},{i % 3}" for i in range(10))
    up = load_file(csv.encode(), "series.csv")
    inputs.set_dataset(up)
    assert inputs.time_source == column_key("t")
    d2, cfg = inputs.apply(up, spec("gpds"), ModelConfig(model="gpds"))
    assert d2.feature_names == ["a", "b", "c"] and cfg.times[:3] == (0.0, 0.5, 1.0)
    inputs.time_source = ROW_ORDER
    d2, cfg = inputs.apply(up, spec("gpds"), ModelConfig(model="gpds"))
    assert d2.d == 4 and cfg.times[:3] == (0.0, 1.0, 2.0)
    # static models take the data as they are
    assert inputs.apply(up, spec("bayesian"), ModelConfig()) == (up, ModelConfig())


def test_time_column_with_missing_values_or_a_text_label_is_refused():
    inputs = ModelInputs()
    csv = "t,a,b\n0,1,2\n,2,3\n2,3,1\n3,1,1\n"
    up = load_file(csv.encode(), "gappy.csv")
    inputs.set_dataset(up)
    assert inputs.time_source == column_key("t")
    assert any("missing values" in e for e in inputs.errors(spec("gpds")))
    with pytest.raises(ValueError, match="missing values"):
        inputs.apply(up, spec("gpds"), ModelConfig(model="gpds"))
    inputs.time_source = LABEL
    assert any("numeric label" in e for e in inputs.errors(spec("gpds")))


def test_views_default_to_the_data_groups_and_columns_move_between_views():
    inputs = ModelInputs()
    ds = load_sample("two-views")
    inputs.set_dataset(ds)
    assert inputs.view_names == ["image", "sensor"] and [len(v) for v in inputs.views] == [100, 8]
    d2, cfg = inputs.apply(ds, spec("mrd"), ModelConfig(model="mrd"))
    assert cfg.view_sizes == (100, 8) and cfg.view_names == ("image", "sensor")
    assert d2.column_groups[0][2] == (10, 10)  # the image view keeps its shape
    # a sensor column moved into the image view leaves the sensor view; the image shape goes
    inputs.set_view(0, inputs.views[0] + ["sensor.s1"])
    assert "sensor.s1" not in inputs.views[1] and len(inputs.views[0]) == 101
    d2, cfg = inputs.apply(ds, spec("mrd"), ModelConfig(model="mrd"))
    assert cfg.view_sizes == (101, 7) and d2.feature_names[100] == "sensor.s1"
    assert d2.column_groups[0][2] is None
    np.testing.assert_array_equal(d2.values[:, 100], ds.values[:, ds.feature_names.index("sensor.s1")])
    # an empty view is refused; three views; back to the data's views
    inputs.set_view(1, [])
    assert any("at least one column" in e for e in inputs.errors(spec("mrd")))
    inputs.set_num_views(3)
    assert len(inputs.views) == 3
    inputs.reset_views()
    assert [len(v) for v in inputs.views] == [100, 8]
    # data without groups: two halves
    inputs.set_dataset(load_sample("three-phase-flow"))
    assert [len(v) for v in inputs.views] == [6, 6]


def test_npz_views_load_as_column_groups_and_become_mrd_views():
    rng = np.random.default_rng(1)
    buf = io.BytesIO()
    np.savez(buf, view_0=rng.normal(size=(20, 3, 3)), view_1=rng.normal(size=(20, 4)), labels=np.arange(20) % 2)
    ds = load_file(buf.getvalue(), "views.npz")
    assert ds.shape == (20, 13) and ds.labels is not None
    assert [(g[0], len(g[1]), g[2]) for g in ds.column_groups] == [("view_0", 9, (3, 3)), ("view_1", 4, None)]
    inputs = ModelInputs()
    inputs.set_dataset(ds)
    _, cfg = inputs.apply(ds, spec("mrd"), ModelConfig(model="mrd"))
    assert cfg.view_sizes == (9, 4) and cfg.view_names == ("view_0", "view_1")


# ---- GPDS results --------------------------------------------------------------------------------
def test_trajectory_covers_gap_and_both_ends_with_growing_uncertainty(gpds_result):
    r = gpds_result
    assert r.view_relevance is None and r.relevance.shape == (2,)
    tr = trajectory(r, n=121)
    assert tr.times[0] < 0.0 and tr.times[-1] > 12.0
    assert len(tr.gaps) == 1 and 4.9 < tr.gaps[0][0] < 5.1 and 6.5 < tr.gaps[0][1] < 6.7
    assert tr.mean.shape == (121, 13) and np.all(tr.std > 0)
    at, gap, beyond = frame_at(r, float(tr.data_times[10])), frame_at(r, 5.8), frame_at(r, 13.5)
    assert (at.where, gap.where, beyond.where) == ("at a frame", "in a gap", "after the data")
    assert frame_at(r, -1.0).where == "before the data"
    assert gap.std.mean() > at.std.mean() and beyond.std.mean() > at.std.mean()
    assert gap.latent_var.sum() > at.latent_var.sum()
    assert not np.allclose(gap.mean, beyond.mean)
    # outputs in the file's units: the frame at a data time is close to that frame
    assert np.sqrt(np.mean((at.mean - at.nearest_values) ** 2)) < 0.1
    assert find_gaps(np.arange(10.0)) == []


def test_dynamics_state_starts_in_the_gap_and_follows_the_time(gpds_result):
    d = Dispatcher()
    dyn = Dynamics(d)
    dyn.offer(gpds_result)
    assert dyn.wait(60)
    assert dyn.trajectory is not None and dyn.frame is not None and dyn.frame.where == "in a gap"
    dyn.time = 13.0
    assert dyn.frame.where == "after the data" and dyn.frame.time == 13.0
    dyn.offer(None)
    assert dyn.trajectory is None and dyn.frame is None


# ---- MRD results --------------------------------------------------------------------------------
def test_mrd_result_has_per_view_relevance_layout_and_cross_prediction(mrd_result):
    r = mrd_result
    assert r.view_relevance.shape == (2, 3) and r.relevance.shape == (3,)
    np.testing.assert_allclose(r.relevance, r.view_relevance.max(axis=0))
    layout = view_layout(r)
    assert [(v.name, v.size, v.image_shape) for v in layout] == [("image", 100, (10, 10)), ("sensor", 8, None)]
    mean, _ = r.predict(r.X_mean[:2])
    parts = split(mean, layout)
    assert [p.shape for p in parts] == [(2, 100), (2, 8)]
    c = cross_predict(r, 5, 1, 0, num_starts=2)
    assert c.mean.shape == c.actual.shape == c.std.shape == (100,) and c.source_values.shape == (8,)
    np.testing.assert_allclose(c.actual, r.dataset.values[5, :100])
    assert np.isfinite(c.rmse) and c.rmse < np.sqrt(np.mean(c.actual ** 2)) + 0.5


def test_multiview_state_answers_for_finished_fits_and_clears_for_other_models(mrd_result, gpds_result):
    d = Dispatcher()
    mv = MultiView(d)
    mv.offer(mrd_result)
    assert mv.wait(60)
    assert mv.cross is not None and (mv.cross.source, mv.cross.target) == (1, 0)
    mv.row, mv.source, mv.target = 7, 0, 1
    mv.ask()
    assert mv.wait(60)
    assert mv.cross.row == 7 and mv.cross.mean.shape == (8,)
    mv.offer(gpds_result)
    assert mv.result is None and mv.cross is None


def test_explorer_trains_gpds_with_the_chosen_time_and_refuses_bad_inputs():
    ex = Explorer(limiter=Limiter(1))
    try:
        ex.data.sample = "walking-gap"
        ex.settings.model = "gpds"
        ex.settings.latent_dim, ex.settings.num_inducing, ex.settings.max_iters = 2, 8, 3
        ex.inputs.time_source = column_key("hip_y")
        assert ex.train()
        assert ex.training.join(120)
        ex.training.pump()
        ex.dispatcher.flush()
        assert ex.training.dataset.d == 12 and "hip_y" not in ex.training.dataset.feature_names
        assert ex.training.config.time_name == "hip_y"
        ex.data.sample = "two-views"
        ex.settings.model = "mrd"
        ex.inputs.set_view(1, [])
        assert not ex.train()
        assert "at least one column" in ex.training.message
    finally:
        ex.close()


def test_views_panel_draws_a_bar_per_view_and_dimension_coloured_by_view(mrd_result):
    from gplvm_explorer.views.views_mrd import MultiViewView

    ex = Explorer(limiter=Limiter(1))
    view = MultiViewView.of(ex)
    assert view.ard_fig.renderers and not view.layout.visible  # the bars exist before any result
    ex.multiview.offer(mrd_result)
    assert ex.multiview.wait(60)
    assert view.layout.visible
    names = [v.name for v in view_layout(mrd_result)]
    assert list(view.ard_colours.factors) == names
    data = view.ard_src.data
    assert list(data["ard_x"]) == [(f"x{q + 1}", n) for q in range(3) for n in names]
    assert list(data["ard_view"]) == [n for _ in range(3) for n in names]
    R = mrd_result.view_relevance / mrd_result.view_relevance.max(axis=1, keepdims=True)
    np.testing.assert_allclose(data["ard_value"], [R[v, q] for q in range(3) for v in range(2)])
