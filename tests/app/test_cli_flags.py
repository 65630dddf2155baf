"""`gplvm-explorer FILE --label/--model/--latent-dim/--num-inducing/--dask-scheduler`."""
from __future__ import annotations

import json

import numpy as np
import pytest

from gplvm_explorer import cli, serving


def _csv(tmp_path, n=40):
    rng = np.random.default_rng(0)
    path = tmp_path / "pts.csv"
    rows = ["a,b,c,group"] + [f"{x:.4f},{y:.4f},{z:.4f},{'gh'[i % 2]}" for i, (x, y, z)
                              in enumerate(rng.standard_normal((n, 3)))]
    path.write_text("\n".join(rows) + "\n")
    return path


def test_flags_parse():
    args = cli.parse_args(["f.csv", "--label", "group", "--model", "bayesian", "--latent-dim", "3",
                           "--num-inducing", "12", "--dask-scheduler", "tcp://h:8786", "--show"])
    assert (args.file, args.label, args.model, args.latent_dim, args.num_inducing, args.dask_scheduler, args.show) \
        == ("f.csv", "group", "bayesian", 3, 12, "tcp://h:8786", True)
    assert cli.page_settings(args) == {"model": "bayesian", "latent_dim": 3, "num_inducing": 12}


@pytest.mark.parametrize("flags, message, code", [
    (["--latent-dim", "99"], "latent_dim", 2),
    (["--model", "nope"], "model", 2),
    (["--label", "nope"], "not found", 3),  # FILE has no such column: the file cannot be used so
])
def test_bad_flags_exit_with_a_message(tmp_path, capsys, flags, message, code):
    assert cli.main([str(_csv(tmp_path)), *flags]) == code
    assert message in capsys.readouterr().err


def test_unreachable_dask_scheduler_is_a_clear_error(tmp_path, capsys):
    pytest.importorskip("distributed")
    assert cli.main([str(_csv(tmp_path)), "--dask-scheduler", "tcp://127.0.0.1:9", "--port", "65533"]) == 2
    assert "dask scheduler at tcp://127.0.0.1:9" in capsys.readouterr().err


def test_session_page_loads_the_file_with_label_and_settings(tmp_path, monkeypatch):
    path = _csv(tmp_path, n=50)
    monkeypatch.setenv(serving.PRELOAD_ENV, str(path))
    monkeypatch.setenv(serving.SETTINGS_ENV, json.dumps({"latent_dim": 4, "num_inducing": 9, "label": "group"}))
    page = cli.session_page()
    try:
        ex = page.explorer
        assert ex.data.dataset.n == 50 and ex.data.dataset.label_name == "group"
        assert (ex.settings.latent_dim, ex.settings.num_inducing) == (4, 9)
        assert not ex.data.dataset.values.flags.writeable  # shared between sessions, read-only
        ex.data.standardize = True  # the page's own options still work on the file
        assert ex.data.dataset.scale is not None and ex.data.error == ""
    finally:
        page.explorer.close()


def test_dask_builder_puts_the_distributable_models_on_the_cluster():
    distributed = pytest.importorskip("distributed")
    import engine
    from gplvm_explorer.catalog import CATALOG, ModelConfig
    from gplvm_explorer.cluster import dask_builder

    rng = np.random.default_rng(1)
    Y = rng.standard_normal((30, 3))
    holey = Y.copy()
    holey[rng.random(Y.shape) < 0.2] = np.nan
    holey[0] = Y[0]  # every row keeps an observed cell
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=1, dashboard_address=None) as client:
        build = dask_builder(client)
        assert {k for k, s in CATALOG.items() if s.distributable} == {"bayesian", "sparse"}
        for key in ("bayesian", "sparse"):
            for data in (Y, holey):
                model = build(data, ModelConfig(model=key, latent_dim=2, num_inducing=5, max_iters=1))
                assert isinstance(model.backend, engine.DaskBackend), (key, np.isnan(data).any())
                assert np.isfinite(model.objective())
        other = build(Y, ModelConfig(model="gplvm", latent_dim=2, num_inducing=5, max_iters=1))
        assert getattr(other, "backend", None) is None
        # a configuration the cluster backend refuses (missing data, linear kernel) trains in process
        linear = build(holey, ModelConfig(model="bayesian", kernel="linear", latent_dim=2, num_inducing=5,
                                          max_iters=1))
        assert getattr(linear, "backend", None) is None or not isinstance(linear.backend, engine.DaskBackend)
        assert np.isfinite(linear.objective())
