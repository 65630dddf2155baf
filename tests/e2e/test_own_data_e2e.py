"""A newcomer's own files, uploaded through the page and trained with the defaults.

Each file is generated here (`userdata`), never a bundled sample.
"""
from __future__ import annotations

import re
import time

import pytest
from browserkit import click_train, fill_numbers, open_page, poll, train_to_end, wait_loaded

from userdata import image_csv, mixed_units_csv

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(420),
    pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning"),
]

#: the status line at a run's end: the iteration cap ("Finished") or the convergence rule ("Converged")
DONE = re.compile(r"(?:Finished|Converged) after (\d+) iterations")


def _upload(page, path) -> None:
    page.locator("input[type=file]").first.set_input_files(str(path))


def _summary(page) -> str:
    values = page.locator("textarea").evaluate_all("(els) => els.map((e) => e.value)")
    return next((v for v in values if "model summary" in v), "")


def _nn_errors(page) -> tuple[int, int] | None:
    found = re.search(r"1-NN errors in the latent space: (\d+) of (\d+)", _summary(page))
    return (int(found.group(1)), int(found.group(2))) if found else None


def test_mixed_units_are_standardised_by_default_with_a_note(page, served_app, tmp_path, artifacts):
    path = tmp_path / "wine-like.csv"
    path.write_bytes(mixed_units_csv())
    open_page(page, served_app)
    box = page.locator("div.bk-Checkbox").filter(has_text="Standardise features").locator("input[type=checkbox]")
    assert not box.is_checked()  # the bundled glyph images keep their units
    _upload(page, path)
    summary = wait_loaded(page, "wine-like.csv")
    assert "standardised (zero mean, unit variance)" in summary
    note = page.locator(".gx-units-note").first
    line = note.get_by_text(re.compile(r"^Standardised by default: the columns' spreads differ [\d,]+-fold "
                                       r"\('proline' vs '\w+'\)\. Untick to model the raw units\.$"))
    line.wait_for(timeout=30_000)
    assert poll(box.is_checked, timeout=10), "the checkbox does not show the standardisation"

    train_to_end(page)  # the defaults
    errors = poll(lambda: _nn_errors(page), timeout=60)
    assert errors is not None and errors[1] == 120 and errors[0] <= 12, _summary(page)
    page.screenshot(path=str(artifacts / "own-data-mixed-units.png"))

    box.uncheck()  # the user's choice: the raw units, and a note on what that means
    note.get_by_text("unstandardised, the widest columns dominate").wait_for(timeout=30_000)
    assert "standardised" not in wait_loaded(page, "wine-like.csv").replace("unstandardised", "")

    # the next data set does not inherit the choice, nor the note
    page.get_by_label("Data set (bundled sample or your file)").select_option(label="Swiss roll (3-D)")
    wait_loaded(page, "swiss-roll")
    assert poll(lambda: not note.is_visible(), timeout=20) and not box.is_checked()


# page pixel at fractions (fx, fy) of the latent map's frame (from its left, from its top), or null
MAP_SPOT = """([fx, fy]) => {
  function* walk(v) { yield v; if (v.children) for (const c of v.children()) yield* walk(c); }
  for (const root of Object.values(Bokeh.index)) for (const v of walk(root)) {
    const t = v.model && v.model.title;
    if (!(t && (t.text === 'Latent space' || t === 'Latent space') && v.frame)) continue;
    const box = v.canvas_view.el.getBoundingClientRect(), f = v.frame.bbox;
    return [box.left + f.left + fx * f.width, box.top + f.top + fy * f.height];
  }
  return null;
}"""
# [height, width, smallest, largest] of the image in the source called `name`, or null
IMAGE_IN = """(name) => {
  for (const doc of Bokeh.documents) for (const m of doc.all_models) {
    if (m.name !== name || !m.data) continue;
    const col = m.data instanceof Map ? m.data.get('image') : m.data.image;
    if (!col || !col.length || !col[0].shape) return null;
    const img = col[0], values = Array.from(img);
    return [img.shape[0], img.shape[1], Math.min(...values), Math.max(...values)];
  }
  return null;
}"""


# the titles of the page's figures
TITLES = """() => {
  const out = [];
  for (const doc of Bokeh.documents) for (const m of doc.all_models)
    if (m.title && typeof m.title.text === 'string' && m.x_range) out.push(m.title.text);
  return out;
}"""


def _image(page, name):
    return page.evaluate(IMAGE_IN, name)


