"""A float .npy file on the server's disk is memory-mapped, not read: loading, checking and preparing it
read a block of rows at a time, and the page on it keeps the file's array instead of copying it."""
from __future__ import annotations

import numpy as np
import pytest
from quiet_tracing import traced_peak

from gplvm_explorer import serving
from gplvm_explorer.data import DataError, Limits, load_file, prepare
from gplvm_explorer.data.column_stats import column_stats
from gplvm_explorer.data.value_kind import propose_likelihood
from gplvm_explorer.explorer import Explorer
from gplvm_explorer.training import Limiter

DISK = serving.CLI_LIMITS  # a file named on the command line


def _data(n, d, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 2))
    Y = np.tanh(X @ rng.standard_normal((2, d))) * rng.uniform(0.5, 3.0, d) + rng.uniform(-5, 5, d)
    return (Y + 0.05 * rng.standard_normal((n, d))).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_float_npy_on_disk_stays_in_its_file(tmp_path, dtype):
    path = tmp_path / "big.npy"
    Y = _data(250_000, 20, dtype=dtype)  # 20 MB of float32, 40 MB of float64
    np.save(path, Y)
    del Y
    ds, peak = traced_peak(lambda: load_file(path, limits=DISK))
    assert isinstance(ds.values, np.memmap) and str(ds.values.filename) == str(path.resolve())
    assert not ds.values.flags.writeable and ds.values.dtype == dtype
    assert ds.source_path == str(path) and ds.shape == (250_000, 20)
    # checked and summarised a block of rows at a time: not even half a float64 copy of the rows
    assert peak < 250_000 * 20 * 8 / 2, peak
    assert not ds.has_missing and "N=250000" in ds.summary()
    # mapped, the file is bounded by its rows and columns, not by the values memory may hold
    few = Limits(max_bytes=DISK.max_bytes, max_rows=250_000, max_values=1000, upload=False)
    assert isinstance(load_file(path, limits=few).values, np.memmap)
    with pytest.raises(DataError, match="more than the limit of 1,000"):
        load_file(path.read_bytes(), "big.npy", limits=few)
    with pytest.raises(DataError, match="250,000 rows, more than the limit of 10[.]"):
        load_file(path, limits=Limits(max_bytes=DISK.max_bytes, max_rows=10, upload=False))


def test_a_mapped_file_gives_the_data_set_an_in_memory_load_gives(tmp_path):
    path = tmp_path / "d.npy"
    Y = _data(3000, 6)
    Y[:, 4] = 2.5  # a constant column: dropped
    np.save(path, Y)
    mapped = load_file(path, limits=DISK)
    read = load_file(path.read_bytes(), "d.npy")  # an upload: read into memory
    assert isinstance(mapped.values, np.ndarray) and not isinstance(read.values, np.memmap)
    np.testing.assert_array_equal(mapped.values, read.values)
    assert mapped.feature_names == read.feature_names and mapped.warnings == read.warnings
    assert mapped.source_path is None  # a column was dropped: no longer the file's values
    for ds in (load_file(path, limits=DISK, standardize=True), prepare(read, standardize=True)):
        np.testing.assert_allclose(ds.values, (read.values - read.values.mean(0)) / read.values.std(0),
                                   rtol=1e-12, atol=1e-12)


def test_bad_values_in_a_mapped_file_are_refused_as_in_memory(tmp_path):
    Y = _data(200_000, 3)
    Y[150_000, 1] = np.inf
    np.save(tmp_path / "inf.npy", Y)
    with pytest.raises(DataError, match=r"Infinite values found in column\(s\) 'x2' \(first at data row 150001\)"):
        load_file(tmp_path / "inf.npy", limits=DISK)
    Y[150_000, 1] = 1e200
    np.save(tmp_path / "huge.npy", Y)
    with pytest.raises(DataError, match=r"as large as 1e\+200 in column 'x2' \(data row 150001\)"):
        load_file(tmp_path / "huge.npy", limits=DISK)
    Y = _data(300, 3)
    Y[7, 0] = np.nan  # missing cells: read into memory, reported as before
    np.save(tmp_path / "nan.npy", Y)
    ds = load_file(tmp_path / "nan.npy", limits=DISK)
    assert not isinstance(ds.values, np.memmap) and ds.n_missing == 1
    assert any("Missing values: 1 cell(s)" in w for w in ds.warnings)


