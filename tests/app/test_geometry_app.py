"""The latent map's geometry without a browser: magnification shading, geodesic mode, ARD-bar axes."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from bokeh.events import Tap
from bokeh.models import LogColorMapper

from gplvm_explorer import export
from gplvm_explorer.explorer import Explorer
from gplvm_explorer.state.geodesic import NUM_POINTS, End
from gplvm_explorer.training import Limiter
from gplvm_explorer.views import ARDPlot, LatentMap
from gplvm_explorer.views.geodesic import STRIP_FRAMES, GeodesicView

pytestmark = pytest.mark.timeout(180)


def trained(pump, sample="three-phase-flow", model="bayesian", Q=3, iters=6, build=None):
    ex = Explorer(limiter=Limiter(1), publish_interval=0.0, build=build)
    if sample != ex.data.sample:
        ex.data.sample = sample
    ex.settings.model, ex.settings.latent_dim, ex.settings.max_iters = model, Q, iters
    assert ex.train(), ex.training.message
    assert pump(ex, lambda: ex.training.status == "finished")
    ex.latent.wait()
    assert ex.latent.view is not None
    return ex


def grid_points(v):
    """(R * R, Q) latent points of view ``v``'s grid, rows following ys (as the grid's values)."""
    g = v.grid
    gx, gy = np.meshgrid(g.xs, g.ys)
    X = np.tile(np.asarray(v.fixed), (gx.size, 1))
    X[:, v.dims[0]], X[:, v.dims[1]] = gx.ravel(), gy.ravel()
    return X


def test_magnification_shading_is_the_models_magnification_in_the_shown_dims(pump):
    ex = trained(pump)
    lat = ex.latent
    variance = lat.view.grid
    assert variance.kind == "variance"
    lat.shading = "magnification"
    lat.wait()
    v = lat.view
    g = v.grid
    assert g.kind == "magnification" and lat.shading_note == ""
    assert g.values.shape == (lat.resolution, lat.resolution) and np.all(g.values > 0)
    expected = v.result.model.magnification(grid_points(v), dims=v.dims).reshape(g.values.shape)
    np.testing.assert_allclose(g.values, expected, rtol=1e-6)
    # another slice of the other dims: a new grid; the same slice again: none
    lat.fixed = [0.0, 0.0, 0.0][:len(lat.fixed)]
    lat.wait()
    kept = lat.view.grid
    lat.offer(v.result)
    lat.wait()
    assert lat.view.grid is kept
    lat.shading = "variance"
    lat.wait()
    assert lat.view.grid.kind == "variance"


def test_models_without_a_metric_are_shaded_by_variance_and_say_so(fake_build, pump):
    ex = trained(pump, sample="rotating-glyph", model="gplvm", build=fake_build())
    latent = LatentMap.of(ex)
    ex.latent.shading = "magnification"
    ex.latent.wait()
    assert ex.latent.view.grid.kind == "variance"
    assert "no latent metric" in ex.latent.shading_note and "predictive variance" in ex.latent.shading_note
    assert latent.shade_note.visible and "no latent metric" in latent.shade_note.object
    assert latent.shade_renderers["variance"].visible and not latent.shade_renderers["magnification"].visible
    ex.latent.shading = "variance"
    ex.latent.wait()
    assert ex.latent.shading_note == "" and not latent.shade_note.visible


def test_the_map_shows_magnification_on_a_log_scale_with_its_own_colour_bar(pump):
    ex = trained(pump)
    latent = LatentMap.of(ex)
    assert latent.shade.value == "variance"
    latent.shade.value = "magnification"  # the map's control sets the slice's shading
    assert ex.latent.shading == "magnification"
    ex.latent.wait()
    g = ex.latent.view.grid
    renderer, bar = latent.shade_renderers["magnification"], latent.colour_bars["magnification"]
    assert renderer.visible and bar.visible
    assert not latent.shade_renderers["variance"].visible and not latent.colour_bars["variance"].visible
    mapper = renderer.glyph.color_mapper
    assert isinstance(mapper, LogColorMapper) and bar.color_mapper is mapper
    assert "magnification" in bar.title and "log" in bar.title
    assert mapper.low == pytest.approx(float(g.values.min())) and mapper.high == pytest.approx(float(g.values.max()))
    np.testing.assert_array_equal(latent.magnification_source.data["image"][0], g.values)
    assert len(latent.variance_source.data["image"]) == 0
    # the exported picture uses the same shading
    rgb = export.latent_rgba(ex.latent.view, ex.shown.colouring(), size=64)
    assert rgb.shape == (64, 64, 3)
    latent.shade.value = "variance"
    ex.latent.wait()
    assert latent.shade_renderers["variance"].visible and latent.colour_bars["variance"].visible
    assert len(latent.magnification_source.data["image"]) == 0 and not latent.colour_bars["magnification"].visible


def test_magnification_follows_the_fit(pump):
    """Each published result gets its own grid: the shading changes while the model trains."""
    ex = trained(pump, iters=2)
    lat = ex.latent
    lat.shading = "magnification"
    lat.wait()
    before = lat.view.grid.values.copy()
    ex.settings.max_iters = 30
    assert ex.train(), ex.training.message
    assert pump(ex, lambda: ex.training.status == "finished")
    lat.wait()
    after = lat.view.grid
    assert after.kind == "magnification" and not np.allclose(after.values, before)


def test_an_ard_bar_click_puts_its_dimension_on_an_axis(pump):
    ex = trained(pump, Q=4)
    ard = ARDPlot.of(ex)
    latent = LatentMap.of(ex)
    shown = ex.latent.view.dims
    dim = next(d for d in range(4) if d not in shown)
    ard._on_tap(Tap(ard.figure, x=dim + 0.5, y=0.1))  # category i spans [i, i + 1)
    assert not ex.latent.auto_dims and ex.latent.x_dim == dim and ex.latent.y_dim == shown[1]
    ex.latent.wait()
    assert ex.latent.view.dims == (dim, shown[1]) and latent.x_sel.value == dim
    assert list(ard.source.data["shown"]).count("shown in map") == 2 and ard.source.data["shown"][dim] == "shown in map"
    # Shift+click: the vertical axis; the horizontal axis's dim there swaps the two
    ard._on_tap(Tap(ard.figure, x=dim + 0.3, y=0.1, modifiers={"shift": True, "ctrl": False, "alt": False}))
    ex.latent.wait()
    assert ex.latent.view.dims == (shown[1], dim)
    ard._on_tap(Tap(ard.figure, x=9.5, y=0.1))  # beyond the bars: nothing
    ex.latent.wait()
    assert ex.latent.view.dims == (shown[1], dim)


def test_two_clicks_in_geodesic_mode_draw_the_geodesic_and_its_walk(pump):
    ex = trained(pump)
    view = GeodesicView.of(ex)
    latent = LatentMap.of(ex, geodesic=view)
    walk, lat = ex.geodesic, ex.latent
    v = lat.view
    x0, y0, x1, y1 = v.extent
    a, b = (x0 + 0.2 * (x1 - x0), y0 + 0.3 * (y1 - y0)), (x0 + 0.8 * (x1 - x0), y0 + 0.7 * (y1 - y0))
    latent._on_tap(Tap(latent.figure, x=a[0], y=a[1]))  # not in geodesic mode: a reconstruction only
    assert walk.ends == [] and not view._layout.visible
    view.toggle.value = True
    assert walk.active and view._layout.visible
    latent._on_tap(Tap(latent.figure, x=a[0], y=a[1]))
    assert len(walk.ends) == 1 and len(view.ends_source.data["x"]) == 1
    latent._on_tap(Tap(latent.figure, x=b[0], y=b[1]))
    walk.wait()
    p = walk.path
    assert p is not None and p.num_points == NUM_POINTS
    ends = [e.position(v) for e in walk.ends]
    np.testing.assert_allclose(p.xy[[0, -1]], ends)
    others = [d for d in range(3) if d not in v.dims]
    np.testing.assert_array_equal(p.path[:, others], np.broadcast_to(np.asarray(v.fixed)[others], (NUM_POINTS, 1)))
    g = v.result.model.geodesic(p.path[0], p.path[-1], num_points=NUM_POINTS, dims=v.dims)
    assert p.length == pytest.approx(g.length, rel=1e-9) and p.length <= p.straight_length
    mean, _ = v.result.predict(p.path)
    np.testing.assert_allclose(p.mean, v.result.dataset.unstandardize(mean))
    # drawn on the map, its lengths beside each other, and the walk plays along it
    np.testing.assert_allclose(view.path_source.data["x"], p.xy[:, 0])
    assert len(view.straight_source.data["x"]) == 2
    text = view.lengths.object
    assert f"{p.length:.4g}" in text and f"{p.straight_length:.4g}" in text
    assert view.walk_row.visible and view.profile.visible and not view.images.visible
    assert view.player.end == NUM_POINTS - 1
    view.player.value = 40
    assert walk.frame == 40
    np.testing.assert_allclose(view.frame_source.data["x"], [p.xy[40, 0]])
    np.testing.assert_allclose(view.profile_source.data["frame"], p.mean[40])
    np.testing.assert_allclose(view.profile_source.data["start"], p.mean[0])
    # a third click starts a new path; leaving the mode clears it
    latent._on_tap(Tap(latent.figure, x=b[0], y=b[1]))
    assert len(walk.ends) == 1 and walk.path is None and len(view.path_source.data["x"]) == 0
    view.toggle.value = False
    assert walk.ends == [] and not view._layout.visible


def test_a_click_near_a_point_picks_its_row_and_the_path_follows_new_results(pump):
    ex = trained(pump, sample="rotating-glyph", model="bayesian", Q=2, iters=3)
    view = GeodesicView.of(ex)
    walk, lat = ex.geodesic, ex.latent
    walk.active = True
    pts = lat.view.points
    walk.pick(*pts[5])
    walk.pick(*pts[40])
    walk.wait()
    assert [e.row for e in walk.ends] == [5, 40]
    first = walk.path
    # image data: a filmstrip along the path and the frame at the player
    assert view.images.visible and not view.profile.visible
    assert len(view.strip_source.data["image"]) == STRIP_FRAMES
    h, w = ex.training.dataset.image_shape
    np.testing.assert_allclose(view.frame_image_source.data["image"][0], first.mean[0].reshape(h, w)[::-1])
    # the same result offered again: the same path
    r = lat.view.result
    lat.offer(r)
    lat.wait()
    walk.wait()
    assert walk.path is first
    # a newer result of the same run (as while training): the path again, its ends on the rows' new places
    moved = dataclasses.replace(r, iteration=r.iteration + 1, X_mean=r.X_mean + 0.05)
    lat.offer(moved)
    lat.wait()
    walk.wait()
    assert walk.path is not first and walk.path.view.result is moved
    np.testing.assert_allclose(walk.path.xy[[0, -1]], lat.view.points[[5, 40]])
    walk.pick_rows(3, 60)
    walk.wait()
    np.testing.assert_allclose(walk.path.xy[[0, -1]], lat.view.points[[3, 60]])
    assert walk.ends == [End(tuple(lat.view.points[3]), 3), End(tuple(lat.view.points[60]), 60)]
    # another run (training again) starts afresh
    lat.offer(dataclasses.replace(moved, run_id=moved.run_id + 1))
    lat.wait()
    assert walk.ends == [] and walk.path is None


def test_models_without_a_metric_say_why_there_is_no_geodesic(fake_build, pump):
    ex = trained(pump, sample="rotating-glyph", model="gplvm", build=fake_build())
    view = GeodesicView.of(ex)
    walk = ex.geodesic
    walk.active = True
    x0, y0, x1, y1 = ex.latent.view.extent
    walk.pick(x0, y0)
    walk.pick(x1, y1)
    walk.wait()
    assert walk.path is None and "no latent metric" in walk.error and "no geodesics" in walk.error
    assert "no latent metric" in view.text.object


def test_the_dynamical_model_is_shaded_by_magnification_and_its_view_keeps_the_variance(pump):
    """GPDS: the map gets the dynamical model's magnification; the dynamics view draws the map's shading
    under its trajectory only while that is the variance (its own linear scale), and nothing fails."""
    from gplvm_explorer.views.dynamics import DynamicsView

    ex = Explorer(limiter=Limiter(1), publish_interval=0.0)
    ex.data.sample = "walking-gap"
    ex.settings.model, ex.settings.latent_dim, ex.settings.num_inducing, ex.settings.max_iters = "gpds", 2, 8, 3
    view = DynamicsView.of(ex)
    assert ex.train(), ex.training.message
    assert pump(ex, lambda: ex.training.status == "finished")
    ex.latent.wait()
    ex.dynamics.wait()
    assert pump(ex, lambda: ex.dynamics.trajectory is not None)
    np.testing.assert_array_equal(view.grid_src.data["image"][0], ex.latent.view.grid.values)
    ex.latent.shading = "magnification"
    ex.latent.wait()
    g = ex.latent.view.grid
    assert g.kind == "magnification" and np.all(g.values > 0) and ex.latent.shading_note == ""
    assert ex.page_error == ""
    ex.close()