def test_an_image_csv_reconstructs_as_images(page, served_app, tmp_path, artifacts):
    path = tmp_path / "my-digits.csv"
    path.write_bytes(image_csv("pixel_{r}_{c}"))
    open_page(page, served_app)
    _upload(page, path)
    summary = wait_loaded(page, "my-digits.csv")
    assert "N = 90 points, D = 64 features" in summary and "images of 8 × 8 pixels" in summary, summary
    train_to_end(page)
    spot = poll(lambda: page.evaluate(MAP_SPOT, [0.15, 0.15]), timeout=30)
    assert spot is not None, "latent map not found"
    page.mouse.click(*spot)
    page.get_by_text("Nearest training point #").first.wait_for(timeout=60_000)
    for name in ("reconstruction-image", "reconstruction-std-image", "reconstruction-nearest-image"):
        shape = poll(lambda n=name: (lambda s: s if s and s[:2] == [8, 8] else None)(_image(page, n)), timeout=30)
        assert shape is not None, f"{name}: {_image(page, name)}"
    low, high = _image(page, "reconstruction-std-image")[2:]
    assert 0 < low <= high, "the ±2σ image is not twice a positive standard deviation"
    titles = poll(lambda: (lambda t: t if any(x.startswith("±2σ\n≤") for x in t) else None)(
        page.evaluate(TITLES)), timeout=30) or page.evaluate(TITLES)
    assert any(re.fullmatch(r"±2σ\n≤ [\d.e+-]+", t) for t in titles), titles
    assert any(re.fullmatch(r"Nearest: #\d+\n(bar|ring|cross)", t) for t in titles), titles
    page.screenshot(path=str(artifacts / "own-data-images.png"))


def test_a_square_number_of_columns_becomes_images_once_confirmed(page, served_app, tmp_path):
    path = tmp_path / "numbered.csv"
    path.write_bytes(image_csv("v{i}"))  # names that say nothing about pixels
    open_page(page, served_app)
    _upload(page, path)
    summary = wait_loaded(page, "numbered.csv")
    assert "D = 60 features" in summary and "images" not in summary  # four blank columns dropped
    page.get_by_text("64 columns: are the rows 8 × 8 images?").first.wait_for(timeout=30_000)
    page.get_by_role("button", name="Show as 8 × 8 images").click()
    assert poll(lambda: "images of 8 × 8 pixels" in wait_loaded(page, "numbered.csv"), timeout=30)
    assert "D = 64 features" in wait_loaded(page, "numbered.csv")  # the blank pixels are back
    page.get_by_label("Rows are images").select_option(label="not images")
    assert poll(lambda: "D = 60 features" in wait_loaded(page, "numbered.csv"), timeout=30)


def test_samples_bring_their_model(page, served_app):
    open_page(page, served_app)
    model = page.get_by_label("Model", exact=True)
    picker = page.get_by_label("Data set (bundled sample or your file)")
    for title, sample, shown in (("Walking, with a gap in time (for the dynamical model)", "walking-gap",
                                  "GP-LVM with dynamics (GPDS)"),
                                 ("Two views: image and sensors (for MRD)", "two-views",
                                  "MRD (shared and private latent dims of several views)"),
                                 ("Swiss roll (3-D)", "swiss-roll", "Bayesian GP-LVM")):
        picker.select_option(label=title)
        wait_loaded(page, sample)
        assert poll(lambda: model.evaluate("(s) => s.options[s.selectedIndex].text") == shown, timeout=20), \
            model.evaluate("(s) => s.options[s.selectedIndex].text")


def test_a_refused_upload_shows_no_success_tile(page, served_app, tmp_path):
    bad = tmp_path / "ragged.csv"
    bad.write_text("a,b,c\n1,2,3\n4,5\n6,7,8\n")
    open_page(page, served_app)
    _upload(page, bad)
    page.get_by_text(re.compile("Could not load ragged.csv: Ragged rows")).first.wait_for(timeout=60_000)
    assert "rotating-glyph" in wait_loaded(page, "rotating-glyph")  # the previous data stay
    complete = page.locator(".filepond--file-status-main").filter(has_text="Upload complete")
    # the dropper marks a file complete once it is sent, a moment after the refusal: watch for a while
    seen = []
    for _ in range(20):
        seen.append(complete.count())
        time.sleep(0.25)
    assert max(seen) == 0, "a refused file shows a green 'Upload complete' tile"
    good = tmp_path / "good.csv"
    good.write_text("a,b,c\n" + "\n".join(f"{i},{i * i % 7},{i % 3}" for i in range(12)) + "\n")
    _upload(page, good)  # the fresh dropper takes files
    wait_loaded(page, "good.csv")
    assert poll(lambda: complete.count() == 1, timeout=20)  # an accepted file does show its tile


