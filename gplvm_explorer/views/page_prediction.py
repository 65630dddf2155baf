"""The model's prediction at a click, computed and drawn by the page itself.

A reconstruction answered by the server waits for a round trip: the click
travels to the server, queues behind whatever the page's thread is doing
(training updates, the reply to the mouse move just before), and the answer
travels back -- 100-250 ms at 20,000 rows while training on a 2-core machine.
The prediction itself is tiny.  With the factors of the shown result's
:class:`engine.predictor.Predictor` (the kernel, Z and, per column group, L,
LW and alpha) it is O(M^2 + M D) arithmetic:

    mean = k*M alpha + Y_mean,
    var  = k** - |L^-1 kM*|^2 + |LW^-1 kM*|^2,

both mapped back to the file's units.  So with every shown result the page
receives those factors -- M Q + M (M + 1) + M D + 2 D numbers, independent of
N -- and a click evaluates the same formulas in JavaScript (forward
substitution on the Cholesky factors, never an inverse) and draws mean ± 2σ
in the next frame.  The server answers the same click with the nearest
training row, the markers and the text.

The stochastic model's dense q(u) sends Rw = L^-T R (M x M) in place of LW;
its variance term is |Rw^T kM*|^2.

The page evaluates the kernels ``rbf``, ``matern32``, ``matern52``,
``linear``, ``mlp``, ``bias``, ``white`` and sums of them.  Results without a
predictor (models that predict by other means), with one over the N training
latents (the exact GP-LVM: its factors grow with N) or with another kernel
get no factors (:func:`predictor_columns` returns None) and the server draws
the whole reconstruction, as it always did.
"""
from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
from bokeh.models import ColumnDataSource

__all__ = ["PAGE_KERNELS", "CLICK_JS", "PREDICT_JS", "in_standard_units", "kernel_in_page", "no_predictor",
           "page_drawn_source", "page_units", "predictor_columns", "slice_columns"]

#: Kernel types the page evaluates (``Kernel.to_spec()["type"]``).
PAGE_KERNELS = frozenset({"rbf", "matern32", "matern52", "linear", "mlp", "bias", "white", "sum"})


def kernel_in_page(spec: dict) -> bool:
    """True if the page can evaluate the kernel described by ``spec`` (a ``to_spec()`` dict)."""
    kind = spec.get("type")
    if kind not in PAGE_KERNELS:
        return False
    if kind == "sum":
        return all(kernel_in_page(p) for p in spec.get("parts", ()))
    return True


def in_standard_units(ds) -> bool:
    """A standardised table's profile is drawn in standardised units (its columns' z-scores): in the
    file's units the widest column, thousands of times the narrowest, flattens all the others."""
    return ds is not None and getattr(ds, "scale", None) is not None and getattr(ds, "image_shape", None) is None


def page_units(ds):
    """The units the page draws its own predictions in (`page_prediction.predictor_columns`' ``dataset``):
    the file's, or the model's for a table drawn in standardised units."""
    return SimpleNamespace(scale=None, mean=None, image_shape=None) if in_standard_units(ds) else ds


def page_drawn_source(data: dict, **kw) -> ColumnDataSource:
    """A source the page also draws into by itself: what it draws is not sent back to the server.

    The server's copy may then be older than what the page shows; that is safe because
    Bokeh sends every assignment of a source's ``data``, even of an equal value.
    """
    return ColumnDataSource(data, syncable=False, **kw)


def _packed_lower(L: np.ndarray) -> np.ndarray:
    """The lower triangle of an (M, M) matrix row by row: row i's entries start at i (i + 1) / 2."""
    return np.ascontiguousarray(L[np.tril_indices(L.shape[0])], dtype=np.float64)


def no_predictor() -> dict:
    """The predictor source's data when the page does not predict (the server draws the reconstruction)."""
    return {"kernel": [], "Z": [], "sizes": [], "group_cols": [], "group_sizes": [], "L": [], "LW": [],
            "Rw": [], "alpha": [], "offset": [], "scale": [], "image_shape": []}


