"""Property: any input gives a valid Dataset or a DataError, quickly."""

import io

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gplvm_explorer.data import DataError, Dataset, Limits, load_file

LIMITS = Limits(max_bytes=200_000, max_rows=500, max_cols=50, max_values=20_000)
SETTINGS = settings(
    max_examples=200, deadline=2000, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
EXTENSIONS = ["data.csv", "data.tsv", "data.txt", "data.npy", "data.npz", None]


def _check(result):
    assert isinstance(result, Dataset)
    n, d = result.values.shape
    assert n >= 3 and d >= 2
    assert result.values.dtype == np.float64 and result.values.flags.c_contiguous
    # finite or NaN (= missing); every row and column has at least one value
    assert not np.isinf(result.values).any()
    assert result.observed.any(axis=0).all() and result.observed.any(axis=1).all()
    assert len(result.feature_names) == d
    assert result.labels is None or result.labels.shape == (n,)
    assert result.image_shape is None or result.image_shape[0] * result.image_shape[1] == d
    assert isinstance(result.summary(), str)


def _load(data, filename, **options):
    try:
        result = load_file(data, filename, limits=LIMITS, **options)
    except DataError as exc:
        assert str(exc)  # a message for the user, never empty
        assert "\n" not in str(exc)  # plain one-line text; user strings in it are quoted
        return None
    _check(result)
    return result


def _npy(arr):
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def _npz(**arrays):
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


VALID_FILES = [
    _npy(np.arange(20.0).reshape(5, 4) ** 1.3),
    _npz(Y=np.arange(24.0).reshape(6, 4) ** 1.3, labels=np.arange(6) % 2, image_shape=np.array([2, 2])),
    b"a,b,c\n1,2,3\n4,5,6.5\n7,8,9\n10,,12\n",
]


@SETTINGS
@given(data=st.binary(max_size=2000), filename=st.sampled_from(EXTENSIONS))
def test_random_bytes(data, filename):
    _load(data, filename)


@SETTINGS
@given(
    which=st.integers(0, len(VALID_FILES) - 1),
    edits=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 255)), max_size=8),
    cut=st.floats(0.0, 1.0),
)
def test_corrupted_valid_files(which, edits, cut):
    data = bytearray(VALID_FILES[which])
    for where, byte in edits:
        data[int(where * len(data))] = byte
    data = bytes(data[: max(1, int(cut * len(data)) if cut < 0.95 else len(data))])
    filename = ["x.npy", "x.npz", "x.csv"][which]
    _load(data, filename)


NUMBER = st.one_of(
    st.floats(-1e6, 1e6, allow_nan=False).map(repr),
    st.integers(-10**6, 10**6).map(str),
)
JUNK = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["", "NA", "nan", "?", "null", "abc", "x y", '"q"', '"a,b"', '"open', "1,5",
                     "1e400", "-", " 3 ", "#", "\\", "'"]),
    st.text(max_size=5),
)


@st.composite
def near_csv(draw):
    """CSV-like text: mostly numbers, some junk cells, sometimes ragged rows."""
    delim = draw(st.sampled_from([",", ";", "\t", " ", "|"]))
    ncols = draw(st.integers(1, 5))
    rows = []
    if draw(st.booleans()):
        rows.append([f"c{j}" for j in range(ncols)])
    body = draw(st.lists(st.lists(NUMBER, min_size=ncols, max_size=ncols), max_size=10))
    for where, bad in draw(st.lists(st.tuples(st.integers(0, 99), JUNK), max_size=4)):
        if body:  # replace a few cells with junk
            body[where % len(body)][where // 10 % ncols] = bad
    if body and draw(st.integers(0, 3)) == 0:  # a ragged row
        body[draw(st.integers(0, len(body) - 1))].pop()
    rows.extend(body)
    newline = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    text = newline.join(delim.join(r) for r in rows)
    if draw(st.booleans()):
        text = "# comment" + newline + text
    return text


@SETTINGS
@given(
    text=near_csv(),
    filename=st.sampled_from(["d.csv", "d.tsv", "d.txt", None]),
    label_column=st.one_of(st.none(), st.integers(-2, 6), st.sampled_from(["c0", "c1", "nope"])),
    standardize=st.booleans(),
    drop_constant=st.booleans(),
    max_rows=st.one_of(st.none(), st.integers(0, 10)),
)
def test_near_valid_csv_text(text, filename, label_column, standardize, drop_constant, max_rows):
    _load(text.encode("utf-8", "surrogatepass"), filename, label_column=label_column,
          standardize=standardize, drop_constant=drop_constant, max_rows=max_rows)


def test_near_valid_csv_strategy_reaches_both_outcomes():
    """The generator is not vacuous: it yields loadable files and rejected ones."""
    outcomes = set()

    @settings(max_examples=150, deadline=None, derandomize=True)
    @given(text=near_csv())
    def run(text):
        outcomes.add(_load(text.encode("utf-8", "surrogatepass"), "d.csv") is not None)

    run()
    assert outcomes == {True, False}
