"""Generated files of the kind a user brings: a table in mixed units, images stored one pixel per column.

Used by the app and browser tests (and the units benchmark); nothing here is a bundled sample.
"""
from __future__ import annotations

import io

import numpy as np

#: Units of the mixed-units table's columns: spreads from 0.05 to 800, like a chemistry table
#: (proline in mg/l beside hue as a ratio).
UNITS = (800.0, 120.0, 40.0, 15.0, 6.0, 3.0, 1.5, 1.0, 0.6, 0.3, 0.15, 0.1, 0.05)
UNIT_NAMES = ("proline", "magnesium", "alkalinity", "colour", "alcohol", "phenols", "flavanoids",
              "ash", "acid", "proanthocyanins", "hue", "od280", "nonflavanoid")


def mixed_units_table(n_per_class: int = 40, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(Y (3 n, 13), labels (3 n,)): three classes in a 2-D latent space seen through 13 columns in
    different units; the widest column ("proline") is mostly noise, the class structure is in the others."""
    rng = np.random.default_rng(seed)
    centres = np.array([[0.0, 2.2], [-1.9, -1.1], [1.9, -1.1]])
    labels = np.repeat(np.arange(3), n_per_class)
    t = centres[labels] + 0.45 * rng.standard_normal((labels.size, 2))
    W = rng.standard_normal((2, len(UNITS)))
    signal = np.tanh(0.8 * t @ W) + 0.1 * rng.standard_normal((labels.size, len(UNITS)))
    signal[:, 0] = 0.15 * signal[:, 0] + rng.standard_normal(labels.size)  # the widest column: noise
    Y = 5.0 * np.array(UNITS) + signal * np.array(UNITS)
    return Y, labels


def mixed_units_csv(n_per_class: int = 40, seed: int = 0) -> bytes:
    """`mixed_units_table` as a CSV with a header and a ``class`` label column."""
    Y, labels = mixed_units_table(n_per_class, seed)
    buf = io.StringIO()
    buf.write(",".join(("class",) + UNIT_NAMES) + "\n")
    for lab, row in zip(labels, Y):
        buf.write(f"c{lab + 1}," + ",".join(f"{v:.6g}" for v in row) + "\n")
    return buf.getvalue().encode()


def glyph_images(n_per_class: int = 30, size: int = 8, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(images (3 n, size, size) in 0..16, labels (3 n,)): a bar, a ring and a cross, shifted by up to a
    pixel and drawn with varying ink; the corner pixels are always blank (constant columns)."""
    rng = np.random.default_rng(seed)
    r, c = np.mgrid[0:size, 0:size].astype(float)
    mid = (size - 1) / 2
    images, labels = [], []
    for k in range(3):
        for _ in range(n_per_class):
            dr, dc = rng.uniform(-1, 1, size=2)
            ink = rng.uniform(8, 16)
            rr, cc = r - mid - dr, c - mid - dc
            if k == 0:  # a vertical bar
                shape = np.exp(-0.5 * (cc / 0.8) ** 2) * (np.abs(rr) < 3)
            elif k == 1:  # a ring
                shape = np.exp(-0.5 * ((np.hypot(rr, cc) - 2.3) / 0.6) ** 2)
            else:  # a cross
                shape = np.maximum(np.exp(-0.5 * (cc / 0.7) ** 2), np.exp(-0.5 * (rr / 0.7) ** 2)) * \
                    (np.hypot(rr, cc) < 3.2)
            img = np.clip(ink * shape + 0.4 * rng.standard_normal((size, size)), 0, 16)
            for corner in ((0, 0), (0, size - 1), (size - 1, 0), (size - 1, size - 1)):
                img[corner] = 0.0
            images.append(np.round(img, 2))
            labels.append(("bar", "ring", "cross")[k])
    return np.array(images), np.array(labels)


def image_csv(naming: str = "pixel_{r}_{c}", n_per_class: int = 30, size: int = 8, seed: int = 0) -> bytes:
    """`glyph_images` as a CSV: a ``label`` column (the shape), then one column per pixel, row by row, named by
    ``naming`` (``{r}``, ``{c}``: the pixel's row and column; ``{i}``: its index ``r * size + c``)."""
    images, labels = glyph_images(n_per_class, size, seed)
    names = [naming.format(r=r, c=c, i=r * size + c) for r in range(size) for c in range(size)]
    buf = io.StringIO()
    buf.write(",".join(["label"] + names) + "\n")
    for lab, img in zip(labels, images):
        buf.write(lab + "," + ",".join(f"{v:g}" for v in img.ravel()) + "\n")
    return buf.getvalue().encode()
