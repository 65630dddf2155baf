"""The Viewer components, without a browser: they follow the state objects."""
from __future__ import annotations

import numpy as np
import pandas as pd
import panel as pn
import pytest
from bokeh.document import Document
from bokeh.document.events import ColumnDataChangedEvent

from gplvm_explorer.app import create_app
from gplvm_explorer.explorer import Explorer
from gplvm_explorer.raster import rasterise_points, unpack_rgba
from gplvm_explorer.training import Limiter
from gplvm_explorer.views import (ARDPlot, DataPanel, ExportPanel, LatentMap, ModelPanel, ObjectivePlot,
                                  ReconstructionView, StatusBar, TrainingPanel)
from gplvm_explorer.views.reconstruction import nearest_title
from gplvm_explorer.views.training_plots import zoom_range

pytestmark = pytest.mark.timeout(120)


def trained(fake_build, pump, sample="rotating-glyph", iters=15, upload=None, delay=0.0):
    ex = Explorer(limiter=Limiter(2), build=fake_build(delay=delay), publish_interval=0.0)
    if upload is not None:
        assert ex.data.load_upload(*upload), ex.data.error
    elif sample != ex.data.sample:
        ex.data.sample = sample
    ex.settings.model, ex.settings.latent_dim, ex.settings.optimizer, ex.settings.max_iters = "gplvm", 3, "adam", iters
    return ex


def finish(ex, pump):
    assert ex.train(), ex.training.message
    assert pump(ex, lambda: ex.training.status == "finished")
    assert ex.latent.wait(180), "the latent slice was not computed in time"  # a loaded machine takes long
    assert ex.latent.view is not None


def colour_args(ex, v):
    """(codes, categories, colours) the map colours the points of view ``v`` by."""
    col = ex.shown.colouring()
    assert col is not None and col.n == v.points.shape[0]
    return col.codes, col.categories, col.colours


def big_csv(n, distinct=4):
    rng = np.random.default_rng(0)
    Y = rng.standard_normal((n, 4))
    rows = "\n".join(",".join(f"{v:.4f}" for v in y) + f",c{i % distinct}" for i, y in enumerate(Y))
    return ("a,b,c,d,label\n" + rows).encode(), "big.csv"


def test_create_app_builds_a_page_per_call():
    a, b = create_app(), create_app()
    assert a.explorer is not b.explorer and a.explorer.training is not b.explorer.training
    assert a.explorer.data.dataset is not None


def test_a_new_page_has_no_figure_without_renderers():
    """Bokeh warns (W-1000 MISSING_RENDERERS) at every page build for a figure with nothing to draw."""
    from bokeh.core.validation import check_integrity

    doc = Document()
    create_app().server_doc(doc)
    models = set()
    for root in doc.roots:
        models |= root.references()
    assert [w.text for w in check_integrity(models).warning if w.code == 1000] == []


def test_the_nearest_images_title_cuts_a_long_label_not_the_index():
    assert nearest_title(60, None) == nearest_title(60, "") == "Nearest: #60"
    assert nearest_title(60, "3") == "Nearest: #60\n3"
    long = nearest_title(12345, "sevens rotated by forty-five degrees, then scaled")
    head, label = long.split("\n")
    assert head == "Nearest: #12345" and len(label) <= 18 and label.startswith("sevens") and label.endswith("…")
    assert nearest_title(7, "<b>x</b>\u202e") == "Nearest: #7\n<b>x</b>"  # plain text; Bokeh shows it as text


def test_training_views_follow_state(fake_build, pump):
    ex = Explorer(limiter=Limiter(1), build=fake_build(delay=0.002))
    tp, sb = TrainingPanel.of(ex, train=ex.train), StatusBar.of(ex)
    assert not tp.train_btn.disabled and tp.stop_btn.disabled
    ex.settings.model, ex.settings.optimizer, ex.settings.max_iters = "gplvm", "adam", 100_000
    dp, mp = DataPanel.of(ex), ModelPanel.of(ex)
    summary = dp.summary.object
    ex.train()
    assert pump(ex, lambda: ex.training.status == "running")
    assert tp.train_btn.disabled and not tp.stop_btn.disabled
    assert dp.file_input.disabled and dp.sample_select.disabled and mp.latent_dim.disabled and mp.seed.disabled
    assert dp.summary.object == summary
    ex.training.pause()
    assert tp.pause_btn.label.endswith("Resume")
    ex.training.stop()
    assert pump(ex, lambda: ex.training.status == "stopped")
    assert not tp.train_btn.disabled and "Stopped after" in sb.text.object
    assert not dp.file_input.disabled and not mp.latent_dim.disabled  # unlocked with the run's end


