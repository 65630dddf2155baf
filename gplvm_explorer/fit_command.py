"""``gplvm-explorer fit FILE -o model.npz``: fit a model headless, with a progress bar.

For scripts, clusters and batch jobs: the data file is read by the data layer
(`gplvm_explorer.data`: every format it reads, validated as in the app), the
model is fitted by the engine and saved with `engine.io.save_model` (an .npz
the app and ``engine.io.load_model`` open again, with the same bound).

Progress goes to stderr: on a terminal one line redrawn in place (iteration,
objective, it/s, ETA for the remaining ``--max-iters``: the fit ends sooner once the
bound has converged, ``engine.Convergence()``); otherwise plain lines,
about twenty per fit and at least one every 30 seconds.  Ctrl-C (SIGINT) or
SIGTERM stops the fit after the current step and still saves the best point
reached; a second Ctrl-C aborts without saving.

Exit codes::

    0    fitted and saved (also when the numbers end the fit early, as on the page: the best point
         reached is saved and a line says so)
    1    the fit failed numerically before its first iteration, or with an error the engine raised
    2    impossible settings or command-line usage (e.g. more inducing points than rows,
         --latent-dim above the data's columns, a model bigger than this machine's memory)
    3    the data file cannot be used (not found, not a regular file, not a table of numbers, ...)
    4    the output files cannot be written (a directory, a device, no permission, ...)
    70   an unexpected internal error (reported in one line)
    130  interrupted by SIGINT (143: SIGTERM); the best point reached was saved

Every refusal is one line on stderr, made before anything big is read or built.
"""
from __future__ import annotations

import argparse
import collections
import logging
import math
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

import numpy as np

from gplvm_explorer.cli_checks import OneLineParser, check_latent_dim, unexpected_error

EXIT_OK = 0
EXIT_FIT_FAILED = 1
EXIT_SETTINGS = 2
EXIT_DATA = 3
EXIT_OUTPUT = 4

MODELS = ("bayesian", "sparse", "gplvm")
KERNELS = ("rbf", "linear", "matern32", "matern52")
OPTIMIZERS = ("lbfgs", "scg", "adam")
INITS = ("pca", "random", "isomap")
MISSING = ("keep", "drop-rows", "impute-mean")
DEFAULT_NUM_INDUCING = 30

#: Plain-text progress (not a terminal): about this many lines per fit, and one at least every PLAIN_PERIOD s.
PLAIN_LINES = 20
PLAIN_PERIOD = 30.0


class UsageError(Exception):
    """A setting that cannot work, found before fitting (exit code 2)."""


