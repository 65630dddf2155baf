"""``gplvm-explorer``: serve the app (``--port``, ``--address``, ``--show``)."""
from __future__ import annotations

import argparse
import os
import sys


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="gplvm-explorer", description="Serve GPLVM Explorer in the browser.")
    p.add_argument("--port", type=int, default=5006, help="port to listen on (default 5006)")
    p.add_argument("--address", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--show", action="store_true", help="open the app in a browser")
    p.add_argument("--max-trainings", type=int, default=None,
                   help="concurrent trainings allowed in this server (default: $GPLVM_EXPLORER_MAX_TRAININGS or 2)")
    p.add_argument("--allow-websocket-origin", action="append", default=None,
                   help="extra host[:port] allowed to connect (repeatable)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.max_trainings is not None:
        if args.max_trainings < 1:
            print("--max-trainings must be at least 1", file=sys.stderr)
            return 2
        os.environ["GPLVM_EXPLORER_MAX_TRAININGS"] = str(args.max_trainings)
    import panel as pn

    from gplvm_explorer import app, session, warmup

    if args.max_trainings is not None:
        session.configure_limiter(args.max_trainings)
    warmup.start()
    origins = [f"{args.address}:{args.port}", f"localhost:{args.port}"]
    if args.allow_websocket_origin:
        origins += args.allow_websocket_origin
    print(f"GPLVM Explorer on http://{args.address}:{args.port}/  (Ctrl+C to stop)", flush=True)
    pn.serve(
        app.create_app,
        port=args.port,
        address=args.address,
        websocket_origin=origins,
        show=args.show,
        title=app.TITLE,
        threaded=False,
        # a closed tab ends its session (and its training thread) within seconds
        check_unused_sessions_milliseconds=2000,
        unused_session_lifetime_milliseconds=5000,
    )
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
