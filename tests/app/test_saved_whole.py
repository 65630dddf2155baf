"""A saved model reopens as it was: column names, labels, image shape, standardisation, trace, settings."""
from __future__ import annotations

import dataclasses
import io
import zipfile

import numpy as np
import pytest

from gplvm_explorer import export, fit_command, saved_model
from gplvm_explorer.saved_context import ENTRIES, SavedContext, context_arrays, read_context
from userdata import image_csv, mixed_units_csv

pytestmark = pytest.mark.timeout(300)

SETTINGS = ("model", "kernel", "bias", "white", "latent_dim", "num_inducing", "init", "optimizer", "max_iters",
            "seed")


def _trained(make_explorer, pump, content, name, **settings):
    ex = make_explorer(publish_interval=0.0)
    assert ex.data.load_upload(content, name), ex.data.error
    for key, value in settings.items():
        setattr(ex.settings, key, value)
    assert ex.train(), ex.training.message
    assert pump(ex, lambda: ex.training.status == "finished", timeout=240)
    return ex


def _reopened(make_explorer, content):
    ex = make_explorer(publish_interval=0.0)
    assert ex.data.load_upload(content, "model.npz"), ex.data.error
    assert ex.training.opened == "model.npz" and ex.training.status == "finished"
    return ex


@pytest.mark.parametrize("content,name,settings", [
    (mixed_units_csv(), "wine-like.csv", dict(latent_dim=3, num_inducing=12, init="random", seed=3, max_iters=25)),
    (image_csv(), "my-digits.csv", dict(model="sparse", latent_dim=4, num_inducing=10, bias=False, max_iters=20,
                                        optimizer="scg")),
])
def test_a_model_saved_on_the_page_reopens_as_it_was(make_explorer, pump, content, name, settings):
    ex = _trained(make_explorer, pump, content, name, **settings)
    before, result = ex.data.dataset, ex.training.result
    trace = ex.training.trace.data.copy()
    assert len(trace) > 5 and result.iteration == ex.training.iteration > 5
    saved = export.model_npz(result, trace)

    again = _reopened(make_explorer, saved)
    ds = again.data.dataset
    assert ds.feature_names == before.feature_names  # not x1, x2, ...
    assert ds.image_shape == before.image_shape and ds.label_name == before.label_name
    np.testing.assert_array_equal(ds.labels, before.labels)
    np.testing.assert_array_equal(ds.values, before.values)
    for attr in ("mean", "scale"):
        got, want = getattr(ds, attr), getattr(before, attr)
        assert (got is None) == (want is None) and (want is None or np.array_equal(got, want)), attr
    assert again.data.standardize == ex.data.standardize
    np.testing.assert_array_equal(again.training.trace.data["iteration"], trace["iteration"])
    np.testing.assert_array_equal(again.training.trace.data["objective"], trace["objective"])
    assert again.training.result.iteration == again.training.iteration == result.iteration
    assert f"Iterations: {result.iteration};" in again.summary
    for key in SETTINGS:
        assert getattr(again.settings, key) == getattr(ex.settings, key), key
    # the reconstruction is in the file's units, as before
    point = np.asarray(result.X_mean[:1])
    np.testing.assert_allclose(ds.unstandardize(again.training.result.predict(point)[0]),
                               before.unstandardize(result.predict(point)[0]), rtol=1e-9, atol=1e-9)
    # and saved again, nothing is lost
    twice = _reopened(make_explorer, export.model_npz(again.training.result, again.training.trace.data))
    assert twice.data.dataset.feature_names == before.feature_names and len(twice.training.trace.data) == len(trace)


