"""The dashboard attacked: beyond loopback it needs the API key on every route (or --insecure, which
warns), a browser logs in once without the key ever coming back, uploads are bounded in size and
count with nothing written beyond them, and an uploaded run names its file, not the demo set."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

import ragray
from ragray.adapters.cli import main
from ragray.adapters.dashboard.app import make_dashboard
from ragray.config import ExperimentConfig
from ragray.store.history import History

KEY = "s3cret-key-of-the-operator"
CSV = ("question_id,passage_id,retrieval_rank,influence,question\n"
       "q1,ferry,1,0.1,Which ferry goes to Corran?\nq1,birds,2,0.9,Which ferry goes to Corran?\n")


def _upload(client, name="harbour-results.csv", body=CSV.encode(), **kw):
    return client.post("/upload", files={"file": (name, body, "text/csv")}, follow_redirects=False, **kw)


def _limits(**values):
    from ragray.config import DashboardConfig  # here: a ragray without upload limits fails this test, not the file

    return DashboardConfig(**values)


def _uploaded(runs: Path) -> list[str]:
    folder = runs / "uploads"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


@pytest.fixture()
def runs(tmp_path):
    """A runs folder with one uploaded run, and a history holding a CLI run."""
    (tmp_path / "runs").mkdir()
    assert _upload(TestClient(make_dashboard(tmp_path / "runs", None))).status_code == 303
    url = f"sqlite:///{tmp_path / 'history.sqlite'}"
    History(url).start_run("run", "cli-secret-run", ExperimentConfig(), tmp_path / "runs" / "elsewhere")
    return tmp_path / "runs", url


@pytest.fixture()
def served(monkeypatch):
    """``ragray dashboard`` in this process, uvicorn replaced: the app and where it would listen."""
    import uvicorn

    seen = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: seen.update(app=app, **kw))
    monkeypatch.delenv("RAGRAY_API_KEY", raising=False)
    return seen


# -- key required off loopback ----------------------------------------------------------------------


def test_off_loopback_without_a_key_the_dashboard_refuses_to_start(runs, served, capsys):
    assert main(["dashboard", str(runs[0]), "--host", "0.0.0.0", "--history", runs[1]]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ragray dashboard: error: --host 0.0.0.0 is not loopback: anyone who reaches it could "
                          "read every run"), err
    assert "$RAGRAY_API_KEY" in err and "--insecure" in err
    assert served == {}  # nothing listens


def test_insecure_starts_off_loopback_with_a_warning_and_no_key(runs, served, capsys):
    assert main(["dashboard", str(runs[0]), "--host", "0.0.0.0", "--insecure", "--history", runs[1]]) == 0
    err = capsys.readouterr().err
    assert "WARNING: dashboard on 0.0.0.0 without an API key (--insecure)" in err
    assert served["host"] == "0.0.0.0" and TestClient(served["app"]).get("/").status_code == 200


def test_on_loopback_nothing_changes(runs, served, capsys, monkeypatch):
    monkeypatch.setenv("RAGRAY_API_KEY", KEY)
    assert main(["dashboard", str(runs[0]), "--history", runs[1]]) == 0
    assert served["host"] == "127.0.0.1" and TestClient(served["app"]).get("/").status_code == 200
    assert KEY not in capsys.readouterr().out


def test_off_loopback_every_route_needs_the_key(runs, served, capsys, monkeypatch):
    runs_dir, url = runs
    monkeypatch.setenv("RAGRAY_API_KEY", KEY)
    assert main(["dashboard", str(runs_dir), "--host", "0.0.0.0", "--history", url]) == 0
    out = capsys.readouterr().out
    assert "key $RAGRAY_API_KEY required" in out and KEY not in out
    c = TestClient(served["app"])
    bearer = {"Authorization": f"Bearer {KEY}"}
    (run_id,) = [r["id"] for r in c.get("/api/runs", headers=bearer).json() if r["source"] == "upload"]
    gets = ["/", f"/runs/{run_id}", f"/runs/{run_id}/questions/q1", f"/compare?a={run_id}&b={run_id}",
            f"/runs/{run_id}/files/report.html", f"/runs/{run_id}/files/passages.csv", "/api/runs",
            f"/api/runs/{run_id}", "/openapi.json", "/no-such-page"]
    for path in gets:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}, {"Cookie": f"ragray_dashboard={KEY}"}):
            r = c.get(path, headers=headers)
            assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer", (path, headers, r.status_code)
            assert "cli-secret-run" not in r.text and "ferry" not in r.text and KEY not in r.text
    assert c.get("/api/runs").json() == {"error": "this dashboard needs the API key (Authorization: Bearer <key>, "
                                                   "or log in below)"}
    before = _uploaded(runs_dir)
    assert _upload(c).status_code == 401 and _uploaded(runs_dir) == before
    for path in gets[:-2]:
        assert c.get(path, headers=bearer).status_code == 200, path
    assert "cli-secret-run" in c.get("/api/runs", headers=bearer).text
    assert _upload(c, headers=bearer).status_code == 303 and len(_uploaded(runs_dir)) == len(before) + 1


def test_a_browser_logs_in_once_and_the_key_never_comes_back(runs, tmp_path):
    c = TestClient(make_dashboard(runs[0], runs[1], api_key=KEY))
    page = c.get("/runs/x?y=1")
    assert page.status_code == 401 and 'action="/login"' in page.text and 'name=next value="/runs/x?y=1"' in page.text
    wrong = c.post("/login", data={"key": "guess", "next": "/"}, follow_redirects=False)
    assert wrong.status_code == 401 and "set-cookie" not in wrong.headers and "guess" not in wrong.text
    # a login never sends the browser to another site
    ok = c.post("/login", data={"key": KEY, "next": "//evil.example/x"}, follow_redirects=False)
    assert ok.status_code == 303 and ok.headers["location"] == "/"
    cookie = ok.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict") and KEY not in cookie
    assert c.get("/").status_code == 200  # the client keeps the cookie, as a browser does
    assert all(KEY not in c.get(p).text for p in ("/", "/api/runs"))


# -- upload limits ----------------------------------------------------------------------------------


def test_an_upload_over_the_size_limit_is_413_and_writes_nothing(tmp_path):
    c = TestClient(make_dashboard(tmp_path, None, limits=_limits(max_upload_bytes=2048)))
    row = "q1,p{},{},0.5,Which ferry goes to Corran?\n"
    big = CSV + "".join(row.format(i, i) for i in range(3, 103))  # a valid CSV of ~4 KB
    r = _upload(c, body=big.encode())  # inside the request limit: the route itself refuses
    assert r.status_code == 413 and "larger than 2,048 bytes (dashboard.max_upload_bytes); nothing was saved" in r.text
    huge = b"question_id,passage_id,retrieval_rank,influence\n" + b"q,p,1,1\n" * 200_000  # 1.6 MB
    r = _upload(c, body=huge)  # refused before the body is read or parsed (not by the route)
    assert r.status_code == 413 and "<h1>413</h1>" in r.text and "dashboard.max_upload_bytes" in r.text
    assert _uploaded(tmp_path) == []
    assert _upload(c).status_code == 303  # a file within the limit still goes in


def test_uploads_over_the_count_limit_are_409_and_write_nothing(tmp_path):
    c = TestClient(make_dashboard(tmp_path, None, limits=_limits(max_uploads=2)))
    assert [_upload(c, name=f"r{i}.csv").status_code for i in range(2)] == [303, 303]
    r = _upload(c, name="r2.csv")
    assert r.status_code == 409 and "already holds 2 uploaded runs (dashboard.max_uploads)" in r.text
    assert len(_uploaded(tmp_path)) == 2
    assert "2 of 2 uploaded runs kept" in c.get("/").text


def test_the_default_limits_are_the_documented_ones():
    assert (_limits().max_upload_bytes, _limits().max_uploads) == (20 * 2**20, 50)


# -- the uploaded run names its file ---------------------------------------------------------------


def test_an_uploaded_run_page_names_the_file_not_the_demo_set(tmp_path):
    c = TestClient(make_dashboard(tmp_path, None))
    page = c.get(_upload(c, name="harbour-results.csv").headers["location"]).text
    (line,) = re.findall(r"<div class=sub>run · .*?</div>", page)
    assert "dataset harbour-results.csv" in line, line
    assert "demo" not in line and "smollm2" not in line, line  # no model or data set of ragray's ran
    (folder,) = (tmp_path / "uploads").iterdir()
    report = (folder / "report.html").read_text(encoding="utf-8")
    assert "dataset harbour-results.csv" in report and "dataset demo" not in report
    assert json.loads((folder / "summary.json").read_text())["uploaded"]["file"] == "harbour-results.csv"


# -- the real server, over real HTTP ---------------------------------------------------------------


@pytest.mark.slow  # over 2 s: outside the fast subset (README)
@pytest.mark.timeout(120)
def test_ragray_dashboard_on_every_interface_answers_401_without_the_key(runs, tmp_path):
    import urllib.error
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "RAGRAY_API_KEY": KEY,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(ragray.__file__).parents[1]),
                                                       os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, "-m", "ragray.adapters.cli", "dashboard", str(runs[0]), "--host",
                             "0.0.0.0", "--port", str(port), "--history", runs[1]],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.time() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/runs", timeout=2)
                raise AssertionError("answered without the key")
            except urllib.error.HTTPError as exc:
                assert exc.code == 401
                break
            except OSError:
                assert proc.poll() is None and time.time() < deadline, proc.stdout.read() if proc.poll() else "timeout"
                time.sleep(0.3)
        asked = urllib.request.Request(f"http://127.0.0.1:{port}/api/runs", headers={"Authorization": f"Bearer {KEY}"})
        assert "cli-secret-run" in urllib.request.urlopen(asked, timeout=5).read().decode()
    finally:
        proc.terminate()
        proc.wait(10)
    assert KEY not in proc.stdout.read()
