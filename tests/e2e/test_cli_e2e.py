"""`gplvm-explorer FILE.parquet --latent-dim 3`: the served page shows the file and the setting."""
from __future__ import annotations

import numpy as np
import pytest

from browserkit import poll, serve_cli, wait_loaded, wait_ready

pytest.importorskip("pyarrow")
pd = pytest.importorskip("pandas")

SLIDER_VALUE = """(title) => {
  for (const doc of Bokeh.documents) for (const m of doc.all_models) {
    if (m.title === title && m.value !== undefined) return m.value;
  }
  return null;
}"""


@pytest.fixture
def served_parquet(tmp_path, chromium_path):
    rng = np.random.default_rng(3)
    df = pd.DataFrame(rng.standard_normal((137, 4)), columns=list("abcd"))
    df["kind"] = pd.Categorical(np.resize(["p", "q"], 137))
    path = tmp_path / "cli_points.parquet"
    df.to_parquet(path)
    with serve_cli([path, "--latent-dim", 3, "--label", "kind"], tmp_path) as url:
        yield url, path


@pytest.mark.timeout(240)
def test_cli_serves_a_parquet_file_with_settings(served_parquet, page, artifacts):
    url, path = served_parquet
    page.goto(url)
    wait_ready(page, timeout=90_000)
    try:
        page.get_by_text("N = 137 points").first.wait_for(timeout=60_000)
    except Exception:
        page.screenshot(path=str(artifacts / "cli_parquet_failed.png"), full_page=True)
        raise
    wait_loaded(page, path.name)
    data_set = page.get_by_label("Data set (bundled sample or your file)")
    chosen_text = "el => el.selectedIndex < 0 ? '' : el.options[el.selectedIndex].text"
    chosen = poll(lambda: data_set.evaluate(chosen_text) == f"Your data: {path.name}", timeout=30)
    assert chosen, data_set.evaluate("el => Array.from(el.options).map(o => o.text)")
    page.get_by_text("labels: kind").first.wait_for(state="attached", timeout=30_000)
    page.wait_for_function(f"({SLIDER_VALUE})('Latent dimensions Q') === 3", timeout=30_000)
    page.screenshot(path=str(artifacts / "cli_parquet.png"), full_page=True)