def test_a_model_fitted_on_the_command_line_reopens_with_its_names_images_and_trace(tmp_path, make_explorer, capsys):
    data = tmp_path / "my-digits.csv"
    data.write_bytes(image_csv())
    out = tmp_path / "model.npz"
    code = fit_command.main([str(data), "--label", "label", "--latent-dim", "3", "--num-inducing", "10",
                             "--max-iters", "15", "--init", "random", "--seed", "4", "--standardize",
                             "-o", str(out), "--quiet"])
    assert code == 0, capsys.readouterr().err
    model = saved_model.load(out)
    ctx = read_context(out, 90, 64)
    assert ctx.image_shape == (8, 8) and ctx.feature_names[:2] == ("pixel_0_0", "pixel_0_1")
    assert ctx.scale is not None and ctx.label_name == "label" and list(ctx.labels[:1]) == ["bar"]
    assert ctx.iterations == len(ctx.trace_iteration) > 5 and ctx.settings["seed"] == 4
    ex = make_explorer()
    assert ex.open_saved(lambda: (model, ctx), "model.npz")
    ds = ex.data.dataset
    assert ds.image_shape == (8, 8) and ds.feature_names == list(ctx.feature_names) and ds.scale is not None
    assert ex.settings.init == "random" and ex.settings.seed == 4 and ex.settings.max_iters == 15
    assert len(ex.training.trace.data) == ctx.iterations and ex.training.iteration == ctx.iterations


def _with_entries(model_bytes: bytes, **entries) -> bytes:
    """The saved file with ``entries`` (name -> array) added or replaced."""
    arrays = dict(np.load(io.BytesIO(model_bytes), allow_pickle=False))
    arrays.update(entries)
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def test_entries_that_do_not_fit_are_left_out_and_old_files_open(make_explorer, pump, caplog):
    ex = _trained(make_explorer, pump, image_csv(), "my-digits.csv", max_iters=5)
    good = export.model_npz(ex.training.result, ex.training.trace.data)
    bad = _with_entries(good, **{ENTRIES["image_shape"]: np.array([7, 9]),
                                 ENTRIES["feature_names"]: np.array(["a", "b"]),
                                 ENTRIES["mean"]: np.zeros(64), ENTRIES["scale"]: np.zeros(64),
                                 ENTRIES["settings"]: np.array("[1, 2]"),
                                 ENTRIES["trace_objective"]: np.zeros(3)})
    ctx = read_context(bad, 90, 64)
    assert ctx.image_shape is None and ctx.feature_names is None and ctx.scale is None and ctx.settings is None
    assert ctx.trace_iteration is None and ctx.labels is not None and ctx.iterations == 5
    assert sum("not used" in r.message for r in caplog.records) == 5
    again = _reopened(make_explorer, bad)
    assert again.data.dataset.feature_names[:2] == ["x1", "x2"] and again.data.dataset.image_shape is None
    # a file written before the app added anything but labels (or not even those)
    with zipfile.ZipFile(io.BytesIO(good)) as z:
        unscaled = {e for k, e in ENTRIES.items() if k not in ("mean", "scale")}  # images: not standardised
        assert {f"{e}.npy" for e in unscaled} <= set(z.namelist())
    plain = io.BytesIO()
    from engine.io import save_model
    save_model(ex.training.result.model, plain)
    old = _reopened(make_explorer, plain.getvalue())
    assert old.training.iteration == 0 and len(old.training.trace.data) == 0
    nothing = read_context(plain.getvalue(), 90, 64)
    assert all(getattr(nothing, f.name) is None for f in dataclasses.fields(SavedContext))


def test_the_context_entries_are_plain_arrays():
    ctx = SavedContext(feature_names=("a", "b"), labels=np.array(["x", "y"], dtype=object), label_name="kind",
                       image_shape=(1, 2), mean=np.zeros(2), scale=np.ones(2), trace_iteration=np.arange(3.0),
                       trace_objective=np.ones(3), iterations=3, settings={"seed": 1})
    arrays = context_arrays(ctx)
    assert all(isinstance(a, np.ndarray) and not a.dtype.hasobject for a in arrays.values())
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    back = read_context(buf.getvalue(), 2, 2)
    assert back.feature_names == ("a", "b") and list(back.labels) == ["x", "y"] and back.image_shape == (1, 2)
    assert back.settings == {"seed": 1} and back.iterations == 3