def build_parser() -> OneLineParser:
    from engine.build import Settings
    from engine.optimize import Convergence
    from gplvm_explorer.catalog import DEFAULT_MAX_ITERS, LIKELIHOODS
    from gplvm_explorer.data import FORMATS

    formats = ", ".join(f.upper() for f in FORMATS)
    p = OneLineParser(
        prog="gplvm-explorer fit",
        description="Fit a GP-LVM to a data file without the browser and save the trained model.",
        epilog="Exit codes: 0 saved (also when stopped early at the best point); 1 the fit failed; 2 impossible settings; "
               "3 unusable data file; 4 cannot write the output; 70 unexpected internal error; "
               "130 interrupted (Ctrl-C), best point saved. Open the saved model in the app or with "
               "engine.io.load_model.",
    )
    p.add_argument("file", metavar="FILE", help=f"data file ({formats}); rows are data points")
    p.add_argument("-o", "--output", required=True, metavar="MODEL.npz", help="where to save the trained model")
    p.add_argument("--coords", metavar="COORDS.csv", help="also write the latent means, one row per data row")
    p.add_argument("--model", default="bayesian", choices=MODELS,
                   help="bayesian: Bayesian GP-LVM (default); sparse: sparse GP-LVM; gplvm: exact GP-LVM")
    p.add_argument("--latent-dim", type=int, default=2, metavar="Q", help="latent dimensions (default 2)")
    p.add_argument("--num-inducing", type=int, default=None, metavar="M",
                   help=f"inducing points of the bayesian and sparse models "
                        f"(default {DEFAULT_NUM_INDUCING}, or the number of rows if fewer)")
    p.add_argument("--kernel", default="rbf", choices=KERNELS,
                   help="ARD kernel over the latent space (default rbf; the bayesian model takes rbf or linear)")
    p.add_argument("--likelihood", default=Settings.likelihood, choices=tuple(LIKELIHOODS),
                   help="noise model: gaussian (real values, default), bernoulli (binary 0/1 data) or poisson "
                        "(counts); bernoulli and poisson with --model bayesian or gplvm")
    p.add_argument("--bias", action=argparse.BooleanOptionalAction, default=Settings.bias,
                   help="add a constant (bias) term to the kernel (default: on; --no-bias to leave it out)")
    p.add_argument("--white", action=argparse.BooleanOptionalAction, default=Settings.white,
                   help="add a white-noise term to the kernel (default: on; --no-white to leave it out)")
    p.add_argument("--max-iters", type=int, default=DEFAULT_MAX_ITERS, metavar="N",
                   help=f"most optimiser iterations (default {DEFAULT_MAX_ITERS}); the fit ends sooner once "
                        "the bound has converged")
    p.add_argument("--until-converged", action=argparse.BooleanOptionalAction, default=True,
                   help=f"end the fit once the bound has converged ({Convergence().describe()}; default: on; "
                        "--no-until-converged runs all --max-iters)")
    p.add_argument("--optimizer", default="lbfgs", choices=OPTIMIZERS, help="default lbfgs")
    p.add_argument("--init", default="pca", choices=INITS, help="initial latent points (default pca)")
    p.add_argument("--seed", type=int, default=0, help="seed of the initialisation and inducing points (default 0)")
    p.add_argument("--label", metavar="COLUMN",
                   help="name or 0-based index of a label column in a CSV/TSV/TXT/Parquet file: left out of the model")
    p.add_argument("--standardize", "--standardise", action="store_true",
                   help="scale every column to zero mean and unit variance first")
    p.add_argument("--missing", default="keep", choices=MISSING,
                   help="rows with missing cells: keep them (NaN; only for models that handle missing values), "
                        "drop them, or fill missing cells with the column mean (default keep)")
    p.add_argument("--quiet", action="store_true", help="no progress bar, only the final summary")
    return p


def _message(exc) -> str:
    return str(exc) or type(exc).__name__


def _output_path(path: str) -> Path:
    """The .npz path numpy would write for ``path``, checked to be writable (UsageError otherwise).

    A name without the suffix gets it (``model`` -> ``model.npz``), unless something other than a
    regular file already has that name (``/dev/full``, a directory, a pipe): that is refused as given.
    """
    out = Path(path).expanduser()
    _check_writable(out)
    if out.suffix.lower() != ".npz":
        out = out.with_name(out.name + ".npz")
        _check_writable(out)
    return out


def _check_writable(path: Path) -> None:
    import stat

    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise UsageError(f"Cannot write {path}: it is a directory.")
    if path.exists() and not stat.S_ISREG(path.stat().st_mode):
        raise UsageError(f"Cannot write {path}: it is a device or a pipe, not a file; give a file name such as "
                         "model.npz.")
    if not parent.is_dir():
        raise UsageError(f"Cannot write {path}: the directory {parent} does not exist.")
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UsageError(f"Cannot write {path}: permission denied.")


def _label_column(value, path, limits):
    """--label as the data layer takes it: a column name, or a 0-based index when no column has that name."""
    from gplvm_explorer.data import DataError, csv_columns

    if value is None or not value.strip().lstrip("-").isdigit():
        return value
    try:
        names = csv_columns(path, limits=limits)
    except DataError:
        names = []
    return value if value in names else int(value)


def load_dataset(args):
    """The Dataset to fit, via the data layer (DataError on any problem with the file)."""
    from gplvm_explorer.data import load_file, regular_file_size
    from gplvm_explorer.serving import CLI_LIMITS

    path = Path(args.file).expanduser()
    regular_file_size(path)  # by stat alone: /dev/zero, pipes and directories are never opened
    return load_file(path, label_column=_label_column(args.label, path, CLI_LIMITS), standardize=args.standardize,
                     missing=args.missing, limits=CLI_LIMITS, seed=args.seed)


