"""bench_evidence's plumbing with the scripted model: splits, resumable text-free exports, panels."""

import json

from benchmarks import bench_evidence


def records(n):
    out = []
    for i in range(n):
        out.append({"id": f"q{i}", "question": f"Which ferry number {i}?", "answers": [f"tern{i}"],
                    "passages": [{"id": f"q{i}-p{j}", "title": "", "text": f"Ferry {j} ANSWER=tern{i}" if j == 0
                                  else f"Gulls {j} nest {i}."} for j in range(7)],
                    "gold_passage_ids": [f"q{i}-p0"]})
    return out


def test_a_tune_run_exports_no_dataset_text_and_resumes_from_the_export(tmp_path, monkeypatch):
    data = tmp_path / "set.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records(160)), encoding="utf-8")
    monkeypatch.setitem(bench_evidence.SPLITS, "tune", (0, 3))
    args = ["--data", str(data), "--name", "toy", "--scope", "per_question", "--variants", "numbered_full",
            "--runs", str(tmp_path / "runs"), "--export", str(tmp_path / "export"), "--out", str(tmp_path / "r.json"),
            "--set", "generation.backend=scripted", "--set", "metrics.embedding=false"]
    assert bench_evidence.main(args) == 0
    exported = tmp_path / "export" / "tune" / "numbered_full" / "toy.jsonl"
    lines = [json.loads(x) for x in exported.read_text().splitlines()]
    assert len(lines) == 3 and all(x["question"]["question"] is None and x["question"]["gold_answers"] is None
                                   for x in lines)
    text = exported.read_text()
    assert "Which ferry" not in text and "Gulls" not in text  # no question or passage text
    result = json.loads((tmp_path / "r.json").read_text())
    panel = result["variants"]["numbered_full"]["sets"]["toy"]["panel"]
    # the one carrying passage is found, and its removal takes the whole answer
    t = panel["subsets"]["all"]["metrics"]["top1_drop"]
    assert t["measures"]["logprob_drop"]["mean"] == 10.0
    assert panel["subsets"]["answered"]["n_questions"] == 3  # gold answers restored from the data set
    # a fresh checkout (no run directory) resumes from the export: nothing is asked again
    fresh = [str(tmp_path / "runs2") if a == str(tmp_path / "runs") else a for a in args]
    again = bench_evidence.main(fresh)
    assert again == 0
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["variants"]["numbered_full"]["sets"]["toy"]["resumed"] == 3


def test_exports_carry_no_answer_text_but_keep_whether_it_was_answered(tmp_path, monkeypatch):
    data = tmp_path / "set.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records(5)), encoding="utf-8")
    monkeypatch.setitem(bench_evidence.SPLITS, "tune", (0, 2))
    bench_evidence.main(["--data", str(data), "--name", "toy", "--scope", "per_question", "--variants",
                         "numbered_full", "--runs", str(tmp_path / "runs"), "--export", str(tmp_path / "export"),
                         "--out", str(tmp_path / "r.json"), "--set", "generation.backend=scripted",
                         "--set", "metrics.embedding=false"])
    exported = (tmp_path / "export" / "tune" / "numbered_full" / "toy.jsonl").read_text()
    assert "tern" not in exported  # neither the gold answer nor the model's answer
    assert all(json.loads(x)["answered"] is True for x in exported.splitlines())


def test_the_tracing_benchmark_keeps_the_answers_that_name_one_source(tmp_path):
    from benchmarks import bench_tracing

    rows = [{"id": f"r{i}", "question": f"Which boat {i}?", "answers": [f"Boat{i}"],
             "passages": [{"id": f"r{i}-g", "title": f"T{i}", "text": f"The boat is ANSWER=Boat{i} today."}]
             + [{"id": f"r{i}-d{j}", "title": "", "text": f"Gulls {j} {i}."} for j in range(4)],
             "gold_passage_ids": [f"r{i}-g"]} for i in range(160)]
    data = tmp_path / "set.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert bench_tracing.main(["--data", str(data), "--name", "toy", "--candidates", "6", "--usable", "4",
                               "--runs", str(tmp_path / "runs"), "--export", str(tmp_path / "export"),
                               "--out", str(tmp_path / "t.json"), "--set", "generation.backend=scripted",
                               "--set", "metrics.embedding=false"]) == 0
    result = json.loads((tmp_path / "t.json").read_text())
    # the scripted model answers from the first marker shown: always exactly one candidate answer
    assert result["candidates"] == 6 and result["usable"] == 6 and result["usable_rate"] == 1.0
    panel = result["stage2"]["panel"]["subsets"]["all"]["metrics"]["recovery_at_1"]
    assert panel["n"] == 4 and panel["measures"]["logprob_drop"]["mean"] == 1.0
    assert "Boat" not in (tmp_path / "export" / "stage1.jsonl").read_text()
