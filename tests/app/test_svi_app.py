"""The SVI model in the app: catalog entry, the big-data proposal, memory-mapped command-line files, epochs.

Fits are tiny: these check the plumbing, not the model's quality (tests/engine and benchmarks/ do that).
"""
from __future__ import annotations

import dataclasses
import html
import types

import numpy as np
import pytest

from gplvm_explorer import serving
from gplvm_explorer.catalog import (CATALOG, PROPOSE_ABOVE_SECONDS, ModelConfig, StartTiming, check, estimate, spec,
                                    suggestion, format_seconds)
from gplvm_explorer.data import Dataset
from gplvm_explorer.data.mapped import training_dataset
from gplvm_explorer.data.npfile import map_npy
from gplvm_explorer.explorer import Explorer
from gplvm_explorer.state.settings import ModelSettings
from gplvm_explorer.training import Limiter, ProgressEvent, ResultEvent, StatusEvent, Status, TrainingJob
from gplvm_explorer.views.controls import progress_text
from gplvm_explorer.views.svi import MinibatchPanel


def _blobs(n, d, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 2))
    return np.tanh(X @ rng.standard_normal((2, d))) + 0.05 * rng.standard_normal((n, d))


# ---- catalog --------------------------------------------------------------------------------------
def test_catalog_entry_trains_by_minibatches_with_its_own_optimiser():
    s = spec("svi")
    assert s.objective_name == "ELBO" and s.minibatch and s.optimizers == ("svi",)
    assert s.uses_inducing and s.uncertain_latents and s.engine_class == "StochasticBayesianGPLVM"
    # the cost of an iteration does not grow with the number of rows
    assert s.cost(10**4, 12, 5, 30).seconds_per_iteration == s.cost(10**7, 12, 5, 30).seconds_per_iteration
    assert "batch=128" in ModelConfig(model="svi", optimizer="svi", batch_size=128).describe()
    errors, _ = check(ModelConfig(model="svi", optimizer="lbfgs"), 1000, 12)
    assert errors and "trains with" in errors[0]
    errors, _ = check(ModelConfig(model="bayesian", optimizer="svi"), 1000, 12)
    assert errors
    # the full-batch models keep their optimisers
    assert all("svi" not in m.optimizers for k, m in CATALOG.items() if not m.minibatch)


def test_collapsed_entry_says_where_it_stops_being_comfortable():
    """Comfortable: a run until converged within PROPOSE_ABOVE_SECONDS (and the memory within bounds)."""
    s, cfg = spec("bayesian"), ModelConfig()
    rows = s.comfortable_rows(cfg, 12)
    assert 10**3 < rows < 10**6
    assert estimate(cfg, rows, 12).seconds <= PROPOSE_ABOVE_SECONDS < estimate(cfg, rows + 1, 12).seconds
    assert s.cost(rows, 12, 5, 30).memory_bytes <= s.comfortable.memory_bytes
    assert suggestion(cfg, rows + 1, 12) == "svi"
    assert suggestion(cfg, rows, 12) == ""
    assert suggestion(ModelConfig(model="svi", optimizer="svi"), 10**7, 12) == ""
    # a run with a fixed number of iterations: its length is what is estimated
    short = ModelConfig(max_iters=10, until_converged=False)
    assert suggestion(short, rows + 1, 12) == "" and s.comfortable_rows(short, 12) > 10 * rows  # memory then


def test_a_measured_start_scales_every_estimate_and_moves_the_proposal():
    """The page times the start it prepares: the timed model's estimate is that timing, the others'
    are scaled by the same factor, and the rows where the proposal begins move with it."""
    cfg = ModelConfig()
    n, d = 20000, 12
    formula = estimate(cfg, n, d)
    assert not formula.measured
    slow = StartTiming(config=cfg, n=n, d=d, seconds_per_evaluation=10 * formula.seconds_per_iteration / 1.1,
                       first_seconds=1.0, objective=0.0)
    timed = estimate(cfg, n, d, slow)
    assert timed.measured and timed.timed
    assert timed.seconds_per_iteration == pytest.approx(10 * formula.seconds_per_iteration)
    sparse = ModelConfig(model="sparse")
    assert estimate(sparse, n, d, slow).seconds_per_iteration == pytest.approx(
        10 * estimate(sparse, n, d).seconds_per_iteration)
    assert not estimate(sparse, n, d, slow).timed
    assert spec("bayesian").comfortable_rows(cfg, d, slow) < spec("bayesian").comfortable_rows(cfg, d) / 5
    # the timing's own run length does not matter, its model does
    assert estimate(dataclasses.replace(cfg, max_iters=7), n, d, slow).timed


