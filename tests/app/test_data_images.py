"""Images stored one pixel per column: recognised from the names, kept whole, or shaped by the user."""
from __future__ import annotations

import numpy as np
import pytest

from gplvm_explorer.data import load_file
from gplvm_explorer.data.images import (column_beside_pixels, image_shape_from_names, parse_shape, shape_choices,
                                        shape_label, square_shape)
from userdata import glyph_images, image_csv


@pytest.mark.parametrize("naming", ["pixel_{r}_{c}", "px_{r}_{c}", "r{r}c{c}", "{r}x{c}", "Pixel{i}",
                                    "pixel {i}", "px{i}"])
def test_pixel_names_give_the_image_shape(naming):
    names = [naming.format(r=r, c=c, i=r * 8 + c) for r in range(8) for c in range(8)]
    shape, order = image_shape_from_names(names)
    assert shape == (8, 8) and list(order) == list(range(64))


def test_columns_in_another_order_are_put_row_by_row():
    rng = np.random.default_rng(0)
    cells = [(r, c) for r in range(1, 4) for c in range(1, 6)]  # 1-based, 3 x 5
    shuffled = rng.permutation(len(cells))
    names = [f"pixel_{cells[k][0]}_{cells[k][1]}" for k in shuffled]
    shape, order = image_shape_from_names(names)
    assert shape == (3, 5)
    assert [names[j] for j in order] == [f"pixel_{r}_{c}" for r, c in cells]


@pytest.mark.parametrize("names", [
    [f"x{j}" for j in range(1, 65)],  # a plain numbered table: no pixel prefix
    [f"col{j}" for j in range(1, 65)],  # a file without a header
    [f"pixel{j}" for j in range(60)],  # not a square number
    [f"pixel{j}" for j in range(1, 64)] + ["pixel65"],  # a gap
    [f"pixel_{r}_{c}" for r in range(8) for c in range(8) if (r, c) != (3, 3)] + ["pixel_9_9"],  # not a grid
    [f"pixel_{r}_{c}" for r in range(8) for c in range(8)][:-1] + ["px_7_7"],  # two spellings
    [f"s{r}_t{c}" for r in range(2) for c in range(2)],  # too few to be an image
    [f"pixel_{r}_{c}" for r in range(8) for c in range(8)][:-1] + ["pixel_0_0"],  # a pixel twice
])
def test_other_names_are_not_images(names):
    assert image_shape_from_names(names) is None


PIXELS = [f"pixel_{r}_{c}" for r in range(8) for c in range(8)]


@pytest.mark.parametrize("names, beside", [
    (["digit"] + PIXELS, "digit"),
    (PIXELS[:10] + ["id"] + PIXELS[10:], "id"),
    ([f"pixel{i}" for i in range(64)] + ["class_2"], "class_2"),
    (PIXELS, None),  # nothing beside the pixels
    (["digit", "id"] + PIXELS, None),  # two other columns: which one is the label is the user's call
    (["digit"] + PIXELS[:-1], None),  # the others are no full grid
    ([f"x{j}" for j in range(1, 65)] + ["digit"], None),  # numbered columns are not pixels
    (["a", "b", "c", "d"], None),
])
def test_the_one_column_beside_an_images_pixels(names, beside):
    assert column_beside_pixels(names) == beside


def test_an_uploaded_image_csv_with_a_numbered_label_column_is_images_labelled_by_it(make_explorer):
    """A digits file as scikit-learn's digits make it: 'digit' (0..9, numbers) then pixel_r_c columns.
    No label guess by name finds 'digit'; left among the pixels it kept the rows from being images."""
    images, shapes = glyph_images()
    digit = np.array([{"bar": 1, "ring": 0, "cross": 4}[s] for s in shapes])
    rows = "\n".join(f"{d}," + ",".join(f"{v:g}" for v in img.ravel()) for d, img in zip(digit, images))
    content = (",".join(["digit"] + PIXELS) + "\n" + rows + "\n").encode()
    ex = make_explorer()
    assert ex.data.load_upload(content, "digits.csv"), ex.data.error
    ds = ex.data.dataset
    assert ds.image_shape == (8, 8) and ds.d == 64 and ex.data.label_column == "digit"
    np.testing.assert_allclose(ds.values, images.reshape(len(images), 64), atol=1e-9)
    np.testing.assert_array_equal(np.asarray(ds.labels).astype(float), digit)
    assert not ex.data.standardize  # pixels share one unit


