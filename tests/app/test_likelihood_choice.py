"""The model card's likelihood: proposed from the loaded values (with its reason), overridable,
offered only for the models that take one, passed to the engine's factory and kept by saved models."""
from __future__ import annotations

import html

import numpy as np
import panel as pn
import pytest

from gplvm_explorer import export
from gplvm_explorer.catalog import CATALOG
from gplvm_explorer.views.controls import ModelPanel
from gplvm_explorer.views.imputation import ImputationView

from .test_binary_views import binary_csv

pytestmark = pytest.mark.timeout(300)


def text(pane) -> str:
    return html.unescape(pane.object)


def csv_bytes(Y, name="data.csv"):
    lines = [",".join(f"c{j}" for j in range(Y.shape[1]))]
    lines += [",".join("" if np.isnan(v) else f"{v:g}" for v in row) for row in Y]
    return ("\n".join(lines) + "\n").encode(), name


def counts_csv(n=30, d=4, seed=1):
    rng = np.random.default_rng(seed)
    return csv_bytes(rng.poisson(3.0, size=(n, d)).astype(float), "counts.csv")


def real_csv(n=30, d=4, seed=2):
    return csv_bytes(np.random.default_rng(seed).standard_normal((n, d)), "real.csv")


def test_each_data_set_proposes_its_likelihood_with_one_line_saying_why(make_explorer):
    ex = make_explorer()
    s = ex.settings
    assert ex.data.load_upload(*binary_csv())
    assert s.likelihood == "bernoulli" and s.proposed_likelihood == "bernoulli"
    assert "0 or 1" in s.likelihood_note() and "\n" not in s.likelihood_note()
    assert ex.data.load_upload(*counts_csv())
    assert s.likelihood == "poisson" and "whole number" in s.likelihood_note()
    assert ex.data.load_upload(*real_csv())
    assert s.likelihood == "gaussian" and s.likelihood_note() == "" and not s.errors
    ex.data.sample = "binary-glyph"  # a bundled sample as well
    assert s.likelihood == "bernoulli" and s.config().likelihood == "bernoulli"


def test_the_user_may_override_the_proposal_and_the_card_says_what_was_proposed(make_explorer):
    ex = make_explorer()
    assert ex.data.load_upload(*binary_csv())
    panel = ModelPanel.of(ex)
    assert panel.likelihood.visible and panel.likelihood.value == "bernoulli"
    assert panel.likelihood_note.visible and "0 or 1" in text(panel.likelihood_note)
    panel.likelihood.value = "gaussian"  # the user's choice wins
    assert ex.settings.likelihood == "gaussian" and ex.settings.config().likelihood == "gaussian"
    assert not ex.settings.errors
    assert "Proposed: Bernoulli" in text(panel.likelihood_note)
    # a likelihood the values do not fit is refused with the reason, and Train is off
    assert ex.data.load_upload(*real_csv())
    panel.likelihood.value = "bernoulli"
    assert any("0 or 1" in e for e in ex.settings.errors)
    panel.likelihood.value = "poisson"
    assert any("whole numbers" in e for e in ex.settings.errors)
    assert not ex.train()


def test_models_that_take_only_the_gaussian_hide_the_choice_and_say_which_models_can(make_explorer):
    ex = make_explorer()
    assert ex.data.load_upload(*binary_csv())
    panel = ModelPanel.of(ex)
    takes = [k for k, spec in CATALOG.items() if "bernoulli" in spec.likelihoods]
    assert sorted(takes) == ["bayesian", "gplvm", "svi"]
    ex.settings.model = "sparse"
    assert not panel.likelihood.visible
    assert ex.settings.config().likelihood == "gaussian"  # trains with the Gaussian one
    note = text(panel.likelihood_note)
    assert "takes only the Gaussian" in note and "GP-LVM (exact)" in note and "SVI" in note
    ex.settings.model = "gplvm"
    assert panel.likelihood.visible and ex.settings.config().likelihood == "bernoulli"
    assert "takes only" not in text(panel.likelihood_note)