def test_a_slow_machine_does_not_get_a_model_that_would_be_no_faster():
    """On a loaded machine a small data set's run takes minutes, and so would the stochastic model's:
    nothing is proposed then, since it would not finish in well under the time."""
    cfg, n, d = ModelConfig(), 1500, 10
    base = estimate(cfg, n, d)
    factor = 2 * PROPOSE_ABOVE_SECONDS / base.seconds  # this machine: the run takes four minutes
    slow = StartTiming(config=cfg, n=n, d=d, seconds_per_evaluation=factor * base.seconds_per_iteration / 1.1,
                       first_seconds=1.0, objective=0.0)
    svi = ModelConfig(model="svi", optimizer="svi")
    assert estimate(cfg, n, d, slow).seconds > PROPOSE_ABOVE_SECONDS
    assert estimate(svi, n, d, slow).seconds > estimate(cfg, n, d, slow).seconds / 2
    assert suggestion(cfg, n, d, slow) == ""
    assert suggestion(cfg, 50 * n, d, slow) == "svi"  # where the minibatches are far cheaper, it is


# ---- the proposal -----------------------------------------------------------------------------------
def _explorer_with(values, name="big.npy"):
    ex = Explorer(limiter=Limiter(1))
    ds = Dataset(values=values, name=name, feature_names=[f"x{j + 1}" for j in range(values.shape[1])])
    assert ex.data.load_given(lambda label, standardize: ds, name)
    return ex


def test_big_dataset_gets_the_svi_suggestion_and_a_small_one_does_not():
    rows = spec("bayesian").comfortable_rows(ModelConfig(), 3)
    big = _explorer_with(np.zeros((rows + 1000, 3)))
    panel = MinibatchPanel.of(big)
    assert big.settings.suggestion == "svi"
    assert panel.proposal.visible and panel.switch.visible
    text = html.unescape(panel.proposal.object)
    assert f"{rows + 1000:,} rows" in text and "until converged would take" in text and "Stochastic (SVI): ≈" in text
    assert not any("Proposed" in n for n in big.settings.notes)  # said once, beside its button
    panel.switch.clicks += 1  # "Use the proposed model"
    assert big.settings.model == "svi" and big.settings.optimizer == "svi"
    assert big.settings.suggestion == "" and not panel.proposal.visible and panel.batch.visible
    big.close()

    small = _explorer_with(_blobs(500, 3))
    panel = MinibatchPanel.of(small)
    assert small.settings.suggestion == "" and not panel.proposal.visible
    assert not any("Proposed" in n for n in small.settings.notes)
    small.close()


def test_the_status_line_points_at_the_proposal_until_a_run_starts():
    """The proposal sits in the Model card, below the sidebar's first screen on a laptop: the status line
    at the top says it is there (and what both runs would take) while the page waits for Train."""
    from gplvm_explorer.views import StatusBar

    rows = spec("bayesian").comfortable_rows(ModelConfig(), 3)
    big = _explorer_with(np.zeros((rows + 1000, 3)))
    bar = StatusBar.of(big)
    line = html.unescape(bar.text.object)
    mine, svi = big.settings.estimate(), big.settings.estimate("svi")
    assert (f"Big data: the Bayesian GP-LVM would take {format_seconds(mine.seconds)} until converged; the Model "
            f"card proposes Stochastic (SVI) ({format_seconds(svi.seconds)})." in line), line
    big.settings.model = "svi"  # taken: the line goes
    assert "Big data" not in html.unescape(bar.text.object)
    big.close()
    small = _explorer_with(_blobs(500, 3))
    assert "Big data" not in html.unescape(StatusBar.of(small).text.object)
    small.close()


