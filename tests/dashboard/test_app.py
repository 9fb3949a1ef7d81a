"""The dashboard app in-process (no browser): catalog, sweep trials, compare, uploads, errors."""

import html
import re

import pytest
from fastapi.testclient import TestClient

from ragray.config import load_config
from ragray.adapters.dashboard.app import make_dashboard
from ragray.adapters.dashboard.upload import parse_passages_csv
from ragray.errors import InputError
from ragray.simulate import simulate
from ragray.adapters.sweep.leaderboard import write_leaderboard


@pytest.fixture()
def runs(tmp_path):
    sweep = tmp_path / "sweep-x"
    base = load_config(None, [f"history.url=sqlite:///{tmp_path / 'h.sqlite'}"])
    for tid, scenario in (("t1", "aligned"), ("t2", "inverted")):
        simulate(sweep / "trials" / tid, n_questions=4, k=4, scenario=scenario, seed=1, base=base, progress=False)
    rows = [{"rank": 1, "trial_id": "t1", "label": "aligned-trial", "status": "done", "score": 0.9},
            {"rank": 2, "trial_id": "t2", "label": "inverted-trial", "status": "done", "score": 0.1}]
    write_leaderboard(sweep, rows, "sweep x", {"objective": "quality", "weights": {}}, None)
    return tmp_path


def test_a_sweep_links_its_trials_and_two_trials_compare(runs):
    c = TestClient(make_dashboard(runs, None))
    index = c.get("/").text
    kinds = dict(re.findall(r'<tr data-run="([^"]+)" data-kind="([^"]+)">', index))
    assert sorted(kinds.values()) == ["run", "run", "sweep"]
    sweep_id = next(i for i, k in kinds.items() if k == "sweep")
    page = c.get(f"/runs/{sweep_id}").text
    links = dict((label, href) for href, label in re.findall(r'<a href="/runs/([^"]+)">(\w+-trial)</a>', page))
    assert set(links) == {"aligned-trial", "inverted-trial"}
    compare = c.get("/compare", params={"a": links["aligned-trial"], "b": links["inverted-trial"]}).text
    assert re.search(r'data-metric="flag_counts.inverted".*?data-side=a data-value="0".*?data-side=b data-value="4"',
                     compare, re.S)
    # four questions in common: a paired test cannot decide, and the page says so
    assert re.search(r'data-paired="misaligned" data-state="undecided"><td>misaligned</td><td class=num>\d</td>', compare)
    api = c.get("/api/runs").json()
    assert {r["kind"] for r in api} == {"run", "sweep"} and all(r["openable"] for r in api)


def test_missing_runs_and_questions_are_404_pages(runs):
    c = TestClient(make_dashboard(runs, None))
    assert c.get("/runs/nope").status_code == 404
    run_id = re.findall(r'<tr data-run="([^"]+)" data-kind="run">', c.get("/").text)[0]
    page = c.get(f"/runs/{run_id}/questions/sim0000")
    assert page.status_code == 200
    assert '<span class="badge context_ignored">used</span>' in page.text  # the passages the answer used
    assert "✓ correct" in page.text or "✗ wrong" in page.text or "gold</b>: –" in page.text
    r = c.get(f"/runs/{run_id}/questions/nope")
    assert r.status_code == 404 and "no question 'nope'" in r.text.replace("&#x27;", "'")
    assert c.get(f"/runs/{run_id}/files/config.yaml").status_code == 404  # only the listed result files
    assert c.get(f"/runs/{run_id}/files/summary.json").json()["simulated"]["scenario"] in ("aligned", "inverted")


ODD_IDS = ["hotpot/dev/17", "what? #2", "100% sure", "a b", "../../etc/passwd"]


def test_question_links_open_ids_with_url_special_characters(tmp_path):
    """A question id with "/", "?", "#", "%" or spaces opens from the run page's own link; an id
    that is no question of the run (a path, however it is spelled) is a 404."""
    lines = ["question_id,passage_id,retrieval_rank,influence,question"]
    lines += [f'"{qid}",p{i},1,1.0,"question number {i}"' for i, qid in enumerate(ODD_IDS)]
    c = TestClient(make_dashboard(tmp_path, None))
    r = c.post("/upload", files={"file": ("odd.csv", "\n".join(lines).encode(), "text/csv")}, follow_redirects=False)
    assert r.status_code == 303
    run_url = r.headers["location"]
    page = c.get(run_url).text
    links = set(re.findall(rf'<a (?:class=qid )?href="({re.escape(run_url)}/questions/[^"]+)"', page))
    assert len(links) == len(ODD_IDS)
    opened = {}
    for link in links:
        got = c.get(html.unescape(link))
        assert got.status_code == 200, (link, got.text[:300])
        qid = html.unescape(re.search(r'<h1 data-question="([^"]*)"', got.text).group(1))
        opened[qid] = got.text
    assert sorted(opened) == sorted(ODD_IDS)
    for i, qid in enumerate(ODD_IDS):
        assert f"question number {i}" in opened[qid]
    for path in ["/questions/hotpot/dev", "/questions/..%2F..%2Fetc%2Fpasswd%2Fx", "/questions/%2E%2E/files/x",
                 "/../../../etc/passwd"]:
        got = c.get(run_url + path)
        assert got.status_code == 404 and "root:" not in got.text, path


