"""``gplvm-explorer fit FILE -o model.npz``: the headless fit, its outputs, messages and exit codes."""
from __future__ import annotations

import io
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from engine.io import load_model
from gplvm_explorer import cli, fit_command

OBJECTIVE = re.compile(r"\((?:ELBO|log-likelihood) (-?[0-9.e+-]+)\)")


def curve_rows(N, D=5, noise=0.01, seed=0):
    rng = np.random.default_rng(seed)
    t = rng.uniform(-1, 1, N)
    base = np.c_[t, t**2, np.sin(2 * t), np.cos(3 * t), 0.5 * t**3]
    Y = np.tile(base, (1, -(-D // 5)))[:, :D] + noise * rng.standard_normal((N, D))
    return Y, np.where(t > 0, "right", "left")


def write_csv(path: Path, Y, labels=None) -> Path:
    names = [f"f{j + 1}" for j in range(Y.shape[1])] + (["side"] if labels is not None else [])
    with open(path, "w") as fh:
        fh.write(",".join(names) + "\n")
        for i, row in enumerate(Y):
            cells = [f"{v:.9g}" for v in row] + ([str(labels[i])] if labels is not None else [])
            fh.write(",".join(cells) + "\n")
    return path


@pytest.fixture(scope="module")
def data_csv(tmp_path_factory):
    Y, labels = curve_rows(40)
    return write_csv(tmp_path_factory.mktemp("fit") / "curve.csv", Y, labels)


def run_fit(args, capsys):
    code = cli.main(["fit", *map(str, args)])
    return code, capsys.readouterr().err


def reported_objective(stderr: str) -> float:
    match = OBJECTIVE.search(stderr.strip().splitlines()[-1])
    assert match, stderr
    return float(match.group(1))


# ---- a fit that finishes --------------------------------------------------------------------------

@pytest.mark.parametrize("model, extra", [("bayesian", []), ("sparse", ["--num-inducing", "10"]),
                                          ("gplvm", ["--kernel", "matern52"])])
def test_fit_saves_a_model_that_loads_with_the_same_bound(data_csv, tmp_path, capsys, model, extra):
    out = tmp_path / "model.npz"
    code, err = run_fit([data_csv, "--label", "side", "--model", model, "--latent-dim", "2",
                         "--max-iters", "25", "-o", out, *extra], capsys)
    assert code == 0, err
    loaded = load_model(out)
    assert type(loaded).__name__ == {"bayesian": "BayesianGPLVM", "sparse": "SparseGPLVM", "gplvm": "GPLVM"}[model]
    assert loaded.Y.shape == (40, 5)  # the label column is not modelled
    assert loaded.objective() == pytest.approx(reported_objective(err), rel=1e-10, abs=0)
    assert "iter 25/25" in err  # plain progress lines when stderr is not a terminal
    assert "it/s" in err and "ETA" in err


def test_coords_csv_holds_the_latent_means(data_csv, tmp_path, capsys):
    out, coords = tmp_path / "m.npz", tmp_path / "coords.csv"
    code, err = run_fit([data_csv, "--label", "side", "--latent-dim", "3", "--max-iters", "10",
                         "--standardize", "-o", out, "--coords", coords], capsys)
    assert code == 0, err
    assert coords.read_text().splitlines()[0] == "x1,x2,x3"
    X = np.loadtxt(coords, delimiter=",", skiprows=1)
    assert X.shape == (40, 3)
    np.testing.assert_array_equal(X, load_model(out).X_mean)
    np.testing.assert_allclose(load_model(out).Y.std(axis=0), 1.0, rtol=1e-9)  # --standardize


def test_output_without_npz_suffix_gets_one(data_csv, tmp_path, capsys):
    code, err = run_fit([data_csv, "--label", "side", "--max-iters", "2", "-o", tmp_path / "model"], capsys)
    assert code == 0, err
    assert (tmp_path / "model.npz").is_file()


def write_csv_with_holes(path: Path) -> Path:
    Y, labels = curve_rows(40)
    Y[::7, 1] = np.nan  # 6 missing cells, written as empty cells
    write_csv(path, Y, labels)
    path.write_text(path.read_text().replace("nan", ""))
    return path


def test_missing_cells_train_the_bayesian_model_and_stop_the_exact_one(tmp_path, capsys):
    data = write_csv_with_holes(tmp_path / "holes.csv")
    out = tmp_path / "m.npz"
    code, err = run_fit([data, "--label", "side", "--max-iters", "15", "-o", out], capsys)
    assert code == 0, err
    loaded = load_model(out)
    assert loaded.objective() == pytest.approx(reported_objective(err), rel=1e-10, abs=0)
    code, err = run_fit([data, "--label", "side", "--model", "gplvm", "-o", tmp_path / "g.npz"], capsys)
    assert code == 2
    assert "6 missing cell(s); try --missing drop-rows or --missing impute-mean" in err
    code, err = run_fit([data, "--label", "side", "--model", "gplvm", "--missing", "drop-rows",
                         "--max-iters", "3", "-o", tmp_path / "g.npz"], capsys)
    assert code == 0, err
    assert load_model(tmp_path / "g.npz").Y.shape == (34, 5)


@pytest.mark.parametrize("label", ["5", "2019"])
def test_label_column_by_index_or_by_a_numeric_name(tmp_path, capsys, label):
    Y, labels = curve_rows(30)
    data = write_csv(tmp_path / "years.csv", Y, labels)
    data.write_text(data.read_text().replace(",side\n", ",2019\n", 1))
    code, err = run_fit([data, "--label", label, "--max-iters", "2", "-o", tmp_path / "m.npz"], capsys)
    assert code == 0, err
    assert "labels '2019': 2 classes" in err
    assert load_model(tmp_path / "m.npz").Y.shape == (30, 5)


# ---- bad files and impossible settings ------------------------------------------------------------

def test_missing_file_exits_3_naming_it(tmp_path, capsys):
    code, err = run_fit([tmp_path / "nope.csv", "-o", tmp_path / "m.npz"], capsys)
    assert code == fit_command.EXIT_DATA == 3
    assert "nope.csv" in err and "File not found" in err
    assert not (tmp_path / "m.npz").exists()


def test_file_without_numbers_exits_3_with_the_data_layer_message(tmp_path, capsys):
    bad = tmp_path / "words.csv"
    bad.write_text("a,b,c\nx,y,z\nu,v,w\np,q,r\n")
    code, err = run_fit([bad, "-o", tmp_path / "m.npz"], capsys)
    assert code == 3
    assert err.strip().splitlines()[-1].startswith("error: cannot use")
    assert "numeric" in err.lower() or "number" in err.lower()


def test_unknown_label_column_exits_3(data_csv, tmp_path, capsys):
    code, err = run_fit([data_csv, "--label", "colour", "-o", tmp_path / "m.npz"], capsys)
    assert code == 3
    assert "colour" in err


@pytest.mark.parametrize("args, message", [
    (["--num-inducing", "100"], "--num-inducing 100 is more than the 40 data rows; use at most 40"),
    (["--kernel", "matern32"], "psi statistics"),
    (["--latent-dim", "0"], "--latent-dim must be at least 1"),
    (["--max-iters", "-5"], "--max-iters must be 0 or more"),
])
def test_impossible_settings_exit_2_with_a_specific_message(data_csv, tmp_path, capsys, args, message):
    code, err = run_fit([data_csv, "--label", "side", *args, "-o", tmp_path / "m.npz"], capsys)
    assert code == fit_command.EXIT_SETTINGS == 2
    assert "error: impossible setting" in err and message in err
    assert not (tmp_path / "m.npz").exists()


def test_unknown_choice_is_a_usage_error(data_csv, tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["fit", str(data_csv), "--model", "pca", "-o", str(tmp_path / "m.npz")])
    assert info.value.code == 2
    assert "invalid choice: 'pca'" in capsys.readouterr().err


def test_unwritable_output_exits_4_before_fitting(data_csv, tmp_path, capsys):
    code, err = run_fit([data_csv, "-o", tmp_path / "no-such-dir" / "m.npz"], capsys)
    assert code == fit_command.EXIT_OUTPUT == 4
    assert "does not exist" in err
    assert "Fitting" not in err


# ---- progress display -----------------------------------------------------------------------------

def snap(i, objective=-12.5, elapsed=None):
    return SimpleNamespace(iteration=i, objective=objective, elapsed=0.5 * i if elapsed is None else elapsed)


def test_progress_on_a_terminal_redraws_one_line():
    stream = io.StringIO()
    progress = fit_command.Progress(stream, max_iters=100, objective_name="ELBO", tty=True, min_interval=0.0)
    for i in range(1, 4):
        progress(snap(i))
    progress.note("warning: a note")
    progress(snap(4))
    progress.close()
    text = stream.getvalue()
    assert text.count("\r") == 4
    assert "iter 3/100" in text and "ELBO -12.5" in text and "2 it/s" in text
    assert "ETA 00:48" in text  # 96 iterations left at 2 it/s
    assert "\nwarning: a note\n\r" in text
    assert text.endswith("\n")


def test_progress_without_a_terminal_prints_plain_lines():
    stream = io.StringIO()
    progress = fit_command.Progress(stream, max_iters=100, objective_name="log-likelihood", tty=False)
    for i in range(1, 101):
        progress(snap(i, elapsed=1e-3 * i))
    lines = stream.getvalue().splitlines()
    assert len(lines) == 20
    assert lines[0].startswith("iter 5/100 (  5%)  log-likelihood -12.5")
    assert "\r" not in stream.getvalue()


# ---- interrupting a long fit ----------------------------------------------------------------------

def _lines(pipe, out: queue.Queue):
    for line in iter(pipe.readline, ""):
        out.put(line)
    out.put(None)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_a_long_fit_and_saves_the_best_point(tmp_path, signum):
    Y, _ = curve_rows(300, D=10, seed=1)
    data = write_csv(tmp_path / "big.csv", Y)
    out, coords = tmp_path / "m.npz", tmp_path / "c.csv"
    # Adam with the default tolerance runs all its iterations: long enough to be interrupted
    cmd = [sys.executable, "-m", "gplvm_explorer.cli", "fit", str(data), "--latent-dim", "3",
           "--optimizer", "adam", "--max-iters", "2000", "-o", str(out), "--coords", str(coords)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_lines, args=(proc.stderr, lines), daemon=True).start()
    seen = []
    try:
        while True:  # wait for the first progress line: the fit is under way
            line = lines.get(timeout=300)
            assert line is not None, "".join(seen)
            seen.append(line)
            if line.startswith("iter "):
                break
        proc.send_signal(signum)
        code = proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    while (line := lines.get(timeout=60)) is not None:
        seen.append(line)
    err = "".join(seen)
    assert code == 128 + int(signum), err  # 130 for SIGINT, 143 for SIGTERM
    assert f"{signal.Signals(signum).name}: stopping" in err
    match = re.search(r"Stopped after (\d+) iterations", err)
    assert match, err
    assert 1 <= int(match.group(1)) < 2000
    model = load_model(out)
    assert model.objective() == pytest.approx(reported_objective(err), rel=1e-10, abs=0)
    assert np.loadtxt(coords, delimiter=",", skiprows=1).shape == (300, 3)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_fit_the_numbers_end_after_some_iterations_is_saved_as_on_the_page(data_csv, tmp_path, capsys,
                                                                              monkeypatch):
    """The page keeps such a fit's best point as a result with a note; the command line too (exit 0, one
    line), instead of 'error: the fit failed' and exit 1 for a model it saved all the same."""
    import engine

    real_fit = engine.fit

    def fit_then_fail(model, callback=None, **kwargs):  # as engine.fit does: the model left at its best point
        real_fit(model, max_iters=2, callback=callback)
        raise engine.NumericalError("The inducing-point kernel matrix Kmm could not be factorised even with "
                                    "jitter 0.27 (1.0e-03 of its mean diagonal). Try standardising the data.")

    monkeypatch.setattr(engine, "fit", fit_then_fail)
    out = tmp_path / "early.npz"
    code, err = run_fit([data_csv, "-o", out], capsys)
    assert code == fit_command.EXIT_OK, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("Stopped early at iteration 2: The inducing-point kernel matrix Kmm could not be "
                           f"factorised even with jitter 0.27 (1.0e-03 of its mean diagonal). Saved {out} at the "
                           "best point reached (ELBO "), last
    assert "error" not in err and out.exists()
    assert float(OBJECTIVE.search(last).group(1)) == pytest.approx(load_model(out).objective(), rel=1e-12)


def test_a_fit_that_fails_before_any_iteration_still_exits_1(data_csv, tmp_path, capsys, monkeypatch):
    import engine

    def fail(model, callback=None, **kwargs):
        raise engine.NumericalError("The inducing-point kernel matrix Kmm could not be factorised.")

    monkeypatch.setattr(engine, "fit", fail)
    code, err = run_fit([data_csv, "-o", tmp_path / "never.npz"], capsys)
    assert code == fit_command.EXIT_FIT_FAILED and "error: the fit failed: The inducing-point" in err, err


# ---- non-Gaussian noise models ---------------------------------------------------------------------

def _binary_csv(path: Path) -> Path:
    rng = np.random.default_rng(4)
    t = rng.uniform(-2, 2, 60)
    Y = (np.c_[t, -t, np.sin(3 * t), t**2 - 1] + 0.3 * rng.standard_normal((60, 4)) > 0).astype(float)
    return write_csv(path, Y)


@pytest.mark.parametrize("model, kind", [("bayesian", "NonConjugateBayesianGPLVM"), ("gplvm", "LaplaceGPLVM")])
def test_binary_data_fit_with_the_bernoulli_likelihood(tmp_path, capsys, model, kind):
    out = tmp_path / "binary.npz"
    code, err = run_fit([_binary_csv(tmp_path / "binary.csv"), "--likelihood", "bernoulli", "--model", model,
                         "--max-iters", "15", "--no-until-converged", "-o", out], capsys)
    assert code == 0, err
    assert "bernoulli likelihood" in err
    loaded = load_model(out)
    assert type(loaded).__name__ == kind and loaded.likelihood == "bernoulli"
    assert loaded.objective() == pytest.approx(reported_objective(err), rel=1e-8, abs=0)


def test_a_likelihood_the_model_does_not_take_exits_2(tmp_path, capsys):
    code, err = run_fit([_binary_csv(tmp_path / "binary.csv"), "--likelihood", "poisson", "--model", "sparse",
                         "-o", tmp_path / "m.npz"], capsys)
    assert code == fit_command.EXIT_SETTINGS
    assert "error: impossible setting" in err and "only the Gaussian likelihood" in err
    assert not (tmp_path / "m.npz").exists()


def test_real_valued_data_with_the_bernoulli_likelihood_are_refused(data_csv, tmp_path, capsys):
    code, err = run_fit([data_csv, "--label", "side", "--likelihood", "bernoulli", "-o", tmp_path / "m.npz"], capsys)
    assert code == fit_command.EXIT_SETTINGS, err
    assert "0" in err and "1" in err and "Traceback" not in err
    assert not (tmp_path / "m.npz").exists()
