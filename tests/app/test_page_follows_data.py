"""The page follows the data on show: samples bring their model, new data clear the old click, refusals
leave no success behind."""
from __future__ import annotations

import numpy as np
import pytest

from gplvm_explorer.data import samples
from gplvm_explorer.views import DataPanel, LatentMap, ReconstructionView

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def explorer(make_explorer):
    return lambda **kw: make_explorer(publish_interval=0.0, **kw)


def test_samples_made_for_a_model_select_it_and_the_next_data_go_back(explorer):
    ex = explorer()
    made_for = {s.name: s.model for s in samples() if s.model}
    assert made_for == {"walking-gap": "gpds", "two-views": "mrd"}
    assert ex.settings.model == "bayesian"
    ex.data.sample = "walking-gap"
    assert ex.settings.model == "gpds" and ex.settings.errors == []
    ex.data.sample = "two-views"
    assert ex.settings.model == "mrd" and ex.settings.errors == []
    ex.data.sample = "swiss-roll"  # made for no model in particular: the default again
    assert ex.settings.model == "bayesian"
    ex.data.sample = "walking-gap"
    ex.settings.model = "sparse"  # the user's own pick stays with the next data set
    ex.data.sample = "three-phase-flow"
    assert ex.settings.model == "sparse"


def test_new_data_clear_the_click_its_pictures_and_the_pointer_caption(explorer, fake_build, pump):
    ex = explorer(build=fake_build())
    recon = ReconstructionView.of(ex)
    latent = LatentMap.of(ex, reconstruction=recon)
    ex.settings.model, ex.settings.latent_dim, ex.settings.optimizer, ex.settings.max_iters = "gplvm", 3, "adam", 5
    assert ex.train(), ex.training.message
    assert pump(ex, lambda: ex.training.status == "finished")
    assert ex.latent.wait() and ex.latent.view is not None
    x0, y0, x1, y1 = ex.latent.view.extent
    ex.latent.reconstruct_at((x0 + x1) / 2, (y0 + y1) / 2)
    latent.hover_text.object = "<span class='gx-hover-text'>Point #11</span>"  # as the pointer left it
    assert recon.pred_source.data["image"][0].shape == (16, 16) and len(latent.marker_source.data["x"]) == 2
    ex.data.sample = "swiss-roll"
    assert ex.latent.reconstruction is None and latent.hover_text.object == ""
    assert len(latent.marker_source.data["x"]) == 0 and "Click the latent map" in recon.text.object
    assert all(src.data["image"][0].shape == (1, 1)
               for src in (recon.pred_source, recon.std_source, recon.near_source))
    assert ex.result_is_stale  # the map is still the glyphs' model, and says so


def test_a_refused_upload_leaves_an_empty_dropper(explorer):
    ex = explorer()
    panel = DataPanel.of(ex)
    first = panel.file_input
    first.value = {"ragged.csv": b"a,b,c\n1,2,3\n4,5\n6,7,8\n"}
    assert "Ragged rows" in ex.data.error and ex.data.dataset.name == "rotating-glyph"
    assert panel.file_input is not first and panel.file_input.value == {}  # no "Upload complete" tile
    assert list(panel._dropper_slot) == [panel.file_input]
    rows = "\n".join(f"{i},{i * i % 7},{np.sin(i):.3f}" for i in range(12))
    panel.file_input.value = {"good.csv": ("a,b,c\n" + rows).encode()}  # the new dropper loads
    assert ex.data.dataset.name == "good.csv" and ex.data.error == "" and panel.file_input.value == {}