def test_settings_switch_optimiser_with_the_model():
    s = ModelSettings()
    s.set_data_shape(1000, 6)
    s.model = "svi"
    assert s.optimizer == "svi" and s.errors == []
    s.model = "sparse"
    assert s.optimizer == "lbfgs" and s.errors == []


def test_the_model_card_has_one_setting_per_field_of_the_config_with_its_default():
    inputs = {f.name for f in dataclasses.fields(ModelConfig) if f.metadata.get("input")}
    assert inputs == {"times", "time_name", "view_sizes", "view_names", "layer_dims"}
    s = ModelSettings()
    for f in dataclasses.fields(ModelConfig):
        assert (f.name in s.param) != (f.name in inputs), f.name
        if f.name not in inputs:
            assert s.param[f.name].default == f.default, f.name
    assert s.config() == ModelConfig()
    # a config taken by the card comes back whole; the run's end rule kept when asked
    s.set_data_shape(200, 6)
    chosen = ModelConfig(model="sparse", kernel="matern32", bias=False, white=False, latent_dim=3, num_inducing=12,
                         init="random", optimizer="scg", max_iters=77, seed=4, until_converged=False, batch_size=64)
    s.apply(chosen, keep=("until_converged",))
    assert s.config() == dataclasses.replace(chosen, until_converged=True)
    s.apply(chosen)
    assert s.config() == chosen
    # what decides the model and its start: all but the run's length
    assert set(s.CHOSEN) - set(s.START) == {"max_iters", "until_converged"}


# ---- memory-mapped command-line files ------------------------------------------------------------------
@pytest.fixture
def npy_on_command_line(tmp_path, monkeypatch):
    path = tmp_path / "big.npy"
    np.save(path, _blobs(1200, 6))
    monkeypatch.setenv(serving.PRELOAD_ENV, str(path))
    serving._load_preloaded.cache_clear()
    yield path
    serving._load_preloaded.cache_clear()


def _cli_explorer(built):
    def build(Y, cfg):
        built.append(Y)
        return cfg.spec.build(Y, cfg)

    ex = Explorer(limiter=Limiter(1), build=build)
    loader = lambda label, standardize: serving.preloaded_dataset(label_column=label, standardize=standardize)  # noqa: E731
    assert ex.data.load_given(loader, "big.npy")
    ex.settings.num_inducing = 10
    ex.settings.latent_dim = 2
    ex.settings.max_iters = 3
    return ex


def test_command_line_npy_is_memory_mapped_for_the_svi_model(npy_on_command_line):
    assert isinstance(map_npy(npy_on_command_line), np.memmap)
    built = []
    ex = _cli_explorer(built)
    ex.settings.model = "svi"
    ex.settings.batch_size = 100
    assert ex.train(), ex.training.message
    assert ex.training.join(120)
    ex.training.pump()
    assert ex.training.status == "finished", ex.training.message
    assert isinstance(built[-1], np.memmap)
    assert isinstance(ex.training.dataset.values, np.memmap)
    assert not ex.training.dataset.values.flags.writeable
    # the file is mapped from its load on (a float .npy on the server's disk): the loaded data set is the
    # file, and a collapsed model is given that same array (its engine model copies it into memory)
    assert isinstance(ex.data.dataset.values, np.memmap)
    ex.settings.model = "sparse"
    assert ex.train(), ex.training.message
    assert ex.training.join(120)
    assert built[-1] is ex.data.dataset.values
    ex.training.pump()
    assert ex.training.status == "finished", ex.training.message
    ex.close()


def test_a_changed_dataset_is_not_mapped(npy_on_command_line):
    ds = serving.preloaded_dataset(standardize=True)
    assert training_dataset(ds, spec("svi")) is ds  # standardised: not the file's values
    ds = serving.preloaded_dataset()
    assert isinstance(training_dataset(ds, spec("svi")).values, np.memmap)
    assert training_dataset(ds, spec("bayesian")) is ds
    assert map_npy(npy_on_command_line.with_suffix(".missing.npy")) is None


