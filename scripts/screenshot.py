"""Regenerate docs/screenshot.png: the app in a headless Chromium, taken while a model trains.

    python scripts/screenshot.py [--out docs/screenshot.png] [--chromium /usr/bin/chromium]

Serves the app (the same factory as ``gplvm-explorer``) on a free local port,
opens it in Chromium through Playwright, picks the three-class flow sample,
presses Train and takes the picture once the objective curve, the ARD bars and
the shaded latent map have been drawn a few times, while the fit is still
running. A PNG over `MAX_BYTES` is reduced to a palette image.

Needs the test extras (``pip install -e '.[test]'``: playwright) and a
Chromium (e.g. Debian's ``chromium`` package; never ``playwright install``).
Serving, Chromium and the page's probes come from the browser tests' kit
(``tests/browserkit.py``).
"""
from __future__ import annotations

import argparse
import io
import logging
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # the package first, then the browser kit beside the tests

from browserkit import CHROMIUM_ARGS, column_length, find_chromium, serve_in_process, wait_ready  # noqa: E402

log = logging.getLogger("screenshot")
SAMPLE_TITLE = "Three-phase flow (synthetic, 12-D)"
VIEWPORT = {"width": 1280, "height": 1180}
MAX_BYTES = 350_000  # above this the PNG is reduced to a palette of 256 colours
# page pixel of a spot in the latent map's upper left, off the points: a click there shows the
# output predicted at a latent location of high variance without selecting (and dimming) points
CLICK_TARGET = """() => {
  const v = __gk.figure('Latent space'); if (!v) return null;
  const box = v.canvas_view.el.getBoundingClientRect(), xr = v.frame.x_range, yr = v.frame.y_range;
  const x = xr.start + 0.2 * (xr.end - xr.start), y = yr.end - 0.2 * (yr.end - yr.start);
  return [box.left + v.frame.x_scale.compute(x), box.top + v.frame.y_scale.compute(y)];
}"""


def _wait_until(predicate, timeout: float, what: str) -> None:
    start = time.monotonic()
    said = start
    while not predicate():
        now = time.monotonic()
        if now - start > timeout:
            raise RuntimeError(f"timed out waiting for {what}")
        if now - said > 10:
            log.info("still waiting for %s (%.0f s)", what, now - start)
            said = now
        time.sleep(0.3)


def take(page, url: str, out: Path, min_points: int) -> None:
    page.goto(url)
    wait_ready(page)
    page.locator("select").first.select_option(label=SAMPLE_TITLE)
    page.get_by_text("N = 450 points").first.wait_for(timeout=60_000)
    iters = page.get_by_label("Iterations")
    iters.fill("5000")  # far more than the picture needs: the fit is still running when it is taken
    iters.press("Enter")
    train = page.get_by_role("button", name="▶ Train", exact=True)
    train.scroll_into_view_if_needed()
    for _ in range(3):  # a click in the middle of a page update can go unanswered: try again
        train.click()
        try:
            page.get_by_text("it/s").first.wait_for(timeout=30_000)
            break
        except Exception:  # noqa: BLE001 - playwright's TimeoutError
            log.info("training has not started; pressing Train again")
    else:
        raise RuntimeError("the page did not start training")

    def length(col):
        return column_length(page, col)

    _wait_until(lambda: length("objective") >= min_points, 300, f"{min_points} points of the objective curve")
    _wait_until(lambda: length("image") > 0 and length("colour") > 0, 120, "the shaded latent map")
    # a click on the map shows the output predicted there (the reconstruction panel)
    pos = page.evaluate(CLICK_TARGET)
    if pos is not None:
        page.mouse.click(*pos)
        page.get_by_text("Nearest training point #").first.wait_for(timeout=60_000)
    # a moment for the page to draw, not more: the points keep moving while training, and the
    # nearest point marked on the map follows its point away from the click
    time.sleep(0.5)
    if page.get_by_role("button", name="■ Stop", exact=True).is_disabled():
        raise RuntimeError("the fit ended before the picture was taken: raise the iteration count")
    page.evaluate("() => window.scrollTo(0, 0)")
    png = page.screenshot(full_page=False)
    logging.getLogger("bokeh").setLevel(logging.ERROR)  # the session's end is not news
    page.get_by_role("button", name="■ Stop", exact=True).click()
    _save_small(png, out)


def _save_small(png: bytes, out: Path) -> None:
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    out.parent.mkdir(parents=True, exist_ok=True)
    image.save(out, optimize=True)
    if out.stat().st_size > MAX_BYTES:  # a palette image; the class colours must stay apart
        image.quantize(colors=256, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE).save(
            out, optimize=True)
    log.info("wrote %s (%d x %d, %.0f kB)", out, *image.size, out.stat().st_size / 1e3)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshot.png")
    p.add_argument("--chromium", default=None, help="Chromium executable (default: Debian's /usr/bin/chromium)")
    p.add_argument("--min-points", type=int, default=60,
                   help="objective points drawn before the picture is taken (default 60)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    chromium = find_chromium(args.chromium)
    if chromium is None:
        raise SystemExit("No Chromium found: install Debian's `chromium` package or pass --chromium PATH.")

    from playwright.sync_api import sync_playwright

    log.info("serving the app and compiling the numerical kernels (once; cached on disk)...")
    with serve_in_process() as url:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport=VIEWPORT)
                try:
                    take(page, url, args.out, args.min_points)
                except Exception:
                    failed = args.out.with_name(args.out.stem + "-failed.png")
                    page.screenshot(path=str(failed), full_page=True)
                    log.error("the page at the failure: %s", failed)
                    raise
            finally:
                browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
