"""Label colouring: a capped legend, numeric labels on a colour scale."""
from __future__ import annotations

import numpy as np

from gplvm_explorer.state.labels import OTHER, colour_labels


def test_many_distinct_labels_are_capped_to_the_most_frequent_plus_other():
    rng = np.random.default_rng(0)
    names = [f"id-{i}" for i in rng.integers(0, 8000, size=20_000)]
    names[:5000] = ["common-a"] * 3000 + ["common-b"] * 2000
    labels = np.array(names)
    col = colour_labels(labels, labels.size, name="id", max_categories=10)
    assert len(col.categories) == 10 and col.categories[-1] == OTHER
    assert "common-a" in col.categories and "common-b" in col.categories
    assert col.capped and col.distinct > 5000
    assert sum(col.counts) == labels.size
    assert col.codes.shape == (labels.size,) and col.codes.max() == 9
    assert np.all(col.codes[:3000] == col.categories.index("common-a"))
    assert len(set(col.colours)) == len(col.colours)


def test_few_categories_keep_their_order_and_colours():
    col = colour_labels(np.array(["b", "a", "c", "a"]), 4, name="cls")
    assert col.categories == ("a", "b", "c") and not col.capped and not col.continuous
    assert list(col.codes) == [1, 0, 2, 0]


def test_numeric_labels_become_ranges_on_a_colour_scale():
    values = np.linspace(0.0, 1.0, 500)
    col = colour_labels(values, 500, name="temperature")
    assert col.continuous and 2 <= len(col.categories) <= 8
    assert col.value_range == (0.0, 1.0)
    assert np.all(np.diff(col.codes) >= 0)  # ordered values -> ordered bins
    ids = np.arange(5000)  # many distinct integers: a scale too, not 5000 legend entries
    assert colour_labels(ids, 5000).continuous


def test_no_labels():
    col = colour_labels(None, 7)
    assert col.categories == ("all points",) and col.codes.tolist() == [0] * 7 and col.name == ""
