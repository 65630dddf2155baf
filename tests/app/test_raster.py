"""The latent points' raster: datashader's image of the points, made off the page's thread."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from gplvm_explorer.dispatch import Dispatcher
from gplvm_explorer.raster import BackgroundRaster, rasterise_points

pytestmark = pytest.mark.timeout(60)


def rgba_of(hex_colour):
    r, g, b = (int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
    return r, g, b


def unpack(px):
    px = int(px)
    return px & 255, (px >> 8) & 255, (px >> 16) & 255, (px >> 24) & 255


def test_points_land_on_their_pixels_in_their_category_colour():
    pts = np.array([[0.25, 0.25], [3.75, 1.75]])  # bottom-left and top-right pixel of a 4 x 2 grid
    img = rasterise_points(pts, np.array([0, 1]), ["a", "b"], ["#ff0000", "#0000ff"], (0, 0, 4, 2), size=(4, 2))
    assert img.shape == (2, 4) and img.dtype == np.uint32
    r, g, b, a = unpack(img[0, 0])  # row 0 is the bottom row (y0), as Bokeh draws it
    assert (r, g, b) == rgba_of("#ff0000") and a > 0
    r, g, b, a = unpack(img[1, 3])
    assert (r, g, b) == rgba_of("#0000ff") and a > 0


def test_many_points_give_an_image_of_the_asked_size_not_of_n():
    rng = np.random.default_rng(0)
    pts = rng.standard_normal((50_000, 2))
    img = rasterise_points(pts, rng.integers(0, 3, 50_000), ["a", "b", "c"], ["#ff0000", "#00ff00", "#0000ff"],
                           (-3, -3, 3, 3), size=(64, 40))
    assert img.shape == (40, 64)
    alpha = (img >> 24) & 255
    assert alpha[20, 32] > 0 and (alpha > 0).mean() > 0.5  # the dense middle is drawn


def test_background_raster_keeps_only_the_newest_request_and_applies_on_the_page_thread():
    d = Dispatcher()
    got, threads = [], []

    def on_done(r):
        got.append(r)
        threads.append(threading.current_thread())
    bg = BackgroundRaster(d, on_done)
    pts = np.random.default_rng(1).standard_normal((2000, 2))
    codes = np.zeros(2000, dtype=np.int32)
    for i in range(5):
        bg.request(pts, codes, ["a"], ["#000000"], (-3 - i, -3, 3, 3), (32, 16), key=i)
    assert bg.wait()
    assert got and got[-1].key == 4 and got[-1].extent == (-7, -3, 3, 3)
    assert [g.key for g in got] == sorted(g.key for g in got)  # never an older image after a newer one
    assert all(t is threading.main_thread() for t in threads)
    errors = []
    bad = BackgroundRaster(d, on_done, on_error=errors.append)
    bad.request(pts, codes[:10], ["a"], ["#000000"], (-3, -3, 3, 3), (32, 16))  # codes do not match the points
    assert bad.wait() and len(errors) == 1


def test_the_packed_image_unpacks_to_the_same_pixels_and_is_far_smaller():
    from gplvm_explorer.raster import pack_rgba, unpack_rgba

    rng = np.random.default_rng(3)
    pts = np.r_[rng.standard_normal((20_000, 2)), rng.uniform(-3, 3, (500, 2))]
    img = rasterise_points(pts, rng.integers(0, 5, pts.shape[0]), list("abcde"),
                           ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00"], (-3, -3, 3, 3), size=(640, 400))
    packed = pack_rgba(img)
    back = unpack_rgba(packed, img.shape)
    assert back.dtype == np.uint32 and back.shape == (400, 640)
    np.testing.assert_array_equal(back, img)  # every pixel, alpha included
    assert len(packed) < img.nbytes / 10, (len(packed), img.nbytes)
    # the browser reads the bytes as little-endian uint32 (Uint32Array), whatever this machine's order
    assert np.frombuffer(__import__("zlib").decompress(packed), dtype="<u4")[0] == img.ravel()[0]


def test_background_raster_hands_over_the_packed_image():
    d = Dispatcher()
    got = []
    r = BackgroundRaster(d, got.append)
    pts = np.random.default_rng(0).standard_normal((2000, 2))
    r.request(pts, np.zeros(2000, dtype=np.int32), ["p"], ["#0072B2"], (-3, -3, 3, 3), (64, 40), key="k")
    assert r.wait(30)
    from gplvm_explorer.raster import unpack_rgba

    assert got and got[0].key == "k" and got[0].packed
    np.testing.assert_array_equal(unpack_rgba(got[0].packed, (40, 64)), got[0].rgba)
    r.close()