def test_the_file_a_dataset_was_read_from_is_recorded_at_load(tmp_path):
    from gplvm_explorer.data import load_file

    path = tmp_path / "plain.npy"
    np.save(path, _blobs(50, 4))
    ds = load_file(path)
    assert ds.source_path == str(path)
    # changed values are no longer the file's: standardised, subsampled, rows dropped, from bytes
    assert load_file(path, standardize=True).source_path is None
    assert load_file(path, max_rows=20).source_path is None
    assert ds.replace(values=ds.values[:30]).source_path is None
    assert ds.replace(name="other").source_path == str(path)
    assert load_file(path.read_bytes(), "plain.npy").source_path is None
    # the mapped copy keeps the file as it is (no copy into memory) and a file whose shape changed is not mapped
    mapped = training_dataset(ds, spec("svi"))
    assert isinstance(mapped.values, np.memmap) and mapped.source_path == str(path)
    np.testing.assert_array_equal(np.asarray(mapped.values), ds.values)
    np.save(path, _blobs(60, 4))
    assert training_dataset(ds, spec("svi")) is ds


# ---- epochs ----------------------------------------------------------------------------------------------
def test_svi_training_in_the_worker_reports_epochs():
    Y = _blobs(1000, 5)
    cfg = ModelConfig(model="svi", optimizer="svi", latent_dim=2, num_inducing=10, max_iters=25, batch_size=100)
    job = TrainingJob(1, Y, cfg, limiter=Limiter(1), publish_interval=1e9)
    job.start()
    assert job.join(120)
    events = job.drain()
    assert [e.status for e in events if isinstance(e, StatusEvent)][-1] == Status.FINISHED
    progress = [e for e in events if isinstance(e, ProgressEvent)]
    assert progress and progress[-1].iteration == 25
    assert progress[-1].epoch == pytest.approx(2.5)
    assert all(e.epoch == pytest.approx(e.iteration * 0.1) for e in progress)
    assert isinstance([e for e in events if isinstance(e, ResultEvent)][-1].result.model.source.data, np.ndarray)


def test_progress_text_shows_epochs_and_an_eta():
    cfg = ModelConfig(model="svi", optimizer="svi", batch_size=100)
    tr = types.SimpleNamespace(status="running", objective_name="ELBO", objective=-1234.5, iteration=30,
                               max_iters=300, elapsed=10.0, rate=3.0, config=cfg,
                               dataset=types.SimpleNamespace(n=1000), opened="")
    text = progress_text(tr)
    assert "Epoch 3.00 / 30.00" in text and "3.0 it/s" in text and "ETA 1:30" in text
    tr.status = "finished"
    assert "(3.00 epochs)" in progress_text(tr)
    tr.config, tr.status = ModelConfig(), "running"
    assert "Epoch" not in progress_text(tr)


def test_a_stalled_fit_is_told_apart_from_one_that_ran_out_of_iterations():
    """A fit whose optimiser found no better point says so, instead of asking for more iterations."""
    from engine.optimize import FitResult
    from gplvm_explorer.training.job import end_reason

    def result(reason, converged):
        return FitResult(objective=1.0, iterations=5, n_evaluations=9, elapsed=1.0, stopped=False,
                         converged=converged, message="", reason=reason)

    assert end_reason(result("optimizer", False)) == "stalled"
    assert [end_reason(result(r, c)) for r, c in (("optimizer", True), ("max_iters", False),
                                                   ("converged", True))] == ["optimizer", "max_iters", "converged"]
    tr = types.SimpleNamespace(status="finished", objective_name="ELBO", objective=-1234.5, iteration=30,
                               max_iters=300, elapsed=10.0, rate=3.0, config=ModelConfig(),
                               dataset=types.SimpleNamespace(n=1000), opened="", end_reason="stalled")
    text = progress_text(tr)
    assert text.startswith("Finished after 30 iterations") and "more iterations would not help" in text
    assert "raise Iterations" not in text
    tr.end_reason = "max_iters"
    assert "more iterations would not help" not in progress_text(tr)
