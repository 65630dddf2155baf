"""StochasticBayesianGPLVM: the SVI bound, its minibatch estimate, gradients, memmap input, fitting."""
import threading

import numpy as np
import pytest

import engine
from engine.models.stochastic import StochasticBayesianGPLVM

N, D, Q, M = 60, 5, 2, 8


def _data(seed=0, n=N):
    rng = np.random.default_rng(seed)
    t = rng.uniform(-2, 2, size=(n, 1))
    W = rng.standard_normal((2, D))
    return np.hstack([np.sin(t), np.cos(2 * t)]) @ W + 0.1 * rng.standard_normal((n, D))


def _model(seed=0, batch_size=20, random_q=True, **kwargs):
    m = StochasticBayesianGPLVM(_data(seed), Q, num_inducing=M, batch_size=batch_size, **kwargs)
    rng = np.random.default_rng(seed + 1)
    m.set_parameters(X_variance=rng.uniform(0.05, 0.8, size=(N, Q)),
                     X_mean=m.X_mean + 0.1 * rng.standard_normal((N, Q)))
    if random_q:  # away from the optimum, so every gradient term matters
        q_sqrt = np.tril(0.3 * rng.standard_normal((M, M)), -1) + np.diag(rng.uniform(0.3, 1.0, M))
        m.set_parameters(q_mu=rng.standard_normal((M, D)), q_sqrt=q_sqrt)
    return m


# ------------------------------------------------------------------ the bound


def test_minibatch_estimates_of_a_partition_average_to_the_full_bound():
    m = _model()
    full = m.objective()
    for seed in range(3):
        parts = np.random.default_rng(seed).permutation(N).reshape(3, 20)
        estimates = [m.minibatch_objective(rows) for rows in parts]
        assert np.mean(estimates) == pytest.approx(full, rel=1e-11, abs=1e-9)
    # and the estimates differ from batch to batch (it is an estimate, not the bound itself)
    assert np.std(estimates) > 1e-3 * abs(full)


def test_minibatch_gradients_of_a_partition_average_to_the_full_gradients():
    m = _model()
    full = m.objective_gradients()
    parts = np.arange(N).reshape(3, 20)
    grads = [m.minibatch_objective(rows, gradients=True)[1] for rows in parts]
    for name, g in full.items():
        if name in ("X_mean", "X_variance"):
            # each row is in one batch, where its gradient is scaled by N / B
            est = np.concatenate([gr[name] for gr in grads]) / 3.0
        else:
            est = np.mean([gr[name] for gr in grads], axis=0)
        np.testing.assert_allclose(est, g, rtol=1e-9, atol=1e-9 * max(1.0, np.max(np.abs(g))), err_msg=name)


def test_full_batch_at_the_optimal_q_equals_the_collapsed_bound():
    m = _model(batch_size=N, random_q=False)
    values = m.parameters
    c = engine.BayesianGPLVM(_data(0), Q, num_inducing=M, X=values["X_mean"], Z=values["Z"], kernel=m.kernel,
                             noise_variance=values["noise_variance"])
    c.set_parameters(X_variance=values["X_variance"])
    c.jitter = m.jitter
    m.reset_q_u()  # q(u) at its optimum for the full data
    collapsed = c.objective()
    assert m.objective() == pytest.approx(collapsed, rel=1e-8)
    assert m.minibatch_objective(np.arange(N)) == pytest.approx(collapsed, rel=1e-8)
    # the optimum: the bound's gradient w.r.t. q(u) vanishes, every other gradient is the collapsed one's
    g, gc = m.objective_gradients(), c.objective_gradients()
    assert np.max(np.abs(g["q_mu"])) < 1e-6 * np.max(np.abs(g["X_mean"]))
    for name in gc:
        np.testing.assert_allclose(g[name], gc[name], rtol=1e-6, atol=1e-6 * np.max(np.abs(gc[name])),
                                   err_msg=name)


def test_any_other_q_gives_a_lower_bound_than_the_collapsed_one():
    m = _model(batch_size=N)
    before = m.objective()
    m.reset_q_u()
    assert m.objective() > before