def check_settings(args) -> None:
    """The settings that are wrong whatever the data (UsageError), checked before the file is read."""
    if args.latent_dim < 1:
        raise UsageError(f"--latent-dim must be at least 1, got {args.latent_dim}.")
    if args.max_iters < 0:
        raise UsageError(f"--max-iters must be 0 or more, got {args.max_iters}.")
    if args.seed < 0:
        raise UsageError(f"--seed must be 0 or more, got {args.seed}.")
    if args.num_inducing is not None and args.num_inducing < 1:
        raise UsageError(f"--num-inducing must be at least 1, got {args.num_inducing}.")


def num_inducing(args, N: int) -> int:
    """M of the bayesian and sparse models: --num-inducing, by default DEFAULT_NUM_INDUCING or N if fewer."""
    return min(DEFAULT_NUM_INDUCING, N) if args.num_inducing is None else int(args.num_inducing)


def check_against_data(args, N: int, D: int, budget=None) -> None:
    """The settings checked against the data's N rows and D columns, and the model's estimated memory
    against ``budget`` (default: this machine's memory), before anything is built (UsageError)."""
    from gplvm_explorer.catalog import CATALOG, Budget, budget_excess

    check_settings(args)
    wrong = check_latent_dim(args.latent_dim, D)
    if wrong:
        raise UsageError(wrong)
    spec = CATALOG[args.model]
    M = num_inducing(args, N) if spec.uses_inducing else 0
    if M > N:
        raise UsageError(f"--num-inducing {M} is more than the {N} data rows; use at most {N}.")
    excess = budget_excess(spec, spec.cost(N, D, args.latent_dim, M), N, budget or Budget.machine())
    if excess:
        raise UsageError(f"{excess[0].upper()}{excess[1:]}; use {spec.cheaper or 'fewer inducing points or rows'}.")


def settings_from(args, N: int):
    """The factory's settings (:class:`engine.build.Settings`) for parsed ``args`` and ``N`` data rows."""
    from engine.build import Settings

    return Settings(model=args.model, latent_dim=args.latent_dim, kernel=args.kernel, bias=args.bias,
                    white=args.white, num_inducing=num_inducing(args, N), init=args.init, seed=args.seed,
                    likelihood=args.likelihood)


def build_model(args, Y):
    """The engine model for these settings, built by the engine's one factory, as the page and
    scikit-learn build theirs (EngineError for impossible ones)."""
    from engine.build import build

    N = Y.shape[0]
    check_against_data(args, N, Y.shape[1])
    return build(Y, settings_from(args, N))


def start_fit(args, Y):
    """(model, note): `build_model`'s model with its start evaluated; a start the numbers refuse falls
    back to a random start, then fewer inducing points (`engine.fit_start`), and the note says so."""
    from engine.fit_start import start_model

    def build(init, m):
        return build_model(argparse.Namespace(**{**vars(args), "init": init, "num_inducing": m}), Y)

    M = None if args.model == "gplvm" else num_inducing(args, Y.shape[0])
    start = start_model(build, args.init, M, optimizer=args.optimizer)
    return start.model, start.note


# ---- progress -----------------------------------------------------------------------------------

