"""Rendering a digit-like stroke glyph, rotated and scaled, into small images.

The prototype is a "7" drawn as a polyline in the square [-1, 1]^2 (x to the
right, y up). Each image is rendered directly from the transformed strokes
(no resampling of a raster), with an anti-aliased pen, so every rotation is
equally sharp. Pixel values are ink in [0, 1]; rows are image rows from the
top, stored row-major.
"""

from __future__ import annotations

import numpy as np


def prototype_strokes() -> np.ndarray:
    """Vertices (P, 2) of the "7" polyline, within radius 0.75 of the centre.

    A top bar and a gently curved stem. Unlike a "2" or a "6" (nearly
    symmetric under a half turn), a "7" makes the first principal components
    of its rotations wind once around the loop rather than twice.
    """
    bar = np.array([[-0.45, 0.55], [0.45, 0.55]])
    a = np.deg2rad(np.linspace(0.0, -60.0, 8))[1:]
    stem = np.column_stack([-0.55 + 1.0 * np.cos(a), 0.55 + 1.2 * np.sin(a)])
    return np.vstack([bar, stem])


def render(points: np.ndarray, size: int, pen: float = 0.11) -> np.ndarray:
    """Rasterise a polyline (P, 2) onto a size x size image in [-1, 1]^2."""
    centres = (np.arange(size) + 0.5) / size * 2.0 - 1.0
    px, py = np.meshgrid(centres, -centres)  # row 0 is the top (y = +1)
    pix = np.column_stack([px.ravel(), py.ravel()])  # (size^2, 2)
    a, b = points[:-1], points[1:]  # segments
    ab = b - a
    t = ((pix[:, None, :] - a[None]) * ab[None]).sum(-1) / (ab * ab).sum(-1)[None]
    t = np.clip(t, 0.0, 1.0)
    closest = a[None] + t[..., None] * ab[None]
    dist = np.sqrt(((pix[:, None, :] - closest) ** 2).sum(-1)).min(axis=1)
    pixel = 2.0 / size
    ink = np.clip((pen - dist) / pixel + 0.5, 0.0, 1.0)
    return ink.reshape(size, size)


def glyph_images(angles_deg: np.ndarray, scales: np.ndarray, size: int) -> np.ndarray:
    """(N, size*size) images of the prototype rotated anticlockwise and scaled."""
    proto = prototype_strokes()
    out = np.empty((len(angles_deg), size * size))
    for i, (ang, s) in enumerate(zip(angles_deg, scales)):
        th = np.deg2rad(ang)
        rot = np.array([[np.cos(th), -np.sin(th)], [np.sin(th), np.cos(th)]])
        out[i] = render(s * proto @ rot.T, size).ravel()
    return out