def test_panels_show_errors_and_only_supported_kernels():
    ex = Explorer()
    dp, mp = DataPanel.of(ex), ModelPanel.of(ex)
    before = dp.summary.object
    ex.data.load_upload(b"\x00\x01\x02", "junk.npy")
    assert dp.error.visible and "junk" in dp.error.object and dp.summary.object == before
    assert set(mp.kernel.options.values()) == {"rbf", "linear"}
    ex.settings.model = "gplvm"
    assert "mlp" in mp.kernel.options.values() and not mp.num_inducing.visible


def test_plots_render_after_training_and_reconstruction(fake_build, pump):
    ex = trained(fake_build, pump)
    latent, recon, ard = LatentMap.of(ex), ReconstructionView.of(ex), ARDPlot.of(ex)
    obj, exp = ObjectivePlot.of(ex), ExportPanel.of(ex)
    finish(ex, pump)
    assert latent.figure.title.text == "Latent space" and not latent.hint.visible
    grid = latent.variance_source.data["image"]
    assert len(grid) == 1 and grid[0].shape == (128, 128)  # the slice's variance grid, drawn as it is
    assert latent.figure.x_range.start == ex.latent.view.extent[0]
    bars = ard.source.data
    assert list(bars["dimension"]) == ["x1", "x2", "x3"] and list(ard.figure.x_range.factors) == ["x1", "x2", "x3"]
    assert set(bars["shown"]) == {"shown in map", "other"}
    np.testing.assert_allclose(bars["value"], ex.training.result.relevance)
    assert len(obj.source.data["objective"]) == 16  # iteration 0 and 15 iterations, streamed
    ex.training.trace.send(pd.DataFrame({"iteration": [16.0, 17.0], "objective": [1.0, 2.0]}))
    assert list(obj.source.data["iteration"])[-3:] == [15.0, 16.0, 17.0]
    assert len(latent.glyph_source.data["x"]) == ex.data.dataset.n  # glyphs below the raster threshold
    v = ex.latent.view
    x0, y0, x1, y1 = v.extent
    from bokeh.events import Tap

    latent._on_tap(Tap(latent.figure, x=(x0 + x1) / 2, y=(y0 + y1) / 2))
    assert ex.latent.reconstruction is not None and recon.images.visible
    assert recon.pred_source.data["image"][0].shape == (16, 16)
    assert "Nearest training point #" in recon.text.object
    rec = ex.latent.reconstruction
    assert recon.near_fig.title.text == nearest_title(rec.nearest_index, rec.nearest_label)
    assert len(latent.marker_source.data["x"]) == 2  # the click and its nearest point
    assert not exp.csv.disabled and not exp.png.disabled and "model summary" in exp.summary.value
    assert exp._html().getvalue().lower().find(b"<html") >= 0


def test_profile_reconstruction_for_tabular_data(fake_build, pump):
    ex = trained(fake_build, pump, sample="three-phase-flow", iters=3)
    recon = ReconstructionView.of(ex)
    finish(ex, pump)
    rec = ex.latent.reconstruct_at(0.0, 0.0)
    assert not rec.is_image and recon.profile.visible
    assert len(recon.profile_source.data["mean"]) == ex.data.dataset.d


