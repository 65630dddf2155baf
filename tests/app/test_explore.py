"""gplvm_explorer.explore: the served page, preloaded from an array, a DataFrame or a path."""
from __future__ import annotations

import numpy as np
import pytest
from bokeh.document import Document
from bokeh.model import Model

import gplvm_explorer
from gplvm_explorer.data import DataError

pd = pytest.importorskip("pandas")


def _data(n=60, d=4, seed=0):
    rng = np.random.default_rng(seed)
    t = rng.uniform(-2, 2, size=(n, 1))
    return np.hstack([np.sin(t * (j + 1)) for j in range(d)]) + 0.05 * rng.standard_normal((n, d))


def _render(app) -> Document:
    doc = app.server_doc(Document())
    assert doc.roots and all(isinstance(r, Model) for r in doc.roots)
    return doc


def _texts(doc) -> str:
    out = []
    for root in doc.roots:
        for m in root.references():
            for attr in ("text", "label", "title"):
                v = getattr(m, attr, None) if attr in m.properties() else None
                if isinstance(v, str):
                    out.append(v)
    return "\n".join(out)


@pytest.fixture
def close_all():
    apps = []
    yield apps
    for app in apps:
        app.explorer.close()


def test_explore_is_exported_lazily():
    assert callable(gplvm_explorer.explore)


def test_from_array_renders_with_settings(close_all):
    Y = _data()
    labels = np.repeat([0, 1, 2], 20)
    app = gplvm_explorer.explore(Y, labels=labels, model="bayesian", latent_dim=3, num_inducing=12,
                                 kernel="rbf", init="random", optimizer="adam", max_iters=7, seed=4)
    close_all.append(app)
    ex = app.explorer
    assert ex.data.dataset.n == 60 and ex.data.dataset.d == 4
    np.testing.assert_array_equal(ex.data.dataset.labels, labels)
    cfg = ex.settings.config()
    assert (cfg.model, cfg.latent_dim, cfg.num_inducing, cfg.init, cfg.optimizer, cfg.max_iters, cfg.seed) == \
        ("bayesian", 3, 12, "random", "adam", 7, 4)
    assert ex.settings.errors == []
    doc = _render(app)
    assert "N = 60 points" in _texts(doc)


def test_from_dataframe_offers_category_columns_as_labels(close_all):
    Y = _data(n=45)
    df = pd.DataFrame(Y, columns=["a", "b", "c", "d"])
    df["kind"] = pd.Categorical(np.repeat(["x", "y", "z"], 15))
    df["note"] = ["n"] * 45
    app = gplvm_explorer.explore(df, latent_dim=2)
    close_all.append(app)
    ds = app.explorer.data.dataset
    assert ds.n == 45 and ds.feature_names == ["a", "b", "c", "d"]
    assert ds.label_name == "kind" and set(ds.labels) == {"x", "y", "z"}
    assert "kind" in app.explorer.data.param.label_column.objects
    assert app.explorer.settings.latent_dim == 2
    # choosing another label column on the page reloads the frame
    app.explorer.data.label_column = "note"
    assert app.explorer.data.dataset.label_name == "note"
    _render(app)


def test_dataframe_label_by_name_and_missing_values(close_all):
    df = pd.DataFrame(_data(n=30, d=3), columns=["u", "v", "w"])
    df.loc[3, "v"] = np.nan
    df["group"] = np.repeat([1, 2], 15)
    app = gplvm_explorer.explore(df, labels="group")
    close_all.append(app)
    ds = app.explorer.data.dataset
    assert ds.d == 3 and ds.n_missing == 1 and ds.label_name == "group"
    _render(app)


def test_from_paths(tmp_path, close_all):
    Y = _data(n=40, d=3)
    csv = tmp_path / "points.csv"
    np.savetxt(csv, Y, delimiter=",", header="p,q,r", comments="")
    npy = tmp_path / "points.npy"
    np.save(npy, Y)
    for path in (csv, str(npy)):
        app = gplvm_explorer.explore(path, model="gplvm", latent_dim=2)
        close_all.append(app)
        ex = app.explorer
        assert ex.data.dataset.n == 40 and ex.settings.model == "gplvm"
        doc = _render(app)
        assert "N = 40 points" in _texts(doc)
        assert ex.data.dataset.name.startswith("points")


def test_standardize_option(close_all):
    app = gplvm_explorer.explore(_data() * 10 + 3, standardize=True)
    close_all.append(app)
    assert app.explorer.data.standardize and app.explorer.data.dataset.scale is not None


@pytest.mark.parametrize("bad", [
    np.arange(10.0),  # 1-D
    np.array([["a", "b"], ["c", "d"]]),
    np.ones((40, 1)),
    np.array([[1.0, np.inf]] * 10),
])
def test_bad_arrays_raise_data_error(bad):
    with pytest.raises(DataError):
        gplvm_explorer.explore(bad)


def test_bad_path_and_frame_raise_data_error(tmp_path):
    with pytest.raises(DataError, match="not found"):
        gplvm_explorer.explore(tmp_path / "nope.csv")
    (tmp_path / "x.xlsx").write_bytes(b"PK\x03\x04")
    with pytest.raises(DataError, match="Unsupported"):
        gplvm_explorer.explore(tmp_path / "x.xlsx")
    with pytest.raises(DataError, match="not found"):
        gplvm_explorer.explore(pd.DataFrame(_data(n=20)), labels="missing")
    with pytest.raises(DataError, match="numeric"):
        gplvm_explorer.explore(pd.DataFrame({"s": ["a"] * 10, "t": ["b"] * 10}))


def test_unknown_or_bad_setting():
    with pytest.raises(TypeError, match="latent_dims"):
        gplvm_explorer.explore(_data(), latent_dims=3)
    with pytest.raises(ValueError, match="model"):
        gplvm_explorer.explore(_data(), model="no-such-model")


def test_servable_returns_the_page(close_all):
    app = gplvm_explorer.explore(_data())
    close_all.append(app)
    assert app.servable() is app
