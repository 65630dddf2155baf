"""The data layer's messages are plain text: user strings quoted, bounded, one line."""

from __future__ import annotations

import io

import numpy as np
import pytest

from gplvm_explorer.data import DataError, csv_columns, load_file

XSS = "<img src=x onerror=window.__xss=1>"
LONG = "<script>" + "A" * 5000 + "</script>"


def _npz(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _messages(ds):
    return list(ds.warnings) + [ds.summary(), ds.description, ds.name]


def test_markup_in_headers_labels_and_name_comes_back_as_plain_text():
    text = f"{XSS},b\u202e,label\n1,2,{XSS}\n3,4,<b>x</b>\n5,7,ok\n".encode()
    ds = load_file(text, f"{XSS}\n.csv", label_column="label")
    assert ds.feature_names == [XSS, "b\u202e"]  # data keep the user's exact strings
    assert ds.labels.tolist() == [XSS, "<b>x</b>", "ok"]
    assert ds.name == f"{XSS} .csv"  # the name is shown, so it is made plain
    for m in _messages(ds):
        assert "\n" not in m and "\u202e" not in m


def test_long_hostile_strings_are_bounded_in_messages():
    text = f"{LONG},b,c\nx,1,2\ny,2,1\nz,3,5\n4,5,4\n".encode()
    ds = load_file(text, "long.csv")
    assert all(len(w) < 400 for w in ds.warnings)
    with pytest.raises(DataError) as exc:
        load_file(b"a,b\n1,2\n3,4\n5,6\n", "m.csv", label_column=LONG)
    assert len(str(exc.value)) < 300 and "\n" not in str(exc.value)
    with pytest.raises(DataError) as exc:
        load_file(b"x", LONG + ".exe")
    assert len(str(exc.value)) < 300


def test_npz_member_names_are_quoted():
    with pytest.raises(DataError) as exc:
        load_file(_npz(**{XSS: np.ones((3, 2)), "b\nc": np.ones((3, 2))}), "x.npz")
    msg = str(exc.value)
    assert f"'{XSS}'" in msg and "\n" not in msg


def test_csv_columns_keep_exact_names():
    assert csv_columns(f"{XSS},b\n1,2\n".encode(), "h.csv") == [XSS, "b"]