def test_many_points_are_rasterised_and_labels_are_sent_once(fake_build, pump):
    ex = trained(fake_build, pump, upload=big_csv(1200), iters=6)
    latent = LatentMap.of(ex, raster_above=1000)
    finish(ex, pump)
    kinds = {type(r.glyph).__name__ for r in latent.figure.renderers}
    assert "ImageRGBA" in kinds  # datashader's image, not 1200 glyphs
    # a click only reconstructs: a selecting tap tool would send the picked pixels back before the click
    taps = [t for t in latent.figure.tools if type(t).__name__ == "TapTool"]
    assert taps and all(t.behavior == "inspect" for t in taps)
    assert len(latent.glyph_source.data["x"]) == 0
    assert latent.wait_raster()
    v = ex.latent.view
    sent = latent.packed_source.data  # the image travels zlib-packed, far below its raw 1 MB
    assert len(sent["packed"]) == 1 and (sent["height"], sent["width"]) == ([400], [640])
    assert sent["packed"][0].dtype == np.uint8 and sent["packed"][0].nbytes < 640 * 400 * 4 / 5
    img = unpack_rgba(sent["packed"][0].tobytes(), (400, 640))
    assert ((img >> 24) > 0).any()
    x0, y0, x1, y1 = v.extent
    assert sent["x"] == [x0] and sent["dw"] == [x1 - x0]
    np.testing.assert_array_equal(img, rasterise_points(v.points, *colour_args(ex, v), v.extent, (640, 400)))
    assert not latent.raster_source.syncable  # filled by the page from the packed image, never sent back
    from bokeh.events import RangesUpdate

    latent._on_ranges(RangesUpdate(latent.figure, x0=x0, x1=(x0 + x1) / 2, y0=y0, y1=(y0 + y1) / 2))  # a zoom
    assert latent.wait_raster()
    assert latent.packed_source.data["dw"] == [(x1 - x0) / 2]  # drawn again at the zoomed range
    latent._clear_raster()
    assert latent.packed_source.data["packed"] == []


def test_glyph_updates_send_only_the_coordinates(fake_build, pump):
    import dataclasses

    ex = trained(fake_build, pump, upload=big_csv(400, distinct=3), iters=5)
    latent = LatentMap.of(ex)
    doc = Document()
    doc.add_root(latent.glyph_source)
    changed = []
    doc.on_change(lambda event: changed.append(event))
    finish(ex, pump)
    first = ex.training.result
    for shift in (0.5, 1.0):  # two more snapshots of the same run
        ex.latent.offer(dataclasses.replace(first, X_mean=first.X_mean + shift, iteration=first.iteration + 1))
        ex.latent.wait()
    events = [e for e in changed if isinstance(e, ColumnDataChangedEvent) and e.model is latent.glyph_source]
    whole = [e for e in events if e.cols is None]
    partial = [e for e in events if e.cols is not None]
    assert len(whole) == 1  # colours and labels: once for the data set
    assert len(partial) == 2 and all(set(e.cols) == {"x", "y"} for e in partial)


def test_legend_is_capped(fake_build, pump):
    ex = Explorer()
    assert ex.data.load_upload(*big_csv(600, distinct=300))
    latent = LatentMap.of(ex)
    html = latent.legend.object
    assert html.count("border-radius:50%") == 10 and "other" in html and "300 distinct" in html


def test_zoom_range_skips_the_first_iterations():
    v = np.r_[-1e6, -1e5, np.linspace(-100, 0, 40)]
    lo, hi = zoom_range(v)
    assert -120 < lo < -100 and hi > 0
    assert zoom_range([1.0, 2.0]) == (None, None)


def test_ard_bars_are_redrawn_only_when_they_change(fake_build, pump):
    ex = trained(fake_build, pump)
    ard = ARDPlot.of(ex)
    finish(ex, pump)
    before = ard.source.data
    ex.latent.fixed = [0.0, 0.0, 0.7]  # a new map of the same result: the same bars
    ex.latent.wait()
    assert ex.latent.view.fixed[2] == 0.7 and ard.source.data is before
    ex.latent.auto_dims = False
    ex.latent.x_dim, ex.latent.y_dim = 2, 0  # other dims shown: other highlighted bars
    ex.latent.wait()
    assert ard.source.data is not before
    assert list(ard.source.data["shown"]) == ["shown in map", "other", "shown in map"]
    rel = np.array(ard.source.data["value"])
    ard.mode.value = "lengthscale"
    np.testing.assert_allclose(ard.source.data["value"], 1.0 / np.sqrt(rel))
    assert ard.figure.title.text == "ARD: lengthscale ℓ"


