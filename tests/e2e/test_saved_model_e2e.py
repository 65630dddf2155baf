"""`gplvm-explorer model.npz`: the served page opens a saved model, ready to explore, without training."""
from __future__ import annotations

import numpy as np
import pytest

from browserkit import poll, serve_cli, wait_ready

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning"),
]

N, Q = 53, 3
# page pixel of the latent map's centre
MAP_CENTRE = """() => {
  const v = __gk.figure('Latent space'); if (!v) return null;
  const box = v.canvas_view.el.getBoundingClientRect(), f = v.frame.bbox;
  return [box.left + f.left + 0.5 * f.width, box.top + f.top + 0.5 * f.height];
}"""


@pytest.fixture
def served_model(tmp_path, chromium_path):
    import engine
    from engine.io import save_model

    rng = np.random.default_rng(5)
    t = rng.uniform(-2, 2, size=(N, 1))
    Y = np.hstack([np.sin(t * (j + 1)) for j in range(6)]) + 0.05 * rng.standard_normal((N, 6))
    model = engine.BayesianGPLVM(Y, Q, num_inducing=10)
    engine.fit(model, max_iters=20)
    path = tmp_path / "saved model.npz"
    save_model(model, path)
    with serve_cli([path], tmp_path) as url:
        yield url, path, model.objective()


@pytest.mark.timeout(240)
def test_cli_opens_a_saved_model_to_explore(served_model, page, artifacts):
    url, path, objective = served_model
    page.goto(url)
    wait_ready(page, timeout=90_000)
    try:
        page.get_by_text(f"Saved model {path.name} opened").first.wait_for(timeout=60_000)
        # the latent map (every row), the ARD bars (one per latent dimension), without a Train click
        page.wait_for_function(f"__gk.len('colour') === {N}", timeout=60_000)
        page.wait_for_function(f"__gk.len('dimension') === {Q}", timeout=30_000)
    except Exception:
        page.screenshot(path=str(artifacts / "saved_model_failed.png"), full_page=True)
        raise
    page.get_by_text(f"N = {N} points").first.wait_for(state="attached", timeout=30_000)
    page.get_by_text(f"ELBO {objective:.6g}").first.wait_for(state="attached", timeout=30_000)  # the saved bound
    train = page.get_by_role("button", name="▶ Train", exact=True)
    assert poll(train.is_enabled, timeout=30), "Train stayed disabled after opening the saved model"
    # clicking the map reconstructs there, from the saved parameters
    pos = poll(lambda: page.evaluate(MAP_CENTRE), timeout=30)
    assert pos is not None, "latent map not found"
    page.mouse.click(*pos)
    page.get_by_text("Nearest training point #").first.wait_for(timeout=30_000)
    page.screenshot(path=str(artifacts / "saved_model.png"), full_page=True)


@pytest.mark.timeout(300)
def test_an_uploaded_model_opens_with_its_labels(served_app, page, artifacts, tmp_path):
    import engine

    from gplvm_explorer.saved_model import write

    rng = np.random.default_rng(8)
    t = rng.uniform(-2, 2, size=(N, 1))
    Y = np.hstack([np.cos(t * (j + 1)) for j in range(5)]) + 0.05 * rng.standard_normal((N, 5))
    model = engine.SparseGPLVM(Y, 2, num_inducing=8)
    engine.fit(model, max_iters=15)
    path = tmp_path / "uploaded model.npz"
    write(model, path, labels=np.where(t[:, 0] > 0, "right", "left"), label_name="side")
    page.goto(served_app)
    wait_ready(page, timeout=90_000)
    page.locator("input[type=file]").set_input_files(str(path))
    try:
        page.get_by_text(f"Saved model {path.name} opened").first.wait_for(timeout=60_000)
        page.wait_for_function(f"__gk.len('colour') === {N}", timeout=60_000)
    except Exception:
        page.screenshot(path=str(artifacts / "saved_model_upload_failed.png"), full_page=True)
        raise
    page.get_by_text("labels: side, 2 distinct").first.wait_for(state="attached", timeout=30_000)
    page.get_by_text(f"ELBO {model.objective():.6g}").first.wait_for(state="attached", timeout=30_000)  # its bound
    page.screenshot(path=str(artifacts / "saved_model_upload.png"), full_page=True)
