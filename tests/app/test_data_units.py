"""Columns in different units: standardised by default, said in one line, the choice kept per data set."""
from __future__ import annotations

import numpy as np
import pytest

from gplvm_explorer.data import load_file, load_sample, samples
from gplvm_explorer.data.frames import from_array
from gplvm_explorer.data.units import SPREAD_RATIO, column_spread, spread_note, standardise_by_default
from gplvm_explorer.state.data import UPLOADED_FILE, LoadedData
from userdata import mixed_units_csv, mixed_units_table


def test_spread_ratio_names_the_widest_and_narrowest_columns_in_file_units():
    Y, labels = mixed_units_table()
    ds = from_array(Y, labels)
    spread = column_spread(ds)
    sd = Y.std(axis=0)
    assert spread.widest == f"x{np.argmax(sd) + 1}" and spread.narrowest == f"x{np.argmin(sd) + 1}"
    expected = sd.max() / sd.min()
    assert spread.ratio == pytest.approx(expected, rel=1e-9) and spread.mixed
    # standardised, the spreads are read from the scale it divided by: the same answer
    again = column_spread(from_array(Y, labels, standardize=True))
    assert again.ratio == pytest.approx(expected, rel=1e-9) and again.widest == spread.widest


def test_tenfold_is_the_line():
    rng = np.random.default_rng(0)
    Z = rng.standard_normal((50, 3))
    below = from_array(Z / Z.std(axis=0) * np.array([1.0, 3.0, 0.99 * SPREAD_RATIO]))
    above = from_array(Z / Z.std(axis=0) * np.array([1.0, 3.0, 1.01 * SPREAD_RATIO]))
    assert not standardise_by_default(below) and standardise_by_default(above)
    assert spread_note(below, False, True) == ""


def test_images_and_constant_columns_do_not_count():
    rng = np.random.default_rng(1)
    Y = np.hstack([rng.standard_normal((30, 2)), np.full((30, 1), 5.0), 100 * rng.standard_normal((30, 1))])
    ds = from_array(Y, image_shape=(2, 2))
    assert ds.image_shape == (2, 2) and column_spread(ds).ratio > 50  # the kept constant pixel is left out
    assert not standardise_by_default(ds)  # pixels share one unit
    assert spread_note(ds, False, True) == ""
    assert column_spread(from_array(np.column_stack([Y[:, 0], np.full(30, 2.0)]), drop_constant=False)) is None


def test_notes_say_what_was_done_and_what_leaving_it_off_means():
    ds = load_file(mixed_units_csv(), "wine-like.csv", label_column="class")
    ratio = f"{column_spread(ds).ratio:,.0f}"
    auto = spread_note(ds, True, True)
    assert auto.startswith("Standardised by default") and f"{ratio}-fold" in auto
    assert f"'proline' vs {column_spread(ds).narrowest!r}" in auto and "Untick" in auto
    off = spread_note(ds, False, False)
    assert "unstandardised" in off and "'proline'" in off
    assert spread_note(ds, True, False) == ""  # the user's own choice needs no note


def test_an_upload_in_mixed_units_is_standardised_by_default_with_the_note():
    data = LoadedData()
    data.load_default()
    assert data.dataset.name == "rotating-glyph" and not data.standardize and data.units_note == ""
    assert data.load_upload(mixed_units_csv(), "wine-like.csv")
    ds = data.dataset
    assert data.standardize and ds.scale is not None and data.units_note.startswith("Standardised by default")
    np.testing.assert_allclose(ds.values.std(axis=0), 1.0, rtol=1e-9)
    np.testing.assert_allclose(ds.scale, mixed_units_table()[0].std(axis=0), rtol=1e-5)  # the file's spreads
    assert ds.labels is not None and data.label_column == "class"


