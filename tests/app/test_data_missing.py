"""Missing cells: kept as NaN from every format, counted per column, and prepare()'s modes."""

from __future__ import annotations

import io

import numpy as np
import pytest

from gplvm_explorer.data import MISSING_MODES, DataError, Dataset, load_file, prepare


def _npy(arr) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def _npz(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


EXPECTED = np.array([[1, 2, 3], [np.nan, 5, 6], [7, np.nan, 9], [10, 11, 12], [13, 14, np.nan]], float)


@pytest.mark.parametrize(
    "text",
    [
        "a,b,c\n1,2,3\n,5,6\n7,,9\n10,11,12\n13,14,\n",
        "a,b,c\n1,2,3\nNA,5,6\n7,nan,9\n10,11,12\n13,14,NaN\n",
        "a;b;c\n1;2;3\nnull;5;6\n7;?;9\n10;11;12\n13;14;N/A\n",
        "a\tb\tc\n1\t2\t3\n\t5\t6\n7\tNA\t9\n10\t11\t12\n13\t14\t\n",
    ],
)
def test_text_missing_markers_keep_rows(text):
    ds = load_file(text.encode(), "m.csv" if "\t" not in text else "m.tsv")
    np.testing.assert_array_equal(ds.values, EXPECTED)
    assert ds.missing_counts.tolist() == [1, 1, 1]
    assert ds.n_missing == 3 and ds.has_missing
    np.testing.assert_array_equal(ds.observed, ~np.isnan(EXPECTED))
    np.testing.assert_array_equal(ds.missing_mask, np.isnan(EXPECTED))
    assert ds.missing_by_column() == [("a", 1), ("b", 1), ("c", 1)]
    assert "3 cell(s) missing (1 in 'a', 1 in 'b', 1 in 'c') in 3 row(s)" in ds.summary()


def test_npy_nan_keeps_rows():
    ds = load_file(_npy(EXPECTED), "m.npy")
    np.testing.assert_array_equal(ds.values, EXPECTED)
    assert ds.missing_counts.tolist() == [1, 1, 1]


def test_npz_nan_and_mask_array():
    ds = load_file(_npz(Y=EXPECTED, labels=np.arange(5)), "m.npz")
    np.testing.assert_array_equal(ds.values, EXPECTED)
    assert ds.labels.tolist() == [0, 1, 2, 3, 4]
    full = np.nan_to_num(EXPECTED, nan=-999.0)
    masked = np.ma.masked_array(full, mask=np.isnan(EXPECTED))
    ds = load_file(_npz(Y=masked.data, mask=masked.mask), "m.npz")
    np.testing.assert_array_equal(ds.values, EXPECTED)
    assert "3 cell(s) marked missing by the NPZ's 'mask' array" in ds.warnings
    with pytest.raises(DataError, match="'mask' in the NPZ must be a boolean array"):
        load_file(_npz(Y=full, mask=np.zeros((2, 2), bool)), "m.npz")


def test_masked_array_in_memory():
    masked = np.ma.masked_invalid(EXPECTED)
    ds = Dataset(values=np.ma.masked_array(np.nan_to_num(EXPECTED, nan=1e9), mask=masked.mask))
    np.testing.assert_array_equal(ds.values, EXPECTED)
    assert ds.n_missing == 3


def test_infinite_is_still_refused():
    with pytest.raises(DataError, match="infinite"):
        Dataset(values=np.array([[1, 2], [np.inf, 3], [4, 5]], float))


def test_prepare_modes():
    ds = load_file(_npy(EXPECTED), "m.npy")
    assert MISSING_MODES == ("keep", "drop-rows", "impute-mean")
    assert prepare(ds, missing="keep") is ds
    more = Dataset(values=np.vstack([EXPECTED, [[2.0, 3.0, 5.0]]]))
    dropped = prepare(more, missing="drop-rows")
    np.testing.assert_array_equal(dropped.values, more.values[[0, 3, 5]])
    assert not dropped.has_missing
    filled = prepare(ds, missing="impute-mean")
    assert not filled.has_missing
    col_means = np.nanmean(EXPECTED, axis=0)
    np.testing.assert_allclose(filled.values[np.isnan(EXPECTED)], col_means[np.nonzero(np.isnan(EXPECTED))[1]])
    np.testing.assert_array_equal(filled.values[~np.isnan(EXPECTED)], EXPECTED[~np.isnan(EXPECTED)])
    np.testing.assert_array_equal(filled.imputed, np.isnan(EXPECTED))
    assert "Filled 3 missing cell(s) with their column means" in filled.warnings
    assert "3 missing cell(s) filled with column means" in filled.summary()
    with pytest.raises(DataError, match="Expected missing to be one of keep, drop-rows, impute-mean"):
        prepare(ds, missing="zero")


def test_drop_rows_keeps_labels_aligned_and_refuses_too_few():
    Y = np.vstack([EXPECTED, [[1, 1, 2], [3, 4, 4]]])
    ds = Dataset(values=Y, labels=np.array(list("abcdefg")))
    out = prepare(ds, missing="drop-rows")
    assert out.labels.tolist() == ["a", "d", "f", "g"]
    np.testing.assert_array_equal(out.values, Y[[0, 3, 5, 6]])
    with pytest.raises(DataError, match="Only 2 of 5 row\\(s\\) have no missing value"):
        prepare(Dataset(values=EXPECTED), missing="drop-rows")


def test_standardise_with_missing_uses_observed_values():
    ds = load_file(_npy(EXPECTED), "m.npy", standardize=True)
    obs = ~np.isnan(ds.values)
    np.testing.assert_array_equal(obs, ~np.isnan(EXPECTED))
    for j in range(3):
        col = ds.values[obs[:, j], j]
        assert abs(col.mean()) < 1e-12 and abs(col.std() - 1) < 1e-12
    np.testing.assert_allclose(ds.unstandardize(ds.values), EXPECTED)


def test_impute_then_standardise_and_subsample_keep_masks_aligned():
    rng = np.random.default_rng(0)
    Y = rng.normal(size=(50, 4))
    Y[rng.random(Y.shape) < 0.2] = np.nan
    ds = Dataset(values=Y)
    out = prepare(ds, missing="impute-mean", standardize=True, max_rows=20, seed=3)
    assert out.n == 20 and not out.has_missing
    assert out.imputed.shape == (20, 4)
    keep = np.sort(np.random.default_rng(3).choice(50, size=20, replace=False))
    np.testing.assert_array_equal(out.imputed, np.isnan(Y[keep]))


def test_columns_with_no_values_are_dropped_rows_are_not():
    ds = load_file(b"a,b,c\n1,,3\n4,,\n7,,9\n", "m.csv")
    assert ds.feature_names == ["a", "c"] and ds.n == 3
    assert ds.missing_counts.tolist() == [0, 1]
    assert any(w.startswith("Dropped 1 column(s) with no values: 'b'") for w in ds.warnings)