def predictor_columns(predictor, dataset) -> dict | None:
    """One-row column data holding what the page needs to predict, or None if it cannot.

    Parameters
    ----------
    predictor : engine.predictor.Predictor or None, the shown result's.
    dataset : the result's Dataset (for the file's units: original = value * scale + mean), or None.

    Columns (one entry each): ``kernel`` the kernel's spec as JSON; ``Z`` (M Q,)
    row-major; ``sizes`` [M, Q, D]; per column group g, concatenated over the
    groups: ``group_cols`` the output indices, ``group_sizes`` D_g, ``L`` and
    ``LW`` packed lower triangles (M (M + 1) / 2 each) -- or, for the
    stochastic model's dense q(u), ``LW`` empty and ``Rw`` (M M,) row-major --
    ``alpha`` (M D_g,) row-major; ``offset`` (D,) = Y_mean * scale + mean and ``scale`` (D,), so
    that a prediction in file units is ``m * scale + offset`` and its
    standard deviation ``sqrt(v) * scale``; ``image_shape`` [h, w] or [].
    """
    if predictor is None or not predictor.inducing:
        return None
    spec = predictor.kernel.to_spec()
    if not kernel_in_page(spec):
        return None
    D = predictor.output_dim
    M, Q = predictor.Z.shape
    scale = np.ones(D) if dataset is None or dataset.scale is None else np.asarray(dataset.scale, dtype=float)
    shift = np.zeros(D) if dataset is None or dataset.mean is None else np.asarray(dataset.mean, dtype=float)
    cols, sizes, Ls, LWs, Rws, alphas = [], [], [], [], [], []
    for g in predictor.groups:
        idx = np.arange(D)[g.cols]
        cols.append(idx.astype(np.int32))
        sizes.append(idx.size)
        Ls.append(_packed_lower(g.L))
        if g.Rw is not None:  # the stochastic model's one group
            Rws.append(np.ascontiguousarray(g.Rw, dtype=np.float64).ravel())
        elif g.LW is not None:
            LWs.append(_packed_lower(g.LW))
        else:  # no posterior term: the page's script has no form for it
            return None
        alphas.append(np.ascontiguousarray(g.alpha, dtype=np.float64).ravel())
    empty = np.zeros(0)
    image = getattr(dataset, "image_shape", None)
    return {
        "kernel": [json.dumps(spec)],
        "Z": [np.ascontiguousarray(predictor.Z, dtype=np.float64).ravel()],
        "sizes": [np.array([M, Q, D], dtype=np.int32)],
        "group_cols": [np.concatenate(cols)],
        "group_sizes": [np.array(sizes, dtype=np.int32)],
        "L": [np.concatenate(Ls)],
        "LW": [np.concatenate(LWs) if LWs else empty],
        "Rw": [np.concatenate(Rws) if Rws else empty],
        "alpha": [np.concatenate(alphas)],
        "offset": [predictor.Y_mean * scale + shift],
        "scale": [scale],
        "image_shape": [np.array(image if image is not None else [], dtype=np.int32)],
    }


def slice_columns(view, follow: bool = False) -> dict:
    """The shown slice of a SliceView: which two dims the map shows, every dim's value (Q,), and
    whether the reconstruction follows the pointer (the page then predicts at every mouse move)."""
    if view is None:
        return {"dims": [], "fixed": [], "follow": []}
    return {"dims": [np.array(view.dims, dtype=np.int32)], "fixed": [np.array(view.fixed, dtype=np.float64)],
            "follow": [bool(follow)]}


