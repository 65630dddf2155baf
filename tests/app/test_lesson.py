"""The lesson: its file format, the bundled lesson's steps, Run this step, Back/Next, and the pace."""
from __future__ import annotations

import json
import threading

import numpy as np
import pytest

from gplvm_explorer.state.lesson import Lesson
from gplvm_explorer.state.lesson_file import (DEFAULT_LESSON, LessonError, VIEWS, default_lesson, load_lesson,
                                              parse_lesson)
from gplvm_explorer.training.pace import Pace

pytestmark = pytest.mark.timeout(300)


def _lesson(**step):
    base = {"title": "A", "text": "Some words.", "sample": "rotating-glyph"}
    return json.dumps({"title": "Mine", "steps": [dict(base, **step)]})


def test_the_bundled_lesson_tells_the_story_from_pca_to_deep_gps():
    plan = default_lesson()
    assert len(plan.steps) >= 8
    models = [s.settings.get("model") for s in plan.steps]
    for key in ("gplvm", "bayesian", "gpds", "mrd", "deep"):
        assert key in models, key
    kernels = {(s.settings.get("model"), s.settings.get("kernel")) for s in plan.steps}
    assert ("gplvm", "linear") in kernels and ("gplvm", "rbf") in kernels  # dual PPCA, then the GP-LVM
    samples = {s.sample for s in plan.steps}
    assert {"walking-gap", "two-views", "occluded-glyph", "binary-glyph"} <= samples
    assert any(s.settings.get("likelihood") == "bernoulli" and s.sample == "binary-glyph" for s in plan.steps)
    views = {v for s in plan.steps for v in s.views}
    assert {"map", "reconstruction", "ard", "dynamics", "views", "deep", "imputation"} <= views
    assert all(len(s.text) > 100 for s in plan.steps)
    assert any(s.pace for s in plan.steps)  # a step a room watches at a slow pace


def test_every_step_of_the_bundled_lesson_loads_and_builds_with_the_engine_factory(make_explorer):
    """Each step's sample and settings are accepted by the page, and engine.build makes its model."""
    ex = make_explorer()
    lesson = Lesson(ex)
    for i, step in enumerate(lesson.plan.steps):
        assert lesson.apply(i), (i, lesson.error)
        assert ex.data.dataset.name == step.sample
        assert ex.settings.errors == [], (i, ex.settings.errors)
        for key, value in step.settings.items():
            assert getattr(ex.settings, key) == value, (i, key)
        ds, config = ex._training_input(ex.data.dataset)
        model = config.spec.build(ds.values, config)  # engine.build.build: settings -> model
        value = model.objective()
        assert np.isfinite(value), (i, step.title)
        assert type(model).__name__.endswith(config.spec.engine_class)  # e.g. NonConjugateBayesianGPLVM


def test_run_this_step_trains_its_model_and_a_running_fit_is_stopped_first(make_explorer, fake_build, pump):
    build = fake_build(delay=0.01)
    ex = make_explorer(build=build)
    lesson = Lesson(ex)
    lesson.go(1)  # the linear GP-LVM on the flow data
    ex.settings.max_iters = 5  # changed by hand: the step sets its own
    assert lesson.run(), lesson.error
    assert ex.training.active and lesson.ran == 1
    assert ex.data.dataset.name == "three-phase-flow"
    assert ex.training.config.model == "gplvm" and ex.training.config.kernel == "linear"
    assert ex.training.config.max_iters == lesson.plan.steps[1].settings["max_iters"]
    lesson.next()
    assert lesson.index == 2 and lesson.ran == 1
    assert lesson.run()  # still training step 2: stopped, then step 3 starts on its own
    assert "Stopping" in lesson.message
    # step 3 started once step 2's run had stopped (its short fake fit may be over before it is looked at)
    assert pump(ex, lambda: lesson.ran == 2, timeout=30), (lesson.error, ex.training.status)
    assert not lesson.error and lesson.message.startswith("Step 3 is training")
    assert ex.training.config.kernel == "rbf"
    assert ex.training.config.max_iters == lesson.plan.steps[2].settings["max_iters"]
    ex.training.stop()
    assert pump(ex, lambda: not ex.training.active, timeout=30)
    lesson.back()
    lesson.back()
    lesson.back()
    assert lesson.index == 0  # Back stops at the first step
    lesson.go(99)
    assert lesson.index == lesson.count - 1


def test_a_step_sets_the_pace_for_itself_and_a_step_without_one_keeps_the_pages(make_explorer, fake_build):
    ex = make_explorer(build=fake_build())
    lesson = Lesson(ex)
    paced = next(i for i, s in enumerate(lesson.plan.steps) if s.pace)
    unpaced = next(i for i, s in enumerate(lesson.plan.steps) if s.pace is None)
    ex.training.pace.rate = 1.0  # picked by hand
    assert lesson.apply(unpaced) and ex.training.pace.rate == 1.0
    assert lesson.apply(paced) and ex.training.pace.rate == lesson.plan.steps[paced].pace
    assert lesson.apply(unpaced) and ex.training.pace.rate == 1.0  # the step's pace ended with the step
    assert lesson.apply(paced)
    ex.training.pace.rate = 2.0  # changed by hand during the paced step: kept
    assert lesson.apply(unpaced) and ex.training.pace.rate == 2.0


