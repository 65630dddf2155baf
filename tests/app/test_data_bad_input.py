"""One test per kind of bad input: the typed error and a message that helps."""

import io
import pickle
import zipfile

import numpy as np
import pytest

from gplvm_explorer.data import DataError, Limits, load_file


def _npy(arr, **kw):
    buf = io.BytesIO()
    np.save(buf, arr, **kw)
    return buf.getvalue()


def _npz(**arrays):
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


GOOD = np.arange(12.0).reshape(4, 3) ** 1.5


def test_data_error_is_a_value_error():
    assert issubclass(DataError, ValueError)


@pytest.mark.parametrize("content", [b"", b"  \n\n \t\n"])
def test_empty_file(content):
    with pytest.raises(DataError, match="The file is empty"):
        load_file(content, "empty.csv")


def test_header_only():
    with pytest.raises(DataError, match="header but no data rows"):
        load_file(b"a,b,c\n", "h.csv")


def test_binary_garbage_as_csv():
    garbage = bytes(np.random.default_rng(0).integers(0, 256, 4000, dtype=np.uint8))
    with pytest.raises(DataError, match="looks like a binary file"):
        load_file(garbage, "g.csv")


def test_binary_garbage_without_nul_bytes():
    garbage = bytes(range(1, 32)) * 50
    with pytest.raises(DataError, match="many control characters"):
        load_file(garbage, "g.txt")


def test_binary_garbage_as_npy_and_npz():
    with pytest.raises(DataError, match="not an NPY array"):
        load_file(b"hello, this is not numpy", "g.npy")
    with pytest.raises(DataError, match="not an NPZ archive"):
        load_file(b"hello, this is not a zip", "g.npz")
    with pytest.raises(DataError, match="NPZ archive is corrupt"):
        load_file(b"PK\x03\x04" + b"\x00" * 60, "g.npz")


def test_ragged_rows():
    with pytest.raises(DataError, match="Ragged rows: line 3 has 2 field\\(s\\) but line 1 has 3"):
        load_file(b"a,b,c\n1,2,3\n4,5\n6,7,8\n", "r.csv")


def test_unclosed_quote():
    with pytest.raises(DataError, match="Could not parse the file near line .*unclosed quote"):
        load_file(b'a,b\n1,"2\n3,4\n' + b"5,6\n" * 5 + b'x' * 200_000, "q.csv")


def test_single_column_csv():
    with pytest.raises(DataError, match="Only one numeric column \\('a'\\).*at least 2 features"):
        load_file(b"a\n1\n2\n3\n", "one.csv")


def test_single_column_after_excluding_text():
    with pytest.raises(DataError, match="Only one numeric column.*Excluded non-numeric column 'name'"):
        load_file(b"name,a\nx,1\ny,2\nz,3\n", "one.csv")


def test_single_column_npy():
    with pytest.raises(DataError, match="1-D array.*at least 2 features"):
        load_file(_npy(np.arange(5.0)), "one.npy")
    with pytest.raises(DataError, match="single column"):
        load_file(_npy(np.arange(5.0)[:, None]), "one.npy")


def test_only_constant_columns():
    with pytest.raises(DataError, match="fewer than 2 varying columns"):
        load_file(b"a,b,c\n1,5,2\n2,5,2\n4,5,2\n", "c.csv")


def test_no_numeric_columns_mentions_decimal_commas():
    with pytest.raises(DataError, match="No numeric columns.*decimal commas"):
        load_file(b"a;b\n1,5;2,5\n3,5;4,5\n5,5;6,5\n", "eu.csv")


def test_all_nan_values():
    with pytest.raises(DataError, match="Every value is missing"):
        load_file(b"a,b\nNaN,\nNA,nan\n,null\n", "nan.csv")
    with pytest.raises(DataError, match="Every value is missing"):
        load_file(_npy(np.full((4, 3), np.nan)), "nan.npy")