# ------------------------------------------------------------------ gradients


def _fd_along(m, rows, name, direction, h=1e-5):
    # h = 1e-5: the minibatch bound is ~3e3 nats, so at 1e-6 its rounding alone moves a difference by ~2e-5
    base = m.parameters[name]
    out = []
    for sign in (1.0, -1.0):
        m.set_parameters(**{name: base + sign * h * direction})
        out.append(m.minibatch_objective(rows))
    m.set_parameters(**{name: base})
    return (out[0] - out[1]) / (2 * h)


@pytest.mark.parametrize("name", ["X_mean", "X_variance", "Z", "variance", "lengthscales", "noise_variance",
                                  "q_mu", "q_sqrt"])
def test_minibatch_gradients_match_finite_differences(name):
    m = _model()
    rows = np.array([41, 3, 17, 8, 30, 59, 22, 11, 5, 47])  # unsorted on purpose
    _, grads = m.minibatch_objective(rows, gradients=True)
    rng = np.random.default_rng(7)
    shape = np.shape(m.parameters[name])
    direction = rng.standard_normal(shape)
    if name == "q_sqrt":
        direction = np.tril(direction)
    if name in ("X_mean", "X_variance"):
        analytic = float(np.sum(grads[name] * direction[rows]))
        mask = np.zeros(shape)
        mask[rows] = 1.0
        direction = direction * mask
    else:
        analytic = float(np.sum(grads[name] * direction))
    numeric = _fd_along(m, rows, name, direction)
    assert analytic == pytest.approx(numeric, rel=1e-5, abs=1e-6)


def test_full_bound_gradients_match_finite_differences():
    m = _model()
    assert m.checkgrad() < 1e-5


# ------------------------------------------------------------------ memmap input


_READS = {"rows": 0, "whole": 0}


class CountingMemmap(np.memmap):
    """A memmap that counts the rows its indexing reads and any operation on the whole array."""

    _top = False

    def __getitem__(self, key):
        if self._top:
            rows = key[0] if isinstance(key, tuple) else key
            _READS["rows"] += int(np.arange(self.shape[0])[rows].size)
        return super().__getitem__(key)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if any(isinstance(x, CountingMemmap) and x._top for x in inputs):
            _READS["whole"] += 1
        inputs = tuple(np.asarray(x).view(np.ndarray) if isinstance(x, CountingMemmap) else x for x in inputs)
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        # memmap's own bookkeeping asks whether views share memory: no data are read
        if func not in (np.may_share_memory, np.shares_memory) and any(isinstance(x, CountingMemmap) and x._top for x in args):
            _READS["whole"] += 1
        return super().__array_function__(func, types, args, kwargs)


def _counting_memmap(path, Y):
    w = np.memmap(path, dtype=np.float64, mode="w+", shape=Y.shape)
    w[:] = Y
    w.flush()
    del w
    Ym = CountingMemmap(path, dtype=np.float64, mode="r", shape=Y.shape)
    Ym._top = True
    return Ym


def test_memmap_input_is_read_only_by_minibatch_rows(tmp_path):
    n, B = 2000, 64
    Y = _data(3, n)
    Ym = _counting_memmap(tmp_path / "Y.dat", Y)
    _READS.update(rows=0, whole=0)
    m = StochasticBayesianGPLVM(Ym, Q, num_inducing=M, batch_size=B, chunk_size=500)
    assert _READS["whole"] == 0
    built = _READS["rows"]
    assert built <= 2 * n + 1024  # the mean/scatter pass, the PCA scores and q(u)'s starting sample
    assert m.source.data is Ym  # never copied
    _READS.update(rows=0, whole=0)
    iters = 25
    engine.fit(m, optimizer="svi", max_iters=iters, evaluate_final=False)
    assert _READS["whole"] == 0
    assert _READS["rows"] == iters * B
    # the full bound reads every row once, in chunks
    _READS.update(rows=0, whole=0)
    value = m.objective()
    assert _READS["rows"] == n and _READS["whole"] == 0
    # the same data in memory give the same model and bound
    m2 = StochasticBayesianGPLVM(Y, Q, num_inducing=M, batch_size=B, chunk_size=500)
    engine.fit(m2, optimizer="svi", max_iters=iters, evaluate_final=False)
    assert m2.objective() == pytest.approx(value, rel=1e-10)


