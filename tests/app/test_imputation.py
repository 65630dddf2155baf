"""Missing values in the app: the catalog flag, completing data for the exact GP-LVM, imputed values
(state, view, CSV export) and the occluded-glyph sample."""
from __future__ import annotations

import dataclasses
import html
import io

import numpy as np
import pandas as pd
import pytest

import engine
from gplvm_explorer import export
from gplvm_explorer.catalog import CATALOG, ModelConfig, spec
from gplvm_explorer.data import DataError, Dataset, load_sample, prepare, samples
from gplvm_explorer.explorer import Explorer
from gplvm_explorer.state.data import missing_lines
from gplvm_explorer.state.imputation import (ImputedValues, MissingValues, imputed_table, missing_cells,
                                             row_imputation, training_data)
from gplvm_explorer.training import Limiter
from gplvm_explorer.training import TrainedResult
from gplvm_explorer.views import DataPanel
from gplvm_explorer.views.imputation import ImputationView, MissingDataChoice, outline_segments

pytestmark = pytest.mark.timeout(120)


def holey(n=24, d=5, seed=0, frac=0.15, names=None, **kw) -> Dataset:
    """A small smooth data set with about ``frac`` of the cells missing (every row keeps one value)."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(-2, 2, n)
    Y = np.column_stack([np.sin(t * (j + 1) / 2) + 0.3 * j for j in range(d)]) + 0.02 * rng.standard_normal((n, d))
    miss = rng.random((n, d)) < frac
    miss[:, 0] = False
    Y[miss] = np.nan
    return Dataset(values=Y, feature_names=names, labels=np.arange(n) % 3, name="holey", **kw)


def fitted(ds: Dataset, model="bayesian", iters=5) -> TrainedResult:
    """A real engine model, fitted briefly, as the worker would publish it."""
    cfg = ModelConfig(model=model, latent_dim=2, num_inducing=8, max_iters=iters, kernel="rbf")
    m = cfg.spec.build(ds.values, cfg)
    engine.fit(m, max_iters=iters)
    state = m.snapshot_state()
    return TrainedResult(run_id=1, iteration=iters, objective=0.0, objective_name="ELBO", model=m,
                         X_mean=np.asarray(state["X_mean"]), X_variance=state.get("X_variance"),
                         relevance=np.asarray(state["relevance"]), parameters={}, config=cfg, dataset=ds,
                         final=True)


@pytest.fixture(scope="module")
def bayes():
    ds = holey()
    return ds, fitted(ds)


# ---- catalog -----------------------------------------------------------------------------

def test_catalog_flag_says_which_models_train_on_missing_cells_and_agrees_with_the_engine():
    assert spec("bayesian").handles_missing and spec("sparse").handles_missing
    assert not spec("gplvm").handles_missing
    for s in CATALOG.values():
        assert s.handles_missing == getattr(engine, s.engine_class).handles_missing, s.key


# ---- completing the data for a model that cannot use missing cells ------------------------

def test_models_that_handle_missing_cells_get_the_data_as_loaded():
    ds = holey()
    assert training_data(ds, spec("bayesian"), "drop-rows") is ds
    assert training_data(ds, spec("sparse"), "impute-mean") is ds
    full = holey(frac=0.0)
    assert training_data(full, spec("gplvm"), "drop-rows") is full


def test_exact_gplvm_gets_column_means_or_complete_rows():
    ds = holey()
    miss = ds.missing_mask
    filled = training_data(ds, spec("gplvm"), "impute-mean")
    assert filled.shape == ds.shape and not filled.has_missing
    np.testing.assert_array_equal(filled.imputed, miss)
    np.testing.assert_allclose(filled.values[miss], np.broadcast_to(np.nanmean(ds.values, 0), ds.shape)[miss])
    np.testing.assert_array_equal(filled.values[~miss], ds.values[~miss])
    dropped = training_data(ds, spec("gplvm"), "drop-rows")
    complete = ~miss.any(axis=1)
    assert dropped.n == complete.sum() < ds.n and not dropped.has_missing
    np.testing.assert_array_equal(dropped.values, ds.values[complete])
    np.testing.assert_array_equal(dropped.labels, ds.labels[complete])


def test_dropping_refuses_when_too_few_complete_rows_are_left():
    ds = holey(frac=0.9)
    with pytest.raises(DataError, match="complete rows"):
        training_data(ds, spec("gplvm"), "drop-rows")


def test_advice_tells_what_the_chosen_model_does_with_missing_cells():
    ds = holey()
    mv = MissingValues()
    assert mv.advice(holey(frac=0.0), spec("gplvm")) == ""
    rows = int(ds.missing_mask.any(1).sum())
    text = mv.advice(ds, spec("bayesian"))
    assert "trains on the data as it is" in text and f"{ds.n_missing} missing cell(s) in {rows} of 24" in text
    text = mv.advice(ds, spec("gplvm"))
    assert "cannot use missing values" in text and f"{24 - rows} complete rows" in text


# ---- imputed values ---------------------------------------------------------------------

def test_row_imputation_matches_the_engines_impute_and_keeps_observed_values(bayes):
    ds, res = bayes
    filled, std = res.model.impute()
    miss = ds.missing_mask
    for row in np.nonzero(miss.any(1))[0][:4]:
        imp = row_imputation(res, row)
        assert imp.method == "model" and imp.n_missing == miss[row].sum()
        np.testing.assert_allclose(imp.values, filled[row], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(imp.std, std[row], rtol=1e-10, atol=1e-12)
        np.testing.assert_array_equal(imp.values[~miss[row]], ds.values[row, ~miss[row]])
        assert np.all(imp.std[~miss[row]] == 0) and np.all(imp.std[miss[row]] > 0)
        assert np.all(np.isfinite(imp.values))
        np.testing.assert_array_equal(np.isnan(imp.observed_values), miss[row])


def test_imputed_values_are_in_the_files_units_when_standardised():
    raw = holey()
    ds = prepare(raw, standardize=True)
    res = fitted(ds)
    values, std, missing = imputed_table(res)
    filled, sd = res.model.impute()
    np.testing.assert_allclose(values, ds.unstandardize(filled))
    np.testing.assert_allclose(std, sd * ds.scale)
    np.testing.assert_allclose(values[~missing], raw.values[~missing])
    row = int(np.nonzero(missing.any(1))[0][0])
    np.testing.assert_allclose(row_imputation(res, row).values, values[row], rtol=1e-10)


def test_cells_filled_with_column_means_before_training_are_reported_with_the_columns_spread():
    raw = holey()
    ds = training_data(raw, spec("gplvm"), "impute-mean")
    res = fitted(ds, model="gplvm", iters=2)
    values, std, missing = imputed_table(res)
    np.testing.assert_array_equal(missing, raw.missing_mask)
    np.testing.assert_allclose(values, ds.values)
    spread = np.nanstd(raw.values, axis=0)
    np.testing.assert_allclose(std, np.where(missing, spread[None, :], 0.0))
    row = int(np.nonzero(missing.any(1))[0][0])
    imp = row_imputation(res, row)
    assert imp.method == "column mean"
    np.testing.assert_allclose(imp.std, std[row])
    np.testing.assert_array_equal(missing_cells(ds), missing)


def test_imputed_csv_has_every_value_and_a_std_column_after_it(bayes):
    ds0, _ = bayes
    ds = ds0.replace(feature_names=["=cmd()", "b", "c", "d", "e"])
    res = fitted(ds)
    table = pd.read_csv(io.BytesIO(export.imputed_csv(res)))
    names = ["'=cmd()", "'=cmd()_std", "b", "b_std", "c", "c_std", "d", "d_std", "e", "e_std"]
    assert list(table.columns) == ["index", "label"] + names
    assert len(table) == ds.n and not table.isna().any().any()
    values = table[names[0::2]].to_numpy()
    std = table[names[1::2]].to_numpy()
    miss = ds.missing_mask
    np.testing.assert_allclose(values[~miss], ds.values[~miss], rtol=1e-7)
    assert np.all(std[~miss] == 0) and np.all(std[miss] > 0)
    filled, sd = res.model.impute()
    np.testing.assert_allclose(values[miss], filled[miss], rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(std[miss], sd[miss], rtol=1e-7)
    with pytest.raises(ValueError, match="Train a model first"):
        export.imputed_csv(None)


def test_imputed_values_state_starts_at_the_first_incomplete_row_and_steps_through_them(bayes):
    ds, res = bayes
    rows = np.nonzero(ds.missing_mask.any(1))[0]
    state = ImputedValues()
    state.offer(res)
    assert state.row == rows[0] and state.imputation.row == rows[0]
    np.testing.assert_array_equal(state.incomplete_rows, rows)
    state.step(+1)
    assert state.row == rows[1] and state.imputation.row == rows[1]
    state.step(-1)
    state.step(-1)
    assert state.row == rows[-1]  # wraps around
    state.row = 0 if rows[0] != 0 else int(np.nonzero(~ds.missing_mask.any(1))[0][0])
    assert state.imputation.n_missing == ds.missing_mask[state.row].sum()
    # a newer snapshot of the same data keeps the row; None clears
    state.offer(res)
    assert state.imputation.row == state.row
    state.offer(None)
    assert state.imputation is None and state.result is None


# ---- the occluded-glyph sample -----------------------------------------------------------

def test_occluded_glyph_sample_hides_a_quarter_of_every_second_image():
    assert "occluded-glyph" in [s.name for s in samples()]
    ds = load_sample("occluded-glyph")
    base = load_sample("rotating-glyph")
    assert ds.shape == (120, 256) and ds.image_shape == (16, 16) and ds.warnings == []
    miss = ds.missing_mask
    np.testing.assert_array_equal(ds.values[~miss], base.values[~miss])
    np.testing.assert_array_equal(ds.labels, base.labels)
    incomplete = miss.any(1)
    assert incomplete.sum() == 60 and ds.n_missing == 60 * 64
    for row in np.nonzero(incomplete)[0]:
        hidden = miss[row].reshape(16, 16)
        r, c = np.nonzero(hidden)
        assert hidden.sum() == 64 and r.max() - r.min() == 7 and c.max() - c.min() == 7
        assert r.min() in (0, 8) and c.min() in (0, 8)
    assert len({tuple(col) for col in miss.T}) == 4  # four missingness patterns: training stays fast
    np.testing.assert_array_equal(load_sample("occluded-glyph").values, ds.values)  # deterministic


# ---- page: data card, model card, imputed-values view ------------------------------------

def csv_with_gaps() -> tuple[bytes, str]:
    ds = holey(names=["a", "<b>x</b>", "c", "d", "e"])
    frame = pd.DataFrame(ds.values, columns=ds.feature_names)
    return frame.to_csv(index=False, na_rep="").encode(), "gaps.csv"


def test_data_card_shows_missing_cells_per_column_as_text():
    ex = Explorer(limiter=Limiter(1))
    assert ex.data.load_upload(*csv_with_gaps()), ex.data.error
    ds = ex.data.dataset
    assert ds.n == 24 and ds.has_missing  # rows with missing cells are kept
    lines = ex.data.summary_lines()
    for name, count in ds.missing_by_column():
        assert f"missing in {name}: {count}" in lines
    shown = DataPanel.of(ex).summary.object
    assert "<b>x</b>" not in shown and "&#60;b&#62;x&#60;/b&#62;" in shown
    assert missing_lines(load_sample("three-phase-flow")) == []
    glyph = missing_lines(load_sample("occluded-glyph"))
    assert glyph[0].startswith("missing: 3840 cell(s) in 60 of 120 rows") and "248 more" in glyph[-1]


def test_model_card_offers_a_choice_only_for_models_that_cannot_use_missing_cells(fake_build, pump):
    build = fake_build()
    ex = Explorer(limiter=Limiter(1), build=build, publish_interval=0.0)
    assert ex.data.load_upload(*csv_with_gaps()), ex.data.error
    view = MissingDataChoice.of(ex)
    ex.settings.model = "bayesian"
    assert view.note.visible and not view.choice.visible and "as it is" in view.note.object
    ex.settings.model = "gplvm"
    assert view.note.visible and view.choice.visible and view.note.alert_type == "warning"
    ex.settings.latent_dim, ex.settings.optimizer, ex.settings.max_iters = 2, "adam", 3
    # the exact GP-LVM trains on column means ...
    assert ex.train(), ex.training.message
    assert pump(ex, lambda: ex.training.status == "finished")
    Y = build.models[-1].Y
    assert Y.shape == (24, 5) and not np.isnan(Y).any()
    # ... or on the complete rows
    view.choice.value = "drop-rows"
    assert ex.missing.choice == "drop-rows"
    assert ex.train(), ex.training.message
    assert pump(ex, lambda: ex.training.status == "finished")
    complete = int((~ex.data.dataset.missing_mask.any(1)).sum())
    assert build.models[-1].Y.shape == (complete, 5)
    # the Bayesian model gets every row, missing cells and all
    ex.settings.model = "bayesian"
    assert ex.train(), ex.training.message
    assert pump(ex, lambda: ex.training.status == "finished")
    assert np.isnan(build.models[-1].Y).sum() == ex.data.dataset.n_missing


def test_imputation_view_shows_observed_and_filled_values_with_two_sigma(bayes):
    ds, res = bayes
    ex = Explorer(limiter=Limiter(1))
    view = ImputationView.of(ex)
    assert not view.controls.visible and "Train a model" in view.text.object
    ex.imputation.offer(res)
    imp = ex.imputation.imputation
    m = imp.missing
    assert view.profile.visible and view.controls.visible and not view.download.disabled
    np.testing.assert_allclose(view.imp_points.data["imputed"], imp.values[m])
    np.testing.assert_allclose(view.imp_points.data["upper"] - view.imp_points.data["lower"], 4 * imp.std[m])
    np.testing.assert_allclose(view.obs_points.data["observed"], imp.values[~m])
    text = html.unescape(view.text.object)  # what the browser shows
    assert f"Row {imp.row}" in text and "filled in by the Bayesian GP-LVM" in text
    j = int(np.nonzero(m)[0][0])
    assert f"{imp.values[j]:.4g} ± {2 * imp.std[j]:.2g}" in html.unescape(view.table.object)
    assert view._csv().getvalue() == export.imputed_csv(res)


def test_imputation_view_marks_and_fills_missing_pixels():
    base = load_sample("occluded-glyph")
    ds = base.replace(values=base.values[:40], labels=base.labels[:40])
    res = fitted(ds, iters=2)
    ex = Explorer(limiter=Limiter(1))
    view = ImputationView.of(ex)
    ex.imputation.offer(res)
    imp = ex.imputation.imputation
    assert view.images.visible and not view.profile.visible and imp.is_image
    observed = view.observed_source.data["image"][0][::-1].ravel()
    filled = view.filled_source.data["image"][0][::-1].ravel()
    np.testing.assert_array_equal(np.isnan(observed), imp.missing)
    assert np.all(np.isfinite(filled)) and imp.n_missing == 64
    assert len(view.outline_source.data["x0"]) == 4 * 8  # the outline of one 8x8 block


def test_outline_segments_trace_the_border_of_each_region():
    mask = np.zeros((4, 4), dtype=bool)
    mask[0, 0] = True
    seg = outline_segments(mask)
    got = sorted(zip(seg["x0"], seg["y0"], seg["x1"], seg["y1"]))
    assert got == sorted([(0, 4, 1, 4), (0, 3, 1, 3), (0, 3, 0, 4), (1, 3, 1, 4)])
    mask[:2, :2] = True
    assert len(outline_segments(mask)["x0"]) == 8


def test_the_row_widget_follows_the_row_on_show(bayes):
    ds0, res0 = bayes
    values = ds0.values.copy()
    values[:2] = np.nan_to_num(values[:2])  # the first incomplete row is not row 0
    ds = ds0.replace(values=values)
    res = dataclasses.replace(res0, dataset=ds)
    ex = Explorer(limiter=Limiter(1))
    view = ImputationView.of(ex)
    ex.imputation.offer(res)
    first = int(np.nonzero(ds.missing_mask.any(1))[0][0])
    assert first > 0 and view.row.value == ex.imputation.row == ex.imputation.imputation.row == first
    view.next_btn.clicks += 1
    assert view.row.value == ex.imputation.row != first
    view.row.value = 0
    assert ex.imputation.imputation.row == 0


def test_snapshots_during_training_are_followed_only_while_a_row_is_cheap(bayes):
    ds, res = bayes
    state = ImputedValues()
    live = dataclasses.replace(res, final=False, iteration=3)
    state.offer(live)
    assert state.result is live
    later = dataclasses.replace(res, final=False, iteration=4)
    state._cost = 10.0  # pretend one row took 10 s
    state.offer(later)
    assert state.result is live  # the page thread is not held up by every snapshot
    state.offer(res)
    assert state.result is res and state.imputation is not None  # the final result always shows


def test_the_summary_says_how_missing_cells_were_treated(bayes):
    ds, res = bayes
    text = export.summary_text(res, "finished", 1.0)
    assert f"Missing cells: {ds.n_missing} in {int(ds.missing_mask.any(1).sum())} rows, trained on as missing" in text
    filled = training_data(ds, spec("gplvm"), "impute-mean")
    text = export.summary_text(dataclasses.replace(res, dataset=filled), "finished", 1.0)
    assert f"filled with their column mean before training: {ds.n_missing}" in text


def test_feature_names_in_the_imputed_values_view_stay_text(bayes):
    ds, res = bayes
    names = ["<img src=x onerror=alert(1)>", "<b>b</b>", "c", "d", "e"]
    hostile = dataclasses.replace(res, dataset=ds.replace(feature_names=names))
    ex = Explorer(limiter=Limiter(1))
    view = ImputationView.of(ex)
    ex.imputation.offer(hostile)
    for _ in range(len(ex.imputation.incomplete_rows)):
        shown = view.table.object + view.text.object
        assert "<img" not in shown and "<b>b</b>" not in shown
        ex.imputation.step(+1)
    ticks = view.profile_fig.xaxis.major_label_overrides
    assert all("&#" not in t for t in ticks.values())  # drawn as text by Bokeh: no entities


def test_incomplete_rows_are_found_without_a_scan_when_nothing_is_missing(monkeypatch):
    """At 10^6 x 30 a scan of every cell took a few hundred ms of the page's thread at the first result."""
    from gplvm_explorer.state.imputation import incomplete_rows

    ds = holey()
    expected = np.nonzero(np.isnan(ds.values).any(axis=1))[0]
    assert expected.size and np.array_equal(incomplete_rows(ds), expected)
    filled = prepare(ds, missing="impute-mean", drop_constant=False)
    assert np.array_equal(incomplete_rows(filled), expected)  # the filled cells count
    complete = Dataset(values=np.nan_to_num(ds.values), name="complete")
    complete.column_stats  # read at load, as every data set's are
    monkeypatch.setattr(Dataset, "missing_mask", property(lambda self: pytest.fail("scanned the cells")))
    rows = incomplete_rows(complete)
    assert rows.size == 0 and rows.dtype.kind == "i"
    imputed = ImputedValues()
    imputed.offer(fitted(complete))
    assert imputed.incomplete_rows.size == 0 and imputed.error == ""
