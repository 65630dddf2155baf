"""``gplvm-explorer [FILE]``: serve the app (``--port``, ``--address``, ``--show``).

``--label COLUMN --model M --latent-dim Q --num-inducing M`` set the page's
data and model settings in every session (they stay changeable there);
``--dask-scheduler ADDRESS`` fits Bayesian and sparse GP-LVMs on a dask.distributed
cluster (``engine.DaskBackend``).  ``--lesson [LESSON]`` opens a guided lesson in every
session: the bundled one, or a lesson file (JSON, ``docs/lessons.md``).

``gplvm-explorer fit FILE ... -o model.npz``: fit headless (see `gplvm_explorer.fit_command`).

FILE (optional) is a CSV / TSV / TXT / NPY / NPZ / Parquet file read from disk and
offered in every browser session, with no upload: the way to explore files
bigger than the upload limit. FILE may also be a saved model (``gplvm-explorer fit
-o model.npz``, or the page's export): every session opens it as a finished
result to explore without training (`gplvm_explorer.saved_model`). The
server's websocket message limit is set
explicitly (see `gplvm_explorer.serving`).

Everything given is checked before the server starts, and every refusal is one
line on stderr (`gplvm_explorer.cli_checks`). Exit codes::

    0    the server stopped (Ctrl-C)
    2    impossible settings or command-line usage: an unknown or bad flag, a port outside
         1-65535 or in use, an address this machine does not have, a dask scheduler that is
         malformed or does not answer within 10 s
    3    FILE (or the --lesson file) cannot be used: not found, not a regular file (a device such as /dev/zero, a
         pipe, a directory), not data the app reads, or a saved model that is damaged or too
         big to open in a session
    70   an unexpected internal error (reported in one line)
"""
from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path

from gplvm_explorer.cli_checks import OneLineParser, check_listen, port_number, unexpected_error

EXIT_SETTINGS = 2
EXIT_FILE = 3


