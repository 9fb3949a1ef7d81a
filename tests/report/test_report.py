"""report.html: written into every run directory, self-contained, numbers equal to the run's files."""

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from ragray.config import load_config
from ragray.report.page import esc
from ragray.simulate import simulate


class Page(HTMLParser):
    """Collects data-key/data-value pairs, charts, question cards and every external reference."""

    def __init__(self, text):
        super().__init__()
        self.values, self.charts, self.rows, self.external, self.sections = {}, [], {}, [], []
        self.verdicts = {}
        self._h2 = False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "data-key" in a and "data-value" in a:
            self.values.setdefault(a["data-key"], json.loads(a["data-value"]))
        if tag == "svg":
            self.charts.append(a.get("data-kind"))
        if tag == "article" and "data-qid" in a:
            self.rows[a["data-qid"]] = a["data-flags"].split()
            self.verdicts[a["data-qid"]] = a["data-verdict"]
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
    # the questions lead, then the recommended plots, the validity panel (or the older validity
    # sections of runs without one), and the Spearman measures last
    panel = summary.get("panel")
    validity_sections = (["Does the attribution find what the model used?"] if panel else
                         ["Validity against gold passages", "Does the attribution capture what the model used?"])
    assert page.sections == ["Questions", "Plots", *validity_sections, "Alignment",
                             "Summary (Spearman ρ measures)", "Details: the Spearman ρ plots"]
    assert not page.external, page.external  # opens offline from disk
    keys = ["n_questions", "n_measured", "mean_spearman", "median_spearman", "divergent_rate", "mean_dominance",
            "baseline_exact_match", "quality.f1", "errors", "n_calls", "alignment.misaligned_rate",
            "alignment.usage_ndcg.mean", "alignment.rbo_alignment.mean", "alignment.top1_used_rate",
            "alignment.relies_on_lower_rank_rate", "alignment.mean_rho_ceiling"]
    for key in keys + [f"flag_counts.{f}" for f in summary["flag_counts"]]:
        assert page.values[key] == dig(summary, key), key
    validity = summary["validity"]
    n_validity = 0
    if panel:
        assert page.values["panel.verdict"] == panel["verdict"]
        text = (out / "report.html").read_text(encoding="utf-8")
        assert text.count(esc(panel["sentence"])) == 1
        for row in panel["rows"]:
            for key, v in row["values"].items():
                if v is not None:
                    assert f'data-subset="{key}">{v["mean"]:.2f} ' in text.split(f'<tr data-row="{esc(row["name"])}">')[1]
    elif validity["available"]:
        n_validity = sum(1 for sub in validity["subsets"].values() if sub["measures"])
        for name, sub in validity["subsets"].items():
            for m, row in sub["measures"].items():
                key = f"validity.subsets.{name}.measures.{m}.recovery_at_1.mean"
                assert page.values[key] == row["recovery_at_1"]["mean"], key
    else:
        assert page.values["validity.available"] is False
    assert page.charts == ["histogram", "bars"] + ["bars"] * n_validity + ["histogram", "bubbles", "histogram"]
    questions = pq.read_table(out / "questions.parquet").to_pylist()
    assert page.rows == {q["question_id"]: list(q["flags"]) for q in questions}
    # the verdict of a card is the tie-robust one (never the ρ rule's Divergent)
    assert page.verdicts == {q["question_id"]: "unmeasured" if q["misaligned"] is None
                             else "misaligned" if q["misaligned"] else "aligned" for q in questions}
    assert page.values["headline.misaligned_rate"] == summary["alignment"]["misaligned_rate"]
    text = (out / "report.html").read_text(encoding="utf-8")
    assert text.index('class=headline') < text.index('<article class=qcard') < text.index('data-kind="histogram"')
    assert not re.search(r"SPEC|§|the seed|issue \d", text)
    return page, summary


def test_simulated_inverted_run_report_shows_its_flags(tmp_path):
    out = tmp_path / "sim"
    simulate(out, n_questions=12, k=6, scenario="inverted", seed=2, base=load_config(None), progress=False)
    page, summary = check_influence_report(out)
    assert summary["flag_counts"]["inverted"] == 12 == page.values["flag_counts.inverted"]
    text = (out / "report.html").read_text()
    assert 'badge simulated' in text and text.count('data-flags="misaligned divergent inverted buried_evidence"') == 12
    assert text.count('data-verdict="misaligned"') == 12 and 'badge divergent' not in text.split("<h2>Plots")[0]
    # the cards hold every passage's influence in retrieval order, equal to the passages table
    passages = pq.read_table(out / "passages.parquet").to_pylist()
    shown = re.findall(r'data-key="influence" data-value="([^"]*)"', text)
    assert [json.loads(v.replace("&quot;", '"')) for v in shown] == [p["influence"] for p in passages]