def test_rejects_non_finite_data_with_a_clear_message():
    Y = _data()
    Y[5, 2] = np.nan
    with pytest.raises(engine.ShapeError, match="missing values"):
        StochasticBayesianGPLVM(Y, Q, num_inducing=M)


def test_refuses_a_backend_with_a_clear_error():
    from engine.backends import LocalBackend

    with pytest.raises(engine.ConfigurationError, match="takes no backend.*BayesianGPLVM"):
        StochasticBayesianGPLVM(_data(), Q, num_inducing=M, backend=LocalBackend())


# ------------------------------------------------------------------ fitting


def test_svi_fit_raises_the_full_bound_and_reports_snapshots():
    m = StochasticBayesianGPLVM(_data(), Q, num_inducing=M, batch_size=20)
    start = m.objective()
    seen = []
    result = engine.fit(m, optimizer="svi", max_iters=300, callback=seen.append, learning_rate=0.02)
    assert result.iterations == 300 and len(seen) == 300 and len(result.history) == 300
    assert isinstance(seen[-1], engine.Snapshot) and seen[-1].optimizer == "svi"
    assert seen[-1].X_mean.shape == (N, Q) and seen[-1].relevance.shape == (Q,)
    assert result.objective == pytest.approx(m.objective(), rel=1e-12)
    assert result.objective > start + 10.0


def test_model_default_optimiser_is_svi_and_fit_is_reproducible():
    a = StochasticBayesianGPLVM(_data(), Q, num_inducing=M, batch_size=20)
    b = StochasticBayesianGPLVM(_data(), Q, num_inducing=M, batch_size=20)
    ra = a.fit(max_iters=40)
    rb = engine.fit(b, max_iters=40)
    assert [h[1] for h in ra.history] == [h[1] for h in rb.history]
    np.testing.assert_array_equal(a.get_free(), b.get_free())


def test_stop_and_pause():
    m = StochasticBayesianGPLVM(_data(), Q, num_inducing=M, batch_size=20)
    stop, pause = threading.Event(), threading.Event()

    def callback(s):
        if s.iteration == 3:
            pause.set()
            threading.Timer(0.2, pause.clear).start()
        if s.iteration == 5:
            stop.set()

    result = engine.fit(m, optimizer="svi", max_iters=100, callback=callback, stop=stop, pause=pause)
    assert result.stopped and result.iterations == 5 and not result.converged


def test_fixed_parameters_do_not_move():
    m = StochasticBayesianGPLVM(_data(), Q, num_inducing=M, batch_size=20)
    m.fix("Z", "lengthscales", "X_variance")
    before = m.parameters
    engine.fit(m, optimizer="svi", max_iters=30)
    after = m.parameters
    for name in ("Z", "lengthscales", "X_variance"):
        np.testing.assert_array_equal(after[name], before[name])
    assert not np.array_equal(after["X_mean"], before["X_mean"])
    assert not np.array_equal(after["q_mu"], before["q_mu"])


def test_svi_is_refused_by_other_models_and_other_optimisers_work_here():
    with pytest.raises(engine.ConfigurationError, match="svi"):
        engine.fit(engine.SparseGPLVM(_data(), Q, num_inducing=M), optimizer="svi", max_iters=2)
    m = _model()
    start = m.objective()
    result = engine.fit(m, optimizer="lbfgs", max_iters=20)
    assert result.objective > start


# ------------------------------------------------------------------ prediction, projection, files


