"""The Viewer components, without a browser: they follow the view-model."""
from __future__ import annotations

import time

import holoviews as hv
import numpy as np
import pytest

from gplvm_explorer.app import create_app
from gplvm_explorer.session import TrainingLimiter, TrainingSession
from gplvm_explorer.viewmodel import ExplorerState
from gplvm_explorer.views import (
    ARDPlot, DataPanel, ExportPanel, LatentMap, ModelPanel, ObjectivePlot, ReconstructionView, StatusBar,
    TrainingPanel,
)
from gplvm_explorer.views.training_plots import zoom_range

pytestmark = pytest.mark.timeout(120)


def trained_vm(fake_factory, sample="rotating-glyph", iters=15):
    vm = ExplorerState(session=TrainingSession(limiter=TrainingLimiter(2), model_factory=fake_factory(),
                                               predict_interval=0.0))
    if sample != vm.sample:
        vm.sample = sample
    vm.model, vm.latent_dim, vm.max_iters = "gplvm", 3, iters
    assert vm.train()
    deadline = time.monotonic() + 30
    while vm.training_active and time.monotonic() < deadline:
        vm.poll()
        time.sleep(0.02)
    vm._next_heavy = 0
    vm.poll()
    assert vm.train_state == "finished"
    return vm


def test_create_app_builds_a_page_per_call():
    a, b = create_app(), create_app()
    assert a.vm is not b.vm and a.vm.session is not b.vm.session
    assert a.vm.dataset is not None


def test_training_views_follow_state(fake_factory):
    vm = ExplorerState(session=TrainingSession(limiter=TrainingLimiter(1), model_factory=fake_factory(delay=0.02)))
    tp, sb = TrainingPanel(vm=vm), StatusBar(vm=vm)
    assert not tp.train_btn.disabled and tp.stop_btn.disabled
    vm.model, vm.max_iters = "gplvm", 10_000
    vm.train()
    vm.poll()
    assert tp.train_btn.disabled and not tp.stop_btn.disabled
    vm.pause()
    assert tp.pause_btn.label.endswith("Resume")
    vm.stop()
    vm.session.join(5)
    vm._next_heavy = 0
    vm.poll()
    assert not tp.train_btn.disabled
    assert "stopped" in sb.text.object


def test_data_panel_shows_error_and_keeps_summary():
    vm = ExplorerState()
    dp = DataPanel(vm=vm)
    before = dp.summary.object
    vm.load_upload(b"\x00\x01\x02", "junk.npy")
    assert dp.error.visible and "junk.npy" in dp.error.object
    assert dp.summary.object == before


def test_model_panel_offers_only_supported_kernels():
    vm = ExplorerState()
    mp = ModelPanel(vm=vm)
    assert set(mp.kernel.options.values()) == {"rbf", "linear"}
    vm.model = "gplvm"
    assert "mlp" in mp.kernel.options.values()
    assert not mp.num_inducing.visible


def test_plots_render_after_training_and_reconstruction(fake_factory):
    vm = trained_vm(fake_factory)
    latent, recon = LatentMap(vm=vm), ReconstructionView(vm=vm)
    ard, obj, exp = ARDPlot(vm=vm), ObjectivePlot(vm=vm), ExportPanel(vm=vm, latent_map=latent)
    for view in (latent, recon, ard):
        hv.render(view.plot.object if hasattr(view, "plot") else view.body[0][0].object)
    assert len(vm.ard_pipe.data) == 3
    assert len(vm.objective_buffer.data) == 15
    # the objective curve streams only new points into its source
    assert len(obj.source.data["objective"]) == 15  # built after the fit: starts with the history
    import pandas as pd
    vm.objective_buffer.send(pd.DataFrame({"iteration": [16.0, 17.0], "objective": [1.0, 2.0]}))
    assert list(obj.source.data["iteration"])[-3:] == [15.0, 16.0, 17.0]
    vm.objective_buffer.clear()
    assert len(obj.source.data["iteration"]) == 0
    assert vm.label_colours and latent.legend.object  # a colour key per label
    x0, y0, x1, y1 = vm.latent_extent()
    vm.tap.event(x=(x0 + x1) / 2, y=(y0 + y1) / 2)
    assert recon._kind == ("image", (16, 16))
    hv.render(recon.body[0][0].object)
    assert not exp.csv.disabled and not exp.png.disabled
    assert "model summary" in exp.summary.value
    html = exp._html().getvalue()
    assert b"<html" in html.lower()[:2000]


def test_profile_reconstruction_view_for_tabular_data(fake_factory):
    vm = trained_vm(fake_factory, sample="three-phase-flow", iters=3)
    recon = ReconstructionView(vm=vm)
    vm.reconstruct_at(0.0, 0.0)
    assert recon._kind == ("profile", vm.dataset.d)
    hv.render(recon.body[0].object)


def test_continuous_labels_are_binned_for_colour():
    labels = np.linspace(0, 1, 50)
    out = ExplorerState.colour_labels(labels, 50)
    assert 2 <= len(set(out)) <= 8
    assert ExplorerState.colour_labels(None, 3).tolist() == ["all points"] * 3


def test_zoom_range_skips_the_first_iterations():
    v = np.r_[-1e6, -1e5, np.linspace(-100, 0, 40)]
    lo, hi = zoom_range(v)
    assert -120 < lo < -100 and hi > 0
    assert zoom_range([1.0, 2.0]) == (None, None)