def test_interpret_and_audit_runs_get_reports(tmp_path, monkeypatch):
    from ragray.adapters.cli import main

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

    config = load_config(None, [f"data.path={shared_data / 'hotpotqa_distractor_dev.jsonl'}", "data.limit=2",
                                "retrieval.top_k=4", "generation.max_tokens=16",
                                f"history.url=sqlite:///{tmp_path / 'h.sqlite'}"])
    run_influence(config, tmp_path / "run", progress=False)
    page, summary = check_influence_report(tmp_path / "run")
    assert summary["model"] and summary["backend"] == "transformers" and page.values["n_questions"] == 2
    # HotpotQA has gold passages: the validity panel is there, with the controls beside the measure
    measures = summary["validity"]["subsets"]["all"]["measures"]
    assert summary["validity"]["available"] and set(measures) == {"influence", "retrieval_rank", "answer_similarity",
                                                                  "random"}
    passages = pq.read_table(tmp_path / "run" / "passages.parquet").to_pylist()
    assert all(-1 <= p["answer_similarity"] <= 1 for p in passages)


def test_a_run_written_before_the_trust_measures_still_opens(tmp_path):
    """Old run directories: no alignment/position/validity columns or blocks -> "not measured"."""
    from fastapi.testclient import TestClient

    from ragray.adapters.dashboard.app import make_dashboard
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
    for block in ("alignment", "position", "validity", "panel"):
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


CARDS = Path(__file__).resolve().parents[1] / "fixtures" / "records" / "report_cards.jsonl"


def scripted_run(out, *extra):
    """A run without a model: the scripted generator answers from ANSWER= markers in passages."""
    from ragray.generation.scripted import ScriptedGenerator
    from ragray.pipeline import run_influence

    config = load_config(None, [f"data.path={CARDS}", "generation.backend=scripted", "metrics.embedding=false",
                                f"history.url=sqlite:///{out.parent / 'h.sqlite'}", *extra])
    run_influence(config, out, generator=ScriptedGenerator(), progress=False)
    return out


def cards_of(text):
    return dict(re.findall(r'<article class=qcard data-qid="([^"]+)"[^>]*>(.*?)</article>', text, flags=re.DOTALL))


def test_each_question_is_a_card_with_its_passages_in_retrieval_order(tmp_path):
    out = scripted_run(tmp_path / "run")
    check_influence_report(out)
    text = (out / "report.html").read_text(encoding="utf-8")
    cards = cards_of(text)
    assert list(cards) == ["ferry", "bird", "garden"]  # the dataset's order
    ferry = cards["ferry"]
    assert 'class="verdict aligned">aligned<' in ferry and "mark-ok" in ferry and "gold: Quillon" in ferry
    # titles, the opening of a long text with the rest on expand, and the marks of the used gold passage
    assert [t for t in re.findall(r"<span class=ptitle>([^<]*)</span>", ferry)] == [
        "Quillon Ferry", "Ashwater", "Marrow Bay Company", "Herons"]
    assert "<details class=ptext>" in ferry and "ANSWER=Quillon The crossing takes twelve minutes" in ferry
    first = ferry.split('<li class="psg')[1]
    assert "mk used" in first and "mk gold" in first and 'style="width:100.0%"' in first
    assert ferry.count("mk used") == 1 and ferry.count("mk gold") == 1
    bird = cards["bird"]
    assert 'class="verdict misaligned">misaligned<' in bird and "mark-no" in bird and "used: #4" in bird
    assert re.findall(r'data-passage="([^"]+)"', bird) == ["bird-p0", "bird-p2", "bird-p1", "bird-p3"]
    assert 'class="verdict unmeasured">answer does not depend on the passages<' in cards["garden"]
    assert text.count('<input type=radio name=verdict') == 4 and "not measured (1)" in text


def test_an_aligned_question_never_carries_the_divergent_badge(tmp_path):
    """aligned_sparse: one used passage at rank 1, the rest tied at 0, so ρ stays under the old
    Divergent threshold while usage nDCG says aligned."""
    out = tmp_path / "sparse"
    simulate(out, n_questions=4, k=6, scenario="aligned_sparse", seed=3,
             base=load_config(None, [f"history.url=sqlite:///{tmp_path / 'h.sqlite'}"]), progress=False)
    page, _ = check_influence_report(out)
    questions = pq.read_table(out / "questions.parquet").to_pylist()
    assert all(q["divergent"] and not q["misaligned"] for q in questions)
    assert set(page.verdicts.values()) == {"aligned"}
    for card in cards_of((out / "report.html").read_text()).values():
        assert "divergent" not in card and "badge" not in card and "ρ " in card  # ρ only as a small number


