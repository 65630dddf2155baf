"""Constancy and standardisation relative to each column's own scale."""

from __future__ import annotations

import io

import numpy as np
import pytest

from gplvm_explorer.data import DataError, Dataset, load_file, prepare
from gplvm_explorer.data.prepare import column_mean_std, constant_columns


def _npy(arr) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


@pytest.mark.parametrize("scale", [1e-300, 1e-200, 1e-20, 1.0, 1e20, 1e140])
def test_varying_columns_are_not_constant_at_any_scale(scale):
    rng = np.random.default_rng(0)
    Y = rng.normal(size=(30, 3)) * scale
    assert not constant_columns(Y).any()
    mu, sd = column_mean_std(Y)
    np.testing.assert_allclose(sd, Y.std(axis=0) if scale >= 1e-100 else (Y / scale).std(axis=0) * scale,
                               rtol=1e-10)


def test_constant_columns_at_any_scale():
    Y = np.column_stack([np.full(5, 3e-300), np.zeros(5), np.full(5, 7e120), np.arange(5.0)])
    assert constant_columns(Y).tolist() == [True, True, True, False]
    # relative round-off around a big offset is still "constant"
    off = 1e6 + np.array([0, 1e-10, 0, -1e-10, 0])
    assert constant_columns(np.column_stack([off, np.arange(5.0)])).tolist() == [True, False]


def test_tiny_values_standardise_to_unit_variance():
    rng = np.random.default_rng(1)
    Y = rng.normal(size=(40, 4)) * 1e-300
    ds = load_file(_npy(Y), "tiny.npy", standardize=True)
    assert ds.shape == (40, 4)  # nothing "constant"
    np.testing.assert_allclose(ds.values.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(ds.values.std(axis=0), 1.0, rtol=1e-12)
    np.testing.assert_allclose(ds.unstandardize(ds.values), Y, rtol=1e-12, atol=0)


def test_tiny_values_without_standardising_are_refused_with_the_reason():
    Y = np.random.default_rng(2).normal(size=(10, 3))
    Y[:, 1] *= 1e-300
    with pytest.raises(DataError, match=r"Column\(s\) 'x2' hold only values smaller than 1e-150.*"
                                        r"underflow.*Turn on standardising"):
        load_file(_npy(Y), "tiny.npy")


def test_huge_but_finite_values_standardise_without_overflow():
    Y = np.random.default_rng(3).normal(size=(20, 2)) * 1e140
    ds = load_file(_npy(Y), "huge.npy", standardize=True)
    assert np.all(np.isfinite(ds.values))
    np.testing.assert_allclose(ds.values.std(axis=0), 1.0, rtol=1e-12)


def test_constant_with_missing_values():
    Y = np.array([[1.0, np.nan, 0.0], [1.0, 2.0, 1.0], [np.nan, 2.0, 2.0], [1.0, 2.0, 3.0]])
    assert constant_columns(Y).tolist() == [True, True, False]
    single = np.array([[np.nan, 1.0], [5.0, 2.0], [np.nan, 3.0]])
    assert constant_columns(single).tolist() == [True, False]  # one observed value


def test_prepare_drop_constant_names_quoted_columns():
    ds = Dataset(values=np.column_stack([np.arange(5.0), np.ones(5), np.arange(5.0) ** 2]),
                 feature_names=["a", "<b>", "c"])
    out = prepare(ds)
    assert out.feature_names == ["a", "c"]
    assert "Dropped 1 constant column(s): '<b>'" in out.warnings
