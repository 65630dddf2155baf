"""Parquet files (pyarrow) wherever a file is accepted: load_file, upload, explore, fit."""
from __future__ import annotations

import io
import os

import numpy as np
import pytest

from gplvm_explorer.data import DataError, csv_columns, load_file
from gplvm_explorer.state.data import UPLOADED_FILE, LoadedData

try:
    import pyarrow as pa
    import pyarrow.parquet as pq
except ImportError:  # pragma: no cover
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        raise  # in CI the `test` extra installs pyarrow: these tests must run
    pytest.skip("pyarrow is not installed (pip install 'gplvm-explorer[parquet]')", allow_module_level=True)

pd = pytest.importorskip("pandas")


def _frame(n=50, seed=1):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(rng.standard_normal((n, 3)), columns=["alpha", "beta", "gamma"])
    df["count"] = np.arange(n, dtype=np.int32)
    df["flag"] = (np.arange(n) % 2).astype(bool)
    df["species"] = pd.Categorical(np.resize(["setosa", "virginica"], n))
    df["comment"] = "text"
    return df


def _parquet_bytes(df) -> bytes:
    buf = io.BytesIO()
    df.to_parquet(buf, engine="pyarrow")
    return buf.getvalue()


def test_parquet_path_loads_numeric_columns_and_label(tmp_path):
    df = _frame()
    df.loc[4, "beta"] = np.nan
    path = tmp_path / "flowers.parquet"
    df.to_parquet(path)
    ds = load_file(path, label_column="species")
    assert ds.n == 50
    assert ds.feature_names == ["alpha", "beta", "gamma", "count", "flag"]
    np.testing.assert_allclose(ds.values[:, 0], df["alpha"].to_numpy())
    np.testing.assert_allclose(ds.values[:, 3], np.arange(50))
    assert ds.n_missing == 1 and np.isnan(ds.values[4, 1])
    assert list(ds.labels[:2]) == ["setosa", "virginica"] and ds.label_name == "species"
    assert any("comment" in w for w in ds.warnings)
    assert "PARQUET" in ds.description and ds.name == "flowers.parquet"
    assert csv_columns(path) == list(df.columns)


def test_parquet_bytes_are_sniffed_by_magic_and_pq_extension():
    data = _parquet_bytes(_frame())
    assert data[:4] == b"PAR1"
    assert load_file(data).n == 50  # no file name: PAR1 magic
    assert load_file(data, "x.pq").n == 50


def test_parquet_numeric_label_and_plain_arrow_table(tmp_path):
    rng = np.random.default_rng(0)
    table = pa.table({"a": rng.standard_normal(20), "b": pa.array(rng.integers(0, 9, 20), pa.int64()),
                      "c": pa.array([None] + list(rng.standard_normal(19)), pa.float64()),
                      "cls": pa.array(np.repeat([1, 2], 10), pa.int16())})
    path = tmp_path / "t.parquet"
    pq.write_table(table, path)
    ds = load_file(path, label_column="cls")
    assert ds.d == 3 and ds.labels.dtype.kind == "i" and ds.n_missing == 1


def test_bad_parquet_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match="Parquet"):
        load_file(b"PAR1 this is not really parquet", "broken.parquet")
    with pytest.raises(DataError, match="not a Parquet"):
        load_file(b"a,b\n1,2\n3,4\n", "renamed.parquet")
    only_text = pd.DataFrame({"s": ["a", "b", "c"], "t": ["x", "y", "z"]})
    with pytest.raises(DataError) as refused:
        load_file(_parquet_bytes(only_text), "text.parquet")
    assert str(refused.value) == "No numeric columns: the Parquet file has no column of numbers to model."
    with pytest.raises(DataError, match="not found"):
        load_file(_parquet_bytes(_frame()), "f.parquet", label_column="nope")


def test_upload_of_a_parquet_file_offers_its_columns_as_labels():
    data = LoadedData()
    assert data.load_upload(_parquet_bytes(_frame()), "mine.parquet"), data.error
    assert data.sample == UPLOADED_FILE and data.dataset.n == 50
    assert "species" in data.param.label_column.objects
    data.label_column = "species"
    assert data.dataset.label_name == "species" and data.error == ""


def test_explore_and_fit_accept_parquet(tmp_path):
    import gplvm_explorer
    from gplvm_explorer import fit_command

    path = tmp_path / "frame.parquet"
    _frame(n=40).to_parquet(path)
    app = gplvm_explorer.explore(path, labels="species", latent_dim=2)
    try:
        assert app.explorer.data.dataset.n == 40 and app.explorer.data.dataset.label_name == "species"
    finally:
        app.explorer.close()
    args = fit_command.build_parser().parse_args([str(path), "--label", "species", "-o", str(tmp_path / "m.npz")])
    ds = fit_command.load_dataset(args)
    assert ds.n == 40 and ds.label_name == "species"


def test_upload_widget_accepts_parquet():
    from gplvm_explorer import serving

    assert ".parquet" in serving.UPLOAD_EXTENSIONS