def test_feature_axes_never_keep_the_previous_data_sets_names():
    from bokeh.plotting import figure

    from gplvm_explorer.views.common import label_feature_axis

    ex = Explorer()
    recon = ReconstructionView.of(ex)
    axis = recon.profile_fig.xaxis[0]
    ex.data.sample = "walking-gap"  # 13 named columns: named ticks
    names = ex.data.dataset.feature_names
    assert axis.major_label_overrides == {i: n for i, n in enumerate(names)}
    ex.data.sample = "two-views"  # 108 columns: every index labelled by its number
    assert axis.major_label_overrides == {i: str(i) for i in range(108)}
    ex.close()
    # the helper the imputation and dynamics views share
    other = figure().xaxis[0]
    label_feature_axis(other, ["a", "b", "c"], 3)
    label_feature_axis(other, None, 40)
    assert other.major_label_overrides[0] == "0" and len(other.major_label_overrides) == 40


def test_the_page_predicts_clicks_where_it_holds_the_factors(pump):
    from bokeh.events import Tap

    ex = Explorer(limiter=Limiter(1), publish_interval=0.0)
    ex.data.sample = "three-phase-flow"
    ex.settings.model, ex.settings.latent_dim, ex.settings.max_iters = "bayesian", 3, 4
    recon = ReconstructionView.of(ex)
    latent = LatentMap.of(ex, reconstruction=recon)
    assert not latent.page_predicts and len(latent.predictor_source.data["Z"]) == 0
    finish(ex, pump)
    v, ds = ex.latent.view, ex.data.dataset
    predictor = v.result.predictor
    assert latent.page_predicts
    cols = latent.predictor_source.data
    M, Q = predictor.Z.shape
    assert list(cols["sizes"][0]) == [M, Q, ds.d] and cols["L"][0].size == M * (M + 1) // 2
    np.testing.assert_array_equal(cols["Z"][0], predictor.Z.ravel())
    assert list(latent.slice_source.data["dims"][0]) == list(v.dims)
    assert list(latent.slice_source.data["fixed"][0]) == list(v.fixed)
    assert latent.slice_source.data["follow"] == [False]
    latent.follow.value = True  # the page then predicts at every mouse move
    assert latent.slice_source.data["follow"] == [True]
    assert list(latent.figure.js_event_callbacks["mousemove"]) == list(latent.figure.js_event_callbacks["tap"])
    latent.follow.value = False
    # the click runs the page's script with the reconstruction's sources
    (click,) = latent.figure.js_event_callbacks["tap"]
    assert click.args["profile"] is recon.profile_source and click.args["predictor"] is latent.predictor_source
    x0, y0, x1, y1 = v.extent
    latent._on_tap(Tap(latent.figure, x=(x0 + x1) / 2, y=(y0 + y1) / 2))
    rec = ex.latent.reconstruction
    assert rec.drawn_in_page
    assert len(recon.profile_source.data["mean"]) == 0  # the page draws the mean and its band
    np.testing.assert_array_equal(recon.nearest_source.data["nearest"], rec.nearest_values)  # the server adds this
    # a new result: the page gets its factors; nothing trained: none
    ex.latent.offer(None)
    assert not latent.page_predicts and len(latent.predictor_source.data["Z"]) == 0
    assert len(latent.slice_source.data["dims"]) == 0


def test_the_server_draws_clicks_of_models_without_factors(fake_build, pump):
    from bokeh.events import Tap

    ex = trained(fake_build, pump, sample="three-phase-flow", iters=3)
    recon = ReconstructionView.of(ex)
    latent = LatentMap.of(ex, reconstruction=recon)
    finish(ex, pump)
    assert ex.latent.view.result.predictor is None and not latent.page_predicts
    x0, y0, x1, y1 = ex.latent.view.extent
    latent._on_tap(Tap(latent.figure, x=(x0 + x1) / 2, y=(y0 + y1) / 2))
    rec = ex.latent.reconstruction
    assert not rec.drawn_in_page
    np.testing.assert_array_equal(recon.profile_source.data["mean"], rec.mean)
    np.testing.assert_array_equal(recon.nearest_source.data["nearest"], rec.nearest_values)


