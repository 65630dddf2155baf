"""Checks of command-line arguments, made before anything is read, built or served.

Shared by ``gplvm-explorer`` (`gplvm_explorer.cli`) and ``gplvm-explorer fit``
(`gplvm_explorer.fit_command`): every refusal is one line on stderr and an
exit code the command documents, never a traceback.
"""
from __future__ import annotations

import argparse
import errno
import socket
import sys

__all__ = ["MAX_LATENT_DIM", "OneLineParser", "check_latent_dim", "check_listen", "port_number",
           "unexpected_error"]

#: Most latent dimensions the command line accepts (beyond the data's own D, which bounds it first).
MAX_LATENT_DIM = 100

#: Exit code of an unexpected internal error (BSD's EX_SOFTWARE), reported in one line.
EXIT_INTERNAL = 70


class OneLineParser(argparse.ArgumentParser):
    """argparse, with a usage error reported in one line (and exit code 2), not the usage block."""

    def error(self, message):
        print(f"{self.prog}: error: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)


def port_number(text: str) -> int:
    """argparse type of a TCP port: a whole number 1-65535."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a port is a whole number from 1 to 65535, got {text!r}") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"a port is a whole number from 1 to 65535, got {port}")
    return port


def check_listen(address: str, port: int) -> str:
    """'' when a server can listen on (address, port) now, else why not (one sentence).

    Binds and closes a socket the way the server will (SO_REUSEADDR, as Tornado
    does), so a port another program listens on is found before the server starts.
    """
    try:
        infos = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError):
        return f"{address!r} is not an address of this machine (--address)."
    family, kind, proto, _, sockaddr = infos[0]
    try:
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(sockaddr)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            return f"port {port} on {address} is in use by another program; choose another with --port."
        if exc.errno == errno.EACCES:
            return f"port {port} on {address} needs more privileges; choose one above 1023 with --port."
        if exc.errno == errno.EADDRNOTAVAIL:
            return f"{address} is not an address of this machine (--address)."
        return f"cannot listen on {address} port {port}: {exc.strerror or exc}."
    return ""


def check_latent_dim(latent_dim: int, columns: int) -> str:
    """'' when ``latent_dim`` latent dimensions suit data of ``columns`` columns, else why not."""
    if latent_dim < 1:
        return f"--latent-dim must be at least 1, got {latent_dim}."
    if latent_dim > columns:
        return (f"--latent-dim {latent_dim} is more than the data's {columns} columns; a latent space has at most "
                f"as many dimensions as the data (use at most {min(columns, MAX_LATENT_DIM)}).")
    if latent_dim > MAX_LATENT_DIM:
        return f"--latent-dim {latent_dim} is more than the {MAX_LATENT_DIM} this command accepts."
    return ""


def unexpected_error(prog: str, exc: BaseException) -> int:
    """Report an error no check foresaw in one line; the exit code `EXIT_INTERNAL`."""
    print(f"{prog}: unexpected error ({type(exc).__name__}): {str(exc).strip() or 'no message'}", file=sys.stderr)
    return EXIT_INTERNAL
