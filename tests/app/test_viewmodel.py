"""ExplorerState against the real engine and data layer (no browser)."""
from __future__ import annotations

import time

import numpy as np
import pytest

from gplvm_explorer.session import TrainingLimiter, TrainingSession
from gplvm_explorer.viewmodel import ExplorerState

pytestmark = pytest.mark.timeout(300)


def poll_until(vm, cond, timeout=180.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        vm.poll()
        if cond():
            return True
        time.sleep(0.05)
    vm.poll()
    return cond()


@pytest.fixture
def vm():
    state = ExplorerState(session=TrainingSession(limiter=TrainingLimiter(2), predict_interval=0.2))
    yield state
    state.close()
    state.session.join(30)


def test_first_open_has_default_sample_and_sensible_preset(vm):
    assert vm.dataset is not None
    assert vm.sample == "rotating-glyph" and vm.dataset.image_shape == (16, 16)
    assert vm.model == "bayesian" and vm.kernel == "rbf"
    assert vm.config_errors == []


def test_train_receives_snapshots_then_stop_and_reconstruct(vm):
    vm.max_iters = 2000
    assert vm.train(), vm.train_message
    # several polls see the history grow: live, not one batch at the end
    seen = []
    assert poll_until(vm, lambda: (seen.append(len(vm.objective_buffer.data))
                                   or len({n for n in seen if n > 0}) >= 2))
    assert vm.train_state in ("running", "starting")
    assert len({n for n in seen if n > 0}) >= 2 and seen == sorted(seen)
    assert vm.model_Q == vm.latent_dim
    assert len(vm.ard_pipe.data) == vm.latent_dim
    assert "Iteration" in vm.progress_text and "it/s" in vm.progress_text
    assert poll_until(vm, lambda: vm.image_pipe.data is not None)
    vm.stop()
    assert poll_until(vm, lambda: vm.train_state == "stopped")
    assert vm.summary_text and "ELBO" in vm.summary_text
    # a Tap at a latent location -> reconstruction of the right shape
    x0, y0, x1, y1 = vm.latent_extent()
    vm.tap.event(x=(x0 + x1) / 2, y=(y0 + y1) / 2)
    rec = vm.reconstruction
    assert rec is not None
    assert rec.mean.shape == (256,) and rec.mean_image.shape == (16, 16)
    assert rec.nearest_image.shape == (16, 16)
    assert np.all(np.isfinite(rec.mean)) and rec.variance >= 0
    assert vm.recon_pipe.data is rec
    # exports
    csv = vm.latents_csv().decode().splitlines()
    assert csv[0].startswith("index,label,x1") and len(csv) == vm.dataset.n + 1
    assert vm.latent_png()[:8] == b"\x89PNG\r\n\x1a\n"
    npz = vm.model_npz()
    assert npz[:2] == b"PK"


def test_profile_reconstruction_for_non_image_data(vm):
    vm.sample = "three-phase-flow"
    assert vm.dataset.image_shape is None
    vm.model, vm.latent_dim, vm.num_inducing, vm.max_iters = "sparse", 2, 10, 3
    assert vm.train()
    assert poll_until(vm, lambda: vm.train_state == "finished")
    rec = vm.reconstruct_at(0.0, 0.0)
    assert rec.mean.shape == (vm.dataset.d,) and rec.std.shape == (vm.dataset.d,)
    assert not rec.is_image


def test_busy_limit_message(vm):
    limiter = vm.session._limiter
    for _ in range(limiter.limit):
        assert limiter.try_acquire()
    try:
        assert vm.train() is False
        assert vm.train_message_kind == "warning" and "busy" in vm.train_message
        assert vm.train_state == "idle"
    finally:
        for _ in range(limiter.limit):
            limiter.release()


def test_error_in_training_thread_is_shown_and_app_stays_usable(vm):
    from engine.errors import NumericalError

    def failing(Y, config):
        raise NumericalError("Cholesky factorisation of Kmm failed.")

    vm.session._factory = failing
    assert vm.train()
    assert poll_until(vm, lambda: vm.train_state == "error")
    assert vm.train_message_kind == "danger"
    assert "Cholesky" in vm.train_message and "standardise" in vm.train_message
    # usable afterwards: the real factory trains again
    from gplvm_explorer.session import build_model

    vm.session._factory = build_model
    vm.max_iters = 2
    assert vm.train()
    assert poll_until(vm, lambda: vm.train_state == "finished")


def test_bad_upload_keeps_previous_data_and_good_csv_loads(vm):
    before = vm.dataset
    assert vm.load_upload(b"a,b,c\n1,2\n\x00\x01garbage", "broken.csv") is False
    assert vm.data_error
    assert vm.dataset is before
    csv = "f1,f2,f3,label\n" + "\n".join(f"{i},{i * 2 % 7},{(i * 3) % 5},{'ab'[i % 2]}" for i in range(20))
    assert vm.load_upload(csv.encode(), "good.csv"), vm.data_error
    assert vm.data_error == ""
    assert vm.dataset.n == 20 and vm.dataset.d == 3
    assert vm.label_column == "label" and vm.dataset.labels is not None


def test_impossible_combination_is_adjusted_and_explained(vm):
    vm.model = "gplvm"
    vm.kernel = "mlp"
    assert vm.config_errors == []
    vm.model = "bayesian"
    assert vm.kernel == "rbf"
    assert vm.config_notes and "MLP" in vm.config_notes[0]
    # M > N is prevented: the parameter (and so the widget) is bounded by N
    with pytest.raises(ValueError):
        vm.num_inducing = vm.dataset.n + 1
    vm.num_inducing = vm.dataset.n
    assert vm.config_errors == []


def test_sample_picker_names_the_uploaded_file_and_switches_back_to_it(vm):
    from gplvm_explorer.viewmodel import UPLOADED_FILE

    # before any upload, picking the "uploaded file" entry explains and keeps the data
    before = vm.dataset
    vm.sample = UPLOADED_FILE
    assert "No file uploaded yet" in vm.data_error
    assert vm.dataset is before and vm.sample == "rotating-glyph"
    csv = "x,y,z,label\n" + "\n".join(f"{i},{i * i % 7},{(3 * i) % 5},{i % 2}" for i in range(12))
    assert vm.load_upload(csv.encode(), "mine.csv"), vm.data_error
    assert vm.sample == UPLOADED_FILE  # the picker no longer claims a bundled sample is loaded
    uploaded_shape = vm.dataset.values.shape
    vm.sample = "swiss-roll"
    assert vm.dataset.name == "swiss-roll"
    vm.sample = UPLOADED_FILE
    assert vm.dataset.values.shape == uploaded_shape and vm.data_source == "upload"