def test_predict_matches_the_collapsed_model_at_the_optimal_q():
    m = _model(batch_size=N, random_q=False)
    m.reset_q_u()
    values = m.parameters
    c = engine.BayesianGPLVM(_data(0), Q, num_inducing=M, X=values["X_mean"], Z=values["Z"], kernel=m.kernel,
                             noise_variance=values["noise_variance"])
    c.set_parameters(X_variance=values["X_variance"])
    c.jitter = m.jitter
    Xs = np.random.default_rng(2).standard_normal((7, Q))
    for Sv in (None, np.full((7, Q), 0.2)):
        mean, var = m.predict(Xs, Sv, include_noise=True)
        mean_c, var_c = c.predict(Xs, Sv, include_noise=True)
        assert mean.shape == var.shape == (7, D)
        np.testing.assert_allclose(mean, mean_c, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(var, var_c, rtol=1e-6, atol=1e-8)


def test_infer_latent_of_training_rows_and_partial_rows():
    m = StochasticBayesianGPLVM(_data(), Q, num_inducing=M, batch_size=20)
    engine.fit(m, optimizer="svi", max_iters=200, learning_rate=0.02)
    Y = _data()[:6].copy()
    res = m.infer_latent(Y)
    assert res.mean.shape == res.variance.shape == (6, Q)
    assert res.prediction.shape == res.prediction_variance.shape == (6, D)
    assert np.all(res.variance > 0) and np.all(np.isfinite(res.log_density))
    # the projection of a training row is at least as good (by its own bound) as the row's q(x_n)
    Y[0, :2] = np.nan
    part = m.infer_latent(Y)
    assert part.observed[0].sum() == D - 2 and np.all(np.isfinite(part.prediction))


def test_save_and_load_round_trip(tmp_path):
    from engine.io import load_model, save_model

    m = _model()
    path = tmp_path / "svi.npz"
    save_model(m, path)
    loaded = load_model(path)
    assert type(loaded) is StochasticBayesianGPLVM
    assert loaded.objective() == pytest.approx(m.objective(), rel=1e-12)
    np.testing.assert_array_equal(loaded.parameters["q_sqrt"], m.parameters["q_sqrt"])


def test_refine_leaves_q_u_at_its_optimum_for_all_rows():
    m = StochasticBayesianGPLVM(_data(), Q, num_inducing=M, batch_size=20)
    engine.fit(m, optimizer="svi", max_iters=100)
    after = m.refine(passes=2)
    assert np.isfinite(after) and after == pytest.approx(m.objective(), rel=1e-12)
    g = m.objective_gradients()
    assert np.max(np.abs(g["q_mu"])) < 1e-6 * max(1.0, np.max(np.abs(g["X_mean"])))


# ------------------------------------------------------------------ the full-data polish after SVI


def _svi(max_iters, **options):
    m = StochasticBayesianGPLVM(_data(), Q, num_inducing=M, batch_size=20)
    return m, engine.fit(m, optimizer="svi", max_iters=max_iters, **options)


def test_polish_passes_are_refine_passes_after_the_iterations():
    polished, result = _svi(30, polish_passes=2)
    plain, plain_result = _svi(30, polish_passes=0)
    assert plain_result.objective == plain.objective()
    expected = plain.refine(passes=2)
    np.testing.assert_array_equal(polished.get_free(), plain.get_free())
    assert result.objective == expected and expected > plain_result.objective
    assert "2 full-data polish passes" in result.message and result.iterations == 30


# N = 60 rows, batches of 20: an epoch is 3 iterations, a pass per 2 epochs, at most 3 passes
@pytest.mark.parametrize("iters, passes", [(5, 0), (6, 1), (9, 1), (12, 2), (40, 3)])
def test_the_automatic_polish_follows_the_epochs_the_iterations_read(iters, passes):
    auto, result = _svi(iters)
    explicit, _ = _svi(iters, polish_passes=passes)
    np.testing.assert_array_equal(auto.get_free(), explicit.get_free())
    other, _ = _svi(iters, polish_passes=passes + 1)
    assert not np.array_equal(auto.get_free(), other.get_free())


def test_a_stopped_fit_is_not_polished_and_stop_reaches_inside_the_polish():
    def stopped_at_20(**options):
        stop = threading.Event()
        return _svi(40, callback=lambda s: s.iteration == 20 and stop.set(), stop=stop, **options)

    stopped, result = stopped_at_20()  # 20 iterations read enough rows for three passes
    plain, _ = stopped_at_20(polish_passes=0)
    assert result.stopped and result.iterations == 20
    np.testing.assert_array_equal(stopped.get_free(), plain.get_free())
    # stop set as the polish begins: it ends at the polish's first row chunk, the fit reports a stop
    m = StochasticBayesianGPLVM(_data(), Q, num_inducing=M, batch_size=20, chunk_size=16)
    stop = threading.Event()
    reset = m.reset_q_u

    def reset_then_stop(*args, **kwargs):
        stop.set()
        return reset(*args, **kwargs)

    m.reset_q_u = reset_then_stop
    result = engine.fit(m, optimizer="svi", max_iters=40, stop=stop)
    assert result.stopped and result.iterations == 40 and "Stopped on request" in result.message


@pytest.mark.parametrize("passes", [-1, 1.5, "2", True])
def test_impossible_polish_passes_are_refused_before_anything_moves(passes):
    m = _model()
    before = m.get_free()
    with pytest.raises(engine.ConfigurationError, match="polish_passes"):
        engine.fit(m, optimizer="svi", max_iters=3, polish_passes=passes)
    np.testing.assert_array_equal(m.get_free(), before)


def test_a_model_without_a_closed_form_q_u_is_not_polished():
    Y = (_data() > 0).astype(float)

    def bernoulli():
        return StochasticBayesianGPLVM(Y, Q, num_inducing=M, batch_size=20, likelihood="bernoulli")

    auto, plain = bernoulli(), bernoulli()
    engine.fit(auto, optimizer="svi", max_iters=12)
    engine.fit(plain, optimizer="svi", max_iters=12, polish_passes=0)
    np.testing.assert_array_equal(auto.get_free(), plain.get_free())
    m = bernoulli()
    before = m.get_free()
    with pytest.raises(engine.ConfigurationError, match="polish_passes=1.*closed-form"):
        engine.fit(m, optimizer="svi", max_iters=3, polish_passes=1)
    np.testing.assert_array_equal(m.get_free(), before)


# ------------------------------------------------------------------ step rules


def _only_free(m, *names):
    m.fix(*[n for n in m.parameter_names if n not in names])


@pytest.mark.parametrize("positive_steps", ["log", "free"])
def test_first_adam_step_on_lengthscales_is_relative_in_log_coordinates(positive_steps):
    from engine.transforms import LENGTHSCALE

    m = _model()
    m.set_parameters(lengthscales=np.array([0.5, 50.0]))  # a short and a long one
    _only_free(m, "lengthscales")
    before = m.parameters["lengthscales"]
    engine.fit(m, optimizer="svi", max_iters=1, learning_rate=0.1, positive_steps=positive_steps)
    after = m.parameters["lengthscales"]
    # Adam's first step is learning_rate * sign(gradient) in its own coordinates
    if positive_steps == "log":
        moved = np.log(after - LENGTHSCALE.lower) - np.log(before - LENGTHSCALE.lower)
    else:
        moved = LENGTHSCALE.inverse(after) - LENGTHSCALE.inverse(before)
    np.testing.assert_allclose(np.abs(moved), 0.1, rtol=1e-6)


def test_unknown_positive_steps_is_refused_before_anything_moves():
    m = _model()
    before = m.get_free().copy()
    with pytest.raises(engine.ConfigurationError, match="positive_steps 'log' or 'free'"):
        engine.fit(m, optimizer="svi", max_iters=5, positive_steps="softplus")
    np.testing.assert_array_equal(m.get_free(), before)


def test_log_coordinate_gradient_matches_finite_differences():
    from engine.svi import LogSteps
    from engine.transforms import LENGTHSCALE

    m = _model()
    m.set_parameters(lengthscales=np.array([0.7, 3.0]), noise_variance=0.05, variance=1.3)
    rows = np.array([41, 3, 17, 8, 30, 59, 22, 11, 5, 47])
    _, grads = m.minibatch_objective(rows, gradients=True)
    gp = m.global_packer
    xg = gp.pack(m.parameters)
    g_log = LogSteps(gp).gradient(xg, gp.pack_gradient(xg, grads))  # flat, log coordinates
    for name, lower in (("lengthscales", LENGTHSCALE.lower), ("noise_variance", 1e-8), ("variance", 1e-8)):
        base = np.asarray(m.parameters[name], dtype=float)
        direction = np.random.default_rng(3).standard_normal(base.shape)
        h, out = 1e-6, []
        for sign in (1.0, -1.0):
            m.set_parameters(**{name: lower + (base - lower) * np.exp(sign * h * direction)})
            out.append(m.minibatch_objective(rows))
        m.set_parameters(**{name: base})
        numeric = (out[0] - out[1]) / (2 * h)
        analytic = float(np.sum(g_log[gp.slice(name)] * np.ravel(direction)))
        assert analytic == pytest.approx(numeric, rel=1e-5, abs=1e-6), name


def test_natural_gradient_steps_of_q_u_follow_the_step_rule():
    """Rows and globals held: q(u)'s natural parameters after three minibatches are
    t1 (first step: rho = 1), then (1 - rho) * previous + rho * t_k, rho constant by default."""
    from engine.models.stochastic import optimal_q

    def natural(q_mu, q_sqrt):  # (S^-1, S^-1 m) of q(v) = N(m, R R^T)
        R = np.tril(q_sqrt)
        Lam = np.linalg.inv(R @ R.T)
        return Lam, Lam @ q_mu

    m = _model()
    _only_free(m, "q_mu", "q_sqrt")
    B, rho = 20, 0.3
    values = m.parameters
    kern, Z, beta = m.kernel, values["Z"], 1.0 / float(values["noise_variance"])
    m.begin_fit()
    L = np.linalg.cholesky(kern.K(Z) + m.jitter * np.eye(Z.shape[0]))
    Yc = _data() - m.Y_mean
    rng = np.random.default_rng(m.seed)
    expected = None
    for _ in range(3):  # the minibatches SVI draws: B rows without replacement from the model's seed
        idx = np.sort(rng.choice(N, B, replace=False))
        st = engine.psi.compute(kern, Z, values["X_mean"][idx], values["X_variance"][idx])
        target = natural(*optimal_q(L, N / B * st.Psi1.T @ Yc[idx], N / B * st.Psi2, beta))
        expected = target if expected is None else tuple((1 - rho) * e + rho * t for e, t in zip(expected, target))
    engine.fit(m, optimizer="svi", max_iters=3, natgrad_step=rho)
    got = natural(m.parameters["q_mu"], m.parameters["q_sqrt"])
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-8 * np.max(np.abs(b)))