@pytest.mark.parametrize("text, message", [
    ("question_id,passage_id,retrieval_rank\nq,p,1\n", "line 1: missing column(s) influence"),
    ("question_id,passage_id,retrieval_rank,influence\n", "header but no rows"),
    ("question_id,passage_id,retrieval_rank,influence\nq,p,1,x\n", "line 2: influence is not a number: 'x'"),
    ("question_id,passage_id,retrieval_rank,influence\nq,p,1,-1\n", "line 2: influence must be >= 0"),
    ("question_id,passage_id,retrieval_rank,influence\nq,p,0,1\n", "line 2: retrieval_rank must be an integer >= 1"),
    ("question_id,passage_id,retrieval_rank,influence\nq,p,1,1\nq,p,2,1\n", "line 3: passage 'p' of question 'q' appears twice"),
    ("question_id,passage_id,retrieval_rank,influence\nq,p,1,1\nq,r,1,1\n", "line 3: question 'q' has retrieval_rank 1 twice"),
    ("question_id,passage_id,retrieval_rank,influence,is_gold\nq,p,1,1,maybe\n", "line 2: is_gold must be"),
    ("question_id,passage_id,retrieval_rank,influence\n,p,1,1\n", "line 2: question_id and passage_id must not be empty"),
])
def test_bad_csv_rows_are_refused_with_the_line(text, message):
    with pytest.raises(InputError) as err:
        parse_passages_csv(text)
    assert message in str(err.value)


def test_uploads_that_are_not_text_are_refused(runs):
    c = TestClient(make_dashboard(runs, None))
    r = c.post("/upload", files={"file": ("x.csv", b"\xff\xfe\x00binary", "text/csv")})
    assert r.status_code == 400 and "not UTF-8 text" in r.text


def test_cli_refuses_a_missing_runs_folder(tmp_path, capsys):
    from ragray.adapters.cli import main

    assert main(["dashboard", str(tmp_path / "nope")]) == 2
    assert "RUNS_DIR: no such folder" in capsys.readouterr().err


@pytest.mark.slow  # over 2 s: outside the fast subset (README)
@pytest.mark.timeout(120)
def test_cli_serves_the_dashboard(runs):
    """`ragray dashboard RUNS_DIR --port P` in a subprocess answers on the port."""
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "ragray.adapters.cli", "dashboard", str(runs), "--port", str(port),
                             "--history", f"sqlite:///{runs / 'h.sqlite'}"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.time() + 60
        while True:
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2).read().decode()
                break
            except OSError:
                assert proc.poll() is None and time.time() < deadline, proc.stdout.read() if proc.poll() else "timeout"
                time.sleep(0.3)
        assert body.count('data-kind="run"') == 2 and 'data-kind="sweep"' in body
    finally:
        proc.terminate()
        proc.wait(10)


def test_a_run_the_history_calls_interrupted_opens_from_its_progress_log(tmp_path, monkeypatch):
    """SIGKILL after a question finished: the history (its process gone) says ``interrupted``, the
    folder holds ``config.yaml`` and ``progress.jsonl`` only; the dashboard lists it ``stopped``
    and opens it as ``ragray report DIR`` would, partial with its one question."""
    import json
    from types import SimpleNamespace

    from ragray.adapters.cli import main
    from ragray.adapters.dashboard.catalog import Catalog

    data = tmp_path / "qa.jsonl"
    data.write_text(json.dumps({"id": "q1", "question": "Which ferry?", "answers": ["tern"],
                                "passages": [{"id": "p1", "text": "ANSWER=tern"}, {"id": "p2", "text": "Gulls."}]})
                    + "\n", encoding="utf-8")
    out = tmp_path / "runs" / "killed"
    assert main(["run", "--backend", "scripted", "--dataset", str(data), "--set", "metrics.embedding=false",
                 "--set", "history.record=false", "--out", str(out), "--no-progress"]) == 0
    for f in out.iterdir():  # what a kill after the first question leaves
        if f.name not in ("config.yaml", "progress.jsonl"):
            f.unlink()
    record = SimpleNamespace(id="7", name="default", kind="run", status="interrupted", out=str(out),
                             started_at=None, seconds=None, summary=None)
    monkeypatch.setattr(Catalog, "_history", lambda self: [record])
    client = TestClient(make_dashboard(tmp_path / "runs"))
    assert re.search(r'data-run="7".*?<span class="badge stopped">stopped', client.get("/").text, re.S)
    page = client.get("/runs/7")
    assert page.status_code == 200 and "PARTIAL: 1 of 1 questions finished (stopped" in page.text
    assert json.loads((out / "summary.json").read_text())["partial"]["questions_done"] == 1