#: ``gxPredictor(data)`` unpacks the predictor source's data (a Map or a plain object) into the
#: factors, or null; ``gxPredict(P, loc)`` returns {mean, std} (file units) at the latent point loc (Q,).
PREDICT_JS = r"""
function gxColumn(d, k) { const c = d instanceof Map ? d.get(k) : d[k]; return c && c.length ? c[0] : null; }

function gxPredictor(d) {
  const kernel = gxColumn(d, "kernel");
  if (kernel === null) return null;
  const sizes = gxColumn(d, "sizes");
  const P = {kernel: JSON.parse(kernel), M: sizes[0], Q: sizes[1], D: sizes[2], Z: gxColumn(d, "Z"),
             offset: gxColumn(d, "offset"), scale: gxColumn(d, "scale"), groups: []};
  const shape = gxColumn(d, "image_shape");
  P.image = shape && shape.length === 2 ? [shape[0], shape[1]] : null;
  const cols = gxColumn(d, "group_cols"), gsizes = gxColumn(d, "group_sizes");
  const L = gxColumn(d, "L"), LW = gxColumn(d, "LW"), Rw = gxColumn(d, "Rw"), alpha = gxColumn(d, "alpha");
  const T = P.M * (P.M + 1) / 2, MM = P.M * P.M, dense = Rw !== null && Rw.length > 0;
  let c0 = 0, a0 = 0;
  for (let g = 0; g < gsizes.length; g++) {
    const Dg = gsizes[g];
    P.groups.push({cols: cols.slice(c0, c0 + Dg), L: L.slice(g * T, (g + 1) * T),
                   LW: dense ? null : LW.slice(g * T, (g + 1) * T), Rw: dense ? Rw.slice(g * MM, (g + 1) * MM) : null,
                   alpha: alpha.slice(a0, a0 + P.M * Dg), Dg});
    c0 += Dg; a0 += P.M * Dg;
  }
  return P;
}

// k(x, Z_m) for every inducing input (M,) and k(x, x), as the engine's kernels define them
function gxKernel(spec, x, Z, M, Q) {
  const p = spec.params, k = new Float64Array(M);
  const per = (v, q) => (typeof v === "number" ? v : v[q]);
  const t = spec.type;
  if (t === "sum") {
    let kxx = 0;
    for (const part of spec.parts) {
      const [kp, kd] = gxKernel(part, x, Z, M, Q);
      for (let m = 0; m < M; m++) k[m] += kp[m];
      kxx += kd;
    }
    return [k, kxx];
  }
  if (t === "rbf" || t === "matern32" || t === "matern52") {
    for (let m = 0; m < M; m++) {
      let r2 = 0;
      for (let q = 0; q < Q; q++) { const u = (x[q] - Z[m * Q + q]) / per(p.lengthscales, q); r2 += u * u; }
      if (t === "rbf") k[m] = p.variance * Math.exp(-0.5 * r2);
      else if (t === "matern32") { const s = Math.sqrt(3 * r2); k[m] = p.variance * (1 + s) * Math.exp(-s); }
      else { const s = Math.sqrt(5 * r2); k[m] = p.variance * (1 + s + 5 * r2 / 3) * Math.exp(-s); }
    }
    return [k, p.variance];
  }
  if (t === "linear") {
    let kxx = 0;
    for (let q = 0; q < Q; q++) kxx += per(p.variances, q) * x[q] * x[q];
    for (let m = 0; m < M; m++) {
      let s = 0;
      for (let q = 0; q < Q; q++) s += per(p.variances, q) * x[q] * Z[m * Q + q];
      k[m] = s;
    }
    return [k, kxx];
  }
  if (t === "mlp") {
    const w = p.weight_variance, b = p.bias_variance, c = p.variance * 2 / Math.PI;
    let xx = 0;
    for (let q = 0; q < Q; q++) xx += x[q] * x[q];
    for (let m = 0; m < M; m++) {
      let xz = 0, zz = 0;
      for (let q = 0; q < Q; q++) { const z = Z[m * Q + q]; xz += x[q] * z; zz += z * z; }
      const s = (w * xz + b) / Math.sqrt((w * xx + b + 1) * (w * zz + b + 1));
      k[m] = c * Math.asin(Math.min(1, Math.max(-1, s)));
    }
    const u = w * xx + b;
    return [k, c * Math.asin(u / (u + 1))];
  }
  if (t === "bias") { k.fill(p.variance); return [k, p.variance]; }
  if (t === "white") return [k, p.variance];  // white noise does not correlate distinct inputs
  throw new Error("kernel " + t + " is not evaluated in the page");
}

// |L^-1 k|^2 for a packed lower-triangular L (row i's entries start at i (i + 1) / 2)
function gxSolvedNorm2(L, k, M) {
  const a = new Float64Array(M);
  let out = 0;
  for (let i = 0; i < M; i++) {
    const r = i * (i + 1) / 2;
    let s = k[i];
    for (let j = 0; j < i; j++) s -= L[r + j] * a[j];
    a[i] = s / L[r + i];
    out += a[i] * a[i];
  }
  return out;
}

// |Rw^T k|^2 for a dense (M, M) Rw, row-major
function gxDenseNorm2(Rw, k, M) {
  let out = 0;
  for (let j = 0; j < M; j++) {
    let s = 0;
    for (let i = 0; i < M; i++) s += Rw[i * M + j] * k[i];
    out += s * s;
  }
  return out;
}

function gxPredict(P, loc) {
  const [k, kxx] = gxKernel(P.kernel, loc, P.Z, P.M, P.Q);
  const mean = new Float64Array(P.D), std = new Float64Array(P.D);
  for (const g of P.groups) {
    const q = g.Rw !== null ? gxDenseNorm2(g.Rw, k, P.M) : gxSolvedNorm2(g.LW, k, P.M);
    const v = Math.max(kxx - gxSolvedNorm2(g.L, k, P.M) + q, 0);
    for (let d = 0; d < g.Dg; d++) {
      let s = 0;
      for (let m = 0; m < P.M; m++) s += k[m] * g.alpha[m * g.Dg + d];
      const col = g.cols[d];
      mean[col] = s * P.scale[col] + P.offset[col];
      std[col] = Math.sqrt(v) * P.scale[col];
    }
  }
  return {mean, std};
}
"""