def test_a_full_natural_step_on_all_rows_lands_on_the_optimal_q_u():
    m = _model(batch_size=N)
    _only_free(m, "q_mu", "q_sqrt")
    engine.fit(m, optimizer="svi", max_iters=2, natgrad_step=1.0)
    got = m.parameters
    m.reset_q_u()
    np.testing.assert_allclose(got["q_mu"], m.parameters["q_mu"], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(np.tril(got["q_sqrt"]), np.tril(m.parameters["q_sqrt"]), rtol=1e-9, atol=1e-9)


# ------------------------------------------------------------------ per-row Adam for q(x_n)


def _softplus_coordinates(S):
    from engine.transforms import POSITIVE

    return POSITIVE.inverse(S)


def test_first_per_row_adam_step_follows_the_sign_of_the_full_bounds_gradient():
    """All rows in the batch, globals held: Adam's first step is local_learning_rate * sign(gradient)
    in every row's own coordinates (X_mean; X_variance's softplus coordinates), the gradient of the
    full bound by central differences (the prior's -mu and -(1 - 1/S)/2 included)."""
    m = _model(batch_size=N)
    _only_free(m, "X_mean", "X_variance")
    before = m.parameters
    h, lr = 1e-6, 1e-3
    fd = {}
    for name in ("X_mean", "X_variance"):
        g = np.zeros((N, Q))
        for n in range(N):
            for q in range(Q):
                for sign in (1, -1):
                    value = before[name].copy()
                    value[n, q] += sign * h
                    m.set_parameters(**{name: value})
                    g[n, q] += sign * m.objective() / (2 * h)
        m.set_parameters(**{name: before[name]})
        fd[name] = g
    engine.fit(m, optimizer="svi", max_iters=1, local_optimizer="adam", local_learning_rate=lr)
    after = m.parameters
    moved = {"X_mean": after["X_mean"] - before["X_mean"],
             "X_variance": _softplus_coordinates(after["X_variance"]) - _softplus_coordinates(before["X_variance"])}
    for name, g in fd.items():
        clear = np.abs(g) > 1e-3  # a sign finite differences can tell
        assert clear.mean() > 0.9, name
        np.testing.assert_allclose(moved[name][clear], lr * np.sign(g[clear]), rtol=1e-5, err_msg=name)


def test_per_row_adam_corrects_each_rows_moments_for_its_own_visits():
    """Two minibatches of half the rows at a constant rate: a row seen once steps by exactly the rate
    in every coordinate, whichever iteration saw it (its first visit, bias-corrected by its own
    count); a row seen twice does not; a row not seen does not move."""
    m = _model(batch_size=N // 2)
    _only_free(m, "X_mean", "X_variance")
    before = m.parameters
    lr = 1e-3
    rng = np.random.default_rng(m.seed)
    visits = np.zeros(N, dtype=int)
    for _ in range(2):
        visits[rng.choice(N, N // 2, replace=False)] += 1
    assert set(visits) == {0, 1, 2}
    engine.fit(m, optimizer="svi", max_iters=2, local_optimizer="adam", local_learning_rate=lr,
               learning_rate=0.02, final_learning_rate=0.02)
    after = m.parameters
    moved = np.hstack([after["X_mean"] - before["X_mean"],
                       _softplus_coordinates(after["X_variance"]) - _softplus_coordinates(before["X_variance"])])
    np.testing.assert_array_equal(moved[visits == 0], 0.0)
    np.testing.assert_allclose(np.abs(moved[visits == 1]), lr, rtol=1e-4)
    assert not any(np.allclose(np.abs(row), lr, rtol=1e-2) for row in moved[visits == 2])


def test_per_row_adam_at_its_default_rate_reaches_the_natural_gradient_fits_bound():
    # the iterations alone (no full-data polish, which moves every row whatever the rows' optimiser)
    natgrad = engine.fit(StochasticBayesianGPLVM(_data(), Q, num_inducing=M, batch_size=20),
                         optimizer="svi", max_iters=600, polish_passes=0)
    adam = engine.fit(StochasticBayesianGPLVM(_data(), Q, num_inducing=M, batch_size=20),
                      optimizer="svi", max_iters=600, local_optimizer="adam", polish_passes=0)
    slow = engine.fit(StochasticBayesianGPLVM(_data(), Q, num_inducing=M, batch_size=20),
                      optimizer="svi", max_iters=600, local_optimizer="adam", local_learning_rate=0.02,
                      polish_passes=0)
    assert adam.objective > natgrad.objective - 5.0
    assert slow.objective < natgrad.objective - 50.0  # the rows' rate matters: the globals' rate is far too small


@pytest.mark.parametrize("rate", [0.0, -1.0, float("nan"), "fast", True])
def test_impossible_local_learning_rates_are_refused_before_anything_moves(rate):
    m = _model()
    before = m.get_free()
    with pytest.raises(engine.ConfigurationError, match="local_learning_rate"):
        engine.fit(m, optimizer="svi", max_iters=3, local_optimizer="adam", local_learning_rate=rate)
    np.testing.assert_array_equal(m.get_free(), before)
