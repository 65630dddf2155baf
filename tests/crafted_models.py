"""Model files crafted to be hostile: each small on disk, each describing too much or nonsense.

Built from a small real model's arrays (`engine.io.model_arrays`) with one
entry changed, or with an .npy member whose header lies about its size.  The
engine, app, command-line and browser tests share them (`HOSTILE`).
"""
from __future__ import annotations

import io
import zipfile

import numpy as np

import engine
from engine.io import model_arrays


def small_arrays(cls=engine.BayesianGPLVM, N=30, D=4, Q=2, M=5, seed=0) -> dict:
    """The arrays of a small model of class ``cls`` (not fitted), as `engine.io.save_model` writes them."""
    Y = np.random.default_rng(seed).normal(size=(N, D))
    kwargs = {} if cls is engine.GPLVM else {"num_inducing": M}
    return model_arrays(cls(Y, Q, **kwargs))


def npz_bytes(arrays: dict, raw: dict | None = None) -> bytes:
    """An .npz of ``arrays``, with members given as raw bytes (``raw``: name -> bytes of the .npy)."""
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    if not raw:
        return buf.getvalue()
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            if info.filename[:-4] not in raw:
                dst.writestr(info.filename, src.read(info))
        for name, data in raw.items():
            dst.writestr(name + ".npy", data)
    return out.getvalue()


def lying_npy(shape, payload_bytes=64) -> bytes:
    """An .npy member whose header promises ``shape`` float64 values but holds ``payload_bytes``."""
    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(head, {"descr": "<f8", "fortran_order": False, "shape": tuple(shape)})
    return head.getvalue() + b"\0" * payload_bytes


def zeros_model(cls_name: str, N: int, D: int, Q: int, M: int) -> bytes:
    """A model file of a big model that compresses to little: zero data and latents, otherwise valid."""
    arrays = small_arrays(engine.GPLVM if cls_name == "GPLVM" else engine.BayesianGPLVM, Q=Q)
    arrays["model_class"] = np.array(cls_name)
    arrays["Y"] = np.zeros((N, D))
    arrays["param/X_mean"] = np.zeros((N, Q))
    if cls_name != "GPLVM":
        arrays["param/X_variance"] = np.ones((N, Q))
        arrays["param/Z"] = np.random.default_rng(0).normal(size=(M, Q))  # random: 8 bytes each on disk
    del arrays["free_vector"]
    return npz_bytes(arrays)


def exact_20k() -> bytes:
    """An exact GP-LVM of 20,000 rows: its kernel matrix alone is 3.2 GB."""
    return zeros_model("GPLVM", N=20_000, D=20, Q=2, M=0)


def bayesian_4000_inducing() -> bytes:
    """A Bayesian GP-LVM with 4,000 inducing points for its 100 rows (about 70 kB on disk)."""
    return zeros_model("BayesianGPLVM", N=100, D=5, Q=2, M=4_000)


def nan_free_vector() -> bytes:
    arrays = small_arrays()
    arrays["free_vector"] = np.full_like(arrays["free_vector"], np.nan)
    return npz_bytes(arrays)


def huge_header() -> bytes:
    """Y's .npy header claims 10^6 x 10^6 values (7.3 TiB)."""
    return npz_bytes(small_arrays(), raw={"Y": lying_npy((10 ** 6, 10 ** 6))})


def deep_kernel_spec(depth: int = 50_000) -> bytes:
    arrays = small_arrays()
    arrays["kernel_spec"] = np.array("[" * depth + "]" * depth)
    return npz_bytes(arrays)


def z_of_wrong_width() -> bytes:
    arrays = small_arrays(Q=2)
    arrays["param/Z"] = np.zeros((5, 3))
    return npz_bytes(arrays)


#: name -> (file bytes maker, a phrase the refusal says)
HOSTILE = {
    "exact-20k": (exact_20k, "needs about"),
    "bayesian-4000-inducing": (bayesian_4000_inducing, "4,000 inducing points are more than its N=100 data rows"),
    "nan-free-vector": (nan_free_vector, "free_vector holds"),
    "huge-header": (huge_header, "1,000,000 x 1,000,000"),
    "deep-kernel-spec": (deep_kernel_spec, "nested 50,000 levels deep"),
    "z-wrong-width": (z_of_wrong_width, "inducing points Z should have Q=2 columns"),
}
