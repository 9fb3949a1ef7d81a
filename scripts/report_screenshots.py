"""Screenshots of a run's report.html in headless Chromium, and the checks its browser test uses.

    python scripts/report_screenshots.py <run_dir> <out_dir>

Writes ``report-first-screen.png`` (the first 1280×800 viewport) and ``report-question-card.png``
(the first question card) into ``out_dir``. Drives Debian's chromium (``/usr/bin/chromium``, or
``chromium`` on PATH) through playwright; never downloads a browser.
"""

from __future__ import annotations

import argparse
import shutil
from itertools import combinations
from pathlib import Path
from typing import Any

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]
VIEWPORT = {"width": 1280, "height": 800}

# every SVG <text> of every chart, as laid out by the browser (rectangles in page pixels)
_TEXT_BOXES = """() => Array.from(document.querySelectorAll('svg.chart')).map(svg => ({
  title: svg.getAttribute('aria-label'),
  texts: Array.from(svg.querySelectorAll('text')).map(t => {
    const r = t.getBoundingClientRect();
    return {text: t.textContent, x: r.x, y: r.y, w: r.width, h: r.height};
  })
}))"""


def chromium() -> str | None:
    """The system chromium, or None when it is not installed."""
    found = shutil.which("chromium") or "/usr/bin/chromium"
    return found if Path(found).exists() else None


def launch(playwright: Any) -> Any:
    """A headless chromium browser (the system one)."""
    return playwright.chromium.launch(executable_path=chromium(), args=CHROMIUM_ARGS)


def open_report(browser: Any, report: Path) -> Any:
    """A page at 1280×800 showing ``report`` (a report.html file), scrolled to the top."""
    page = browser.new_context(viewport=VIEWPORT).new_page()
    page.goto(Path(report).resolve().as_uri())
    page.wait_for_selector("#qcards")
    return page


def chart_text_boxes(page: Any) -> list[dict[str, Any]]:
    """Per chart: its title and the bounding box of each of its texts."""
    return page.evaluate(_TEXT_BOXES)


def overlapping(texts: list[dict[str, Any]], slack: float = 0.5) -> list[tuple[str, str]]:
    """Pairs of texts whose boxes intersect (by more than ``slack`` px each way)."""
    def meet(a: dict[str, Any], b: dict[str, Any]) -> bool:
        return (a["x"] + a["w"] - slack > b["x"] and b["x"] + b["w"] - slack > a["x"]
                and a["y"] + a["h"] - slack > b["y"] and b["y"] + b["h"] - slack > a["y"])
    shown = [t for t in texts if t["w"] > 0 and t["h"] > 0]
    return [(a["text"], b["text"]) for a, b in combinations(shown, 2) if meet(a, b)]


def screenshots(run_dir: Path, out_dir: Path) -> list[Path]:
    """Write the first-screen and first-question-card screenshots of ``run_dir``'s report."""
    from playwright.sync_api import sync_playwright

    if chromium() is None:
        raise SystemExit("chromium is not installed (apt-get install chromium)")
    out_dir.mkdir(parents=True, exist_ok=True)
    first, card = out_dir / "report-first-screen.png", out_dir / "report-question-card.png"
    with sync_playwright() as p:
        browser = launch(p)
        page = open_report(browser, Path(run_dir) / "report.html")
        page.screenshot(path=str(first))
        page.locator(".qcard").first.screenshot(path=str(card))
        browser.close()
    return [first, card]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="a run directory holding report.html")
    parser.add_argument("out_dir", type=Path, help="where the PNG files go")
    args = parser.parse_args(argv)
    for path in screenshots(args.run_dir, args.out_dir):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