def test_a_page_drawn_source_gets_every_assignment_even_an_equal_one():
    """The page draws into these sources without telling the server: the server's copy can be older
    than what the page shows, so an assignment equal to that copy must reach the page all the same."""
    from gplvm_explorer.views.page_prediction import page_drawn_source

    doc = Document()
    source = page_drawn_source({"x": [1.0, 2.0]})
    doc.add_root(source)
    assert not source.syncable  # what the page draws into it is not sent back
    sent = []
    doc.on_change(lambda event: sent.append(event))
    source.data = {"x": [1.0, 2.0]}
    source.data = {"x": [1.0, 2.0]}
    assert [type(e) for e in sent] == [ColumnDataChangedEvent] * 2 and all(e.model is source for e in sent)


def test_the_page_predicts_clicks_of_the_stochastic_model_too(pump):
    from bokeh.events import Tap

    ex = Explorer(limiter=Limiter(1), publish_interval=0.0)
    ex.data.sample = "three-phase-flow"
    ex.settings.model = "svi"
    ex.settings.latent_dim, ex.settings.num_inducing, ex.settings.max_iters = 3, 8, 20
    recon = ReconstructionView.of(ex)
    latent = LatentMap.of(ex, reconstruction=recon)
    finish(ex, pump)
    assert latent.page_predicts
    cols = latent.predictor_source.data
    assert cols["Rw"][0].size == 8 * 8 and cols["LW"][0].size == 0  # q(u)'s dense covariance factor
    x0, y0, x1, y1 = ex.latent.view.extent
    latent._on_tap(Tap(latent.figure, x=(x0 + x1) / 2, y=(y0 + y1) / 2))
    assert ex.latent.reconstruction.drawn_in_page and len(recon.profile_source.data["mean"]) == 0


def test_every_axis_pick_sticks_and_a_clash_swaps_the_axes(fake_build, pump):
    """The pickers show what the user picked at once (the map follows when its view is computed),
    never the previous view's dims, which would undo the pick; picking the other axis's dim swaps them."""
    ex = trained(fake_build, pump)
    ex.settings.latent_dim = 4
    latent = LatentMap.of(ex)
    finish(ex, pump)
    shown = ex.latent.view.dims
    latent.auto.value = False
    assert (latent.x_sel.value, latent.y_sel.value) == shown  # unticking keeps the pair on show
    ex.latent.wait()
    assert ex.latent.view.dims == shown
    picks = [("x", 3), ("y", 2), ("x", 0), ("y", 1), ("x", 2)]
    for axis, dim in picks:
        other = latent.y_sel if axis == "x" else latent.x_sel
        before_other = other.value
        (latent.x_sel if axis == "x" else latent.y_sel).value = dim  # before the new view exists
        assert (latent.x_sel if axis == "x" else latent.y_sel).value == dim, (axis, dim)
        assert other.value == before_other
        ex.latent.wait()
        assert ex.latent.view.dims == (latent.x_sel.value, latent.y_sel.value)
    # the vertical axis's dim picked for the horizontal one: the axes swap
    x, y = latent.x_sel.value, latent.y_sel.value
    latent.x_sel.value = y
    assert (latent.x_sel.value, latent.y_sel.value) == (y, x)
    ex.latent.wait()
    assert ex.latent.view.dims == (y, x)
    assert (ex.latent.x_dim, ex.latent.y_dim) == (y, x)


def shown(status_bar) -> str:
    """The status line's text as the page shows it."""
    import html

    return html.unescape(status_bar.text.object)


def test_the_status_says_when_the_result_on_show_is_another_data_sets(fake_build, pump):
    ex = trained(fake_build, pump)
    sb = StatusBar.of(ex)
    finish(ex, pump)
    trained_on = ex.data.dataset.name
    assert not ex.result_is_stale and "press Train to fit" not in shown(sb)
    assert ex.data.load_upload(*big_csv(50)), ex.data.error  # other data: the old model stays on show...
    assert ex.result_is_stale and ex.latent.view is not None
    assert f"show the model of {trained_on}; press Train to fit big.csv" in shown(sb)  # ...and says so
    ex.settings.latent_dim = 2
    finish(ex, pump)  # trained on the loaded data: the note goes
    assert not ex.result_is_stale and "press Train to fit" not in shown(sb)
    assert ex.data.load_upload(b"a,b,c\n1,2,3\n", "bad.csv") is False  # a refused file keeps the data
    assert not ex.result_is_stale and "press Train to fit" not in shown(sb)


