"""A saved model opens on the page (``gplvm-explorer model.npz``, or uploaded) to explore without retraining."""
from __future__ import annotations

import io
import threading
import time

import numpy as np
import pytest

import engine
from engine.io import load_model, save_model
from gplvm_explorer import cli, export, saved_model
from gplvm_explorer.catalog import ModelConfig
from gplvm_explorer.data import DataError
from gplvm_explorer.serving import PRELOAD_ENV, SETTINGS_ENV

pytestmark = pytest.mark.timeout(300)


def _data(n=40, d=5, seed=0):
    rng = np.random.default_rng(seed)
    t = rng.uniform(-2, 2, size=(n, 1))
    return np.hstack([np.sin(t * (j + 1)) for j in range(d)]) + 0.05 * rng.standard_normal((n, d))


def _fitted(key, kernel="rbf", Q=3, M=8, iters=15):
    """A model of catalog entry ``key`` built as the page builds it, fitted for a few iterations."""
    from gplvm_explorer.catalog import spec

    config = ModelConfig(model=key, kernel=kernel, latent_dim=Q, num_inducing=M, bias=True, white=False)
    model = spec(key).build(_data(), config)
    engine.fit(model, max_iters=iters)
    return model


def _npz_bytes(model) -> bytes:
    buf = io.BytesIO()
    save_model(model, buf)
    return buf.getvalue()


@pytest.mark.parametrize("key,kernel", [("bayesian", "rbf"), ("sparse", "linear"), ("gplvm", "rbf")])
def test_an_uploaded_model_is_shown_as_trained_with_its_own_bound(make_explorer, pump, key, kernel):
    model = _fitted(key, kernel)
    content = _npz_bytes(model)
    ex = make_explorer()
    before = ex.data.dataset
    assert ex.data.load_upload(content, "my model.npz"), ex.data.error
    tr = ex.training
    assert tr.status == "finished" and tr.opened == "my model.npz" and not tr.active
    assert ex.data.dataset is not before and ex.data.dataset.n == 40 and ex.data.dataset.d == 5
    np.testing.assert_array_equal(ex.data.dataset.values, model._Y_data)
    # the bound is the saved model's, exactly: nothing was retrained
    assert tr.result.objective == model.objective() == tr.objective
    np.testing.assert_array_equal(tr.result.X_mean, model.parameters["X_mean"])
    assert tr.result.final and tr.result.relevance.shape == (3,)
    cfg = ex.settings.config()
    assert (cfg.model, cfg.kernel, cfg.bias, cfg.white, cfg.latent_dim) == (key, kernel, True, False, 3)
    if key != "gplvm":
        assert cfg.num_inducing == 8
    assert ex.settings.errors == []
    assert "finished" in ex.summary.lower() and tr.objective_name in ex.summary
    # the latent map, its shading and the reconstruction come from the saved parameters
    assert pump(ex, lambda: ex.latent.wait(0) is not None and ex.latent.view is not None, timeout=60)
    v = ex.latent.view
    assert v.result is tr.result
    x0, y0, x1, y1 = v.extent
    rec = ex.latent.reconstruct_at((x0 + x1) / 2, (y0 + y1) / 2)
    loc = np.array(v.fixed, dtype=float)
    loc[v.dims[0]], loc[v.dims[1]] = (x0 + x1) / 2, (y0 + y1) / 2
    np.testing.assert_allclose(rec.mean, model.predict(loc[None, :])[0][0], rtol=1e-10, atol=1e-12)
    # and it can be exported again (the page's NPZ), loading with the same bound
    assert load_model(io.BytesIO(export.model_npz(tr.result))).objective() == model.objective()


def test_train_after_opening_fits_again_with_the_models_settings(make_explorer, pump):
    ex = make_explorer()
    assert ex.data.load_upload(_npz_bytes(_fitted("bayesian")), "m.npz")
    assert ex.training.result is not None and not ex.result_is_stale  # the opened model is the loaded data's
    ex.settings.max_iters = 3
    assert ex.train(), ex.training.message
    assert pump(ex, lambda: ex.training.status in ("finished", "stopped", "failed"), timeout=120)
    assert ex.training.status == "finished", ex.training.message
    assert ex.training.opened == "" and ex.training.result.config.latent_dim == 3