# [the profile's x-axis labels, the objective curve's points] on the page
NAMES_AND_TRACE = """() => {
  let labels = null, points = -1;
  for (const doc of Bokeh.documents) for (const m of doc.all_models) {
    if (m.title && m.title.text === 'Predicted features at the click' && m.below && m.below.length) {
      const o = m.below[0].major_label_overrides;
      labels = o instanceof Map ? Array.from(o.values()) : Object.values(o || {});
    }
    if (m.data && m.selected !== undefined) {
      const col = m.data instanceof Map ? m.data.get('objective') : m.data.objective;
      if (col !== undefined) points = Math.max(points, col.length);
    }
  }
  return [labels, points];
}"""


def test_a_model_saved_and_reopened_on_the_page_is_whole(page, served_app, tmp_path, artifacts):
    path = tmp_path / "wine-like.csv"
    path.write_bytes(mixed_units_csv())
    open_page(page, served_app)
    _upload(page, path)
    wait_loaded(page, "wine-like.csv")
    train_to_end(page)
    done = page.get_by_text(DONE).first.inner_text()
    iterations = int(DONE.search(done).group(1))
    points = poll(lambda: (lambda p: p if p[1] > 1 else None)(page.evaluate(NAMES_AND_TRACE)), timeout=30)[1]
    with page.expect_download(timeout=60_000) as info:
        page.get_by_role("button", name="Trained model (NPZ)").click()
    saved = tmp_path / "wine-model.npz"
    info.value.save_as(saved)

    page.get_by_label("Data set (bundled sample or your file)").select_option(label="Swiss roll (3-D)")
    wait_loaded(page, "swiss-roll")
    _upload(page, saved)
    page.get_by_text("Saved model wine-model.npz opened").first.wait_for(timeout=60_000)
    summary = wait_loaded(page, "wine-model.npz")
    assert "standardised (zero mean, unit variance)" in summary and "labels: class, 3 distinct" in summary, summary
    # the trace and the iterations, the column names on the reconstruction's axis
    names = poll(lambda: (lambda r: r if r[0] and r[1] == points else None)(page.evaluate(NAMES_AND_TRACE)),
                 timeout=30)
    assert names is not None, page.evaluate(NAMES_AND_TRACE)
    assert names[0][0] == "proline" and "x1" not in names[0], names[0]
    assert poll(lambda: f"Iterations: {iterations};" in _summary(page), timeout=30), _summary(page)
    page.screenshot(path=str(artifacts / "own-data-reopened.png"))


# what is cut off in the main area: its own horizontal overflow, and every card wider than its box
CUT_OFF = """() => {
  const main = document.querySelector('#main'), box = main.getBoundingClientRect(), out = [];
  if (main.scrollWidth > main.clientWidth + 1) out.push(`main: ${main.scrollWidth} > ${main.clientWidth}`);
  for (const card of main.querySelectorAll('.card-margin')) {
    const r = card.getBoundingClientRect();
    if (r.height === 0) continue;  // a card for another model, hidden
    const title = (card.innerText || '').split('\\n')[0].slice(0, 40);
    if (card.scrollWidth > card.clientWidth + 1 || r.right > box.right + 1)
      out.push(`${title}: ${card.scrollWidth} > ${card.clientWidth}, right ${Math.round(r.right)} > ${Math.round(box.right)}`);
  }
  return out;
}"""
# [top, bottom] of each visible card of the main area, and the height below the page's header
CARD_SPANS = """() => {
  const header = document.querySelector('#header'), top = header ? header.getBoundingClientRect().bottom : 0;
  const spans = [...document.querySelectorAll('#main .card-margin')].map((c) => c.getBoundingClientRect())
    .filter((r) => r.height > 0).map((r) => [Math.round(r.top), Math.round(r.bottom)]);
  return {spans, room: window.innerHeight - top};
}"""