@pytest.mark.parametrize("content, words", [
    ("{not json", "not valid JSON"),
    (b"\xff\xfe\x00", "not UTF-8"),
    ("[1, 2]", "JSON object"),
    (json.dumps({"title": "x", "steps": []}), "non-empty list"),
    (json.dumps({"title": "x", "steps": [1]}), "Step 1 must be an object"),
    (json.dumps({"title": "x", "format": "v9", "steps": [{"title": "a", "text": "b"}]}), "format"),
    (json.dumps({"title": "x", "stepz": []}), "unknown field 'stepz'"),
    (_lesson(sample="no-such-sample"), "unknown sample"),
    (_lesson(settings={"latentdim": 3}), "unknown setting 'latentdim'"),
    (_lesson(settings={"latent_dim": 99}), "bad value for latent_dim"),
    (_lesson(settings={"model": "quantum"}), "bad value for model"),
    (_lesson(settings={"until_converged": "yes"}), "bad value for until_converged"),
    (_lesson(pace=-1), "'pace'"),
    (_lesson(pace="fast"), "'pace'"),
    (_lesson(views=["mapp"]), "unknown view 'mapp'"),
    (_lesson(text=""), "'text' must be a non-empty text"),
    (_lesson(colour="red"), "unknown field 'colour'"),
])
def test_a_malformed_lesson_file_is_refused_with_a_specific_message(content, words):
    with pytest.raises(LessonError) as err:
        parse_lesson(content, "mine.json")
    assert words in str(err.value)
    assert str(err.value).startswith("mine.json")


def test_a_refused_lesson_file_keeps_the_lesson_on_show(make_explorer, fake_build):
    ex = make_explorer(build=fake_build())
    lesson = Lesson(ex)
    lesson.go(3)
    plan = lesson.plan
    assert not lesson.open_text(_lesson(settings={"latentdim": 3}), "bad.json")
    assert lesson.plan is plan and lesson.index == 3 and "latentdim" in lesson.error
    assert lesson.open_text(_lesson(settings={"model": "sparse", "latent_dim": 3}), "good.json")
    assert lesson.plan.title == "Mine" and lesson.index == 0 and lesson.error == "" and lesson.shown
    assert lesson.apply() and ex.settings.model == "sparse" and ex.settings.latent_dim == 3


def test_load_lesson_from_disk_and_its_refusals(tmp_path):
    assert load_lesson(DEFAULT_LESSON).title == default_lesson().title
    with pytest.raises(LessonError, match="no such file"):
        load_lesson(tmp_path / "missing.json")
    with pytest.raises(LessonError, match="not a regular file"):
        load_lesson(tmp_path)
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 2_000_001)
    with pytest.raises(LessonError, match="at most"):
        load_lesson(big)


def test_every_view_a_step_may_name_is_described():
    assert all(isinstance(v, str) and v.startswith("the ") for v in VIEWS.values())


class _FakeStop:
    """A stop event whose waits advance a fake clock instead of sleeping."""

    def __init__(self, clock):
        self.clock, self.waits = clock, []

    def wait(self, seconds):
        self.waits.append(seconds)
        self.clock.now += seconds
        return False


class _Clock:
    now = 100.0

    def __call__(self):
        return self.now


def test_pace_spaces_iterations_evenly_and_never_waits_when_off():
    clock = _Clock()
    stop = _FakeStop(clock)
    pace = Pace(clock=clock)
    for _ in range(50):  # off: not one wait
        clock.now += 0.003
        pace.wait(stop)
    assert stop.waits == []
    pace.rate = 5.0
    ends = []
    for _ in range(26):
        clock.now += 0.03  # an iteration of 30 ms
        pace.wait(stop)
        ends.append(clock.now)
    rate = (len(ends) - 1) / (ends[-1] - ends[0])
    assert rate == pytest.approx(5.0, rel=1e-9)
    clock.now += 3.0  # a pause: the next iterations do not rush to catch up
    pace.wait(stop)
    t = clock.now
    clock.now += 0.03
    pace.wait(stop)
    assert clock.now - t == pytest.approx(0.2)


def test_a_paced_job_is_stopped_at_once_while_it_waits(fake_build):
    from gplvm_explorer.catalog import ModelConfig
    from gplvm_explorer.training import Limiter
    from gplvm_explorer.training import TrainingJob

    Y = np.random.default_rng(0).standard_normal((20, 3))
    pace = Pace(rate=0.2)  # one iteration per 5 s
    job = TrainingJob(1, Y, ModelConfig(model="gplvm", optimizer="adam", max_iters=100, latent_dim=2),
                      limiter=Limiter(1), build=fake_build(), pace=pace)
    job.start()
    seen = threading.Event()
    for _ in range(400):
        if any(getattr(e, "iteration", 0) >= 1 for e in job.drain()):
            seen.set()
            break
        job.join(0.01)
    assert seen.is_set()
    job.stop()
    assert job.join(2.0), "the paced wait did not end at Stop"


