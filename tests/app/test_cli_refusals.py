"""Every command-line refusal is one line and a documented exit code, made before anything big is read,
built or served.  Each case runs ``gplvm-explorer`` in a subprocess with a time limit and a memory
ceiling (`runbounded`): a regression is killed, not allowed to take the machine."""
from __future__ import annotations

import os
import socket
import threading

import numpy as np
import pytest

from crafted_models import HOSTILE
from gplvm_explorer import cli, fit_command
from runbounded import run_bounded

pytestmark = pytest.mark.timeout(600)

#: Peak resident memory any refusal may take (the interpreter and its imports are ~250 MB).
CEILING_MB = 700


def gplvm_explorer(*args, timeout=90.0, env=None):
    return run_bounded(["python", "-m", "gplvm_explorer.cli", *args], timeout=timeout, max_rss_mb=CEILING_MB,
                       env=env)


def assert_one_line(outcome, code: int, phrase: str) -> None:
    assert not outcome.killed, f"killed ({outcome.killed}) after {outcome.seconds:.0f} s, {outcome.peak_rss_mb:.0f} MB"
    # the refusal itself: fit's report of the data it read ("Data: ...", "note: ...") comes before it
    lines = [line for line in outcome.stderr.strip().splitlines() if not line.startswith(("Data: ", "note: "))]
    assert outcome.returncode == code, outcome.stderr
    assert len(lines) == 1 and "Traceback" not in outcome.stderr, outcome.stderr
    assert phrase in lines[0], lines[0]


@pytest.fixture(scope="module")
def data_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli") / "rows.csv"
    rng = np.random.default_rng(0)
    np.savetxt(path, rng.normal(size=(60, 4)), delimiter=",", header="a,b,c,d", comments="")
    return path


# ---- gplvm-explorer FILE (serving) --------------------------------------------------------------

def test_a_device_is_refused_by_stat_before_reading():
    out = gplvm_explorer("/dev/zero", "--port", "65534")
    assert_one_line(out, cli.EXIT_FILE, "'zero' is a character device, not a file")


def test_a_named_pipe_is_refused_without_opening_it(tmp_path):
    fifo = tmp_path / "data.csv"
    os.mkfifo(fifo)  # opening it for reading would block until a writer comes: it must never be opened
    out = gplvm_explorer(str(fifo), "--port", "65534")
    assert_one_line(out, cli.EXIT_FILE, "is a named pipe (FIFO), not a file")


@pytest.mark.parametrize("port", ["99999", "0", "http"])
def test_ports_outside_1_to_65535_are_usage_errors(port):
    assert_one_line(gplvm_explorer("--port", port), 2, "a port is a whole number from 1 to 65535")


def test_a_port_in_use_is_refused_before_the_url_is_printed():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        out = gplvm_explorer("--port", str(port))
    assert_one_line(out, cli.EXIT_SETTINGS, f"port {port} on 127.0.0.1 is in use by another program")
    assert "http://" not in out.stdout


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_model_file_is_refused_in_one_line_within_the_ceiling(tmp_path, name):
    make, phrase = HOSTILE[name]
    path = tmp_path / f"{name}.npz"
    path.write_bytes(make())
    out = gplvm_explorer(str(path), "--port", "65534",
                         env=dict(os.environ, GPLVM_EXPLORER_SESSION_MEMORY="2G"))
    assert_one_line(out, cli.EXIT_FILE, phrase)


def _silent_listener():
    """A TCP port that accepts connections and never says anything (what a firewall can look like)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    held = []
    stop = threading.Event()

    def accept():
        sock.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(sock.accept()[0])
            except OSError:
                continue

    threading.Thread(target=accept, daemon=True).start()
    return sock, stop, held


@pytest.mark.parametrize("address, phrase", [
    ("not-a-url", "'not-a-url' is not a dask scheduler address"),
    ("tcp://127.0.0.1:9", "nothing listens on port 9 of 127.0.0.1"),
    ("silent", "no answer within 10 s"),
])
def test_an_unusable_dask_scheduler_is_reported_in_one_line(address, phrase):
    pytest.importorskip("distributed")
    listener = None
    if address == "silent":
        listener = _silent_listener()
        address = f"tcp://127.0.0.1:{listener[0].getsockname()[1]}"
    try:
        # the connection gives up after 10 s; the limit leaves room for a loaded machine's imports
        out = gplvm_explorer("--dask-scheduler", address, "--port", "65534", timeout=60.0)
    finally:
        if listener is not None:
            sock, stop, held = listener
            stop.set()
            for conn in held:
                conn.close()
            sock.close()
    assert_one_line(out, cli.EXIT_SETTINGS, phrase)


# ---- gplvm-explorer fit -------------------------------------------------------------------------

def fit(*args):
    return run_bounded(["python", "-m", "gplvm_explorer.cli", "fit", *args], timeout=90.0, max_rss_mb=CEILING_MB)


def test_latent_dim_is_checked_against_the_data_before_building(data_csv, tmp_path):
    out = fit(str(data_csv), "-o", str(tmp_path / "m.npz"), "--latent-dim", "1000000")
    assert_one_line(out, fit_command.EXIT_SETTINGS, "--latent-dim 1000000 is more than the data's 4 columns")
    assert not (tmp_path / "m.npz").exists()


def test_a_model_bigger_than_the_machine_is_refused_before_building(tmp_path):
    path = tmp_path / "wide.npy"
    np.save(path, np.random.default_rng(0).normal(size=(40_000, 2)))  # 0.6 MB of data; the exact model: 51 GB
    out = fit(str(path), "-o", str(tmp_path / "m.npz"), "--model", "gplvm")
    assert_one_line(out, fit_command.EXIT_SETTINGS, "The GP-LVM (exact) on N=40,000 points needs about")


def test_a_negative_seed_is_a_setting_not_the_files_fault(data_csv, tmp_path):
    out = fit(str(data_csv), "-o", str(tmp_path / "m.npz"), "--seed", "-1")
    assert_one_line(out, fit_command.EXIT_SETTINGS, "--seed must be 0 or more, got -1")


def test_output_to_a_device_is_refused_and_nothing_is_written_beside_it(data_csv):
    out = fit(str(data_csv), "-o", "/dev/full")
    assert_one_line(out, fit_command.EXIT_OUTPUT, "Cannot write /dev/full: it is a device or a pipe, not a file")
    assert not os.path.exists("/dev/full.npz")


def test_fitting_a_device_is_refused_by_stat(tmp_path):
    out = fit("/dev/zero", "-o", str(tmp_path / "m.npz"))
    assert_one_line(out, fit_command.EXIT_DATA, "'zero' is a character device, not a file")


def test_a_usage_error_is_one_line():
    out = fit("--latent-dim", "two")
    assert_one_line(out, 2, "gplvm-explorer fit: error:")
