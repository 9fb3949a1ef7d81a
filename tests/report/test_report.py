"""report.html: written into every run directory, self-contained, numbers equal to the run's files."""

import json
import re
from html.parser import HTMLParser

import pyarrow.parquet as pq
import pytest

from ragray.config import load_config
from ragray.simulate import simulate


class Page(HTMLParser):
    """Collects data-key/data-value pairs, charts, question rows and every external reference."""

    def __init__(self, text):
        super().__init__()
        self.values, self.charts, self.rows, self.external, self.sections = {}, [], {}, [], []
        self._h2 = False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "data-key" in a and "data-value" in a:
            self.values.setdefault(a["data-key"], json.loads(a["data-value"]))
        if tag == "svg":
            self.charts.append(a.get("data-kind"))
        if tag == "tr" and "data-qid" in a:
            self.rows[a["data-qid"]] = a["data-flags"].split()
        for key in ("src", "href"):
            if a.get(key) and re.match(r"(https?:)?//", a[key]):
                self.external.append(a[key])
        if tag in ("script", "link", "img", "iframe") and (a.get("src") or a.get("href")):
            self.external.append(a.get("src") or a.get("href"))
        self._h2 = tag == "h2"

    def handle_data(self, data):
        if self._h2:
            self.sections.append(data.strip())
            self._h2 = False


def dig(summary, dotted):
    for part in dotted.split("."):
        summary = summary[part]
    return summary


def check_influence_report(out):
    page = Page((out / "report.html").read_text(encoding="utf-8"))
    summary = json.loads((out / "summary.json").read_text())
    assert page.sections == ["Summary", "Plots", "Questions"]
    assert not page.external, page.external  # opens offline from disk
    keys = ["n_questions", "n_measured", "mean_spearman", "median_spearman", "divergent_rate", "mean_dominance",
            "baseline_exact_match", "quality.f1", "errors", "n_calls"]
    for key in keys + [f"flag_counts.{f}" for f in summary["flag_counts"]]:
        assert page.values[key] == dig(summary, key), key
    assert page.charts == ["histogram", "bubbles", "bars", "histogram"]
    questions = pq.read_table(out / "questions.parquet").to_pylist()
    assert page.rows == {q["question_id"]: list(q["flags"]) for q in questions}
    return page, summary


def test_simulated_inverted_run_report_shows_its_flags(tmp_path):
    out = tmp_path / "sim"
    simulate(out, n_questions=12, k=6, scenario="inverted", seed=2, base=load_config(None), progress=False)
    page, summary = check_influence_report(out)
    assert summary["flag_counts"]["inverted"] == 12 == page.values["flag_counts.inverted"]
    text = (out / "report.html").read_text()
    assert 'badge simulated' in text and text.count('data-flags="divergent inverted buried_evidence"') == 12
    # the drill-down holds every passage's influence, equal to the passages table
    passages = pq.read_table(out / "passages.parquet").to_pylist()
    shown = re.findall(r'data-key="influence" data-value="([^"]*)"', text)
    assert [json.loads(v.replace("&quot;", '"')) for v in shown] == [p["influence"] for p in passages]


def test_interpret_and_audit_runs_get_reports(tmp_path, monkeypatch):
    from ragray.cli import main

    monkeypatch.chdir(tmp_path)
    common = ["--dataset", "demo", "--limit", "4", "--no-progress", "--set", "generation.backend=scripted",
              "--set", "metrics.embedding=false"]
    assert main(["interpret", *common, "--out", "interp", "--repeats", "3", "--set", "faithfulness.similarity=rouge_l",
                 "--set", "faithfulness.measures=[rouge_l]"]) == 0
    page = Page((tmp_path / "interp" / "report.html").read_text())
    summary = json.loads((tmp_path / "interp" / "summary.json").read_text())
    assert page.sections == ["Summary", "Plots", "Questions"] and not page.external
    for k, row in summary["per_k"].items():
        for case in ("A", "B", "C", "inconclusive"):
            assert page.values[f"per_k.{k}.cases.{case}.share"] == row["cases"][case]["share"]
    assert page.charts == ["bars", "lines"]
    assert main(["audit", "--dataset", "demo", "--out", "aud", "--no-progress"]) in (0, 1)
    page = Page((tmp_path / "aud" / "report.html").read_text())
    report = json.loads((tmp_path / "aud" / "audit_report.json").read_text())["summary"]
    for key in ("n_queries", "pass_rate", "n_pass", "n_fail", "mean_score", "hit_at_k", "mrr"):
        assert page.values[key] == report[key], key
    assert page.sections == ["Summary", "Plots", "Queries"]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_report_of_a_real_smollm2_run_on_hotpotqa(tmp_path, shared_data):
    from ragray.commands.run import run_influence

    config = load_config(None, [f"data.path={shared_data / 'hotpotqa_distractor_dev.jsonl'}", "data.limit=3",
                                "retrieval.top_k=4", "generation.max_tokens=16",
                                f"history.url=sqlite:///{tmp_path / 'h.sqlite'}"])
    run_influence(config, tmp_path / "run", progress=False)
    page, summary = check_influence_report(tmp_path / "run")
    assert summary["model"] and summary["backend"] == "transformers" and page.values["n_questions"] == 3
