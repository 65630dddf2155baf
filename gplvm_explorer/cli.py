"""``gplvm-explorer [FILE]``: serve the app (``--port``, ``--address``, ``--show``).

``gplvm-explorer fit FILE ... -o model.npz``: fit headless (see `gplvm_explorer.fit_command`).

FILE (optional) is a CSV / TSV / TXT / NPY / NPZ file read from disk and
offered in every browser session, with no upload: the way to explore files
bigger than the upload limit. The server's websocket message limit is set
explicitly (see `gplvm_explorer.serving`).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def parse_args(argv=None):
    from gplvm_explorer.serving import WEBSOCKET_MAX_MESSAGE_SIZE

    p = argparse.ArgumentParser(prog="gplvm-explorer", description="Serve GPLVM Explorer in the browser.")
    p.add_argument("file", nargs="?", default=None, metavar="FILE",
                   help="a data file (CSV/TSV/TXT/NPY/NPZ) to offer in every session; read from disk, "
                        "so it may be bigger than the upload limit")
    p.add_argument("--port", type=int, default=5006, help="port to listen on (default 5006)")
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


def check_file(path: str) -> tuple[Path | None, str]:
    """(absolute path, summary) when FILE loads, else (None, the reason)."""
    from gplvm_explorer.data import DataError
    from gplvm_explorer.serving import CLI_LIMITS
    from gplvm_explorer.data import load_file

    p = Path(path).expanduser()
    try:
        ds = load_file(p, limits=CLI_LIMITS)
    except DataError as exc:
        return None, str(exc)
    return p.resolve(), ds.summary()


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["fit"]:  # `gplvm-explorer fit FILE ...`: headless fit (gplvm_explorer.fit_command)
        from gplvm_explorer import fit_command

        return fit_command.main(argv[1:])
    args = parse_args(argv)
    if args.max_trainings is not None:
        if args.max_trainings < 1:
            print("--max-trainings must be at least 1", file=sys.stderr)
            return 2
        os.environ["GPLVM_EXPLORER_MAX_TRAININGS"] = str(args.max_trainings)
    if args.websocket_max_message_size < 1:
        print("--websocket-max-message-size must be positive", file=sys.stderr)
        return 2
    from gplvm_explorer.serving import PRELOAD_ENV, SERVER_OPTIONS

    if args.file is not None:
        path, summary = check_file(args.file)
        if path is None:
            print(f"Cannot use {args.file}: {summary}", file=sys.stderr)
            return 2
        os.environ[PRELOAD_ENV] = str(path)  # read by every session (gplvm_explorer.serving)
        print(f"Data file: {summary}", flush=True)
    import panel as pn

    from gplvm_explorer import app, warmup
    from gplvm_explorer.training.worker import configure_limiter

    if args.max_trainings is not None:
        configure_limiter(args.max_trainings)
    warmup.start()
    origins = [f"{args.address}:{args.port}", f"localhost:{args.port}"]
    if args.allow_websocket_origin:
        origins += args.allow_websocket_origin
    print(f"GPLVM Explorer on http://{args.address}:{args.port}/  (Ctrl+C to stop)", flush=True)
    options = dict(SERVER_OPTIONS, websocket_max_message_size=args.websocket_max_message_size)
    pn.serve(
        app.create_app,
        port=args.port,
        address=args.address,
        websocket_origin=origins,
        show=args.show,
        title=app.TITLE,
        threaded=False,
        **options,
    )
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