def test_the_choice_belongs_to_the_data_set_it_was_made_for():
    data = LoadedData()
    data.load_default()
    assert data.load_upload(mixed_units_csv(), "wine-like.csv") and data.standardize
    data.standardize = False  # the user keeps the units of this table
    assert data.dataset.scale is None and "unstandardised" in data.units_note
    data.label_column = "(none)"  # reloading the same file keeps the choice
    assert not data.standardize and data.dataset.scale is None
    data.sample = "three-phase-flow"  # another data set starts from its own default
    assert data.dataset.name == "three-phase-flow" and not data.standardize and data.units_note == ""
    data.standardize = True
    assert data.dataset.scale is not None
    data.sample = "swiss-roll"  # ... and does not inherit the last one's choice
    assert not data.standardize and data.dataset.scale is None
    data.sample = UPLOADED_FILE  # the table again: its own choice comes back
    assert not data.standardize and data.dataset.scale is None and data.dataset.d == 13
    data.sample = "three-phase-flow"
    assert data.standardize and data.dataset.scale is not None
    # a different file of the same name is another data set
    other = mixed_units_csv(seed=1)
    assert data.load_upload(other, "wine-like.csv") and data.standardize


def test_a_given_data_set_takes_the_programs_choice_and_a_refused_option_keeps_the_data():
    Y, labels = mixed_units_table()
    data = LoadedData()
    assert data.load_given(lambda label, s: from_array(Y, labels, standardize=s), "table", standardize=False)
    assert not data.standardize and data.dataset.scale is None and "unstandardised" in data.units_note

    fixed = from_array(Y, labels)

    def only_raw(label, s):
        if s:
            from gplvm_explorer.data import DataError
            raise DataError("kept in its units")
        return fixed

    assert data.load_given(only_raw, "fixed", standardize=False)
    data.standardize = True  # refused: the data and the checkbox stay as they were
    assert "kept in its units" in data.error and data.dataset is fixed and not data.standardize


def test_bundled_samples_keep_their_shared_units():
    data = LoadedData()
    for info in samples():
        assert info.shared_units
        data.sample = info.name
        assert data.dataset.name == info.name and not data.standardize and data.units_note == "", info.name
    # the marker coordinates of the walk differ in spread, in one unit: not standardised all the same
    assert standardise_by_default(load_sample("walking-gap"))


def test_a_standardised_tables_reconstruction_is_drawn_in_standardised_units(make_explorer, pump):
    """In the file's units the widest column (hundreds) flattens the others (tenths) to a line at zero."""
    from gplvm_explorer.views import LatentMap, ReconstructionView
    from gplvm_explorer.views.page_prediction import predictor_columns

    ex = make_explorer(publish_interval=0.0)
    recon = ReconstructionView.of(ex)
    latent = LatentMap.of(ex, reconstruction=recon)
    assert ex.data.load_upload(mixed_units_csv(), "wine-like.csv") and ex.data.standardize
    ex.settings.max_iters = 20
    assert ex.train(), ex.training.message
    assert pump(ex, lambda: ex.training.status == "finished", timeout=240) and ex.latent.wait(60)
    ds = ex.data.dataset
    rec = ex.latent.reconstruct_at(*ex.latent.view.points[3])
    drawn = recon.profile_source.data
    np.testing.assert_allclose(drawn["mean"], (rec.mean - ds.mean) / ds.scale, rtol=1e-9)
    np.testing.assert_allclose(drawn["upper"] - drawn["mean"], 2 * rec.std / ds.scale, rtol=1e-9)
    np.testing.assert_allclose(recon.nearest_source.data["nearest"], ds.values[rec.nearest_index], rtol=1e-9)
    assert recon.profile_fig.yaxis[0].axis_label == "standardised value"
    assert np.abs(drawn["mean"]).max() < 5  # z-scores, not hundreds of mg/l
    # the legend names what is drawn: the nearest row's number on its own line, no probability bars
    shown = [item.label["value"] for item in recon.profile_fig.legend[0].items if item.visible]
    assert shown == ["±2σ", "prediction", f"nearest #{rec.nearest_index}"], shown
    # the page predicts in the same units: the model's, not the file's
    page = latent.predictor_source.data
    expected = predictor_columns(ex.training.result.predictor, None)
    np.testing.assert_allclose(page["scale"][0], 1.0)
    np.testing.assert_allclose(page["offset"][0], expected["offset"][0])