def _clock(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "--:--"
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


class Progress:
    """Progress of a fit on ``stream``: a bar redrawn in place on a terminal, plain lines otherwise.

    it/s is measured over the last ``window`` iterations (the first ones include the start-up);
    the ETA assumes all ``max_iters`` iterations run ("ETA <=" when ``until_converged``: the fit
    may end sooner).  On a terminal the bar is redrawn at most once per ``min_interval`` seconds.
    """

    def __init__(self, stream, max_iters: int, objective_name: str, tty: bool | None = None,
                 window: int = 20, min_interval: float = 0.1, until_converged: bool = False):
        self.until_converged = bool(until_converged)
        self.stream = stream
        self.max_iters = max(int(max_iters), 1)
        self.name = objective_name
        self.tty = stream.isatty() if tty is None else tty
        self.step = max(1, self.max_iters // PLAIN_LINES)
        self.min_interval = float(min_interval)
        self._recent = collections.deque(maxlen=max(2, int(window)))
        self._last_plain = self._last_draw = time.monotonic()
        self._drawn = False

    def rate(self) -> float:
        """Iterations per second over the recent window."""
        (i0, t0), (i1, t1) = self._recent[0], self._recent[-1]
        if len(self._recent) < 2 or t1 <= t0:
            return i1 / t1 if t1 > 0 else float("nan")
        return (i1 - i0) / (t1 - t0)

    def line(self, iteration: int, objective: float, elapsed: float) -> str:
        self._recent.append((iteration, elapsed))
        rate = self.rate()
        eta = (self.max_iters - iteration) / rate if rate > 0 else float("nan")
        pct = 100.0 * iteration / self.max_iters
        return (f"iter {iteration}/{self.max_iters} ({pct:3.0f}%)  {self.name} {objective:.6g}  "
                f"{rate:.3g} it/s  elapsed {_clock(elapsed)}  ETA {'<= ' if self.until_converged else ''}"
                f"{_clock(eta)}")

    def __call__(self, snapshot) -> None:
        text = self.line(snapshot.iteration, snapshot.objective, snapshot.elapsed)
        now = time.monotonic()
        if self.tty:
            if now - self._last_draw < self.min_interval and snapshot.iteration < self.max_iters:
                return
            self._last_draw = now
            width = shutil.get_terminal_size((100, 20)).columns
            filled = int(20 * min(snapshot.iteration / self.max_iters, 1.0))
            bar = f"[{'#' * filled}{'.' * (20 - filled)}] "
            self.stream.write("\r" + (bar + text)[: max(width - 1, 10)].ljust(max(width - 1, 10)))
            self.stream.flush()
            self._drawn = True
        elif snapshot.iteration % self.step == 0 or now - self._last_plain >= PLAIN_PERIOD:
            self._last_plain = now
            print(text, file=self.stream, flush=True)

    def note(self, text: str) -> None:
        """A message on a line of its own (after the bar, which is redrawn at the next iteration)."""
        if self._drawn:
            self.stream.write("\n")
            self._drawn = False
        print(text, file=self.stream, flush=True)

    def close(self) -> None:
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False


class _NoteHandler(logging.Handler):
    """The engine's log messages (e.g. a jitter raised mid-fit) as ``warning: ...`` lines."""

    def __init__(self, write):
        super().__init__(logging.INFO)
        self.write = write

    def emit(self, record):
        try:
            self.write(f"{record.levelname.lower()}: {record.getMessage()}")
        except Exception:  # noqa: BLE001 - logging must never end the fit
            self.handleError(record)


class engine_log_to:
    """Context: route the ``engine`` logger's records to ``write`` (one line each) instead of the root."""

    def __init__(self, write):
        self.handler = _NoteHandler(write)
        self.logger = logging.getLogger("engine")

    def __enter__(self):
        self._propagate = self.logger.propagate
        self.logger.addHandler(self.handler)
        self.logger.propagate = False
        return self

    def __exit__(self, *exc):
        self.logger.removeHandler(self.handler)
        self.logger.propagate = self._propagate
        return False


class StopOnSignals:
    """SIGINT / SIGTERM set ``event`` (the fit stops and the best point is saved); a second SIGINT aborts."""

    SIGNALS = ("SIGINT", "SIGTERM")

    def __init__(self, stream):
        self.event = threading.Event()
        self.signum = None
        self.stream = stream
        self._previous = {}

    def _handle(self, signum, frame):
        if self.event.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.signum = signum
        self.event.set()
        print(f"\n{signal.Signals(signum).name}: stopping after the current step and saving the best point "
              "(Ctrl-C again to abort without saving)...", file=self.stream, flush=True)

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for name in self.SIGNALS:
                if hasattr(signal, name):
                    sig = getattr(signal, name)
                    self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
        return False


# ---- output -------------------------------------------------------------------------------------

def _replace_atomically(path: Path, write) -> None:
    """``write(file object)`` to a temporary file next to ``path``, then rename it over ``path``."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            write(fh)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def save_outputs(model, out: Path, coords: Path | None, labels=None, label_name: str | None = None,
                 context=None) -> None:
    """The model (with the rows' labels, or the whole ``context`` the app shows when it opens the file:
    `gplvm_explorer.saved_context`) and the coordinates."""
    from gplvm_explorer.saved_model import write

    _replace_atomically(out, lambda fh: write(model, fh, labels, label_name, context=context))
    if coords is not None:
        X = np.asarray(model.parameters["X_mean"], dtype=float)
        header = ",".join(f"x{q + 1}" for q in range(X.shape[1]))
        _replace_atomically(coords, lambda fh: np.savetxt(fh, X, delimiter=",", header=header,
                                                          comments="", fmt="%.17g"))


# ---- main ---------------------------------------------------------------------------------------

def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return run(args)
    except KeyboardInterrupt:
        print("\nAborted; nothing was saved.", file=sys.stderr)
        return 128 + int(signal.SIGINT)
    except Exception as exc:  # noqa: BLE001 - a failure no check foresaw: still one line, never a traceback
        return unexpected_error("gplvm-explorer fit", exc)


def run(args) -> int:
    """The fit described by parsed ``args``; returns the exit code."""
    err = sys.stderr
    import engine
    from gplvm_explorer.data import DataError

    try:
        check_settings(args)
    except UsageError as exc:
        print(f"error: impossible setting: {exc}", file=err)
        return EXIT_SETTINGS
    try:
        out = _output_path(args.output)
        coords = None
        if args.coords:
            coords = Path(args.coords).expanduser()
            _check_writable(coords)
    except UsageError as exc:
        print(f"error: {exc}", file=err)
        return EXIT_OUTPUT

    try:
        ds = load_dataset(args)
    except DataError as exc:
        print(f"error: cannot use {args.file}: {_message(exc)}", file=err)
        return EXIT_DATA
    print(f"Data: {ds.summary()}", file=err)
    for note in ds.warnings:
        print(f"note: {note}", file=err)

    try:
        with engine_log_to(lambda text: print(text, file=err, flush=True)):
            model, start_note = start_fit(args, ds.values)
    except engine.NumericalError as exc:  # not even the fallbacks start
        print(f"error: the fit failed at its start: {_message(exc)}", file=err)
        return EXIT_FIT_FAILED
    except (UsageError, engine.EngineError) as exc:
        hint = ""
        if isinstance(exc, engine.UnsupportedKernelError):
            hint = f" (--model sparse and --model gplvm take --kernel {args.kernel}.)"
        elif ds.has_missing and isinstance(exc, engine.ShapeError):
            hint = (f" The data have {ds.n_missing} missing cell(s); try --missing drop-rows or "
                    "--missing impute-mean.")
        print(f"error: impossible setting: {_message(exc)}{hint}", file=err)
        return EXIT_SETTINGS

    if start_note:
        print(f"note: {start_note}", file=err)
    if args.model == "gplvm" and args.num_inducing is not None:
        print("note: --num-inducing is ignored by --model gplvm (the exact GP-LVM has no inducing points)",
              file=err)
    what = f"{type(model).__name__}, Q={args.latent_dim}"
    if hasattr(model, "num_inducing"):
        what += f", M={model.num_inducing}"
    kernel = args.kernel + (" + bias" if args.bias else "") + (" + white" if args.white else "")
    if args.likelihood != "gaussian":
        what += f", {args.likelihood} likelihood"
    until = ", until converged" if args.until_converged else ""
    print(f"Fitting {what}, kernel {kernel}, {args.optimizer}, at most {args.max_iters} iterations{until} "
          "(Ctrl-C stops and saves the best point)", file=err, flush=True)
    progress = None if args.quiet else Progress(err, args.max_iters, model.objective_name,
                                                until_converged=args.until_converged)
    failure = None
    note = progress.note if progress else (lambda text: print(text, file=err, flush=True))
    trace = TraceRecorder(progress)
    with StopOnSignals(err) as stopper, engine_log_to(note):
        try:
            result = engine.fit(model, optimizer=args.optimizer, max_iters=args.max_iters,
                                convergence=engine.Convergence() if args.until_converged else None,
                                callback=trace, stop=stopper.event)
        except engine.ConfigurationError as exc:
            print(f"error: impossible setting: {_message(exc)}", file=err)
            return EXIT_SETTINGS
        except engine.EngineError as exc:  # left at the best point reached, if any
            result, failure = None, exc
        finally:
            if progress:
                progress.close()

        objective = _objective_or_none(model)
        if failure is not None and objective is None:
            print(f"error: the fit failed: {_message(failure)}", file=err)
            return EXIT_FIT_FAILED
        try:
            iterations = result.iterations if result is not None else len(trace.iterations)
            save_outputs(model, out, coords, context=saved_context(args, ds, model, trace, iterations))
        except OSError as exc:
            print(f"error: cannot write the output: {exc}", file=err)
            return EXIT_OUTPUT
        signum = stopper.signum

    saved = f"Saved {out}" + (f" and {coords}" if coords is not None else "")
    if failure is not None and not (isinstance(failure, engine.NumericalError) and trace.iterations):
        print(f"error: the fit failed: {_message(failure)}", file=err)
        print(f"{saved} at the best point reached ({model.objective_name} {float(objective)!r}).", file=err)
        return EXIT_FIT_FAILED
    if failure is not None:  # the numbers ended it after some iterations: a result, as on the page
        from gplvm_explorer.training.messages import stopped_early_note

        print(stopped_early_note(int(trace.iterations[-1]), failure,
                                 f"{saved} at the best point reached ({model.objective_name} {float(objective)!r})"),
              file=err)
        return EXIT_OK
    if result.stopped:
        print(f"Stopped after {result.iterations} iterations; {saved} at the best point "
              f"({model.objective_name} {float(objective)!r}).", file=err)
        return 128 + int(signum if signum is not None else signal.SIGINT)
    state = "converged" if result.converged else "finished"
    print(f"{state.capitalize()} after {result.iterations} iterations in {result.elapsed:.1f} s "
          f"({model.objective_name} {float(objective)!r}). {saved}.", file=err)
    return EXIT_OK


class TraceRecorder:
    """A fit callback keeping (iteration, objective) of every snapshot, then calling ``then`` (or nothing)."""

    def __init__(self, then=None):
        self.then = then
        self.iterations: list[float] = []
        self.objectives: list[float] = []

    def __call__(self, snap):
        self.iterations.append(float(snap.iteration))
        self.objectives.append(float(snap.objective))
        return None if self.then is None else self.then(snap)


def saved_context(args, ds, model, trace: TraceRecorder, iterations: int):
    """What the app shows about this fit when it opens the file: the data's names, labels, image shape and
    standardisation, the objective trace, the iterations and the settings."""
    from gplvm_explorer.saved_context import SavedContext

    n = int(np.shape(model._Y_data)[0])
    labels = ds.labels if ds.labels is not None and len(ds.labels) == n else None
    settings = {"model": args.model, "kernel": args.kernel, "latent_dim": int(args.latent_dim),
                "init": args.init, "optimizer": args.optimizer, "max_iters": int(args.max_iters),
                "seed": int(args.seed), "likelihood": args.likelihood}
    if hasattr(model, "num_inducing"):
        settings["num_inducing"] = int(model.num_inducing)
    return SavedContext(feature_names=tuple(ds.feature_names), labels=labels,
                        label_name=None if labels is None else (ds.label_name or "label"),
                        image_shape=ds.image_shape, mean=ds.mean, scale=ds.scale,
                        trace_iteration=np.asarray(trace.iterations), trace_objective=np.asarray(trace.objectives),
                        iterations=int(iterations), settings=settings)


def _objective_or_none(model):
    try:
        value = model.objective()
    except Exception:  # noqa: BLE001 - any failure here means there is no usable point to save
        return None
    return value if math.isfinite(value) else None


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