def test_standardised_binary_values_keep_the_gaussian_and_say_how_to_use_the_bernoulli(make_explorer):
    ex = make_explorer()
    assert ex.data.load_upload(*binary_csv())
    ex.data.standardize = True
    # the values as loaded are still 0/1: proposed, but the Gaussian one stays, and the card says how
    assert ex.settings.proposed_likelihood == "bernoulli" and ex.settings.likelihood == "gaussian"
    assert "Untick 'Standardise features'" in ex.settings.likelihood_note() and not ex.settings.errors
    ex.settings.likelihood = "bernoulli"  # chosen all the same: refused, with the reason
    assert any("Standardise features" in e for e in ex.settings.errors)
    assert not ex.train()
    ex.data.standardize = False
    assert ex.settings.likelihood == "bernoulli" and not ex.settings.errors


def test_a_linear_kernel_with_a_bernoulli_bayesian_model_is_refused_before_training(make_explorer):
    ex = make_explorer()
    assert ex.data.load_upload(*binary_csv())
    ex.settings.kernel = "linear"
    assert any("RBF kernel" in e for e in ex.settings.errors)
    ex.settings.likelihood = "gaussian"
    assert not ex.settings.errors


def train_through_the_factory(ex, pump, iters=15):
    ex.settings.latent_dim, ex.settings.num_inducing, ex.settings.max_iters = 2, 8, iters
    assert ex.train(), ex.training.message
    assert pump(ex, lambda: ex.training.status == "finished", timeout=240), ex.training.message
    return ex.training.result


def test_training_passes_the_likelihood_to_the_engine_and_a_saved_model_keeps_it(make_explorer, pump):
    ex = make_explorer(publish_interval=0.0)
    assert ex.data.load_upload(*binary_csv(missing=0.1))
    result = train_through_the_factory(ex, pump)
    assert result.model.likelihood == "bernoulli" and result.config.likelihood == "bernoulli"
    assert "likelihood=Bernoulli" in result.config.describe()
    mean, _ = result.model.predict(result.model.X_mean[:5])
    assert np.all((mean >= 0) & (mean <= 1))
    saved = export.model_npz(result)
    other = make_explorer()
    assert other.data.load_upload(*real_csv())
    assert other.settings.likelihood == "gaussian"
    assert other.data.load_upload(saved, "binary model.npz"), other.data.error
    assert other.training.result.model.likelihood == "bernoulli"
    assert other.settings.likelihood == "bernoulli" and other.training.result.config.likelihood == "bernoulli"


@pytest.mark.parametrize("model", ["gplvm", "svi"])
def test_a_count_data_set_trains_a_poisson_model(make_explorer, pump, model):
    ex = make_explorer(publish_interval=0.0)
    assert ex.data.load_upload(*counts_csv())
    ex.settings.model = model
    ex.settings.batch_size = 10
    result = train_through_the_factory(ex, pump, iters=5)
    assert result.model.likelihood == "poisson" and result.config.model == model


def test_the_imputed_values_of_a_bernoulli_model_are_shown_as_probabilities(make_explorer, pump):
    ex = make_explorer(publish_interval=0.0)
    assert ex.data.load_upload(*binary_csv(missing=0.1))
    train_through_the_factory(ex, pump)
    view = ImputationView.of(ex)
    imp = ex.imputation.imputation
    assert imp is not None and imp.probabilities and imp.n_missing > 0
    p = np.asarray(view.imp_points.data["imputed"])
    assert p.size == imp.n_missing and np.all((p > 0) & (p < 1))
    np.testing.assert_array_equal(view.imp_points.data["lower"], p)  # no ±2σ around a probability
    assert "P(y = 1)" in text(view.text) and "P(y = 1) =" in text(view.table)
    assert view.profile_fig.y_range.start == -0.05 and view.profile_fig.y_range.end == 1.05
    assert view.profile_fig.yaxis.axis_label == "value, or P(y = 1)"
    assert not view.profile_fig.legend[0].items[0].visible  # no "±2σ" entry
    pn.panel(view)  # renders