#: A click on the map (CustomJS on Tap and DoubleTap; on MouseMove too, acting only while the
#: reconstruction follows the pointer): predict at the point of the shown slice and draw it into the
#: reconstruction's sources and the map's marker.  Nothing happens when the page holds no factors
#: (the server answers).
CLICK_JS = PREDICT_JS + r"""
if (cb_obj.x == null || cb_obj.y == null) return;
if (cb_obj.event_name === "mousemove" && gxColumn(slice.data, "follow") !== true) return;
const data = predictor.data;
if (!predictor._gx || predictor._gx.data !== data) predictor._gx = {data, P: gxPredictor(data)};
const P = predictor._gx.P;
const dims = gxColumn(slice.data, "dims"), fixed = gxColumn(slice.data, "fixed");
if (P === null || dims === null || fixed === null || fixed.length !== P.Q) return;
const loc = Float64Array.from(fixed);
loc[dims[0]] = cb_obj.x;
loc[dims[1]] = cb_obj.y;
const {mean, std} = gxPredict(P, loc);
if (P.image !== null) {
  const [h, w] = P.image;
  const flipped = new Float64Array(h * w);  // row 0 of an image is its top row; Bokeh draws row 0 at the bottom
  for (let r = 0; r < h; r++) flipped.set(mean.subarray((h - 1 - r) * w, (h - r) * w), r * w);
  const spread = new Float64Array(h * w);  // the ±2σ image: twice the standard deviation of every pixel
  for (let r = 0; r < h; r++) for (let c = 0; c < w; c++) spread[r * w + c] = 2 * std[(h - 1 - r) * w + c];
  const {ndarray} = Bokeh.require("core/util/ndarray");
  image.data = {image: [ndarray(flipped.buffer, {dtype: "float64", shape: [h, w]})], dw: [w], dh: [h]};
  std_image.data = {image: [ndarray(spread.buffer, {dtype: "float64", shape: [h, w]})], dw: [w], dh: [h]};
} else {
  const x = new Float64Array(P.D), lower = new Float64Array(P.D), upper = new Float64Array(P.D);
  for (let d = 0; d < P.D; d++) { x[d] = d; lower[d] = mean[d] - 2 * std[d]; upper[d] = mean[d] + 2 * std[d]; }
  profile.data = {x, mean, lower, upper};
}
marker.data = {x: [cb_obj.x], y: [cb_obj.y], marker: ["x"], colour: ["#d55e00"]};
"""