def test_every_row_has_a_missing_value_is_kept_but_cannot_drop_rows():
    ds = load_file(b"a,b,c\n1,,3\n,5,6\n7,8,\n", "m.csv")
    assert ds.n == 3 and ds.n_missing == 3
    with pytest.raises(DataError, match="Only 0 of 3 row\\(s\\) have no missing value.*column means"):
        load_file(b"a,b,c\n1,,3\n,5,6\n7,8,\n", "m.csv", missing="drop-rows")


def test_too_few_rows_left_after_dropping_missing():
    with pytest.raises(DataError, match="Only 2 of 4 row\\(s\\) have no missing value"):
        load_file(b"a,b\n1,2\n3,\n,6\n7,8\n", "m.csv", missing="drop-rows")


def test_rows_without_any_value_are_dropped_with_a_note():
    ds = load_file(b"a,b\n1,2\n,\n3,4\nNA,nan\n5,7\n", "m.csv")
    assert ds.n == 3 and not ds.has_missing
    # a line of bare delimiters is skipped by the parser; NA,nan is data row 3
    assert "Dropped 1 row(s) with no values at all (first: data row 3)" in ds.warnings
    with pytest.raises(DataError, match="Only 2 row\\(s\\) have any values"):
        load_file(b"a,b\n1,2\n,\n3,4\nNA,nan\n", "m.csv")


def test_infinite_values():
    with pytest.raises(DataError, match="Infinite values found in column\\(s\\) 'b'"):
        load_file(b"a,b\n1,2\n3,inf\n5,6\n", "i.csv")
    with pytest.raises(DataError, match="Infinite values"):
        load_file(_npy(np.array([[1.0, 2.0], [np.inf, 1.0], [3.0, 4.0]])), "i.npy")


def test_fewer_than_three_rows():
    with pytest.raises(DataError, match="Need at least 3 rows \\(data points\\), got 2"):
        load_file(b"a,b\n1,2\n3,4\n", "two.csv")
    with pytest.raises(DataError, match="Need at least 3 rows"):
        load_file(_npy(np.ones((2, 4)) * [[1.0], [2.0]]), "two.npy")


def test_object_dtype_npy_is_refused_without_unpickling():
    arr = np.array([1, "two", None], dtype=object).reshape(3, 1).repeat(2, axis=1)
    with pytest.raises(DataError, match="object array.*never loaded"):
        load_file(_npy(arr, allow_pickle=True), "obj.npy")


def test_raw_pickle_posing_as_npy_is_refused():
    class Boom:
        def __reduce__(self):
            return (exec, ("raise SystemExit('executed!')",))

    payload = pickle.dumps(Boom())
    with pytest.raises(DataError, match="looks like a Python pickle"):
        load_file(payload, "evil.npy")


def test_object_dtype_inside_npz_is_refused():
    buf = io.BytesIO()
    np.savez(buf, Y=GOOD, labels=np.array([{"a": 1}] * 4, dtype=object))
    with pytest.raises(DataError, match="Array 'labels' in the NPZ holds an object array"):
        load_file(buf.getvalue(), "obj.npz")


def test_structured_and_complex_and_text_npy_refused():
    rec = np.zeros(4, dtype=[("a", "f8"), ("b", "f8")])
    with pytest.raises(DataError, match="structured"):
        load_file(_npy(rec), "rec.npy")
    with pytest.raises(DataError, match="complex numbers"):
        load_file(_npy(GOOD + 1j), "c.npy")
    with pytest.raises(DataError, match="not numeric"):
        load_file(_npy(np.array([["a", "b"]] * 3)), "s.npy")


def test_truncated_npy():
    with pytest.raises(DataError, match="truncated or corrupt"):
        load_file(_npy(GOOD)[:-5], "t.npy")


def test_npy_header_claiming_a_huge_shape_allocates_nothing():
    data = _npy(GOOD).replace(b"(4, 3)", b"(400000000, 300)", 1)
    with pytest.raises(DataError, match="more than the limit of 10,000,000 values"):
        load_file(data, "huge.npy")


def test_npz_without_y_lists_what_it_found():
    with pytest.raises(DataError, match="no array named 'Y'. Found: 'a', 'b'"):
        load_file(_npz(a=GOOD, b=GOOD), "x.npz")


