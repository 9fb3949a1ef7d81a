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
    # the tie-robust verdict and the validity panel lead; the seed's measures follow
    assert page.sections == ["Alignment", "Validity against gold passages",
                             "Does the attribution capture what the model used?", "Summary (the seed's measures)",
                             "Plots", "Questions"]
    assert not page.external, page.external  # opens offline from disk
    keys = ["n_questions", "n_measured", "mean_spearman", "median_spearman", "divergent_rate", "mean_dominance",
            "baseline_exact_match", "quality.f1", "errors", "n_calls", "alignment.misaligned_rate",
            "alignment.usage_ndcg.mean", "alignment.rbo_alignment.mean", "alignment.top1_used_rate",
            "alignment.relies_on_lower_rank_rate", "alignment.mean_rho_ceiling"]
    for key in keys + [f"flag_counts.{f}" for f in summary["flag_counts"]]:
        assert page.values[key] == dig(summary, key), key
    validity = summary["validity"]
    n_validity = 0
    if validity["available"]:
        n_validity = sum(1 for sub in validity["subsets"].values() if sub["measures"])
        for name, sub in validity["subsets"].items():
            for m, row in sub["measures"].items():
                key = f"validity.subsets.{name}.measures.{m}.recovery_at_1.mean"
                assert page.values[key] == row["recovery_at_1"]["mean"], key
    else:
        assert page.values["validity.available"] is False
    assert page.charts == ["bars"] * n_validity + ["histogram", "bubbles", "bars", "histogram"]
    questions = pq.read_table(out / "questions.parquet").to_pylist()
    assert page.rows == {q["question_id"]: list(q["flags"]) for q in questions}
    return page, summary


def test_simulated_inverted_run_report_shows_its_flags(tmp_path):
    out = tmp_path / "sim"
    simulate(out, n_questions=12, k=6, scenario="inverted", seed=2, base=load_config(None), progress=False)
    page, summary = check_influence_report(out)
    assert summary["flag_counts"]["inverted"] == 12 == page.values["flag_counts.inverted"]
    text = (out / "report.html").read_text()
    assert 'badge simulated' in text and text.count('data-flags="misaligned divergent inverted buried_evidence"') == 12
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
    from ragray.pipeline import run_influence

    config = load_config(None, [f"data.path={shared_data / 'hotpotqa_distractor_dev.jsonl'}", "data.limit=3",
                                "retrieval.top_k=4", "generation.max_tokens=16",
                                f"history.url=sqlite:///{tmp_path / 'h.sqlite'}"])
    run_influence(config, tmp_path / "run", progress=False)
    page, summary = check_influence_report(tmp_path / "run")
    assert summary["model"] and summary["backend"] == "transformers" and page.values["n_questions"] == 3
    # HotpotQA has gold passages: the validity panel is there, with the controls beside the measure
    measures = summary["validity"]["subsets"]["all"]["measures"]
    assert summary["validity"]["available"] and set(measures) == {"influence", "retrieval_rank", "answer_similarity",
                                                                  "random"}
    passages = pq.read_table(tmp_path / "run" / "passages.parquet").to_pylist()
    assert all(-1 <= p["answer_similarity"] <= 1 for p in passages)


def test_a_run_written_before_the_trust_measures_still_opens(tmp_path):
    """Old run directories: no alignment/position/validity columns or blocks -> "not measured"."""
    from fastapi.testclient import TestClient

    from ragray.dashboard.app import make_dashboard
    from ragray.report.report import write_report
    from ragray.rows.influence import PassageRow, QuestionRow

    PASSAGES_SCHEMA, QUESTIONS_SCHEMA = PassageRow.arrow_schema(), QuestionRow.arrow_schema()

    out = tmp_path / "old"
    simulate(out, n_questions=3, k=4, scenario="aligned_sparse", seed=1,
             base=load_config(None, [f"history.url=sqlite:///{tmp_path / 'h.sqlite'}"]), progress=False)
    new_q = {"usage_ndcg", "rbo_alignment", "top1_used", "relies_on_lower_rank", "rho_ceiling", "misaligned",
             "position_control", "position_sensitivity", "position_driven", "n_control_calls"}
    new_p = {"control_slot", "influence_control", "content_influence", "answer_similarity"}
    for name, new, schema in (("questions", new_q, QUESTIONS_SCHEMA), ("passages", new_p, PASSAGES_SCHEMA)):
        table = pq.read_table(out / f"{name}.parquet")
        assert new <= set(table.column_names) <= set(schema.names)
        pq.write_table(table.drop_columns(sorted(new)), out / f"{name}.parquet")
    summary = json.loads((out / "summary.json").read_text())
    for block in ("alignment", "position", "validity"):
        del summary[block]
    (out / "summary.json").write_text(json.dumps(summary))
    (out / "report.html").unlink()
    assert write_report(out) is not None
    text = (out / "report.html").read_text()
    assert "misaligned: not measured (run written before the tie-robust measures)" in text
    assert "not measured: run written before the validity panel" in text
    c = TestClient(make_dashboard(tmp_path, None))
    run_id = re.search(r'<tr data-run="([^"]+)" data-kind="run">', c.get("/").text).group(1)
    assert "not measured" in c.get(f"/runs/{run_id}").text
    page = c.get(f"/runs/{run_id}/questions/sim0000")
    assert page.status_code == 200 and 'data-key="usage_ndcg" data-value="null"' in page.text