def test_the_command_line_refuses_a_malformed_lesson_in_one_line(tmp_path):
    from gplvm_explorer import cli
    from runbounded import run_bounded

    bad = tmp_path / "mine.json"
    bad.write_text(_lesson(settings={"latentdim": 3}))
    out = run_bounded(["python", "-m", "gplvm_explorer.cli", "--lesson", str(bad), "--port", "65534"],
                      timeout=90.0, max_rss_mb=700)
    assert out.returncode == cli.EXIT_FILE, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr
    assert "mine.json: Step 1: unknown setting 'latentdim'" in lines[0]


def test_every_session_opens_the_command_lines_lesson(tmp_path, monkeypatch):
    from gplvm_explorer import cli

    own = tmp_path / "own.json"
    own.write_text(_lesson(settings={"model": "sparse", "latent_dim": 3}))
    monkeypatch.setenv(cli.LESSON_ENV, str(own))
    page = cli.session_page()
    try:
        lesson = page.explorer.lesson
        assert lesson.shown and lesson.plan.title == "Mine" and lesson.error == ""
    finally:
        page.explorer.close()
    own.write_text("{broken")  # changed after the server started: the page says so, with the bundled lesson
    page = cli.session_page()
    try:
        lesson = page.explorer.lesson
        assert lesson.shown and "not valid JSON" in lesson.error and lesson.count >= 8
    finally:
        page.explorer.close()
    monkeypatch.delenv(cli.LESSON_ENV)
    page = cli.session_page()
    try:
        assert not page.explorer.lesson.shown  # no --lesson: the Lesson button opens the bundled one
    finally:
        page.explorer.close()


def test_pca_map_matches_the_eigenvectors_of_the_covariance():
    from gplvm_explorer.state.pca_beside import pca_map

    rng = np.random.default_rng(3)
    Y = rng.standard_normal((80, 2)) @ np.array([[3.0, 0.5, 0.0, 1.0], [0.0, 1.0, 2.0, -1.0]]) \
        + 0.05 * rng.standard_normal((80, 4)) + 7.0
    points, frac = pca_map(Y)
    Yc = Y - Y.mean(0)
    evals, evecs = np.linalg.eigh(Yc.T @ Yc)  # an independent route: the covariance's eigenvectors
    ref = Yc @ evecs[:, ::-1][:, :2]
    for k in range(2):  # a component's sign is arbitrary
        assert np.allclose(np.abs(points[:, k]), np.abs(ref[:, k]), atol=1e-9)
        assert abs(abs(np.corrcoef(points[:, k], ref[:, k])[0, 1]) - 1) < 1e-12
    assert np.allclose(frac, evals[::-1][:2] / evals.sum())
    Y[3, 1] = np.nan  # a missing cell is mean-filled, not fatal
    points, _ = pca_map(Y)
    assert np.all(np.isfinite(points))


def test_pca_beside_shows_the_same_points_in_the_same_colours_and_a_step_can_show_it(make_explorer, fake_build):
    from gplvm_explorer.state.pca_beside import PCABeside
    from gplvm_explorer.views.pca_beside import PCABesideView

    ex = make_explorer(build=fake_build())
    pca = PCABeside(ex)
    view = PCABesideView.of(ex, pca=pca)
    assert pca.points is None and len(view.source.data["pca_x"]) == 0  # off: nothing computed
    lesson = Lesson(ex, pca=pca)
    step = next(i for i, s in enumerate(lesson.plan.steps) if "pca" in s.views)
    assert lesson.apply(step) and pca.shown
    ds = ex.data.dataset
    assert pca.dataset is ds and pca.points.shape == (ds.n, 2)
    colouring = ex.shown.colouring(ds)
    assert list(view.source.data["pca_colour"]) == list(np.asarray(colouring.colours, dtype=object)[colouring.codes])
    assert len(set(view.source.data["pca_colour"])) == 3  # the flow data's three classes
    assert lesson.apply(0) and pca.dataset is ex.data.dataset and pca.points.shape[0] == ex.data.dataset.n
    pca.shown = False
    assert len(view.source.data["pca_x"]) == 0


def test_a_step_that_fails_unexpectedly_says_so_and_the_page_stays(make_explorer, fake_build, monkeypatch):
    ex = make_explorer(build=fake_build())
    lesson = Lesson(ex)
    before = ex.data.dataset

    def broken():
        raise RuntimeError("disk on fire")
    monkeypatch.setattr(ex, "train", broken)
    assert not lesson.run()
    assert "Step 1 failed: RuntimeError: disk on fire" in lesson.error
    assert not ex.training.active and ex.data.dataset is not None and before is not None