def test_column_statistics_read_by_blocks_are_numpys():
    rng = np.random.default_rng(1)
    Y = rng.standard_normal((1001, 5)) * np.array([1.0, 1e-300, 1e200, 4.0, 1.0]) + np.array([0, 0, 0, 7.0, 3.0])
    Y[rng.random(Y.shape) < 0.1] = np.nan
    Y[:, 4] = np.where(np.isnan(Y[:, 4]), np.nan, 3.0)  # constant where observed
    scale = np.nanmax(np.abs(Y), axis=0)
    for rows in (7, 1000, 5000):
        s = column_stats(Y, rows=rows)
        np.testing.assert_array_equal(s.scale, scale)
        np.testing.assert_allclose(s.mean, np.nanmean(Y / scale, axis=0) * scale, rtol=1e-12)
        np.testing.assert_allclose(s.std, np.nanstd(Y / scale, axis=0) * scale, rtol=1e-12)
        np.testing.assert_array_equal(s.missing, np.isnan(Y).sum(axis=0))
        assert s.unit_std[4] == 0.0 and not s.infinite


def test_the_likelihood_proposal_reads_every_block():
    Y = np.zeros((300_000, 2))  # several blocks
    Y[::3] = 1.0
    assert propose_likelihood(Y).likelihood == "bernoulli"
    Y[-1, 1] = 2.0  # a count, in the last block only
    assert propose_likelihood(Y).likelihood == "poisson"
    Y[-1, 1] = 0.5
    assert propose_likelihood(Y).likelihood == "gaussian"


@pytest.fixture
def big_npy_on_command_line(tmp_path, monkeypatch):
    path = tmp_path / "rows.npy"
    np.save(path, _data(400_000, 5))  # 16 MB
    monkeypatch.setenv(serving.PRELOAD_ENV, str(path))
    serving._load_preloaded.cache_clear()
    yield path
    serving._load_preloaded.cache_clear()


def test_the_page_on_a_big_command_line_file_keeps_it_mapped_and_proposes_svi(big_npy_on_command_line):
    ex = Explorer(limiter=Limiter(1))
    loader = lambda label, standardize: serving.preloaded_dataset(label_column=label, standardize=standardize)  # noqa: E731
    assert traced_peak(lambda: ex.data.load_given(loader, "rows.npy"))[0]
    ok, peak = traced_peak(lambda: ex.data.load_given(loader, "rows.npy"))  # loaded and shown again
    assert ok
    ds = ex.data.dataset
    assert isinstance(ds.values, np.memmap) and ds.n == 400_000
    assert peak < big_npy_on_command_line.stat().st_size / 2, peak  # the page made no copy of the rows
    assert ex.settings.suggestion == "svi"
    assert "N = 400000 points, D = 5 features" in ex.data.summary_lines()
    ex.close()


def test_the_runs_tables_pca_row_reads_a_mapped_file_by_blocks(tmp_path):
    from gplvm_explorer.state.runs import pca_record

    path = tmp_path / "pca.npy"
    np.save(path, _data(300_000, 8))  # 19 MB
    mapped = load_file(path, limits=DISK)
    assert isinstance(mapped.values, np.memmap)
    cells, peak = traced_peak(lambda: pca_record(mapped).cells)
    assert peak < 300_000 * 8 * 8 / 4, peak  # no centred copy of the rows (nor an SVD's N x D factor)
    # the same row as the data in memory give (SVD of the centred rows as the reference)
    Y = np.asarray(mapped.values)
    s = np.linalg.svd(Y - Y.mean(0), compute_uv=False)
    lam = s ** 2 / len(Y)
    log_det = np.log(lam[:2]).sum() + 6 * np.log(lam[2:].mean())
    assert cells["bound_per_row"] == pytest.approx(-0.5 * (8 * np.log(2 * np.pi) + log_det + 8), rel=1e-10)
