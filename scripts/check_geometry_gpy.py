"""The latent metric against GPy's ``predict_wishart_embedding`` at equal parameters.

For the GP-LVM, the sparse GP-LVM and the Bayesian GP-LVM, with kernels GPy
differentiates twice (RBF-ARD, linear-ARD, bias, white and their sums), this
builds our model, hands its parameters to GPy 1.15 (the same centred Y,
latents, inducing inputs, kernel parameters and noise) and compares
``model.metric(X)`` with GPy's ``predict_wishart_embedding(X)`` and
``model.magnification(X, dims)`` with ``predict_magnification``, at points
near and far from the data.  Prints the largest relative difference per case.

GPy is an oracle only: the project never depends on it.  It may live in
another Python environment (GPy needs its own numpy); then name that
interpreter and the GPy side runs there on the arrays this side writes:

    python scripts/check_geometry_gpy.py [--gpy-python /path/to/python-with-GPy]

Without GPy (importable here or through --gpy-python) it says so and exits 0.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path


# ---- the GPy side (imports numpy and GPy only) -------------------------------------------------
def gpy_kernel(GPy, spec):
    kind, Q, p = spec["type"], spec["input_dim"], spec.get("params", {})
    if kind == "sum":
        parts = [gpy_kernel(GPy, s) for s in spec["parts"]]
        out = parts[0]
        for k in parts[1:]:
            out = out + k
        return out
    if kind == "rbf":
        return GPy.kern.RBF(Q, variance=p["variance"], lengthscale=p["lengthscales"], ARD=spec["ard"])
    if kind == "linear":
        return GPy.kern.Linear(Q, variances=p["variances"], ARD=spec["ard"])
    if kind == "bias":
        return GPy.kern.Bias(Q, variance=p["variance"])
    if kind == "white":
        return GPy.kern.White(Q, variance=p["variance"])
    raise ValueError(f"no GPy kernel for {kind!r} here")


def gpy_side(inp: str, out: str) -> None:
    import numpy as np
    import GPy

    data = np.load(inp, allow_pickle=False)
    cases = json.loads(str(data["cases"]))
    results = {}
    for i, case in enumerate(cases):
        a = {k[len(f"{i}_"):]: data[k] for k in data.files if k.startswith(f"{i}_")}
        kern = gpy_kernel(GPy, case["kernel"])
        Y, Q = a["Y"], int(case["Q"])
        if case["model"] == "GPLVM":
            m = GPy.models.GPLVM(Y, Q, X=a["X"], kernel=kern)
        elif case["model"] == "SparseGPLVM":
            m = GPy.models.SparseGPLVM(Y, Q, X=a["X"], kernel=kern, num_inducing=a["Z"].shape[0])
            m.Z[:] = a["Z"]
        else:
            m = GPy.models.BayesianGPLVM(Y, Q, X=a["X"], X_variance=a["S"], Z=a["Z"], kernel=kern,
                                         num_inducing=a["Z"].shape[0])
        m.likelihood.variance = float(a["noise"])
        G = m.predict_wishart_embedding(a["Xnew"])
        mag = m.predict_magnification(a["Xnew"], dimensions=[int(d) for d in case["dims"]])
        mean, var = m.predict(a["Xnew"], include_likelihood=False)
        results[f"{i}_G"] = G
        results[f"{i}_mag"] = mag
        results[f"{i}_var"] = var[:, 0]
    np.savez(out, **results, version=np.array(GPy.__version__))


def _rel(G, ref):
    """(n,) max |G - ref| per point relative to max |ref| there."""
    import numpy as np

    n = G.shape[0]
    return np.max(np.abs(G - ref).reshape(n, -1), axis=1) / np.max(np.abs(ref).reshape(n, -1), axis=1)


# ---- our side ----------------------------------------------------------------------------------
def our_cases():
    import numpy as np

    from engine import kernels as K
    from engine.models.bayesian import BayesianGPLVM
    from engine.models.gplvm import GPLVM
    from engine.models.sparse import SparseGPLVM

    rng = np.random.default_rng(7)
    N, D, Q = 60, 6, 3
    X = rng.standard_normal((N, Q))
    Y = np.tanh(X @ rng.standard_normal((Q, D))) + 0.3 * np.sin(2 * X[:, :1]) + 0.05 * rng.standard_normal((N, D))
    Xnew = np.vstack([X[:4] + 0.05 * rng.standard_normal((4, Q)), 3.0 * rng.standard_normal((4, Q))])
    ls = np.array([0.9, 1.6, 3.0])

    def rbf():
        return K.RBF(Q, variance=1.3, lengthscales=ls)

    def rich():
        return rbf() + K.Linear(Q, variances=np.array([0.2, 0.5, 0.1])) + K.Bias(Q, 0.4) + K.White(Q, 0.01)

    models = [
        ("GPLVM rbf", GPLVM(Y, Q, X=X, kernel=rbf(), noise_variance=0.05)),
        ("GPLVM rbf+linear+bias+white", GPLVM(Y, Q, X=X, kernel=rich(), noise_variance=0.05)),
        ("SparseGPLVM rbf", SparseGPLVM(Y, Q, num_inducing=15, X=X, kernel=rbf(), noise_variance=0.05)),
        ("BayesianGPLVM rbf", BayesianGPLVM(Y, Q, num_inducing=15, X=X, X_variance=0.2, kernel=rbf(),
                                            noise_variance=0.05)),
        ("BayesianGPLVM rbf+bias+white", BayesianGPLVM(
            Y, Q, num_inducing=15, X=X, X_variance=0.2, noise_variance=0.05,
            kernel=rbf() + K.Bias(Q, 0.4) + K.White(Q, 0.01))),
        ("BayesianGPLVM linear", BayesianGPLVM(
            Y, Q, num_inducing=15, X=X, X_variance=0.2, noise_variance=0.05,
            kernel=K.Linear(Q, variances=np.array([0.7, 0.5, 0.1])))),
    ]
    for _, m in models:  # a few steps, so the latents and parameters are not the initial ones
        m.fit(max_iters=15)
        if m.jitter:  # GPy's VarDTC adds 1e-8 to Kmm's diagonal: the same here, so both have one posterior
            m.jitter = 1e-8
            m.set_parameters()  # (drops the cached factors)
    return models, Xnew


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpy-python", help="a Python interpreter that can import GPy (if not this one)")
    ap.add_argument("--gpy-side", nargs=2, metavar=("IN", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.gpy_side:
        gpy_side(*args.gpy_side)
        return 0
    python = args.gpy_python
    if python is None:
        try:
            import GPy  # noqa: F401
        except ImportError:
            print("GPy is not importable here and no --gpy-python was given: comparison skipped.")
            return 0
        python = sys.executable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import numpy as np

    models, Xnew = our_cases()
    arrays, cases = {}, []
    for i, (name, m) in enumerate(models):
        values = m.parameters
        dims = list(np.argsort(-m.relevance)[:2])
        cases.append({"name": name, "model": type(m).__name__, "Q": m.latent_dim, "dims": [int(d) for d in dims],
                      "kernel": m.kernel.to_spec()})
        arrays.update({f"{i}_Y": m.Y, f"{i}_X": values["X_mean"], f"{i}_noise": values["noise_variance"],
                       f"{i}_Xnew": Xnew})
        if "Z" in values:
            arrays[f"{i}_Z"] = values["Z"]
        if "X_variance" in values:
            arrays[f"{i}_S"] = values["X_variance"]
    with tempfile.TemporaryDirectory() as tmp:
        inp, out = Path(tmp) / "in.npz", Path(tmp) / "out.npz"
        np.savez(inp, cases=np.array(json.dumps(cases)), **arrays)
        run = subprocess.run([python, str(Path(__file__).resolve()), "--gpy-side", str(inp), str(out)],
                             capture_output=True, text=True)
        if run.returncode != 0:
            print(run.stderr[-3000:])
            if "No module named 'GPy'" in run.stderr:
                print("GPy is not importable by", python, ": comparison skipped.")
                return 0
            return 1
        ref = dict(np.load(out, allow_pickle=False))
    print(f"GPy {ref['version']}: predict_wishart_embedding vs model.metric at 4 points near the data and 4 far;")
    print("relative differences (per point, to its largest |G| entry); 'posterior': the predictive variances")
    worst = 0.0
    for i, (name, m) in enumerate(models):
        G, G_gpy = m.metric(Xnew), ref[f"{i}_G"]
        # GPy's Linear.gradients_XX_diag returns zeros (its formula is commented out in GPy's source):
        # its cov(J_d) lacks the linear part's d2k = diag(variances), D times in G
        linear = [p for p in getattr(m.kernel, "parts", [m.kernel]) if p.name == "linear"]
        missing = sum((np.diag(np.broadcast_to(p.params["variances"], (m.latent_dim,))) for p in linear),
                      np.zeros((m.latent_dim, m.latent_dim))) * m.output_dim
        err = _rel(G, G_gpy + missing)
        dims = cases[i]["dims"]
        mag, mag_gpy = m.magnification(Xnew, dims=dims), ref[f"{i}_mag"]
        var = m.predict(Xnew)[1][:, 0]
        post = float(np.max(np.abs(var - ref[f"{i}_var"]) / ref[f"{i}_var"]))
        line = (f"  {name:30s} metric {err.max():.1e} (near {err[:4].max():.1e}, far {err[4:].max():.1e}); "
                f"posterior {post:.1e}")
        if linear:
            line += f"; GPy as is (no linear d2k): {_rel(G, G_gpy).max():.1e}"
        else:
            mag_err = float(np.max(np.abs(mag - mag_gpy) / np.abs(mag_gpy)))
            line += f"; magnification in dims {dims}: {mag_err:.1e}"
            worst = max(worst, mag_err)
        worst = max(worst, float(err.max()))
        print(line)
    print(f"largest relative difference (GPy's missing linear d2k added): {worst:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