def test_npz_label_and_image_shape_mismatch():
    with pytest.raises(DataError, match="expected \\(4,\\), one label per row"):
        load_file(_npz(Y=GOOD, labels=np.arange(3)), "x.npz")
    with pytest.raises(DataError, match="does not match the 3 columns"):
        load_file(_npz(Y=GOOD, image_shape=np.array([2, 2])), "x.npz")


def test_npz_zip_bomb_member_is_refused():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        header = _npy(np.zeros((1, 2)))  # a valid start, then a huge zero tail
        zf.writestr("Y.npy", header + b"\x00" * 2_000_000)
    assert len(buf.getvalue()) < 10_000
    with pytest.raises(DataError, match="expands to 2,000,1\\d\\d bytes, more than the limit"):
        load_file(buf.getvalue(), "bomb.npz", limits=Limits(max_values=1000))


def test_file_over_size_limit(tmp_path):
    path = tmp_path / "big.csv"
    path.write_bytes(b"a,b\n" + b"1,2\n" * 1000)
    with pytest.raises(DataError, match=r"The file is 4 kB, more than the 1 kB upload limit.*gplvm-explorer FILE"):
        load_file(path, limits=Limits(max_bytes=1000))
    with pytest.raises(DataError, match=r"more than the 1 kB upload limit.*command line \(gplvm-explorer FILE\)"):
        load_file(path.read_bytes(), "big.csv", limits=Limits(max_bytes=1024))
    with pytest.raises(DataError, match=r"more than the 1 kB limit\. Use a smaller file") as exc:
        load_file(path, limits=Limits(max_bytes=1024, upload=False))
    assert "command line" not in str(exc.value)


def test_default_size_limit_suits_browser_uploads():
    assert Limits().max_bytes == 20_000_000


def test_too_many_rows():
    text = b"a,b\n" + b"".join(b"%d,%d\n" % (i, i * i) for i in range(30))
    with pytest.raises(DataError, match="more than 20 data rows \\(the limit\\).*Limits.max_rows"):
        load_file(text, "rows.csv", limits=Limits(max_rows=20))
    with pytest.raises(DataError, match="30 rows, more than the limit of 20"):
        load_file(_npy(np.ones((30, 2))), "rows.npy", limits=Limits(max_rows=20))


def test_too_many_columns():
    text = (",".join(f"c{j}" for j in range(12)) + "\n" + ",".join(["1"] * 12) + "\n").encode()
    with pytest.raises(DataError, match="12 columns, more than the limit of 10.*Limits.max_cols"):
        load_file(text, "cols.csv", limits=Limits(max_cols=10))
    with pytest.raises(DataError, match="12 columns, more than the limit of 10"):
        load_file(_npy(np.ones((3, 12))), "cols.npy", limits=Limits(max_cols=10))


def test_unsupported_extension():
    with pytest.raises(DataError, match="Unsupported file type \\('.xlsx'\\).*save as CSV"):
        load_file(b"PK\x03\x04", "sheet.xlsx")


def test_missing_path(tmp_path):
    with pytest.raises(DataError, match="File not found: 'nope.csv'"):
        load_file(tmp_path / "nope.csv")


def test_wrong_source_type():
    with pytest.raises(DataError, match="Expected a file path or bytes, got int"):
        load_file(42)


def test_unknown_label_column_lists_columns():
    with pytest.raises(DataError, match="Label column 'kind' not found. Columns in the file: 'a', 'b', 'c'"):
        load_file(b"a,b,c\n1,2,3\n4,5,6\n7,8,9\n", "l.csv", label_column="kind")


def test_label_column_on_npy_explains_npz_labels():
    with pytest.raises(DataError, match="store the labels as an array named 'labels'"):
        load_file(_npy(GOOD), "x.npy", label_column=0)


def test_max_rows_below_three():
    with pytest.raises(DataError, match="max_rows must be at least 3"):
        load_file(_npy(GOOD), "x.npy", max_rows=2)


def test_values_too_large_to_square():
    with pytest.raises(DataError, match="Values as large as 1e\\+300 in column 'b'.*Rescale"):
        load_file(b"a,b\n1,2\n3,1e300\n5,6\n", "big.csv")
