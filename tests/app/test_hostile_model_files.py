"""Hostile model files uploaded to the page: each refused with a message in the Data card, before anything
of the size it describes is allocated, and the data and result on show stay exactly as they were."""
from __future__ import annotations

import io

import numpy as np
import pytest

import engine
from crafted_models import HOSTILE, small_arrays
from engine.io import save_model
from gplvm_explorer import saved_model
from gplvm_explorer.catalog import Budget
from gplvm_explorer.data import DataError
from gplvm_explorer.explorer import Explorer
from gplvm_explorer.training import Limiter
from quiet_tracing import traced_peak

pytestmark = pytest.mark.timeout(300)

#: A session budget that does not depend on this machine's memory.
BUDGET = Budget(memory_bytes=2e9, seconds_per_iteration=60.0)


def _good_model_bytes() -> bytes:
    rng = np.random.default_rng(3)
    Y = np.hstack([np.sin(rng.uniform(-2, 2, (40, 1)) * (j + 1)) for j in range(5)])
    model = engine.BayesianGPLVM(Y, 2, num_inducing=6)
    engine.fit(model, max_iters=5)
    buf = io.BytesIO()
    save_model(model, buf)
    return buf.getvalue()


def _page_state(ex) -> dict:
    """Everything a refusal must leave as it was."""
    tr = ex.training
    return {"dataset": ex.data.dataset, "values": ex.data.dataset.values.copy(), "labels": ex.data.labels,
            "sample": ex.data.sample, "upload_name": ex.data.upload_name, "result": tr.result,
            "X_mean": None if tr.result is None else tr.result.X_mean.copy(), "status": tr.status,
            "opened": tr.opened, "objective": tr.objective, "config": ex.settings.config(),
            "result_source": ex.result_source}


def _assert_same(before: dict, after: dict) -> None:
    for key, value in before.items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(after[key], value, err_msg=key)
        else:
            assert after[key] is value or after[key] == value, key


@pytest.fixture
def opened_page():
    """A page showing an opened model (data and a result) to lose."""
    ex = Explorer(limiter=Limiter(2), budget=BUDGET)
    assert ex.data.load_upload(_good_model_bytes(), "good.npz"), ex.data.error
    assert ex.training.result is not None and ex.training.opened == "good.npz"
    prepared = ex.training.prepared  # the start of the next Train, evaluated in the background
    assert prepared is None or prepared.wait(60)
    yield ex
    ex.close()


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_model_file_is_refused_with_a_message_and_the_page_kept(opened_page, name):
    make, phrase = HOSTILE[name]
    content = make()
    assert len(content) < 200_000  # small files, every one
    ex = opened_page
    before = _page_state(ex)
    refused, peak = traced_peak(lambda: ex.data.load_upload(content, f"{name}.npz"))
    assert refused is False
    assert phrase in ex.data.error and f"{name}.npz" in ex.data.error, ex.data.error
    assert peak < 50e6, f"{peak / 1e6:.0f} MB allocated before the refusal"
    _assert_same(before, _page_state(ex))
    # and the page still works: the next good file opens
    assert ex.data.load_upload(_good_model_bytes(), "again.npz") and ex.training.opened == "again.npz"
    assert ex.data.error == ""


def test_the_size_guard_is_the_trainings_own(opened_page):
    """What the page would refuse to train, it refuses to open, with the same figures."""
    ex = opened_page
    ex.data.load_upload(HOSTILE["exact-20k"][0](), "exact.npz")
    assert ex.data.error == ("'exact.npz' is too big to open here: the GP-LVM (exact) on N=20,000 points needs "
                             "about 12.9 GB of memory, more than the 2.0 GB a session may use.")
    ok = Explorer(limiter=Limiter(2), budget=Budget(memory_bytes=20e9, seconds_per_iteration=1e6))
    try:  # a bigger budget opens the same kind of model when it fits: the guard is the budget, not a fixed size
        model = saved_model.load(HOSTILE["bayesian-4000-inducing"][0](), "b.npz", budget=ok.settings.budget)
    except DataError as exc:
        assert "inducing points are more than its N=100 data rows" in str(exc)  # M > N: never, as in training
    else:
        pytest.fail(f"opened {model!r}")
    finally:
        ok.close()


def test_a_model_whose_objective_cannot_be_evaluated_keeps_the_page(opened_page, monkeypatch):
    """A failure after loading (here: the bound cannot be evaluated) still changes nothing on the page."""
    ex = opened_page
    before = _page_state(ex)

    def fail(self):
        raise engine.NumericalError("The inducing-point kernel matrix Kmm could not be factorised.")

    monkeypatch.setattr(engine.BayesianGPLVM, "objective", fail)
    buf = io.BytesIO()
    np.savez(buf, **small_arrays())
    assert ex.data.load_upload(buf.getvalue(), "unfit.npz") is False
    assert "Could not open 'unfit.npz'" in ex.data.error and "could not be factorised" in ex.data.error
    _assert_same(before, _page_state(ex))