def test_shapes_a_user_may_pick():
    assert square_shape(64) == (8, 8) and square_shape(63) is None and square_shape(4) is None
    assert shape_choices(64) == [(8, 8), (4, 16), (16, 4), (2, 32), (32, 2)]
    assert shape_choices(13) == [] and shape_choices(8) == []
    assert shape_label((8, 16)) == "8 × 16"
    assert parse_shape("8x8") == (8, 8) and parse_shape(" 4 × 16 ") == (4, 16) and parse_shape("none") is None
    with pytest.raises(ValueError, match="height x width"):
        parse_shape("eight")


def test_an_image_csv_keeps_its_constant_pixels_and_its_shape():
    images, labels = glyph_images()
    ds = load_file(image_csv("pixel_{r}_{c}"), "digits.csv", label_column="label")
    assert ds.image_shape == (8, 8) and ds.d == 64  # the four blank corners are kept
    np.testing.assert_allclose(ds.values, images.reshape(len(images), 64), atol=1e-9)
    assert ds.feature_names[:2] == ["pixel_0_0", "pixel_0_1"] and list(ds.labels[:1]) == ["bar"]
    assert any("Kept 4 constant pixel(s)" in w for w in ds.warnings)


def test_columns_named_column_first_are_reordered_row_by_row():
    images, _ = glyph_images()
    transposed = image_csv("p_{c}_{r}")  # the names say (column, row): read as the transposed image
    ds = load_file(transposed, "t.csv", label_column="label")
    assert ds.image_shape == (8, 8)
    np.testing.assert_allclose(ds.values, images.transpose(0, 2, 1).reshape(len(images), 64), atol=1e-9)


def test_the_user_decides_the_shape_or_that_they_are_no_images():
    numbered = image_csv("v{i}")  # a square number of columns, names that say nothing
    ds = load_file(numbered, "v.csv", label_column="label")
    assert ds.image_shape is None and ds.d == 60 and ds.file_columns == 64  # four constant columns dropped
    assert square_shape(ds.file_columns) == (8, 8)
    shaped = load_file(numbered, "v.csv", label_column="label", image_shape=(8, 8))
    assert shaped.image_shape == (8, 8) and shaped.d == 64
    plain = load_file(image_csv("pixel_{r}_{c}"), "p.csv", label_column="label", image_shape=False)
    assert plain.image_shape is None and plain.d == 60
    with pytest.raises(Exception, match="does not match the 64 columns"):
        load_file(numbered, "v.csv", label_column="label", image_shape=(7, 9))


def test_an_uploaded_image_csv_reconstructs_as_images_with_a_two_sigma_image(make_explorer, pump):
    """The user's own 8 x 8 images: trained by the engine, a click shows the predicted image, its ±2σ
    image (twice the predictive std of every pixel) and the nearest row, all 8 x 8."""
    from gplvm_explorer.views import ReconstructionView

    ex = make_explorer(publish_interval=0.0)
    recon = ReconstructionView.of(ex)
    assert ex.data.load_upload(image_csv(), "my-digits.csv"), ex.data.error
    assert ex.data.dataset.image_shape == (8, 8) and ex.data.dataset.d == 64 and not ex.data.standardize
    ex.settings.max_iters = 30
    assert ex.train(), ex.training.message
    assert pump(ex, lambda: ex.training.status == "finished", timeout=240)
    assert ex.latent.wait(60) and ex.latent.view is not None
    x0, y0, x1, y1 = ex.latent.view.extent
    rec = ex.latent.reconstruct_at(x0 + 0.9 * (x1 - x0), y0 + 0.9 * (y1 - y0))  # far from most rows
    assert rec.is_image and recon.images.visible and not recon.profile.visible
    pred, spread = recon.pred_source.data["image"][0], recon.std_source.data["image"][0]
    near = recon.near_source.data["image"][0]
    assert pred.shape == spread.shape == near.shape == (8, 8)
    np.testing.assert_allclose(spread, 2 * rec.std.reshape(8, 8)[::-1])  # drawn top row first, like the image
    np.testing.assert_allclose(near, ex.data.dataset.values[rec.nearest_index].reshape(8, 8)[::-1])
    assert recon.std_fig.title.text == f"±2σ\n≤ {2 * rec.std.max():.2g}" and np.all(spread > 0)
    low, high = recon.std_mapper.low, recon.std_mapper.high
    assert low == 0 and high == pytest.approx(np.ptp(ex.data.dataset.values))  # 0 to the data's range
    # other data loaded: the click's pictures go, the hint comes back
    ex.data.sample = "three-phase-flow"
    assert ex.latent.reconstruction is None and recon.std_source.data["image"][0].shape == (1, 1)
