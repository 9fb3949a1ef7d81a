"""report.html in headless Chromium (Debian's /usr/bin/chromium, driven by playwright).

A run without a model (the scripted generator over tests/fixtures/records/report_cards.jsonl)
writes report.html; opened from disk at 1280×800, the first question card's passages (text and
influence bars) are on the first screen without a click, with their "used" and "gold" marks; the
verdict filter hides and shows cards; and no two texts of any chart overlap, in the report and in
a page of charts with hard labels. Screenshots go to ``$RAGRAY_TEST_ARTIFACTS`` (default
``tests/artifacts/``).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

playwright_api = pytest.importorskip("playwright.sync_api")

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("report_screenshots", ROOT / "scripts" / "report_screenshots.py")
shots = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(shots)

if shots.chromium() is None:
    pytest.skip("Debian's chromium is not installed (apt-get install chromium)", allow_module_level=True)

from ragray.config import load_config  # noqa: E402
from ragray.generation.scripted import ScriptedGenerator  # noqa: E402
from ragray.pipeline import run_influence  # noqa: E402
from ragray.report import svg  # noqa: E402
from ragray.report.page import page as html_page  # noqa: E402

pytestmark = pytest.mark.browser

CARDS = ROOT / "tests" / "fixtures" / "records" / "report_cards.jsonl"


def artifacts() -> Path:
    folder = Path(os.environ.get("RAGRAY_TEST_ARTIFACTS") or ROOT / "tests" / "artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "run"
    config = load_config(None, [f"data.path={CARDS}", "generation.backend=scripted",
                                f"history.url=sqlite:///{out.parent / 'h.sqlite'}"])
    run_influence(config, out, generator=ScriptedGenerator(), progress=False)
    return out


@pytest.fixture(scope="module")
def browser():
    with playwright_api.sync_playwright() as p:
        b = shots.launch(p)
        yield b
        b.close()


@pytest.fixture()
def report(browser, run_dir):
    pg = shots.open_report(browser, run_dir / "report.html")
    external = []
    pg.on("request", lambda r: external.append(r.url) if not r.url.startswith(("file://", "data:")) else None)
    pg.reload()
    pg.wait_for_selector("#qcards")
    yield pg
    pg.context.close()
    assert not external, f"the report fetched from outside: {external}"


def inside_viewport(box, width=1280, height=800) -> bool:
    return (box is not None and box["width"] > 0 and box["height"] > 0 and box["x"] >= 0 and box["y"] >= 0
            and box["x"] + box["width"] <= width and box["y"] + box["height"] <= height)


def test_the_first_question_and_its_passages_are_on_the_first_screen(report, run_dir):
    folder = artifacts()
    report.screenshot(path=str(folder / "report-first-screen.png"))
    card = report.locator(".qcard").first
    card.screenshot(path=str(folder / "report-question-card.png"))
    first_q = pq.read_table(run_dir / "questions.parquet").to_pylist()[0]
    assert card.get_attribute("data-qid") == first_q["question_id"]
    assert first_q["question"] in card.locator(".qtext").inner_text()
    rows = card.locator("li.psg")
    passages = [p for p in pq.read_table(run_dir / "passages.parquet").to_pylist()
                if p["question_id"] == first_q["question_id"]]
    assert rows.count() == len(passages) == 4
    for i in range(rows.count()):  # text and bar of every passage, without a click
        row = rows.nth(i)
        assert inside_viewport(row.locator(".ptext").bounding_box()), i
        assert inside_viewport(row.locator(".ibar").bounding_box()), i
        assert row.locator(".ptext").inner_text().strip()
    # the used gold passage: a full-width bar, both marks; the long text opens on a click
    top = rows.first
    assert top.locator(".mk.used").is_visible() and top.locator(".mk.gold").is_visible()
    fill = top.locator(".ibar > span").bounding_box()
    assert fill["width"] == pytest.approx(top.locator(".ibar").bounding_box()["width"], abs=1)
    assert "Quillon Ferry" in top.inner_text() and "twelve minutes" not in top.inner_text()
    top.locator("summary").click()
    assert "The crossing takes twelve minutes" in top.inner_text()
    assert card.locator(".mark-ok").is_visible()


def test_the_verdict_filter_hides_and_shows_cards(report, run_dir):
    questions = pq.read_table(run_dir / "questions.parquet").to_pylist()
    want = {"misaligned": sum(q["misaligned"] is True for q in questions),
            "aligned": sum(q["misaligned"] is False for q in questions),
            "unmeasured": sum(q["misaligned"] is None for q in questions)}
    assert all(want.values())
    cards = report.locator(".qcard")
    for verdict, n in [*want.items(), ("all", len(questions))]:
        report.locator(f'input[name=verdict][value="{verdict}"]').check()
        visible = [cards.nth(i) for i in range(cards.count()) if cards.nth(i).is_visible()]
        assert len(visible) == n, verdict
        assert verdict == "all" or all(c.get_attribute("data-verdict") == verdict for c in visible)
        assert report.locator(".vfilter .shown").inner_text() == str(n)


def test_no_two_texts_of_any_chart_overlap(report):
    charts = shots.chart_text_boxes(report)
    assert len(charts) >= 5  # the two recommended plots, validity bars, the details
    for chart in charts:
        assert len(chart["texts"]) >= 4, chart["title"]
        assert shots.overlapping(chart["texts"]) == [], chart["title"]
    report.screenshot(path=str(artifacts() / "report-full.png"), full_page=True)


def test_hard_labels_do_not_overlap_either(browser, tmp_path):
    """Many ranks, long measure names, small tick steps and long titles, all drawn by svg.py."""
    ranks = list(range(1, 51))
    measures = ["drop-one log-prob", "retrieval rank*", "answer–passage embedding similarity*",
                "question–passage embedding similarity*", "retrieval score*", "random*"]
    idx = list(range(len(measures)))
    charts = [
        svg.bars([str(r) for r in ranks], [svg.Series("mean influence", ranks, [1 / r for r in ranks])],
                 title="Mean influence by retrieval rank (50 passages)", xlabel="retrieval rank", ylabel="mean influence"),
        svg.bars(measures, [svg.Series("recovery@1", idx, [0.5] * 6), svg.Series("AUC", idx, [0.6] * 6)],
                 title="Finding the gold passage: answered_context_dependent (1234 questions)",
                 xlabel="measure (* control)", ylabel="share / AUC", ymax=1.0),
        svg.histogram([0.01, 0.02, 0.0125], title="Narrow", xlabel="a long axis title " * 6, lo=0, hi=0.03,
                      marker=0.02, marker_label="misaligned below"),
        svg.lines([svg.Series("most influential first", [0, 0.5, 1], [1, 0.4, 0.1]),
                   svg.Series("least influential first", [0, 0.5, 1], [1, 0.9, 0.8])],
                  title="Deletion curves", xlabel="fraction removed", ylabel="similarity to the baseline answer " * 3),
        svg.bubbles({(r, r): 1 for r in range(1, 31)}, 30, title="Retrieval rank vs influence rank",
                    xlabel="retrieval rank", ylabel="influence rank"),
    ]
    path = tmp_path / "charts.html"
    path.write_text(html_page("charts", "<div class=charts>" + "".join(charts) + "</div>"), encoding="utf-8")
    pg = browser.new_context(viewport=shots.VIEWPORT).new_page()
    pg.goto(path.as_uri())
    boxes = shots.chart_text_boxes(pg)
    assert len(boxes) == len(charts)
    for chart in boxes:
        assert shots.overlapping(chart["texts"]) == [], chart["title"]
    pg.screenshot(path=str(artifacts() / "report-hard-labels.png"), full_page=True)
    pg.context.close()