def test_train_is_on_the_first_screen_at_1280x720(page, served_app, artifacts):
    page.set_viewport_size({"width": 1280, "height": 720})
    open_page(page, served_app)
    train = page.get_by_role("button", name="▶ Train", exact=True)
    box = train.bounding_box()
    assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= 720, box
    assert page.evaluate("() => document.querySelector('#sidebar').scrollTop") == 0  # nothing scrolled
    assert page.evaluate("([x, y]) => { let e = document.elementFromPoint(x, y);"
                         " while (e && e.shadowRoot && e.shadowRoot.elementFromPoint(x, y) !== e)"
                         " { const inner = e.shadowRoot.elementFromPoint(x, y); if (!inner || inner === e) break; e = inner; }"
                         " return e ? e.textContent : null; }",
                         [box["x"] + box["width"] / 2, box["y"] + box["height"] / 2]).strip() == "▶ Train"
    train.click()
    page.get_by_text(DONE).first.wait_for(timeout=150_000)
    page.screenshot(path=str(artifacts / "layout-1280x720.png"))
    cards = page.evaluate(CARD_SPANS)
    tall = [s for s in cards["spans"][:2] if s[1] - s[0] > cards["room"]]  # the status line, the map's card
    assert not tall, f"taller than the screen below the header ({cards['room']} px): {tall}"
    assert page.evaluate(CUT_OFF) == []


def test_nothing_is_cut_off_at_1024x768(page, served_app, artifacts):
    page.set_viewport_size({"width": 1024, "height": 768})
    open_page(page, served_app)
    train = page.get_by_role("button", name="▶ Train", exact=True)
    box = train.bounding_box()
    assert box is not None and box["y"] + box["height"] <= 768, box
    assert page.evaluate(CUT_OFF) == []
    picker = page.get_by_label("Data set (bundled sample or your file)")
    for title, sample in (("Glyph with hidden quarters (missing pixels)", "occluded-glyph"),
                          ("Walking, with a gap in time (for the dynamical model)", "walking-gap"),
                          ("Two views: image and sensors (for MRD)", "two-views")):
        picker.select_option(label=title)
        wait_loaded(page, sample)
        fill_numbers(page, {"Iterations": 60})
        finished = page.get_by_text(DONE)
        click_train(page)
        assert poll(lambda: finished.count() == 0, timeout=60), "the run did not start"  # the last run's line went
        finished.first.wait_for(timeout=150_000)
        time.sleep(2)  # the cards of the result are drawn after the status line
        cut = poll(lambda: page.evaluate(CUT_OFF) == [] or None, timeout=10)
        page.screenshot(path=str(artifacts / f"layout-1024x768-{sample}.png"), full_page=True)
        assert cut, f"{sample}: {page.evaluate(CUT_OFF)}"
    # the reconstruction and the ARD bars go under the map instead of beside it
    spans = page.evaluate(CARD_SPANS)["spans"]
    recon = page.get_by_text("Reconstruction", exact=True).first.bounding_box()
    latent = page.get_by_text("Latent space", exact=True).first.bounding_box()
    assert recon["y"] > latent["y"] + 300 and recon["x"] < latent["x"] + 50, (recon, latent, spans)


def test_a_model_fitted_on_the_command_line_opens_with_its_images_and_trace(page, tmp_path, artifacts):
    """``gplvm-explorer fit my-digits.csv -o model.npz``, then ``gplvm-explorer model.npz``: images, names, trace."""
    from gplvm_explorer import fit_command

    from browserkit import serve_cli

    data = tmp_path / "my-digits.csv"
    data.write_bytes(image_csv("pixel_{r}_{c}"))
    out = tmp_path / "digits-model.npz"
    assert fit_command.main([str(data), "--label", "label", "--max-iters", "40", "-o", str(out), "--quiet"]) == 0
    with serve_cli([out], tmp_path) as url:
        page.goto(url)
        page.wait_for_function("window.Bokeh && Bokeh.documents.length > 0", timeout=120_000)
        page.get_by_text("Saved model digits-model.npz opened").first.wait_for(timeout=90_000)
        summary = wait_loaded(page, "digits-model.npz")
        assert "images of 8 × 8 pixels" in summary and "labels: label, 3 distinct" in summary, summary
        points = poll(lambda: (lambda p: p if p[1] > 5 else None)(page.evaluate(NAMES_AND_TRACE)), timeout=30)
        assert points is not None, page.evaluate(NAMES_AND_TRACE)  # the fit's objective curve
        spot = poll(lambda: page.evaluate(MAP_SPOT, [0.5, 0.5]), timeout=30)
        page.mouse.click(*spot)
        page.get_by_text("Nearest training point #").first.wait_for(timeout=60_000)
        for name in ("reconstruction-image", "reconstruction-std-image", "reconstruction-nearest-image"):
            shape = poll(lambda n=name: (lambda s: s if s and s[:2] == [8, 8] else None)(_image(page, n)),
                         timeout=30)
            assert shape is not None, f"{name}: {_image(page, name)}"
        page.screenshot(path=str(artifacts / "own-data-cli-model.png"))
