"""Bundled samples: listing, documented shapes, determinism, cache safety."""

import sys
import types

import numpy as np
import pytest

import gplvm_explorer.data.registry as samples_mod
from gplvm_explorer.data import DataError, Dataset, SampleInfo, load_sample, prepare, samples

# name -> (shape, image_shape, number of label classes), as in sample_data/README.md
DOCUMENTED = {
    "rotating-glyph": ((120, 256), (16, 16), 8),
    "rotating-scaled-glyph": ((160, 256), (16, 16), 8),
    "three-phase-flow": ((450, 12), None, 3),
    "swiss-roll": ((400, 3), None, 8),
}


def _no_sklearn(monkeypatch):
    real = samples_mod.importlib.util.find_spec
    monkeypatch.setattr(
        samples_mod.importlib.util, "find_spec",
        lambda name, *a: None if name == "sklearn" else real(name, *a),
    )


def _fake_sklearn(monkeypatch):
    """A stand-in sklearn.datasets with load_digits, so the digits path runs without sklearn."""
    real = samples_mod.importlib.util.find_spec
    monkeypatch.setattr(
        samples_mod.importlib.util, "find_spec",
        lambda name, *a: object() if name == "sklearn" else real(name, *a),
    )
    rng = np.random.default_rng(1)
    images = rng.integers(0, 17, size=(30, 8, 8)).astype(float)
    images[:, 0, 0] = 0.0  # a constant pixel, as in the real digits
    fake = types.ModuleType("sklearn.datasets")
    fake.load_digits = lambda: types.SimpleNamespace(images=images, target=np.arange(30) % 10)
    monkeypatch.setitem(sys.modules, "sklearn.datasets", fake)
    samples_mod._generate.cache_clear()
    return images


def test_samples_listed_in_stable_order_with_glyph_first(monkeypatch):
    _no_sklearn(monkeypatch)
    infos = samples()
    assert all(isinstance(i, SampleInfo) for i in infos)
    # the sample with missing pixels comes after these (tests/app/test_imputation.py), then the
    # samples of the dynamical and multi-view models (tests/app/test_gpds_mrd.py)
    # and the binary one, for the noise models (tests/app/test_binary_sample.py)
    assert [i.name for i in infos] == list(DOCUMENTED) + ["occluded-glyph", "binary-glyph", "walking-gap",
                                                          "two-views"]
    assert [i.name for i in samples()] == [i.name for i in infos]
    first = infos[0]
    assert first.image_shape is not None and 60 <= first.shape[0] <= 200


@pytest.mark.parametrize("name", list(DOCUMENTED))
def test_sample_has_documented_shape_labels_and_image_shape(name):
    shape, image_shape, n_classes = DOCUMENTED[name]
    ds = load_sample(name)
    info = {i.name: i for i in samples()}[name]
    assert isinstance(ds, Dataset)
    assert ds.shape == shape == info.shape
    assert ds.image_shape == image_shape == info.image_shape
    assert ds.values.dtype == np.float64 and ds.values.flags.c_contiguous
    assert np.all(np.isfinite(ds.values))
    assert ds.labels is not None and ds.labels.dtype == np.int64 and len(ds.labels) == ds.n
    assert len(np.unique(ds.labels)) == n_classes
    assert len(ds.feature_names) == ds.d and ds.name == name
    assert ds.description and ds.label_name
    assert ds.warnings == []  # nothing dropped or changed by default


@pytest.mark.parametrize("name", list(DOCUMENTED))
def test_generation_is_deterministic_for_a_seed(name):
    a = samples_mod._REGISTRY[[s.info.name for s in samples_mod._REGISTRY].index(name)].make(3)
    b = samples_mod._REGISTRY[[s.info.name for s in samples_mod._REGISTRY].index(name)].make(3)
    c = samples_mod._REGISTRY[[s.info.name for s in samples_mod._REGISTRY].index(name)].make(4)
    np.testing.assert_array_equal(a.values, b.values)
    np.testing.assert_array_equal(a.labels, b.labels)
    assert not np.array_equal(a.values, c.values)


def test_glyph_labels_are_angle_buckets_and_images_show_ink():
    ds = load_sample("rotating-glyph")
    counts = np.bincount(ds.labels)
    assert counts.tolist() == [15] * 8  # 120 angles evenly spread over 8 buckets of 45 degrees
    images = ds.values.reshape(ds.n, *ds.image_shape)
    assert images.max() > 0.9 and np.median(images) < 0.1  # a thin stroke on a dark ground
    # neighbouring angles look alike: each image's nearest neighbour is in the same or a next bucket
    d2 = ((ds.values[:, None] - ds.values[None]) ** 2).sum(-1)
    np.fill_diagonal(d2, np.inf)
    gap = np.abs(ds.labels - ds.labels[d2.argmin(1)]) % 7
    assert np.all(gap <= 1)


def test_returned_arrays_are_copies_so_the_cache_cannot_be_corrupted():
    a = load_sample("three-phase-flow")
    a.values[:] = 0.0
    a.labels[:] = 99
    b = load_sample("three-phase-flow")
    assert np.abs(b.values).sum() > 0 and 99 not in b.labels


def test_sample_options_standardize_and_subsample():
    ds = load_sample("three-phase-flow", standardize=True, max_rows=100)
    assert ds.shape == (100, 12)
    np.testing.assert_allclose(ds.values.mean(0), 0.0, atol=1e-12)
    np.testing.assert_allclose(ds.values.std(0), 1.0)
    assert any("Subsampled 450 rows to 100" in w for w in ds.warnings)
    base = load_sample("three-phase-flow")
    again = prepare(base, standardize=True, max_rows=100, seed=0)
    np.testing.assert_array_equal(again.values, ds.values)
    np.testing.assert_allclose(ds.unstandardize(ds.values), base.values[np.isin(
        np.arange(450), np.sort(np.random.default_rng(0).choice(450, 100, replace=False)))])


def test_unknown_sample_lists_valid_names():
    with pytest.raises(DataError, match="Unknown sample 'nope'.*rotating-glyph.*swiss-roll"):
        load_sample("nope")


def test_bad_seed_is_a_data_error():
    with pytest.raises(DataError, match="non-negative integer seed"):
        load_sample("swiss-roll", seed=-1)


def test_digits_not_listed_without_sklearn_and_loading_says_how_to_install(monkeypatch):
    _no_sklearn(monkeypatch)
    assert "digits" not in [i.name for i in samples()]
    with pytest.raises(DataError, match="pip install scikit-learn"):
        load_sample("digits")


def test_digits_listed_and_loaded_when_sklearn_importable(monkeypatch):
    images = _fake_sklearn(monkeypatch)
    try:
        infos = samples()
        assert infos[-1].name == "digits" and infos[-1].image_shape == (8, 8)
        ds = load_sample("digits")
        assert ds.shape == (30, 64) and ds.image_shape == (8, 8)
        np.testing.assert_array_equal(ds.values, images.reshape(30, 64))
        np.testing.assert_array_equal(ds.labels, np.arange(30) % 10)
        # the constant pixel is kept so the images keep their shape
        assert any("Kept 1 constant pixel" in w for w in ds.warnings)
    finally:
        samples_mod._generate.cache_clear()
