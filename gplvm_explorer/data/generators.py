"""Generators of the bundled samples, deterministic for a seed.

No downloads: the glyph, flow and swiss-roll sets are generated here; the
8x8 digits come from scikit-learn's bundled copy (an optional dependency,
imported lazily). See sample_data/README.md for what each set is and what
structure to expect.
"""

from __future__ import annotations

import importlib
import importlib.util

import numpy as np

from .dataset import Dataset
from .errors import DataError
from .glyphs import glyph_images

GLYPH_SIZE = 16
GLYPH_N = 120
GLYPH_SCALED_N = 160
GLYPH_NOISE = 0.02
ANGLE_BUCKET = 45  # degrees per label class
FLOW_PER_CLASS = 150
FLOW_D = 12
SWISS_N = 400
SWISS_BUCKETS = 8
OCCLUDED_FRACTION = 0.5  # of the images, each with one quarter hidden
BINARY_GLYPH_FLIPS = 0.05  # fraction of pixels whose 0/1 value is flipped in the binary glyphs


def _angle_labels(angles: np.ndarray) -> np.ndarray:
    return (np.floor(np.mod(angles, 360.0) / ANGLE_BUCKET).astype(np.int64)) % (360 // ANGLE_BUCKET)


def _pixel_names(h: int, w: int) -> list[str]:
    return [f"px_{r}_{c}" for r in range(h) for c in range(w)]


def _glyph_angles(seed: int, rng=None) -> np.ndarray:
    """The rotating glyph's angles (GLYPH_N,), degrees: a full turn, random phase and jitter."""
    rng = np.random.default_rng(seed) if rng is None else rng
    step = 360.0 / GLYPH_N
    angles = np.arange(GLYPH_N) * step + rng.uniform(0.0, step)
    return np.mod(angles + rng.uniform(-0.25, 0.25, GLYPH_N) * step, 360.0)


def rotating_glyph(seed: int = 0) -> Dataset:
    rng = np.random.default_rng(seed)
    angles = _glyph_angles(seed, rng)
    Y = glyph_images(angles, np.ones(GLYPH_N), GLYPH_SIZE)
    Y += GLYPH_NOISE * rng.standard_normal(Y.shape)
    return Dataset(
        values=Y,
        labels=_angle_labels(angles),
        feature_names=_pixel_names(GLYPH_SIZE, GLYPH_SIZE),
        image_shape=(GLYPH_SIZE, GLYPH_SIZE),
        name="rotating-glyph",
        description=(
            f"{GLYPH_N} images ({GLYPH_SIZE}x{GLYPH_SIZE}) of a drawn '7' rotated through a full "
            f"turn, with slight pixel noise. One degree of freedom (the angle) on a closed loop: "
            f"expect a ring in a 2-D latent space, ordered by angle. Label: angle bucket of "
            f"{ANGLE_BUCKET} degrees (0 = 0-45)."
        ),
        label_name=f"angle ({ANGLE_BUCKET} degree bucket)",
    )


def rotating_scaled_glyph(seed: int = 0) -> Dataset:
    rng = np.random.default_rng(seed)
    angles = rng.uniform(0.0, 360.0, GLYPH_SCALED_N)
    scales = rng.uniform(0.55, 1.0, GLYPH_SCALED_N)
    Y = glyph_images(angles, scales, GLYPH_SIZE)
    Y += GLYPH_NOISE * rng.standard_normal(Y.shape)
    return Dataset(
        values=Y,
        labels=_angle_labels(angles),
        feature_names=_pixel_names(GLYPH_SIZE, GLYPH_SIZE),
        image_shape=(GLYPH_SIZE, GLYPH_SIZE),
        name="rotating-scaled-glyph",
        description=(
            f"{GLYPH_SCALED_N} images ({GLYPH_SIZE}x{GLYPH_SIZE}) of a drawn '7' at random angles "
            "and sizes (scale 0.55-1.0), with slight pixel noise. Two degrees of freedom: a "
            "cylinder (angle around, size along); with Q >= 3 and ARD expect about two relevant "
            f"dimensions. Label: angle bucket of {ANGLE_BUCKET} degrees."
        ),
        label_name=f"angle ({ANGLE_BUCKET} degree bucket)",
    )


def occluded_glyph(seed: int = 0) -> Dataset:
    """The rotating glyph with one quarter of every second image hidden (NaN = missing)."""
    base = rotating_glyph(seed)
    rng = np.random.default_rng([seed, 1])  # its own stream: the images equal rotating_glyph(seed)
    n, half = GLYPH_N, GLYPH_SIZE // 2
    rows = np.sort(rng.choice(n, int(round(OCCLUDED_FRACTION * n)), replace=False))
    quarters = rng.integers(0, 4, rows.size)
    Y = base.values.reshape(n, GLYPH_SIZE, GLYPH_SIZE).copy()
    for r, q in zip(rows, quarters):
        top, left = divmod(int(q), 2)
        Y[r, top * half:(top + 1) * half, left * half:(left + 1) * half] = np.nan
    return base.replace(
        values=Y.reshape(n, GLYPH_SIZE * GLYPH_SIZE),
        name="occluded-glyph",
        description=(
            f"The rotating-glyph images ({GLYPH_N} of {GLYPH_SIZE}x{GLYPH_SIZE}) with one quarter "
            f"({half}x{half} pixels) hidden in {rows.size} of them: their pixels are missing (NaN), "
            f"{rows.size * half * half} cells in all. The Bayesian and sparse GP-LVMs train on the "
            "visible pixels and fill in the hidden quarters; compare with the column means."
        ),
    )


def binary_glyph(seed: int = 0) -> Dataset:
    """The rotating glyph in black and white: pixels are 0 or 1 (ink above 1/2), 5% of them flipped."""
    base = rotating_glyph(seed)
    rng = np.random.default_rng([seed, 2])  # its own stream: the angles equal rotating_glyph(seed)'s
    clean = glyph_images(_glyph_angles(seed), np.ones(GLYPH_N), GLYPH_SIZE) > 0.5
    flip = rng.uniform(size=clean.shape) < BINARY_GLYPH_FLIPS
    return base.replace(
        values=(clean ^ flip).astype(np.float64),
        name="binary-glyph",
        description=(
            f"The rotating '7' ({GLYPH_N} images of {GLYPH_SIZE}x{GLYPH_SIZE}) in black and white: every "
            f"pixel is 0 or 1, and {BINARY_GLYPH_FLIPS:.0%} of them are flipped at random. Train it with a "
            "Bernoulli and with a Gaussian likelihood and compare the reconstructions: the Bernoulli "
            "model draws probabilities of ink (0 to 1, the 0.5 contour is the digit's edge), the "
            "Gaussian one grey values that spill below 0 and above 1."
        ),
    )


def _flow_map():
    """The fixed nonlinear map from the 4-D intermediate space to 12-D."""
    rng = np.random.default_rng(20240611)  # fixed: the same map for every seed
    A = rng.standard_normal((4, FLOW_D)) / 2.0
    W = rng.standard_normal((4, 8)) * 0.9
    b = rng.standard_normal(8) * 0.3
    B = rng.standard_normal((8, FLOW_D)) / 2.0
    return A, W, b, B


def three_phase_flow(seed: int = 0) -> Dataset:
    rng = np.random.default_rng(seed)
    A, W, b, B = _flow_map()
    radii = (1.0, 1.6, 2.2)
    offsets = (0.0, 0.5, 1.0)
    Z, labels = [], []
    for c in range(3):
        t1 = rng.uniform(0.0, 1.0, FLOW_PER_CLASS)
        t2 = rng.uniform(0.0, 1.0, FLOW_PER_CLASS)
        theta = offsets[c] + 1.3 * np.pi * t1
        Z.append(np.column_stack([
            radii[c] * np.cos(theta),
            radii[c] * np.sin(theta),
            2.0 * t2 - 1.0,
            np.sin(np.pi * t1) * (2.0 * t2 - 1.0),
        ]))
        labels.append(np.full(FLOW_PER_CLASS, c))
    Z = np.vstack(Z)
    Y = Z @ A + np.tanh(Z @ W + b) @ B
    Y += 0.05 * rng.standard_normal(Y.shape)
    order = rng.permutation(len(Y))
    return Dataset(
        values=Y[order],
        labels=np.concatenate(labels)[order],
        feature_names=[f"sensor{j + 1}" for j in range(FLOW_D)],
        name="three-phase-flow",
        description=(
            f"{3 * FLOW_PER_CLASS} points in {FLOW_D} dimensions from three classes (0, 1, 2; "
            f"{FLOW_PER_CLASS} each), synthetic and oil-flow-like: each class is a curved 2-D "
            "sheet (nested arcs of different radius, extended in a second direction) pushed "
            "through a fixed random nonlinear map, plus noise (sd 0.05). The classes overlap in "
            "linear projections (PCA) but separate in a good nonlinear embedding."
        ),
        label_name="class",
    )


def swiss_roll(seed: int = 0) -> Dataset:
    rng = np.random.default_rng(seed)
    u = rng.uniform(0.0, 1.0, SWISS_N)
    t = 1.5 * np.pi * (1.0 + 2.0 * u)
    height = rng.uniform(0.0, 21.0, SWISS_N)
    Y = np.column_stack([t * np.cos(t), height, t * np.sin(t)])
    Y += 0.05 * rng.standard_normal(Y.shape)
    bucket = np.minimum((u * SWISS_BUCKETS).astype(np.int64), SWISS_BUCKETS - 1)
    return Dataset(
        values=Y,
        labels=bucket,
        feature_names=["x", "y", "z"],
        name="swiss-roll",
        description=(
            f"{SWISS_N} points on a swiss roll in 3-D (a rolled-up 2-D sheet, 1.5 turns), noise "
            f"sd 0.05. Label: position along the roll in {SWISS_BUCKETS} equal segments (0 = "
            "inner end). A good 2-D embedding unrolls it into a rectangle ordered by label; PCA "
            "initialisation folds the layers onto each other (Lawrence 2005, sec. 7.2.3), so try "
            "Isomap initialisation."
        ),
        label_name=f"position along roll ({SWISS_BUCKETS} segments)",
    )


def sklearn_digits(seed: int = 0) -> Dataset:
    if importlib.util.find_spec("sklearn") is None:
        raise DataError(
            "The 'digits' sample needs scikit-learn, which is not installed. "
            "Install it with: pip install scikit-learn (or the project's 'digits' extra)."
        )
    try:
        datasets = importlib.import_module("sklearn.datasets")
        bunch = datasets.load_digits()
    except Exception as exc:  # a broken optional install must not crash the app
        raise DataError(f"Could not load the digits from scikit-learn ({exc}). Reinstall scikit-learn.") from None
    images = np.asarray(bunch.images, dtype=np.float64)
    n, h, w = images.shape
    return Dataset(
        values=images.reshape(n, h * w),
        labels=np.asarray(bunch.target, dtype=np.int64),
        feature_names=_pixel_names(h, w),
        image_shape=(h, w),
        name="digits",
        description=(
            f"scikit-learn's {n} handwritten digits (8x8 images, grey levels 0-16, classes 0-9; "
            "the UCI optical digits test set). Ten clusters with within-class variation; for "
            "interactive training use a subsample (max_rows)."
        ),
        label_name="digit",
    )


# --------------------------------------------------------------------------
# Samples for the dynamical model (GPDS) and for several views (MRD)
# --------------------------------------------------------------------------

WALK_PERIOD = 2.4  # seconds per stride
WALK_SPAN = 12.0  # seconds recorded (five strides)
WALK_FRAMES = 150  # frames before the gap is cut out
WALK_GAP = (5.0, 6.6)  # seconds without frames (two thirds of a stride)
WALK_NOISE = 0.01
TWO_VIEW_N = 120
TWO_VIEW_GRID = 10  # the image view is GRID x GRID pixels
TWO_VIEW_SENSORS = 8
TWO_VIEW_NOISE = 0.05


def walk_markers(phase: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Marker positions of a walking two-segment leg pair at stride phases (radians): (n, 13), names."""
    phase = np.asarray(phase, dtype=float)
    cols = [1.0 + 0.03 * np.cos(2 * phase)]  # the hip bobs twice per stride
    names = ["hip_y"]
    for side, shift in (("left", 0.0), ("right", np.pi)):
        p = phase + shift
        thigh = 0.45 * np.sin(p)  # swing of the thigh from vertical
        knee = 0.6 * 0.5 * (1.0 - np.cos(p + 0.6))  # the knee bends during the swing
        kx, ky = 0.5 * np.sin(thigh), cols[0] - 0.5 * np.cos(thigh)
        shin = thigh - knee
        ax, ay = kx + 0.5 * np.sin(shin), ky - 0.5 * np.cos(shin)
        tx, ty = ax + 0.15 * np.cos(shin), ay + 0.15 * np.sin(shin)
        cols += [kx, ky, ax, ay, tx, ty]
        names += [f"{side}_{m}_{c}" for m in ("knee", "ankle", "toe") for c in ("x", "y")]
    return np.column_stack(cols), names


def walking_gap(seed: int = 0) -> Dataset:
    """A leg pair walking for five strides, 13 marker coordinates per frame, with a gap in time."""
    rng = np.random.default_rng(seed)
    step = WALK_SPAN / (WALK_FRAMES - 1)
    t = np.linspace(0.0, WALK_SPAN, WALK_FRAMES) + rng.uniform(-0.2, 0.2, WALK_FRAMES) * step
    t = np.sort(np.clip(t, 0.0, WALK_SPAN))
    keep = (t < WALK_GAP[0]) | (t > WALK_GAP[1])
    t = t[keep]
    Y, names = walk_markers(2 * np.pi * t / WALK_PERIOD)
    Y = Y + WALK_NOISE * rng.standard_normal(Y.shape)
    return Dataset(
        values=Y,
        labels=np.round(t, 3),  # continuous (seconds)
        feature_names=names,
        name="walking-gap",
        description=(
            f"{t.size} frames of a generated walk (two legs of two segments each; hip height and the "
            f"(x, y) of both knees, ankles and toes: 13 coordinates) over {WALK_SPAN:.0f} s, a stride "
            f"every {WALK_PERIOD} s, noise sd {WALK_NOISE}. No frames between {WALK_GAP[0]} s and "
            f"{WALK_GAP[1]} s (the gap). Label: the frame's time in seconds -- choose it as the time "
            "of the dynamical model, which fills the gap and predicts beyond the ends."
        ),
        label_name="time (s)",
    )


def _blob_images(sx: np.ndarray, sy: np.ndarray) -> np.ndarray:
    g = np.linspace(-1.0, 1.0, TWO_VIEW_GRID)
    gx, gy = np.meshgrid(g, g)
    cx, cy = 0.6 * sx[:, None], -0.6 * sy[:, None]  # row 0 is the top: +sy moves the blob up
    return np.exp(-((gx.ravel()[None] - cx) ** 2 + (gy.ravel()[None] - cy) ** 2) / (2 * 0.3**2))


def two_views(seed: int = 0) -> Dataset:
    """An image view and a sensor view of the same rows: one shared and one private factor each."""
    rng = np.random.default_rng(seed)
    n = TWO_VIEW_N
    s, pa, pb = (rng.uniform(-1.0, 1.0, n) for _ in range(3))
    W = np.random.default_rng(20240612).normal(size=(4, TWO_VIEW_SENSORS))  # fixed for every seed
    image = _blob_images(s, pa) + TWO_VIEW_NOISE * rng.standard_normal((n, TWO_VIEW_GRID ** 2))
    sensor = np.c_[s, s ** 2 - 1 / 3, pb, pb ** 2 - 1 / 3] @ W + TWO_VIEW_NOISE * rng.standard_normal(
        (n, TWO_VIEW_SENSORS))
    img_names = tuple(f"image.px_{r}_{c}" for r, c in np.ndindex(TWO_VIEW_GRID, TWO_VIEW_GRID))
    sen_names = tuple(f"sensor.s{j + 1}" for j in range(TWO_VIEW_SENSORS))
    quarter = np.minimum(((s + 1.0) * 2.0).astype(np.int64), 3)
    return Dataset(
        values=np.hstack([image, sensor]),
        labels=quarter,
        feature_names=list(img_names + sen_names),
        name="two-views",
        description=(
            f"{n} rows seen twice: an image view ({TWO_VIEW_GRID}x{TWO_VIEW_GRID} pixels, a blob whose "
            "horizontal position is the shared factor s and whose height is the image's private "
            f"factor) and a sensor view ({TWO_VIEW_SENSORS} readings, a fixed linear map of s, s^2 and "
            "the sensors' own private factor and its square); s and both private factors uniform on "
            f"[-1, 1], noise sd {TWO_VIEW_NOISE}. MRD should find one latent dimension relevant in both "
            "views and one private to each. Label: the quarter of [-1, 1] that s falls in (0-3)."
        ),
        label_name="shared factor s (quarter)",
        column_groups=(("image", img_names, (TWO_VIEW_GRID, TWO_VIEW_GRID)), ("sensor", sen_names, None)),
    )
