"""The binary glyph sample: 0/1 pixels of the rotating glyph, a few flipped; the page proposes Bernoulli for it."""
import numpy as np

from gplvm_explorer.data import load_sample
from gplvm_explorer.data.generators import BINARY_GLYPH_FLIPS
from gplvm_explorer.data.value_kind import propose_likelihood


def test_binary_glyph_is_the_rotating_glyph_in_black_and_white():
    binary, grey = load_sample("binary-glyph"), load_sample("rotating-glyph")
    assert binary.shape == grey.shape and binary.image_shape == grey.image_shape == (16, 16)
    assert set(np.unique(binary.values)) == {0.0, 1.0}
    np.testing.assert_array_equal(binary.labels, grey.labels)
    flipped = np.mean((grey.values > 0.5) != (binary.values == 1.0))
    assert abs(flipped - BINARY_GLYPH_FLIPS) < 0.01  # the grey sample's noise moves a few edge pixels too
    np.testing.assert_array_equal(load_sample("binary-glyph").values, binary.values)  # the same for a seed
    assert not np.array_equal(load_sample("binary-glyph", seed=1).values, binary.values)
    assert propose_likelihood(binary.values).likelihood == "bernoulli"
    assert propose_likelihood(grey.values).likelihood == "gaussian"
