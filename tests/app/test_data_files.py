"""User files: round trips through CSV/TSV/NPY/NPZ, parsing rules and options."""

import io

import numpy as np
import pytest

from gplvm_explorer.data import DataError, Dataset, csv_columns, load_file, prepare


@pytest.fixture
def table():
    rng = np.random.default_rng(7)
    Y = rng.standard_normal((12, 4)) * [1.0, 10.0, 0.1, 3.0] + [0.0, 5.0, -2.0, 100.0]
    labels = np.array(["a", "b", "c"] * 4)
    return Y, labels


def _npy(arr):
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def _npz(**arrays):
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def _csv(Y, labels=None, names=None, delimiter=","):
    names = names or [f"f{j}" for j in range(Y.shape[1])]
    head = ([] if labels is None else ["label"]) + names
    lines = [delimiter.join(head)]
    for i, row in enumerate(Y):
        cells = ([] if labels is None else [str(labels[i])]) + [repr(float(v)) for v in row]
        lines.append(delimiter.join(cells))
    return ("\n".join(lines) + "\n").encode()


def test_csv_round_trip_with_labels(table, tmp_path):
    Y, labels = table
    path = tmp_path / "data.csv"
    path.write_bytes(_csv(Y, labels))
    ds = load_file(path, label_column="label")  # format from the path's own name
    np.testing.assert_array_equal(ds.values, Y)
    np.testing.assert_array_equal(ds.labels, labels)
    assert ds.feature_names == ["f0", "f1", "f2", "f3"] and ds.label_name == "label"
    assert ds.name == "data.csv" and ds.warnings == []


def test_tsv_round_trip_with_integer_labels(table):
    Y, _ = table
    ints = np.arange(12) % 3
    ds = load_file(_csv(Y, ints, delimiter="\t"), "data.tsv", label_column=0)
    np.testing.assert_array_equal(ds.values, Y)
    assert ds.labels.dtype == np.int64
    np.testing.assert_array_equal(ds.labels, ints)


def test_npy_round_trip(table):
    Y, _ = table
    ds = load_file(_npy(Y), "data.npy")
    np.testing.assert_array_equal(ds.values, Y)
    assert ds.labels is None and ds.image_shape is None


def test_npy_fortran_order_and_float32_load_equal(table):
    Y, _ = table
    np.testing.assert_array_equal(load_file(_npy(np.asfortranarray(Y)), "f.npy").values, Y)
    y32 = Y.astype(np.float32)
    np.testing.assert_array_equal(load_file(_npy(y32), "f.npy").values, y32.astype(np.float64))


def test_npz_round_trip_with_labels_image_shape_and_names(tmp_path):
    rng = np.random.default_rng(3)
    Y = rng.random((10, 6))
    labels = np.arange(10) % 2
    path = tmp_path / "images.npz"
    path.write_bytes(_npz(Y=Y, labels=labels, image_shape=np.array([2, 3]),
                          feature_names=np.array([f"p{j}" for j in range(6)])))
    ds = load_file(path)
    np.testing.assert_array_equal(ds.values, Y)
    np.testing.assert_array_equal(ds.labels, labels)
    assert ds.image_shape == (2, 3) and ds.feature_names == [f"p{j}" for j in range(6)]


def test_npy_image_stack_becomes_rows_with_image_shape():
    stack = np.random.default_rng(0).random((5, 3, 4))
    ds = load_file(_npy(stack), "stack.npy")
    assert ds.shape == (5, 12) and ds.image_shape == (3, 4)
    np.testing.assert_array_equal(ds.values.reshape(5, 3, 4), stack)


def test_header_detection():
    with_header = load_file(b"x,y\n1,2\n3,4\n5,7\n", "h.csv")
    assert with_header.feature_names == ["x", "y"] and with_header.n == 3
    no_header = load_file(b"1,2\n3,4\n5,7\n", "h.csv")
    assert no_header.feature_names == ["col1", "col2"] and no_header.n == 3
    forced = load_file(b"1,2\n3,4\n5,7\n6,1\n", "h.csv", header=True)
    assert forced.feature_names == ["1", "2"] and forced.n == 3


def test_whitespace_txt_semicolons_quotes_and_comments():
    ds = load_file(b"# made by hand\n1.0  2.0 3\n4 5 6.5\n7 8 9\n", "w.txt")
    assert ds.shape == (3, 3)
    ds = load_file(b"a;b\n1;2\n3;4\n5;7\n", "s.csv")
    assert ds.feature_names == ["a", "b"] and ds.shape == (3, 2)
    ds = load_file(b'name,"x, first",y\n"p, q",1,2\nr,3,4\ns,5,7\n', "q.csv", label_column="name")
    assert ds.feature_names == ["x, first", "y"] and ds.labels.tolist() == ["p, q", "r", "s"]


