"""Text files in UTF-8 (with or without BOM), UTF-16 and UTF-32 decode; binary is refused."""

from __future__ import annotations

import codecs

import numpy as np
import pytest

from gplvm_explorer.data import DataError, csv_columns, load_file
from gplvm_explorer.data.textfile import decode_text, detect_encoding

CSV = "größe,höhe,klasse\n1.5,2.5,α\n2.5,3.5,β\n3.5,5.0,γ\n4.0,4.5,α\n"

ENCODINGS = [
    # (codec used to write, byte-order mark written first)
    ("utf-8", b""),
    ("utf-8", codecs.BOM_UTF8),
    ("utf-16-le", codecs.BOM_UTF16_LE),
    ("utf-16-be", codecs.BOM_UTF16_BE),
    ("utf-32-le", codecs.BOM_UTF32_LE),
    ("utf-32-be", codecs.BOM_UTF32_BE),
]


@pytest.mark.parametrize("codec, bom", ENCODINGS)
def test_csv_in_every_unicode_encoding_loads_the_same(codec, bom):
    data = bom + CSV.encode(codec)
    ds = load_file(data, "enc.csv", label_column="klasse")
    assert ds.feature_names == ["größe", "höhe"]
    assert ds.labels.tolist() == ["α", "β", "γ", "α"]
    np.testing.assert_array_equal(ds.values, [[1.5, 2.5], [2.5, 3.5], [3.5, 5.0], [4.0, 4.5]])
    assert not any("binary" in w or "Latin-1" in w for w in ds.warnings)
    assert csv_columns(data, "enc.csv") == ["größe", "höhe", "klasse"]


def test_python_utf16_codec_output_loads():
    """What Excel's "Unicode text" and Python's "utf-16" write: BOM + native order."""
    ds = load_file(CSV.replace(",", "\t").encode("utf-16"), "excel.txt", label_column="klasse")
    assert ds.shape == (4, 2)


@pytest.mark.parametrize("codec, label", [("utf-16-le", "UTF-16 LE"), ("utf-16-be", "UTF-16 BE"),
                                          ("utf-32-le", "UTF-32 LE")])
def test_utf16_without_bom_is_recognised_and_noted(codec, label):
    ds = load_file("a,b\n1,2\n3,4\n5,7\n".encode(codec), "nobom.csv")
    assert ds.shape == (3, 2)
    assert f"The file has no byte-order mark; it was read as {label}" in ds.warnings


def test_detect_encoding_prefers_utf32_over_utf16_le():
    assert detect_encoding(codecs.BOM_UTF32_LE + "a".encode("utf-32-le"))[0] == "utf-32-le"
    assert detect_encoding(codecs.BOM_UTF16_LE + "a".encode("utf-16-le"))[0] == "utf-16-le"
    assert detect_encoding(b"a,b\n1,2\n") == (None, 0, "UTF-8")


def test_latin1_fallback_is_noted():
    ds = load_file("gr\xf6\xdfe,b\n1,2\n3,4\n5,7\n".encode("latin-1"), "l1.csv")
    assert ds.feature_names == ["größe", "b"]
    assert "The file is not valid UTF-8; it was read as Latin-1" in ds.warnings


def test_bom_with_invalid_body_is_refused_with_the_encoding_named():
    data = codecs.BOM_UTF16_LE + "a,b\n1,2\n".encode("utf-16-le") + b"\x00\xdc"  # lone low surrogate
    with pytest.raises(DataError, match="starts like UTF-16 LE text but is not valid UTF-16 LE"):
        load_file(data, "bad.csv")


def test_binary_with_nul_bytes_is_still_refused():
    rng = np.random.default_rng(0)
    data = rng.integers(0, 256, 5000, dtype=np.uint8).tobytes()
    with pytest.raises(DataError, match="looks like a binary file"):
        load_file(data, "x.csv")


def test_head_cut_inside_a_character_is_not_latin1():
    """csv_columns reads the first 64 kB; a multi-byte character cut there must not flip to Latin-1."""
    row = "α,β\n" + "1,2\n" * 10
    text, warnings = decode_text(row.encode("utf-8")[:1], partial=True)  # half of "α"
    assert text == "" and warnings == []
    big = ("αβγ,δ\n" + "1.5,2\n" * 20000).encode("utf-8")
    assert len(big) > 1 << 16
    assert csv_columns(big, "big.csv") == ["αβγ", "δ"]
