"""Serving limits, the CLI's FILE argument and the preloaded dataset."""

from __future__ import annotations

import numpy as np
import pytest

from gplvm_explorer import cli, serving


def test_websocket_limit_carries_the_upload_limit_with_room():
    assert serving.SERVER_OPTIONS["websocket_max_message_size"] == serving.WEBSOCKET_MAX_MESSAGE_SIZE
    need = serving.message_bytes_for_upload(serving.UPLOAD_LIMIT_BYTES)
    assert serving.WEBSOCKET_MAX_MESSAGE_SIZE >= 2 * need - 2**20  # about twice the upload limit
    # Bokeh's default (20 MiB) carries only ~15 MB files: the bug this guards against
    assert serving.upload_bytes_for_message(20 * 2**20) < 16_000_000
    for size in (0, 1, 2, 3, 10**6, 20 * 2**20):
        assert serving.upload_bytes_for_message(serving.message_bytes_for_upload(size)) >= size
    with pytest.raises(TypeError):
        serving.SERVER_OPTIONS["websocket_max_message_size"] = 1  # immutable


def test_upload_hint_names_limit_and_cli():
    hint = serving.upload_hint()
    assert "20 MB" in hint and "gplvm-explorer FILE" in hint


def test_cli_parses_optional_file_and_limit():
    args = cli.parse_args([])
    assert args.file is None and args.websocket_max_message_size == serving.WEBSOCKET_MAX_MESSAGE_SIZE
    args = cli.parse_args(["data.csv", "--port", "7000", "--websocket-max-message-size", "123"])
    assert args.file == "data.csv" and args.port == 7000 and args.websocket_max_message_size == 123


def test_cli_check_file(tmp_path):
    good = tmp_path / "d.csv"
    good.write_text("a,b\n1,2\n3,4\n5,7\n")
    path, summary = cli.check_file(str(good))
    assert path == good.resolve() and "N=3 rows" in summary
    path, reason = cli.check_file(str(tmp_path / "missing.csv"))
    assert path is None and "File not found" in reason


def test_cli_refuses_a_bad_file_before_serving(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("only text\n")
    assert cli.main([str(bad)]) == cli.EXIT_FILE == 3
    assert "Cannot use" in capsys.readouterr().err


def test_preloaded_dataset_is_shared_read_only_and_big_files_are_fine(tmp_path, monkeypatch):
    monkeypatch.delenv(serving.PRELOAD_ENV, raising=False)
    assert serving.preload_path() is None and serving.preloaded_dataset() is None
    path = tmp_path / "big.npy"
    rng = np.random.default_rng(0)
    Y = rng.normal(size=(3000, 1000))  # 24 MB: over the upload limit, fine from disk
    np.save(path, Y)
    assert path.stat().st_size > serving.UPLOAD_LIMIT_BYTES
    monkeypatch.setenv(serving.PRELOAD_ENV, str(path))
    a = serving.preloaded_dataset()
    b = serving.preloaded_dataset()
    assert a is b and a.shape == (3000, 1000)
    assert not a.values.flags.writeable
    c = a.copy()
    c.values[0, 0] = 1.0  # a session's copy is its own
    assert a.values[0, 0] == Y[0, 0]


def test_upload_widget_checks_size_in_the_browser_and_chunks():
    pn = pytest.importorskip("panel")
    w = serving.upload_widget()
    assert isinstance(w, pn.widgets.FileDropper)
    assert w.max_file_size == "20MB" and not w.multiple
    assert serving.message_bytes_for_upload(w.chunk_size) < 20 * 2**20  # fits even Bokeh's default
    # no type list: the dropper matches browser-reported MIME types, empty for .npy / .npz / .parquet,
    # and would refuse them; the data layer refuses other files with a message
    assert w.accepted_filetypes == []


def test_uploaded_file_reads_dropper_and_input_values():
    assert serving.uploaded_file({}) is None and serving.uploaded_file(None) is None
    assert serving.uploaded_file({"a.csv": b"1,2"}) == ("a.csv", b"1,2")
    assert serving.uploaded_file({"a.csv": "1,2"}) == ("a.csv", b"1,2")
    assert serving.uploaded_file(b"xy") == ("upload", b"xy")


def test_data_panel_loads_a_dropped_file_once():
    pytest.importorskip("panel")
    from gplvm_explorer.explorer import Explorer
    from gplvm_explorer.views import DataPanel

    ex = Explorer()
    dp = DataPanel.of(ex)
    assert isinstance(dp.file_input, type(serving.upload_widget()))
    rows = "\n".join(f"{i},{i % 3},{i * 0.5}" for i in range(25))
    dp.file_input.value = {"dropped.csv": "a,b,c\n" + rows}  # text files arrive decoded
    assert ex.data.error == "" and ex.data.upload_name == "dropped.csv" and ex.data.dataset.n == 25
    ex.data.sample = "swiss-roll"
    assert ex.data.dataset.d == 3
    # the dropper announces its value again when it reports the old file removed: no second load
    dp.file_input.param.trigger("value")
    assert ex.data.dataset.d == 3
    dp.file_input.value = {}  # the file removed: not an upload
    assert ex.data.dataset.d == 3 and ex.data.error == ""


def test_the_picker_names_the_uploaded_or_given_file():
    from gplvm_explorer.explorer import Explorer
    from gplvm_explorer.state.data import UPLOADED_FILE
    from gplvm_explorer.views import DataPanel

    ex = Explorer()
    dp = DataPanel.of(ex)

    def title():
        return {v: k for k, v in dp.sample_select.options.items()}[UPLOADED_FILE]

    assert title() == "Your uploaded file"
    rows = "\n".join(f"{i},{i % 3},{i * 0.5}" for i in range(25))
    assert ex.data.load_upload(("a,b,c\n" + rows).encode(), "<i>mine</i>.csv"), ex.data.error
    assert title() == "Your file: <i>mine</i>.csv" and dp.sample_select.value == UPLOADED_FILE
    given = ex.data.dataset
    assert ex.data.load_given(lambda label, standardize: given, "big.npy")
    assert title() == "Your data: big.npy" and dp.sample_select.value == UPLOADED_FILE
    assert ex.data.load_upload(("a,b,c\n" + rows).encode(), "<i>mine</i>.csv")  # same name as before
    assert title() == "Your file: <i>mine</i>.csv"
