"""`ragray audit` end to end: a real PDF folder (built with reportlab), JSONL datasets, exit codes."""

import json
import pyarrow.parquet as pq
import pytest

from ragray.adapters.cli import main
from ragray.pipeline import run_audit
from ragray.config import load_config
from ragray.generation.scripted import ScriptedGenerator
from tests.architecture.summaries import check_summary_file

pytest.importorskip("reportlab.pdfgen.canvas")
pytest.importorskip("pypdf")


@pytest.fixture()
def pdf_folder(tmp_path, make_pdf):
    data = tmp_path / "data"
    (data / "pdfs").mkdir(parents=True)
    make_pdf(data / "pdfs" / "gdpr.pdf", [["GDPR data retention: personal data is kept no longer than necessary."]])
    make_pdf(data / "pdfs" / "finance_rules.pdf", [["Financial records retention policy: keep financial records ten years."]])
    make_pdf(data / "pdfs" / "canteen.pdf", [["The canteen serves soup on Fridays."]])
    make_pdf(data / "pdfs" / "parking.pdf", [["Parking permits are renewed every spring."]])
    (data / "queries.json").write_text(json.dumps([
        {"query_id": "q1", "query": "What is GDPR data retention policy for financial records?"},
        {"query_id": "q2", "query": "When are parking permits renewed?"},
        {"query_id": "q3", "query": "What does the canteen serve?"},
    ]))
    (data / "ground_truth.json").write_text(json.dumps({"q1": ["gdpr.pdf", "finance_rules.pdf"], "q2": ["parking.pdf"]}))
    return data


def test_pdf_folder_audit_end_to_end(pdf_folder, tmp_path, capsys):
    out = tmp_path / "audit"
    code = main(["audit", "--pdfs", str(pdf_folder / "pdfs"), "--out", str(out), "--no-progress"])
    text = capsys.readouterr().out
    report = json.loads((out / "audit_report.json").read_text())
    q = {e["query_id"]: e for e in report["queries"]}
    # q1 is the seed's example: both expected PDFs and one noise document in the top 3
    assert (q["q1"]["score"], q["q1"]["coverage"], q["q1"]["precision"], q["q1"]["noise_ratio"],
            q["q1"]["status"]) == (60, 100.0, 0.67, 33.33, "PASS")
    assert set(q["q1"]["relevant"]) == {"gdpr.pdf", "finance_rules.pdf"} and q["q1"]["noise"] != []
    # q2: one expected document and two noise documents in the top 3: 70 - 20 = 50, FAIL
    assert (q["q2"]["score"], q["q2"]["status"], q["q2"]["retrieved"][0]) == (50, "FAIL", "parking.pdf")
    assert q["q3"]["status"] == "UNSCORED"  # no ground truth for q3
    s = report["summary"]
    assert (s["n_queries"], s["n_scored"], s["n_pass"], s["n_fail"], s["n_unscored"]) == (3, 2, 1, 1, 1)
    assert s["pass_rate"] == 0.5 and s["failing"] == ["q2"] and s["unscored"] == ["q3"]
    # q2 found its only gold document: it fails on the formula's noise term and cannot pass at k = 3
    assert (s["n_fail_missed"], s["n_fail_noise_only"], s["cannot_pass"]) == (0, 1, ["q2"])
    assert (q["q2"]["best_score"], q["q1"]["best_score"]) == (50, 60)
    assert "why: every gold document is in the top 3" in text and "cannot PASS at top-3" in text
    assert "cannot pass at top-3" in (out / "report.html").read_text()
    assert code == 1  # a failing query fails the gate
    assert "=== RETRIEVAL INTEGRITY AUDIT ===" in text and "status: PASS" in text and "1/2 PASS" in text
    rows = pq.read_table(out / "audit.parquet").to_pylist()
    assert [r["status"] for r in rows] == ["PASS", "FAIL", "UNSCORED"] and (out / "audit.csv").exists()