def parse_args(argv=None):
    from gplvm_explorer.serving import WEBSOCKET_MAX_MESSAGE_SIZE

    p = OneLineParser(prog="gplvm-explorer", description="Serve GPLVM Explorer in the browser.",
                      epilog="Exit codes: 0 the server stopped; 2 impossible settings (a bad flag, a port outside "
                             "1-65535 or in use, a dask scheduler that does not answer within 10 s); 3 FILE cannot "
                             "be used (not a regular file, not readable data, a saved model too big to open); "
                             "70 unexpected internal error. 'gplvm-explorer fit --help' for the headless fit.")
    p.add_argument("file", nargs="?", default=None, metavar="FILE",
                   help="a data file (CSV/TSV/TXT/NPY/NPZ/Parquet) to offer in every session; read from disk, "
                        "so it may be bigger than the upload limit; or a saved model (.npz) to explore "
                        "without training")
    p.add_argument("--label", default=None, metavar="COLUMN",
                   help="label column of FILE (name, or 0-based index): colours the points, left out of the model")
    p.add_argument("--model", default=None, help="model to select (e.g. bayesian, gplvm)")
    p.add_argument("--latent-dim", type=int, default=None, metavar="Q", help="latent dimensions Q")
    p.add_argument("--num-inducing", type=int, default=None, metavar="M", help="inducing points M")
    p.add_argument("--dask-scheduler", default=None, metavar="ADDRESS",
                   help="fit Bayesian and sparse GP-LVMs on this dask.distributed scheduler (e.g. tcp://host:8786)")
    p.add_argument("--lesson", nargs="?", const="", default=None, metavar="LESSON",
                   help="open a guided lesson in every session: the bundled one, or LESSON, a lesson file "
                        "(JSON; see docs/lessons.md)")
    p.add_argument("--port", type=port_number, default=5006, help="port to listen on, 1-65535 (default 5006)")
    p.add_argument("--address", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--show", action="store_true", help="open the app in a browser")
    p.add_argument("--max-trainings", type=int, default=None,
                   help="concurrent trainings allowed in this server (default: $GPLVM_EXPLORER_MAX_TRAININGS or 2)")
    p.add_argument("--allow-websocket-origin", action="append", default=None,
                   help="extra host[:port] allowed to connect (repeatable)")
    p.add_argument("--websocket-max-message-size", type=int, default=WEBSOCKET_MAX_MESSAGE_SIZE,
                   metavar="BYTES",
                   help=f"largest websocket message, which bounds uploads (default {WEBSOCKET_MAX_MESSAGE_SIZE})")
    return p.parse_args(argv)


def check_file(path: str, label=None) -> tuple[Path | None, str]:
    """(absolute path, summary) when FILE loads (with ``label`` as its label column), else (None, the reason)."""
    from gplvm_explorer.data import DataError
    from gplvm_explorer.serving import CLI_LIMITS
    from gplvm_explorer.data import load_file

    from gplvm_explorer import saved_model
    from gplvm_explorer.data import regular_file_size

    p = Path(path).expanduser()
    try:
        regular_file_size(p)  # by stat alone: /dev/zero, pipes and directories are never opened
    except DataError as exc:
        return None, str(exc)
    if saved_model.is_model_file(p):  # a model saved by `gplvm-explorer fit` or the page: opened, not retrained
        if label is not None:
            return None, "--label applies to data files; a saved model has no label column."
        try:
            model = saved_model.load(p, p.name)
        except DataError as exc:
            return None, str(exc)
        spec = saved_model.spec_for(model)
        N, D = model._Y_data.shape
        return p.resolve(), (f"{p.name}: a saved {spec.display_name} (N={N} rows, D={D} features, "
                             f"Q={model.latent_dim}, {model.objective_name} {model.objective():.6g})")
    try:
        ds = load_file(p, label_column=label, limits=CLI_LIMITS)
    except DataError as exc:
        return None, str(exc)
    return p.resolve(), ds.summary()


@functools.lru_cache(maxsize=4)
def _saved_model(path: str, mtime_ns: int) -> tuple:
    """(model, context) of a saved model file, loaded once per server (sessions get copies of the model)."""
    from gplvm_explorer import saved_model

    model = saved_model.load(path, Path(path).name)
    context = saved_model.read_context(path, model.num_data, model.output_dim)
    for arr in (context.labels, context.mean, context.scale, context.trace_iteration, context.trace_objective):
        if arr is not None:
            arr.setflags(write=False)
    return model, context


LESSON_ENV = "GPLVM_EXPLORER_LESSON"


@functools.lru_cache(maxsize=4)
def _lesson(path: str, mtime_ns: int):
    """The lesson file's plan, read once per server (and again when the file changes)."""
    from gplvm_explorer.state.lesson_file import load_lesson

    return load_lesson(path)


def session_lesson():
    """(plan, error) of the --lesson the server was started with: (None, '') without one."""
    from gplvm_explorer.state.lesson_file import LessonError

    value = os.environ.get(LESSON_ENV)
    if value is None:
        return None, ""
    path = Path(value)
    try:
        return _lesson(str(path), path.stat().st_mtime_ns), ""
    except (OSError, LessonError) as exc:  # changed or removed since the server started
        return None, f"The lesson file cannot be used any more: {exc}"


def page_settings(args) -> dict:
    """The page settings given as flags (only those given), checked: ValueError names a bad one."""
    from types import SimpleNamespace

    from gplvm_explorer.notebook import apply_settings
    from gplvm_explorer.state.settings import ModelSettings

    settings = {k: v for k, v in (("model", args.model), ("latent_dim", args.latent_dim),
                                  ("num_inducing", args.num_inducing)) if v is not None}
    apply_settings(SimpleNamespace(settings=ModelSettings()), settings)
    return settings


def session_page(build=None):
    """One session's page: `app.create_app` with the command line's file and settings (`serving`)."""
    from gplvm_explorer import app, serving
    from gplvm_explorer.notebook import apply_settings

    plan, lesson_error = session_lesson()
    page = app.create_app(lesson=plan, **({"build": build} if build is not None else {}))
    ex = page.explorer
    if lesson_error:
        ex.lesson.error, ex.lesson.shown = lesson_error, True
    settings = dict(serving.preload_settings())
    label = settings.pop("label", None)
    path = serving.preload_path()
    from gplvm_explorer import saved_model

    if path is not None and saved_model.is_model_file(path):
        def read():  # e.g. the file changed since the server started: the Data card says so
            model, context = _saved_model(str(path), path.stat().st_mtime_ns)
            return model.copy(), context

        ex.open_saved(read, path.name)  # on a thread: a new tab holds up no one
        return page  # the saved model's settings are the page's; command-line settings do not apply
    if path is not None:
        def loader(label_column, standardize):
            return serving.preloaded_dataset(label_column=label_column, standardize=standardize)

        ex.data.load_given(loader, path.name, serving.preload_columns(), label)
    try:
        apply_settings(ex, settings)
    except ValueError as exc:  # e.g. more inducing points than rows: the page says so
        ex.page_error = f"A command-line setting could not be applied: {exc}"
    return page


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["fit"]:  # `gplvm-explorer fit FILE ...`: headless fit (gplvm_explorer.fit_command)
        from gplvm_explorer import fit_command

        return fit_command.main(argv[1:])
    args = parse_args(argv)
    try:
        return serve(args)
    except Exception as exc:  # noqa: BLE001 - a refusal no check foresaw: still one line, never a traceback
        return unexpected_error("gplvm-explorer", exc)


def _refuse(message: str, code: int = EXIT_SETTINGS) -> int:
    print(message, file=sys.stderr)
    return code


def serve(args) -> int:
    """Check everything ``args`` give, then serve the app until Ctrl-C; the exit code."""
    if args.max_trainings is not None:
        if args.max_trainings < 1:
            return _refuse(f"--max-trainings must be at least 1, got {args.max_trainings}.")
        os.environ["GPLVM_EXPLORER_MAX_TRAININGS"] = str(args.max_trainings)
    if args.websocket_max_message_size < 1:
        return _refuse(f"--websocket-max-message-size must be positive, got {args.websocket_max_message_size}.")
    from gplvm_explorer.serving import PRELOAD_ENV, SERVER_OPTIONS, SETTINGS_ENV

    try:
        settings = page_settings(args)
    except (TypeError, ValueError) as exc:
        return _refuse(f"Bad setting: {exc}")
    label = args.label
    if label is not None and args.file is None:
        return _refuse("--label needs a FILE.")
    if args.file is not None:
        if label is not None and label.strip().lstrip("-").isdigit():
            from gplvm_explorer.data import DataError, csv_columns
            from gplvm_explorer.serving import CLI_LIMITS

            try:
                names = csv_columns(args.file, limits=CLI_LIMITS)
            except DataError:
                names = []
            label = label if label in names else int(label)
        path, summary = check_file(args.file, label)
        if path is None:
            return _refuse(f"Cannot use {args.file}: {summary}", EXIT_FILE)
        os.environ[PRELOAD_ENV] = str(path)  # read by every session (gplvm_explorer.serving)
        print(f"Data file: {summary}", flush=True)
        from gplvm_explorer.saved_model import is_model_file

        if settings and is_model_file(path):
            print("note: the saved model's own settings are shown; --model, --latent-dim and --num-inducing "
                  "are ignored", file=sys.stderr, flush=True)
    if args.lesson is not None:
        from gplvm_explorer.state.lesson_file import DEFAULT_LESSON, LessonError, load_lesson

        lesson_path = Path(args.lesson).expanduser() if args.lesson else DEFAULT_LESSON
        try:
            plan = load_lesson(lesson_path)
        except LessonError as exc:
            return _refuse(f"Cannot use the lesson: {exc}", EXIT_FILE)
        os.environ[LESSON_ENV] = str(lesson_path.resolve())
        print(f"Lesson: {plan.title} ({len(plan.steps)} steps)", flush=True)
    busy = check_listen(args.address, args.port)
    if busy:
        return _refuse(f"Cannot serve: {busy}")
    build = None
    if args.dask_scheduler:
        from gplvm_explorer.cluster import ClusterError, connect, dask_builder

        try:
            client = connect(args.dask_scheduler)
        except ClusterError as exc:
            return _refuse(str(exc))
        build = dask_builder(client)
        print(f"Bayesian GP-LVMs train on the dask scheduler at {args.dask_scheduler}", flush=True)
    os.environ[SETTINGS_ENV] = json.dumps(dict(settings, **({"label": label} if label is not None else {})))
    import panel as pn

    from gplvm_explorer import app, warmup
    from gplvm_explorer.training.limiter import configure_limiter

    if args.max_trainings is not None:
        configure_limiter(args.max_trainings)
    warmup.start()
    origins = [f"{args.address}:{args.port}", f"localhost:{args.port}"]
    if args.allow_websocket_origin:
        origins += args.allow_websocket_origin
    print(f"GPLVM Explorer on http://{args.address}:{args.port}/  (Ctrl+C to stop)", flush=True)
    options = dict(SERVER_OPTIONS, websocket_max_message_size=args.websocket_max_message_size)

    def page():  # a plain function: pn.serve calls it once per session
        return session_page(build)

    try:
        pn.serve(
            page,
            port=args.port,
            address=args.address,
            websocket_origin=origins,
            show=args.show,
            title=app.TITLE,
            threaded=False,
            liveness=True,  # GET /liveness answers 200 once the server is up
            **options,
        )
    except OSError as exc:  # e.g. the port was taken between the check and now
        return _refuse(f"Cannot serve on {args.address} port {args.port}: {exc.strerror or exc}.")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
