"""The retrieval-audit layout: PDFs + queries.json + ground_truth.json (built with reportlab)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragray.config import DataConfig
from ragray.data import detect_format, load_dataset, load_pdf_folder
from ragray.errors import InputError

pytest.importorskip("pypdf")
pytest.importorskip("reportlab.pdfgen.canvas")


@pytest.fixture()
def audit(tmp_path: Path, make_pdf) -> Path:
    """The seed's layout: data/pdfs/*.pdf, data/queries.json, data/ground_truth.json."""
    data = tmp_path / "data"
    pdfs = data / "pdfs"
    pdfs.mkdir(parents=True)
    make_pdf(pdfs / "retention.pdf", [["Records of payments are kept for seven years."],
                                      ["After that they are shredded by the archive office."]])
    make_pdf(pdfs / "finance_rules.pdf", [["Invoices above a threshold need two signatures."]])
    make_pdf(pdfs / "canteen.pdf", [["The canteen serves soup on Fridays."]])
    (data / "queries.json").write_text(json.dumps(
        {"query_id": "q1", "query": "How long are payment records kept?"}))
    (data / "ground_truth.json").write_text(json.dumps({"q1": ["retention.pdf", "finance_rules"]}))
    return data


def test_seed_layout_from_the_pdf_folder(audit):
    ds = load_dataset(DataConfig(path=str(audit / "pdfs")))
    assert detect_format(audit / "pdfs") == "pdf"
    assert ds.documents is True and ds.name == "data"
    assert [d.id for d in ds.corpus] == ["canteen.pdf", "finance_rules.pdf", "retention.pdf"]
    retention = ds.corpus[2]
    assert retention.title == "retention"
    assert "kept for seven years" in retention.text and "shredded" in retention.text
    assert retention.meta["pages"] == 2 and retention.meta["page_starts"][0] == 0
    assert retention.text[retention.meta["page_starts"][1]:].startswith("After that")
    (q,) = ds.questions
    assert (q.id, q.question) == ("q1", "How long are payment records kept?")
    assert q.gold_passage_ids == ("retention.pdf", "finance_rules.pdf")  # "finance_rules" resolved
    assert q.passages == ds.corpus  # per_question scope sees the same documents as global
    assert q.passages is ds.corpus  # shared, not copied


def test_data_folder_with_pdfs_subfolder_and_query_list(audit):
    (audit / "queries.json").write_text(json.dumps([
        {"query_id": "q1", "query": "How long are payment records kept?"},
        {"query_id": "q2", "query": "When is soup served?"},
    ]))
    ds = load_pdf_folder(audit)
    assert [q.id for q in ds.questions] == ["q1", "q2"]
    assert ds.questions[1].gold_passage_ids == ()  # no ground truth for q2: no gold


def test_explicit_paths_and_missing_ground_truth(audit, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (audit / "queries.json").rename(elsewhere / "my_queries.json")
    (audit / "ground_truth.json").unlink()
    with pytest.raises(InputError,
                       match=r"queries\.json not found \(looked for .*\); set data\.queries"):
        load_pdf_folder(audit / "pdfs")
    ds = load_dataset(DataConfig(path=str(audit / "pdfs"), format="pdf",
                                 queries=str(elsewhere / "my_queries.json")))
    assert ds.questions[0].gold_passage_ids == ()
    with pytest.raises(InputError, match=r"ground_truth\.json not found: .*nope\.json"):
        load_pdf_folder(audit / "pdfs", queries=elsewhere / "my_queries.json",
                        ground_truth=elsewhere / "nope.json")


def test_unreadable_and_empty_pdfs(audit, make_pdf):
    (audit / "pdfs" / "broken.pdf").write_bytes(b"this is not a pdf")
    with pytest.raises(InputError, match=r"broken\.pdf: not a readable PDF"):
        load_pdf_folder(audit)
    (audit / "pdfs" / "broken.pdf").unlink()
    make_pdf(audit / "pdfs" / "scan.pdf", [])
    with pytest.raises(InputError, match=r"scan\.pdf: no extractable text"):
        load_pdf_folder(audit)
    (audit / "pdfs" / "broken.pdf").write_bytes(b"")
    ds = load_pdf_folder(audit, on_bad_row="skip")
    assert [d.id for d in ds.corpus] == ["canteen.pdf", "finance_rules.pdf", "retention.pdf"]
    assert sorted(Path(s.source).name for s in ds.skipped) == ["broken.pdf", "scan.pdf"]


@pytest.mark.parametrize(("queries", "message"), [
    ([{"query_id": "q1"}], r"queries\.json: query 1: 'query' is missing"),
    ([{"query_id": "q1", "query": ""}], r"queries\.json: query 1: 'query' is empty"),
    ([{"query_id": "q1", "query": "a?"}, {"query_id": "q1", "query": "b?"}],
     r"queries\.json: query 2: duplicate query_id 'q1'"),
    ([{"query_id": "q1", "query": "a?"}, "q2"], r"queries\.json: query 2: not an object"),
    ("just text", r"queries\.json: expected an object or a list of objects"),
])
def test_bad_queries(audit, queries, message):
    (audit / "queries.json").write_text(json.dumps(queries))
    with pytest.raises(InputError, match=message):
        load_pdf_folder(audit)


def test_bad_json_names_the_line(audit):
    (audit / "queries.json").write_text('{\n  "query_id": "q1",\n  "query": \n}')
    with pytest.raises(InputError, match=r"queries\.json:4: not valid JSON: Expecting value"):
        load_pdf_folder(audit)


@pytest.mark.parametrize(("truth", "message"), [
    ({"q1": ["retention.pdf", "gdpr.pdf"]},
     r"ground_truth\.json: query 'q1' lists 'gdpr\.pdf', which is not a readable PDF here"),
    ({"q9": ["retention.pdf"]}, r"ground_truth\.json: query 'q9' is not in the queries file"),
    ({"q1": {"doc": "retention.pdf"}}, r"ground_truth\.json: query 'q1': expected a list"),
    (["retention.pdf"], r"ground_truth\.json: expected an object \{query_id: \[document ids\]\}"),
])
def test_bad_ground_truth(audit, truth, message):
    (audit / "ground_truth.json").write_text(json.dumps(truth))
    with pytest.raises(InputError, match=message):
        load_pdf_folder(audit)


def test_skipped_ground_truth_drops_its_query_visibly(audit):
    (audit / "queries.json").write_text(json.dumps([
        {"query_id": "q1", "query": "How long are payment records kept?"},
        {"query_id": "q2", "query": "When is soup served?"},
    ]))
    (audit / "ground_truth.json").write_text(json.dumps(
        {"q1": ["gdpr.pdf"], "q2": ["canteen.pdf"]}))
    ds = load_pdf_folder(audit, on_bad_row="skip")
    assert [(q.id, q.gold_passage_ids) for q in ds.questions] == [("q2", ("canteen.pdf",))]
    assert [(Path(s.source).name, s.line) for s in ds.skipped] == [("ground_truth.json", 1)]


def test_folder_without_pdfs(tmp_path):
    with pytest.raises(InputError, match=r"no \.pdf files"):
        load_pdf_folder(tmp_path)


def test_missing_pypdf_names_the_extra(audit, monkeypatch):
    import sys

    from ragray.errors import MissingDependencyError

    monkeypatch.setitem(sys.modules, "pypdf", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'ragray\[data\]'"):
        load_pdf_folder(audit)