def test_top_k_is_the_number_of_documents_and_all_passing_exits_zero(pdf_folder, tmp_path, capsys):
    out = tmp_path / "a1"
    code = main(["audit", "--pdfs", str(pdf_folder / "pdfs"), "--top-k", "1", "--out", str(out),
                 "--no-progress", "--set", "audit.pass_score=35"])
    report = json.loads((out / "audit_report.json").read_text())
    q = {e["query_id"]: e for e in report["queries"]}
    assert len(q["q1"]["retrieved"]) == 1 and q["q1"]["score"] == 35  # half the truth, no noise
    assert q["q2"]["score"] == 70 and report["summary"]["k"] == 1
    assert code == 0


def test_jsonl_dataset_with_chunks_collapses_to_documents(tmp_path):
    rows = [{"id": "q1", "question": "Where do puffins nest?", "answers": ["north stacks"],
             "passages": [{"id": "birds", "text": "Puffins nest on the north stacks. " * 4},
                          {"id": "ferry", "text": "The ferry sails at noon. " * 40}],
             "gold_passage_ids": ["birds"]}]
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = load_config(None, [f"data.path={path}", "chunking.method=words", "chunking.size=20",
                                "audit.k=2", "retrieval.scope=per_question"])
    res = run_audit(config, tmp_path / "o", progress=False)
    check_summary_file(res.summary, res.out / "audit_report.json", key="summary")
    (e,) = res.entries
    assert e.retrieved == ("birds", "ferry")  # many chunks, two documents
    assert e.score == 55 and res.exit_code == 1


def test_llm_explanations_never_change_the_score(pdf_folder, tmp_path):
    base = load_config(None, [f"data.path={pdf_folder / 'pdfs'}"])
    plain = run_audit(base, tmp_path / "plain", progress=False)
    llm = run_audit(base.model_copy(update={"audit": base.audit.model_copy(update={"llm": True})}),
                    tmp_path / "llm", progress=False, generator=ScriptedGenerator())
    assert plain.summary.cache is None and "cache" not in plain.report()["summary"]  # no model, no calls
    for a, b in zip(plain.entries, llm.entries):
        assert (a.score, a.status, a.coverage) == (b.score, b.status, b.coverage)
        assert b.aspects == ("unknown",)  # the scripted model's reply, parsed into lines
        assert (b.explanation is None) == (b.status == "UNSCORED")


def test_bad_audit_arguments(pdf_folder, tmp_path, capsys):
    assert main(["audit", "--pdfs", str(pdf_folder / "pdfs"), "--dataset", "demo"]) == 2
    assert "either --dataset or --pdfs" in capsys.readouterr().err
    assert main(["audit", "--pdfs", str(tmp_path / "nothing"), "--out", str(tmp_path / "x")]) == 2
    with pytest.raises(SystemExit) as exc:  # argparse rejects it before anything runs
        main(["audit", "--dataset", "demo", "--top-k", "0"])
    assert exc.value.code == 2


@pytest.mark.slow
def test_llm_steps_with_the_real_generator(pdf_folder, tmp_path):
    config = load_config(None, [f"data.path={pdf_folder / 'pdfs'}", "audit.llm=true", "generation.max_tokens=48"])
    res = run_audit(config, tmp_path / "llm", progress=False)
    plain = run_audit(load_config(None, [f"data.path={pdf_folder / 'pdfs'}"]), tmp_path / "plain", progress=False)
    assert res.summary.cache["calls_miss"] > 0 and res.summary.cache["calls_hit"] >= 0  # the LLM steps' calls
    for a, b in zip(res.entries, plain.entries):
        assert (a.score, a.status) == (b.score, b.status)
        assert a.llm_error is None and a.aspects and all(isinstance(x, str) and x for x in a.aspects)
        if a.status != "UNSCORED":
            assert isinstance(a.explanation, str) and len(a.explanation.split()) >= 3