def test_non_numeric_column_reported_and_excluded():
    ds = load_file(b"species,a,b\nx,1,2\ny,3,4\nz,5,7\n", "n.csv")
    assert ds.feature_names == ["a", "b"]
    assert "Excluded non-numeric column 'species' (use it as the label column?)" in ds.warnings


def test_missing_values_reported_with_counts_and_rows_kept():
    text = b"a,b,c\n1,2,3\n,5,6\n7,NA,9\n10,11,12\n13,14,15\n16,17,?\n"
    ds = load_file(text, "m.csv")
    assert ds.n == 6
    np.testing.assert_array_equal(ds.values[:, 0], [1, np.nan, 7, 10, 13, 16])
    assert "Missing values: 3 cell(s) (1 in 'a', 1 in 'b', 1 in 'c') in 3 row(s); the rows are kept" in ds.warnings
    dropped = load_file(text, "m.csv", missing="drop-rows")
    assert dropped.n == 3
    np.testing.assert_array_equal(dropped.values[:, 0], [1, 10, 13])
    assert "Dropped 3 row(s) with missing values (3 complete rows left)" in dropped.warnings
    assert load_file(text, "m.csv", drop_missing_rows=True).n == 3  # the older spelling


def test_labels_follow_dropped_rows():
    ds = load_file(b"k,a,b\np,1,2\nq,,4\nr,5,6\ns,7,9\n", "l.csv", label_column="k")
    assert ds.labels.tolist() == ["p", "q", "r", "s"]
    ds = load_file(b"k,a,b\np,1,2\nq,,4\nr,5,6\ns,7,9\n", "l.csv", label_column="k", missing="drop-rows")
    assert ds.labels.tolist() == ["p", "r", "s"]


def test_constant_columns_dropped_and_reported():
    ds = load_file(b"a,b,c,d\n1,5,2,0\n2,5,3,0\n4,5,1,0\n", "c.csv")
    assert ds.feature_names == ["a", "c"]
    assert "Dropped 2 constant column(s): 'b', 'd'" in ds.warnings


def test_standardize_gives_zero_mean_unit_variance_and_can_be_undone(table):
    Y, _ = table
    ds = load_file(_npy(Y), "s.npy", standardize=True)
    np.testing.assert_allclose(ds.values.mean(0), 0.0, atol=1e-12)
    np.testing.assert_allclose(ds.values.std(0), 1.0)
    np.testing.assert_allclose(ds.unstandardize(ds.values), Y)


def test_standardize_without_drop_constant_refuses_constant_columns():
    with pytest.raises(DataError, match="Cannot standardise: column\\(s\\) 'b' are constant"):
        load_file(b"a,b,c\n1,5,2\n2,5,3\n4,5,1\n", "c.csv", standardize=True, drop_constant=False)


def test_subsample_is_seeded_and_keeps_labels_aligned():
    Y = np.column_stack([np.arange(50.0), np.arange(50.0) ** 2])
    data = _npz(Y=Y, labels=np.arange(50))
    a = load_file(data, "s.npz", max_rows=10, seed=1)
    b = load_file(data, "s.npz", max_rows=10, seed=1)
    c = load_file(data, "s.npz", max_rows=10, seed=2)
    assert a.n == 10
    np.testing.assert_array_equal(a.values, b.values)
    assert not np.array_equal(a.values, c.values)
    np.testing.assert_array_equal(a.values[:, 0], a.labels)
    assert "Subsampled 50 rows to 10 (random subset, seed 1)" in a.warnings


def test_prepare_leaves_its_input_untouched(table):
    Y, _ = table
    ds = Dataset(values=Y.copy())
    out = prepare(ds, standardize=True, max_rows=5)
    np.testing.assert_array_equal(ds.values, Y)
    assert ds.warnings == [] and out.n == 5
    assert prepare(ds) is ds


def test_csv_columns_reads_header_for_label_picker(tmp_path):
    assert csv_columns(b"species,a,b\nx,1,2\n", "p.csv") == ["species", "a", "b"]
    assert csv_columns(b"1\t2\t3\n4\t5\t6\n", "p.tsv") == ["col1", "col2", "col3"]
    assert csv_columns(_npy(np.zeros((3, 2))), "p.npy") == []
    big = tmp_path / "big.csv"
    big.write_bytes(b"a,b\n" + b"1,2\n" * 200_000)  # only the start is read
    assert csv_columns(big) == ["a", "b"]


def test_bytes_without_filename_are_sniffed(table):
    Y, _ = table
    np.testing.assert_array_equal(load_file(_npy(Y)).values, Y)
    np.testing.assert_array_equal(load_file(_npz(Y=Y)).values, Y)
    np.testing.assert_array_equal(load_file(_csv(Y)).values, Y)


def test_summary_mentions_size_labels_and_images():
    ds = load_file(_npz(Y=np.random.default_rng(0).random((6, 4)), labels=np.array([0, 1] * 3),
                        image_shape=np.array([2, 2])), "s.npz")
    text = ds.summary()
    assert "N=6" in text and "D=4" in text and "2 classes" in text and "images 2x2" in text