def test_past_the_card_limit_the_most_informative_questions_come_first():
    from ragray.report.questions import question_cards

    questions = [{"question_id": f"q{i:03d}", "question": f"question {i}", "misaligned": i % 7 == 0 if i % 5 else None,
                  "usage_ndcg": (i % 10) / 10 if i % 5 else None, "state": "measured" if i % 5 else "context_ignored",
                  "flags": []} for i in range(230)]
    text = question_cards(questions, [], [], limit=200)
    shown = re.findall(r'data-qid="([^"]+)" data-verdict="(\w+)"', text)
    assert len(shown) == 200 and "200 of 230 questions shown" in text
    verdicts = [v for _, v in shown]
    n_mis = sum(1 for q in questions if q["misaligned"])
    n_unmeasured = sum(1 for q in questions if q["misaligned"] is None)
    assert verdicts[:n_mis] == ["misaligned"] * n_mis and "unmeasured" not in verdicts[:230 - n_unmeasured]
    aligned = [questions[int(q[1:])]["usage_ndcg"] for q, v in shown if v == "aligned"]
    assert aligned == sorted(aligned)


def test_a_run_without_titles_texts_or_marks_shows_passage_ids(tmp_path):
    out = scripted_run(tmp_path / "run")
    for name, drop in (("passages", ["used", "title", "text"]), ("questions", ["answer_correct"])):
        table = pq.read_table(out / f"{name}.parquet")
        pq.write_table(table.drop_columns(drop), out / f"{name}.parquet")
    from ragray.report.report import write_report

    assert write_report(out) is not None
    cards = cards_of((out / "report.html").read_text())
    assert "ferry-p0" in cards["ferry"] and "ptitle" not in cards["ferry"]
    assert not any(mark in card for card in cards.values() for mark in ("mk used", "mark-ok", "mark-no"))
    assert "mk gold" in cards["ferry"]  # is_gold is older than the marks


def test_the_validity_panel_replaces_the_older_validity_sections(tmp_path):
    from ragray.report.report import write_report

    out = scripted_run(tmp_path / "run")
    summary = json.loads((out / "summary.json").read_text())
    summary["panel"] = {
        "available": True, "reason": None, "verdict": "UNDECIDED", "metric": "gold passage ranked first",
        "sentence": "Too few questions to tell whether drop-one log-prob beats the free controls.",
        "subsets": [{"key": "all", "name": "all questions", "definition": "every question", "n": 3},
                    {"key": "answered", "name": "answered", "definition": "answer contains a gold answer", "n": 1}],
        "primary": "answered",
        "rows": [{"name": "drop-one log-prob", "control": False, "beats_every_control": False,
                  "values": {"all": {"mean": 0.5, "low": 0.0, "high": 1.0}, "answered": {"mean": 1.0, "low": 1.0,
                                                                                     "high": 1.0}}},
                 {"name": "retrieval rank", "control": True, "beats_every_control": None,
                  "values": {"all": {"mean": 0.25, "low": 0.0, "high": 0.5}, "answered": None}}]}
    (out / "summary.json").write_text(json.dumps(summary))
    assert write_report(out) is not None
    text = (out / "report.html").read_text()
    page = Page(text)
    assert page.sections == ["Questions", "Plots", "Does the attribution find what the model used?", "Alignment",
                             "Summary (Spearman ρ measures)", "Details: the Spearman ρ plots"]
    assert page.values["panel.verdict"] == "UNDECIDED" and text.count("Too few questions to tell") == 1
    rows = dict(re.findall(r'<tr data-row="([^"]+)">(.*?)</tr>', text))
    assert "free control" in rows["retrieval rank"] and "free control" not in rows["drop-one log-prob"]
    # the primary subset first, each cell mean [low, high]
    assert re.findall(r'data-subset="(\w+)">([\d.]+)', rows["drop-one log-prob"]) == [("answered", "1.00"),
                                                                                    ("all", "0.50")]
    assert 'data-subset="answered">–' in rows["retrieval rank"]
    summary["panel"] = {"available": False, "reason": "no gold passages in this dataset", "verdict": "NOT MEASURED",
                        "sentence": "Nothing to check against.", "metric": "", "subsets": [], "primary": None, "rows": []}
    (out / "summary.json").write_text(json.dumps(summary))
    write_report(out)
    assert "not measured: no gold passages in this dataset" in (out / "report.html").read_text()