def test_the_stale_note_shows_file_names_as_plain_text():
    from gplvm_explorer.views.controls import stale_text

    class Named:
        def __init__(self, name):
            self.name = name

    text = stale_text(Named("old\u202egnp.csv"), Named("x" * 100))
    assert "\u202e" not in text and "oldgnp.csv" in text and "x" * 59 + "…" in text and "x" * 61 not in text


def test_views_are_given_the_state_objects_they_read_and_not_the_page():
    """Every view names what it reads; only the views of the page's own state (its summary, warm-up and
    errors) read the page itself; a view built from a page holds its parts, not the page."""
    import importlib
    import pkgutil

    import gplvm_explorer.views as views_pkg
    from gplvm_explorer.views.common import StateView

    for info in pkgutil.iter_modules(views_pkg.__path__):
        importlib.import_module(f"gplvm_explorer.views.{info.name}")

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    found = {cls.__name__: cls.reads() for cls in subclasses(StateView)}
    viewers = [cls for cls in subclasses(pn.viewable.Viewer) if cls.__module__.startswith("gplvm_explorer.views.")]
    assert not [cls.__name__ for cls in viewers if "explorer" in cls.param], "a view takes the whole Explorer"
    assert {"LatentMap", "ReconstructionView", "ModelPanel", "DataPanel", "ImputationView"} <= set(found)
    page = create_app(limiter=Limiter(1)).explorer
    try:
        for name, reads in found.items():
            assert reads, name
            assert "explorer" not in reads and all(r == "page" or hasattr(page, r) for r in reads), (name, reads)
        assert {name for name, reads in found.items() if "page" in reads} == {"StatusBar", "PageErrors",
                                                                                "ExportPanel"}
        view = LatentMap.of(page)
        assert view.latent is page.latent and view.shown is page.shown and view.dispatcher is page.dispatcher
        assert not any(isinstance(getattr(view, p), Explorer) for p in view.param)
    finally:
        page.close()


def test_the_data_on_show_are_the_trained_rows_once_a_result_is_shown(fake_build, pump):
    ex = trained(fake_build, pump)
    loaded = ex.data.dataset
    assert ex.shown.dataset is loaded
    ex.held_out.enabled = True  # the model trains on 90% of the rows
    finish(ex, pump)
    assert ex.shown.dataset is ex.training.dataset and ex.shown.dataset.n < loaded.n
    assert ex.shown.colouring().n == ex.training.dataset.n  # the map's points: the trained rows
    assert ex.shown.colouring(loaded) is ex.data.labels
    ex.close()


def test_a_clicks_markers_repaint_only_the_maps_overlay_layer():
    """Bokeh repaints a plot's image, glyph and guide layer unless every renderer that changed is at the
    overlay level: the click's and the pointer's markers -- drawn by the page at the click, then by the
    server's answer -- are the map's only overlay renderer, so they never repaint its images and axes."""
    ex = Explorer()
    recon = ReconstructionView.of(ex)
    latent = LatentMap.of(ex, reconstruction=recon)
    overlay = [r for r in latent.figure.renderers if r.level == "overlay"]
    assert overlay == [latent.marker_renderer]
    assert latent.marker_renderer.data_source is latent.marker_source
    (click,) = latent.figure.js_event_callbacks["tap"]
    assert click.args["marker"] is latent.marker_source  # the page draws the click into the same source
    assert all(r.level != "overlay" for r in latent.figure.renderers if r is not latent.marker_renderer)


def test_the_empty_maps_hint_says_training_while_a_run_is_on_its_way(fake_build, pump):
    """At 10^6 rows the first map comes seconds after Train: the hint then does not ask to press Train."""
    from gplvm_explorer.views.latent_map import PLACEHOLDER, PLACEHOLDER_TRAINING

    ex = trained(fake_build, pump, iters=60, delay=0.05)
    latent = LatentMap.of(ex)
    assert latent.hint.visible and latent.hint.text == PLACEHOLDER
    assert ex.train(), ex.training.message
    assert pump(ex, lambda: ex.training.status == "running")
    assert latent.hint.text == PLACEHOLDER_TRAINING
    assert pump(ex, lambda: ex.training.status == "finished", timeout=60)
    assert latent.hint.text == PLACEHOLDER
