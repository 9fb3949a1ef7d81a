"""The dashboard in headless Chromium (Debian's /usr/bin/chromium, driven by playwright).

A real ``ragray run`` (SmolLM2 on two demo questions) and a simulated ``inverted`` run sit in a
runs folder served by ``ragray dashboard``'s app under uvicorn. The browser opens both, checks that
the divergent flags and counts it shows equal the runs' files, filters by flag, drills into a
question, compares the runs, uploads a CSV (and a bad one), and saves screenshots to
``test-artifacts/browser/``.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
import socket
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

playwright_api = pytest.importorskip("playwright.sync_api")
uvicorn = pytest.importorskip("uvicorn")

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
if not Path(CHROMIUM).exists():
    pytest.skip("Debian's chromium is not installed (apt-get install chromium)", allow_module_level=True)

from ragray.config import load_config  # noqa: E402
from ragray.adapters.dashboard.app import make_dashboard  # noqa: E402
from ragray.simulate import simulate  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "browser"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from ragray.pipeline import run_influence

    root = tmp_path_factory.mktemp("runs")
    history = f"history.url=sqlite:///{root / 'history.sqlite'}"
    simulate(root / "sim-inverted", n_questions=8, k=5, scenario="inverted", seed=4, base=load_config(None, [history]),
             progress=False)
    config = load_config(None, ["data.path=demo", "data.limit=2", "retrieval.top_k=3", "generation.max_tokens=12",
                                history])
    run_influence(config, root / "real-smollm2", progress=False)
    return root


@pytest.fixture(scope="module")
def server(runs):
    port = free_port()
    app = make_dashboard(runs, f"sqlite:///{runs / 'history.sqlite'}")
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.time() + 30
    while not srv.started:
        assert time.time() < deadline, "the dashboard did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(10)


@pytest.fixture(scope="module")
def browser():
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture()
def page(browser, request):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    external = []
    pg.on("request", lambda r: external.append(r.url)
          if not r.url.startswith(("http://127.0.0.1", "data:", "file://")) else None)
    yield pg
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    pg.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
    context.close()
    assert not external, f"the page fetched from outside: {external}"


def open_run(page, server, folder: str) -> None:
    page.goto(server + "/")
    page.locator(f'tr:has(div:text-is("{folder}")) a').first.click()
    page.wait_for_selector("h2:text('Questions')")


def shown_value(page, key):
    return json.loads(page.locator(f'[data-key="{key}"]').first.get_attribute("data-value"))


def check_flags_match_files(page, run_dir: Path, rows: str = "#questions tbody tr") -> dict:
    summary = json.loads((run_dir / "summary.json").read_text())
    questions = pq.read_table(run_dir / "questions.parquet").to_pylist()
    for flag, count in summary["flag_counts"].items():
        assert shown_value(page, f"flag_counts.{flag}") == count, flag
        assert page.locator(f'{rows}[data-flags~="{flag}"]').count() == count, flag
        assert count == sum(flag in q["flags"] for q in questions)
    assert shown_value(page, "divergent_rate") == summary["divergent_rate"]
    assert shown_value(page, "n_questions") == len(questions)
    return summary


def test_index_lists_both_runs(page, server):
    page.goto(server + "/")
    rows = page.locator("#runs tbody tr")
    assert rows.count() == 2
    assert page.locator("#runs tbody tr:has-text('simulated-inverted') .badge.simulated").count() == 1


def test_simulated_inverted_run_shows_its_flags_and_filters(page, server, runs):
    open_run(page, server, "sim-inverted")
    summary = check_flags_match_files(page, runs / "sim-inverted")
    assert summary["flag_counts"]["divergent"] == summary["flag_counts"]["inverted"] == 8
    assert page.locator(".badge.simulated").count() == 1
    assert page.locator("svg.chart").count() == 4


def test_real_run_shows_its_flags_and_the_flag_filter_works(page, server, runs):
    open_run(page, server, "real-smollm2")
    summary = check_flags_match_files(page, runs / "real-smollm2")
    assert summary["backend"] == "transformers" and summary["n_questions"] == 2
    flagged = [f for f, n in summary["flag_counts"].items() if n]
    if flagged:  # tick a flag: only its questions stay visible, and the counter says how many
        page.locator(f'[data-filter-for="questions"] input[value="{flagged[0]}"]').check()
        visible = page.locator("#questions tbody tr[data-flags]:visible").count()
        assert visible == summary["flag_counts"][flagged[0]]
        assert page.locator('[data-filter-for="questions"] .shown').inner_text() == str(visible)


def test_drill_into_a_question(page, server, runs):
    open_run(page, server, "sim-inverted")
    page.locator("#questions tbody tr a").first.click()
    qid = page.locator("h1[data-question]").get_attribute("data-question")
    passages = [p for p in pq.read_table(runs / "sim-inverted" / "passages.parquet").to_pylist()
                if p["question_id"] == qid]
    rows = page.locator("#passages tbody tr")
    assert rows.count() == len(passages) == 5
    shown = [json.loads(v) for v in page.locator('#passages td[data-key="influence"]').evaluate_all(
        "els => els.map(e => e.getAttribute('data-value'))")]
    assert shown == [p["influence"] for p in sorted(passages, key=lambda p: p["retrieval_rank"])]
    assert page.locator("#passages").inner_text().count("Simulated passage") == 5  # texts from the dataset
    assert "inverted" in page.locator(".badge.inverted").first.inner_text()


def test_compare_two_runs(page, server, runs):
    page.goto(server + "/")
    form = page.locator("#compare-form")
    values = form.locator("#compare-a option").evaluate_all("os => os.map(o => o.value)")
    form.locator("#compare-a").select_option(values[0])
    form.locator("#compare-b").select_option(values[1])
    form.locator("button").click()
    page.wait_for_selector("#compare")
    a = float(page.locator('#compare tr[data-metric="n_questions"] td[data-side=a]').get_attribute("data-value"))
    b = float(page.locator('#compare tr[data-metric="n_questions"] td[data-side=b]').get_attribute("data-value"))
    assert sorted([a, b]) == [2, 8]


def test_upload_a_csv_of_another_tools_results(page, server, tmp_path):
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["question_id", "passage_id", "retrieval_rank", "influence", "question"])
    for q in range(3):  # the tool's influence falls with the rank for q0, rises for q1 and q2
        for r in range(1, 5):
            w.writerow([f"t{q}", f"t{q}-p{r}", r, (5 - r) / 4 if q == 0 else r / 4, f"tool question {q}"])
    path = tmp_path / "contextcite_scores.csv"
    path.write_text(buf.getvalue())
    page.goto(server + "/")
    page.set_input_files("#upload-file", str(path))
    page.locator("#upload-form button").click()
    page.wait_for_selector("h2:text('Questions')")
    assert shown_value(page, "n_questions") == 3
    assert shown_value(page, "flag_counts.inverted") == 2
    assert page.locator('#questions tbody tr[data-flags~="inverted"]').count() == 2
    bad = tmp_path / "bad.csv"
    bad.write_text("question_id,passage_id,retrieval_rank,influence\nq,p,first,0.5\n")
    page.goto(server + "/")
    page.set_input_files("#upload-file", str(bad))
    page.locator("#upload-form button").click()
    assert "line 2: retrieval_rank is not a number: 'first'" in page.locator(".error-message").inner_text()


def test_report_html_opens_from_disk_with_no_network(page, runs):
    """The run directory's own report.html, as a file: every section and number, nothing fetched."""
    run_dir = runs / "real-smollm2"
    page.goto((run_dir / "report.html").as_uri())
    assert page.locator("h2").all_inner_texts() == [
        "Questions", "Plots", "Does the attribution find what the model used?", "Alignment",
        "Summary (Spearman ρ measures)", "Details: the Spearman ρ plots"]
    summary = check_flags_match_files(page, run_dir, rows="#qcards article.qcard")
    assert shown_value(page, "mean_spearman") == summary["mean_spearman"]
    assert page.locator("#panel tbody tr").count() > 0  # the validity panel, read from summary.json
    assert page.locator("svg.chart").count() == 5  # usage nDCG, influence by rank; the Spearman details
    assert page.locator("svg.chart").first.get_attribute("aria-label").startswith("Usage nDCG per question")
    first = page.locator("#qcards article.qcard").first  # passages shown without a click
    assert first.locator("li.psg").count() == 3 and first.locator("li.psg").first.is_visible()
