"""The 0.5 contour of a probability map (marching squares)."""
import numpy as np

from gplvm_explorer.views.contour import level_segments


def test_a_disc_gives_a_closed_ring_at_its_radius():
    h = w = 24
    yy, xx = np.mgrid[0:h, 0:w] + 0.5
    r = np.hypot(xx - 12, yy - 12)
    image = 1.0 / (1.0 + np.exp(r - 6.0))  # 0.5 exactly at radius 6
    xs, ys = level_segments(image, 0.5)
    pts = np.array([(x, y) for sx, sy in zip(xs, ys) for x, y in zip(sx, sy)])
    assert len(xs) > 20
    np.testing.assert_allclose(np.hypot(pts[:, 0] - 12, pts[:, 1] - 12), 6.0, atol=0.1)
    # closed: every segment end is shared by another segment
    ends = [tuple(np.round(p, 9)) for p in pts]
    assert all(ends.count(e) == 2 for e in ends)


def test_a_vertical_edge_lies_halfway_between_the_pixels():
    image = np.zeros((4, 6))
    image[:, 3:] = 1.0
    xs, ys = level_segments(image)
    assert len(xs) == 3
    assert all(sx == [3.0, 3.0] for sx in xs)  # between pixel centres 2.5 and 3.5
    assert sorted(min(sy) for sy in ys) == [0.5, 1.5, 2.5]


def test_nothing_to_draw():
    assert level_segments(np.zeros((3, 3))) == ([], [])
    assert level_segments(np.ones((3, 3))) == ([], [])
    assert level_segments(np.ones(5)) == ([], [])
    image = np.zeros((3, 3))
    image[1, 1] = np.nan
    assert level_segments(image) == ([], [])