def test_a_damaged_model_file_keeps_the_data_and_says_why(make_explorer):
    good = _npz_bytes(_fitted("sparse", iters=2))
    buf = io.BytesIO()
    np.savez(buf, format_version=np.array(1), model_class=np.array("SparseGPLVM"), Y=np.zeros((3, 2)))
    ex = make_explorer()
    before = ex.data.dataset
    assert not ex.data.load_upload(buf.getvalue(), "<b>broken</b>.npz")
    assert ex.data.dataset is before and ex.training.status == "idle"
    assert "not a model the app can open" in ex.data.error and "<b>broken</b>.npz" in ex.data.error
    # truncated: not a zip any more, so it is read as data, and refused as such
    assert not ex.data.load_upload(good[: len(good) // 2], "cut.npz")
    assert ex.data.dataset is before and ex.data.error


def test_plain_npz_data_is_still_data(make_explorer):
    buf = io.BytesIO()
    np.savez(buf, Y=_data())
    assert not saved_model.is_model_file(buf.getvalue())
    ex = make_explorer()
    assert ex.data.load_upload(buf.getvalue(), "data.npz")
    assert ex.training.status == "idle" and ex.data.dataset.n == 40


def test_models_with_extra_inputs_are_refused_with_a_reason():
    mrd = type("MRD", (), {})()
    with pytest.raises(DataError, match="cannot be opened in the app yet.*engine.io.load_model"):
        saved_model.spec_for(mrd)


def test_an_oversized_model_file_is_refused_before_loading():
    content = _npz_bytes(_fitted("sparse", iters=1))
    with pytest.raises(DataError, match="unpacks to"):
        saved_model.load(content, "m.npz", max_unpacked=100)


def test_command_line_checks_the_model_and_every_session_opens_it(tmp_path, monkeypatch, pump):
    model = _fitted("bayesian")
    path = tmp_path / "model.npz"
    save_model(model, path)
    resolved, summary = cli.check_file(str(path))
    assert resolved == path.resolve()
    assert "a saved Bayesian GP-LVM" in summary and "N=40" in summary and "Q=3" in summary
    assert cli.check_file(str(path), label="class")[0] is None  # no label column in a model
    monkeypatch.setenv(PRELOAD_ENV, str(path))
    monkeypatch.setenv(SETTINGS_ENV, '{"latent_dim": 7}')  # ignored: the model's own settings are shown
    pages = [cli.session_page(), cli.session_page()]
    try:
        a, b = (p.explorer for p in pages)
        for ex in (a, b):
            assert ex.training.status == "finished" and ex.training.opened == "model.npz"
            assert ex.training.result.objective == model.objective()
            assert ex.settings.latent_dim == 3 and ex.page_error == ""
        assert a.training.result.model is not b.training.result.model  # sessions do not share a model
    finally:
        for p in pages:
            p.explorer.close()


def test_command_line_refuses_a_damaged_model_with_exit_code_3(tmp_path, capsys):
    path = tmp_path / "bad.npz"
    np.savez(path, format_version=np.array(1), model_class=np.array("Nothing"), Y=np.zeros((3, 2)))
    assert cli.main([str(path), "--port", "65535"]) == cli.EXIT_FILE == 3  # refused before the port is used
    assert "not a model the app can open" in capsys.readouterr().err


def test_labels_travel_with_the_model_and_colour_the_opened_points(make_explorer, pump):
    model = _fitted("bayesian")
    labels = np.resize(np.array(["low", "mid", "high"]), 40)
    buf = io.BytesIO()
    saved_model.write(model, buf, labels=labels.astype(object), label_name="<i>band</i>")
    content = buf.getvalue()
    assert load_model(io.BytesIO(content)).objective() == model.objective()  # the engine ignores the labels
    ex = make_explorer()
    assert ex.data.load_upload(content, "labelled.npz"), ex.data.error
    ds = ex.data.dataset
    np.testing.assert_array_equal(ds.labels, labels)
    assert ds.label_name == "<i>band</i>" and ex.training.result.dataset is ds
    assert sorted(ex.shown.colouring().categories) == ["high", "low", "mid"]
    # exported again from the page, the labels stay with it
    again, name = saved_model.read_labels(export.model_npz(ex.training.result), 40)
    np.testing.assert_array_equal(again, labels)
    assert name == "<i>band</i>"


def test_labels_of_the_wrong_length_are_left_out(make_explorer):
    model = _fitted("sparse", iters=2)
    buf = io.BytesIO()
    saved_model.write(model, buf, labels=np.arange(7), label_name="short")
    ex = make_explorer()
    assert ex.data.load_upload(buf.getvalue(), "m.npz"), ex.data.error
    assert ex.data.dataset.labels is None and ex.training.opened == "m.npz"


def test_fit_on_the_command_line_saves_the_label_column_with_the_model(tmp_path, capsys):
    from gplvm_explorer import fit_command

    Y = _data()
    rows = ["a,b,c,d,e,kind"] + [",".join(f"{v:.6f}" for v in row) + f",k{i % 3}" for i, row in enumerate(Y)]
    csv = tmp_path / "data.csv"
    csv.write_text("\n".join(rows) + "\n")
    out = tmp_path / "m.npz"
    assert fit_command.main([str(csv), "--label", "kind", "--latent-dim", "2", "--num-inducing", "6",
                             "--max-iters", "3", "--quiet", "-o", str(out)]) == 0
    labels, name = saved_model.read_labels(out, 40)
    assert name == "kind" and list(labels[:4]) == ["k0", "k1", "k2", "k0"]
    assert load_model(out).Y.shape == (40, 5)


def test_the_objective_plot_says_an_opened_model_has_no_trace_until_it_trains(make_explorer, pump):
    from gplvm_explorer.views import ObjectivePlot

    ex = make_explorer()
    plot = ObjectivePlot.of(ex)
    assert not plot.note.visible
    model = _fitted("bayesian")
    assert ex.data.load_upload(_npz_bytes(model), "<b>m</b>.npz")
    assert plot.note.visible and plot.note.text.startswith("<b>m</b>.npz: ")
    assert f"{model.objective():.6g}" in plot.note.text and "no trace" in plot.note.text
    assert plot.source.data["iteration"] == []
    ex.settings.max_iters = 3
    assert ex.train(), ex.training.message
    assert pump(ex, lambda: ex.training.status in ("finished", "stopped", "failed"), timeout=120)
    assert len(plot.source.data["iteration"]) > 0 and not plot.note.visible


class _ServedDoc:
    """A served session's document as the dispatcher uses it: callbacks queued for the page's next tick."""

    def __init__(self):
        self.callbacks = []

    def add_next_tick_callback(self, fn):
        self.callbacks.append(fn)

    def run_until(self, cond, timeout=60.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            while self.callbacks:
                self.callbacks.pop(0)()
            if cond():
                return True
            time.sleep(0.01)
        return cond()


def test_a_served_page_opens_a_model_on_a_thread_of_its_own(make_explorer, monkeypatch):
    """Opening (an exact GP-LVM's kernel matrix and factors: seconds at a few thousand rows) does not run on
    the server's thread, where it held up every session: the upload returns while the model is still being
    prepared, the page keeps its data meanwhile, and the model is shown once it is ready."""
    model = _fitted("gplvm")
    doc = _ServedDoc()
    ex = make_explorer(doc=doc)
    assert ex.data.load_upload(b"a,b,c\n" + b"\n".join(b"%d,%d,%d" % (i, i * i % 7, i % 3) for i in range(30)),
                               "first.csv"), ex.data.error
    before = ex.data.dataset
    release, threads = threading.Event(), []
    real = saved_model.prepare_opening

    def gated(*args, **kwargs):
        threads.append(threading.current_thread().name)
        assert release.wait(60)
        return real(*args, **kwargs)

    monkeypatch.setattr(saved_model, "prepare_opening", gated)
    assert ex.data.load_upload(_npz_bytes(model), "slow.npz")  # returns with the opening still waiting
    assert doc.run_until(lambda: threads, timeout=30)
    assert threads == ["gplvm-open-model"]
    assert ex.data.dataset is before and ex.training.opened == "" and ex.training.message == "Opening 'slow.npz'…"
    release.set()
    assert doc.run_until(lambda: ex.training.opened == "slow.npz"), ex.data.error
    assert ex.training.result.objective == model.objective() and ex.data.dataset.n == 40
    assert ex.training.message == "" and ex.data.error == ""


def test_a_model_refused_on_the_thread_says_why_and_keeps_the_page(make_explorer):
    doc = _ServedDoc()
    ex = make_explorer(doc=doc)
    assert ex.data.load_upload(b"a,b,c\n" + b"\n".join(b"%d,%d,%d" % (i, i * i % 7, i % 3) for i in range(30)),
                               "first.csv"), ex.data.error
    before = ex.data.dataset
    arrays = engine.io.model_arrays(_fitted("bayesian"))
    arrays["free_vector"] = np.full_like(arrays["free_vector"], np.nan)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    assert ex.data.load_upload(buf.getvalue(), "nan.npz")
    assert doc.run_until(lambda: ex.data.error != "")
    assert "'nan.npz'" in ex.data.error and "NaN" in ex.data.error, ex.data.error
    assert ex.data.dataset is before and ex.training.opened == "" and ex.training.message == ""
