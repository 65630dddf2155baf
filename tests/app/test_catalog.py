"""The model catalog: one ModelSpec per model, cost estimates and the size guard."""
from __future__ import annotations

import numpy as np
import pytest

from gplvm_explorer import catalog
from gplvm_explorer.catalog import CATALOG, KERNELS, Budget, ModelConfig, check


def test_every_spec_is_complete_and_builds_its_engine_model():
    import engine

    Y = np.random.default_rng(0).standard_normal((12, 3))
    for key, s in CATALOG.items():
        assert s.key == key and s.display_name and s.objective_name
        assert set(s.kernels) <= set(KERNELS)
        model = s.build(Y, ModelConfig(model=key, latent_dim=2, num_inducing=4, max_iters=1))
        assert isinstance(model, getattr(engine, s.engine_class))
        assert model.objective_name in (s.objective_name, "log-likelihood bound")  # the engine's own name
        assert (model.X_variance is not None) == s.uncertain_latents


def test_ui_questions_are_answered_by_the_spec():
    assert catalog.spec("gplvm").uses_inducing is False
    assert catalog.spec("bayesian").uses_inducing is True
    assert "mlp" in catalog.spec("gplvm").kernels and "mlp" not in catalog.spec("bayesian").kernels
    with pytest.raises(ValueError, match="Expected a model"):
        catalog.spec("deep-gp")
    assert "M=30" in ModelConfig(model="bayesian").describe()
    assert "M=" not in ModelConfig(model="gplvm").describe()


def test_costs_grow_as_the_models_scale():
    exact, bayes = catalog.spec("gplvm"), catalog.spec("bayesian")
    a, b = exact.cost(10_000, 30, 10, 0), exact.cost(20_000, 30, 10, 0)
    assert 3.5 < b.memory_bytes / a.memory_bytes <= 4.0  # O(N^2) memory
    assert 7.0 < b.seconds_per_iteration / a.seconds_per_iteration <= 8.0  # O(N^3) time
    c, d = bayes.cost(10_000, 30, 10, 50), bayes.cost(100_000, 30, 10, 50)
    assert d.memory_bytes < 11 * c.memory_bytes  # linear in N
    assert bayes.cost(20_000, 30, 10, 100).seconds_per_iteration > 3 * bayes.cost(20_000, 30, 10, 50).seconds_per_iteration


def test_size_guard_refuses_the_exact_model_on_big_data_and_suggests_the_scalable_ones():
    budget = Budget(memory_bytes=4e9, seconds_per_iteration=60)
    errors, _ = check(ModelConfig(model="gplvm", latent_dim=10), 20_000, 30, budget)
    assert errors and "memory" in errors[0] and "sparse or Bayesian" in errors[0]
    errors, _ = check(ModelConfig(model="bayesian", latent_dim=10, num_inducing=50), 20_000, 30, budget)
    assert errors == []
    errors, _ = check(ModelConfig(model="bayesian", latent_dim=10, num_inducing=50), 100_000, 30, budget)
    assert errors == []
    # time alone can refuse too
    errors, _ = check(ModelConfig(model="gplvm"), 6_000, 30, Budget(memory_bytes=1e12, seconds_per_iteration=5))
    assert errors and "s per iteration" in errors[0]


def test_budget_from_environment():
    b = Budget.from_env({"GPLVM_EXPLORER_SESSION_MEMORY": "512M", "GPLVM_EXPLORER_MAX_SECONDS_PER_ITERATION": "3"})
    assert b.memory_bytes == 512e6 and b.seconds_per_iteration == 3.0
    default = Budget.from_env({"GPLVM_EXPLORER_SESSION_MEMORY": "lots"})  # ignored, with a warning
    assert default.memory_bytes > 0


def test_check_prevents_impossible_combinations():
    errs, _ = check(ModelConfig(model="bayesian", kernel="mlp"), 100, 5)
    assert errs and "RBF" in errs[0]
    errs, _ = check(ModelConfig(model="sparse", num_inducing=200), 100, 5)
    assert any("M=200" in e for e in errs)
    assert check(ModelConfig(model="gplvm", kernel="mlp"), 100, 5)[0] == []
