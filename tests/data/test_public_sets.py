"""The public sets by name: parsing hand-written rows shaped like the hub's / BEIR's, the records
they are written as, and where a name finds its file (override folder, cache, fetch). Nothing here
touches the network: fetching is replaced, or reads a local file:// archive."""

from __future__ import annotations

import dataclasses
import json
import zipfile
from pathlib import Path

import pytest

from ragray.catalog import DATASET_NAMES
from ragray.config import DataConfig, load_config
from ragray.data import (
    PUBLIC_SETS,
    hotpotqa,
    load_beir,
    load_dataset,
    load_records,
    named,
    public_set_path,
    pubmedqa,
    squad,
    write_records,
)
from ragray.data.hotpotqa import parse_hotpotqa_rows
from ragray.data.pubmedqa import parse_pubmedqa_rows
from ragray.data.scifact import fetch_scifact, scifact_records
from ragray.data.squad import parse_squad_rows
from ragray.errors import InputError, MissingDependencyError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def rows(name: str) -> list[dict]:
    text = (FIXTURES / "public" / f"{name}_rows.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    """A fresh cache and no override folder (CI exports one) for every test."""
    monkeypatch.setenv("RAGRAY_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(named.DATA_DIR_ENV, raising=False)


def test_the_catalog_knows_every_name():
    assert DATASET_NAMES == {"demo", "nq", *PUBLIC_SETS}
    assert {s.file for s in PUBLIC_SETS.values()} == {
        "squad_v11_dev.jsonl", "squad_v20_dev.jsonl", "hotpotqa_distractor_dev.jsonl", "pubmedqa_pqal.jsonl",
        "scifact.jsonl"}


# --- parsing ------------------------------------------------------------------------------------


def test_squad_rows_become_records_over_the_paragraph_corpus():
    ds = parse_squad_rows(rows("squad"))
    assert [q.id for q in ds.questions] == ["sq1", "sq2", "sq3", "sq4"]
    assert ds.questions[0].answers == ("the Marrow Bay Company", "Marrow Bay Company")  # repeats dropped
    assert ds.questions[3].answers == ("31 metres",)
    # paragraphs numbered per article in order of appearance; a repeated one keeps its id
    assert [q.gold_passage_ids for q in ds.questions] == [
        ("Quillon_Ferry#p0",), ("Quillon_Ferry#p0",), ("Quillon_Ferry#p1",), ("Saltmarsh_Lighthouse#p0",)]
    assert [p.id for p in ds.corpus] == ["Quillon_Ferry#p0", "Quillon_Ferry#p1", "Saltmarsh_Lighthouse#p0"]
    q = ds.questions[2]
    assert q.passages[0].title == "Quillon Ferry" and q.passages[0].text.startswith("Its two boats")
    assert dict(q.meta) == {"source": "SQuAD v1.1 dev", "article": "Quillon_Ferry"}


def test_squad_bad_rows_name_the_row_or_are_skipped():
    bad = rows("squad")
    bad[1]["answers"] = {"text": ["  "], "answer_start": [0]}
    with pytest.raises(InputError, match=r"^rajpurkar/squad\[validation\]:2: 'answers' has no answer text$"):
        parse_squad_rows(bad)
    ds = parse_squad_rows(bad, on_bad_row="skip")
    assert [q.id for q in ds.questions] == ["sq1", "sq3", "sq4"]
    assert [(s.line, s.reason) for s in ds.skipped] == [(2, "'answers' has no answer text")]
    with pytest.raises(InputError, match=":2: duplicate id 'sq1'"):
        parse_squad_rows([rows("squad")[0]] * 2)


def test_hotpotqa_rows_keep_their_paragraphs_and_supporting_titles():
    ds = parse_hotpotqa_rows(rows("hotpotqa"))
    assert ds.corpus is None and [q.id for q in ds.questions] == ["hp1", "hp2", "hp3"]
    first = ds.questions[0]
    assert first.answers == ("Marrow Bay Company",)
    assert [p.id for p in first.passages] == [
        "hotpot:Quillon Ferry", "hotpot:Marrow Bay Company", "hotpot:Saltmarsh Lighthouse"]
    assert first.passages[0].text == "The Quillon Ferry crosses the Ashwater estuary. Its boats were built at the Ashwater yard."
    assert first.gold_passage_ids == ("hotpot:Quillon Ferry", "hotpot:Marrow Bay Company")
    assert first.meta["type"] == "bridge" and first.meta["supporting_facts"] == [
        ["Quillon Ferry", 1], ["Marrow Bay Company", 0]]
    second = ds.questions[1]  # a title supporting twice is one gold id; the same text the same id
    assert second.gold_passage_ids == ("hotpot:Saltmarsh Lighthouse", "hotpot:Ashwater yard")
    assert second.passages[0] == first.passages[2]
    # the same title with another text than before gets its own id; a repeated title is kept once
    third = ds.questions[2]
    assert [p.id for p in third.passages] == ["hotpot:Marrow Bay Company#2", "hotpot:Quillon Ferry"]
    assert third.gold_passage_ids == ("hotpot:Marrow Bay Company#2",)


def test_hotpotqa_gold_must_be_among_the_paragraphs():
    bad = rows("hotpotqa")
    bad[0]["supporting_facts"] = {"title": ["Nowhere"], "sent_id": [0]}
    with pytest.raises(InputError, match=r":1: supporting fact 'Nowhere' is not among the context's paragraphs"):
        parse_hotpotqa_rows(bad)
    # a skipped row leaves no id behind: hp3's company text is then the first one seen
    ds = parse_hotpotqa_rows(bad, on_bad_row="skip")
    assert ds.questions[-1].gold_passage_ids == ("hotpot:Marrow Bay Company",)


def test_pubmedqa_rows_answer_with_the_decision():
    ds = parse_pubmedqa_rows(rows("pubmedqa"))
    q = ds.questions[0]
    assert (q.id, q.answers, q.gold_passage_ids) == ("pubmedqa-1001", ("yes",), ("pmid:1001",))
    assert q.passages[0].text == ("Marsh reeds grow near the coast of the archipelago. "
                                  "Plots sprayed with sea water grew 30% less than control plots.")
    assert q.meta["long_answer"] == "Salt spray slowed the growth of marsh reeds."
    assert q.meta["context_labels"] == ["BACKGROUND", "RESULTS"] and q.meta["meshes"] == ["Plants", "Salinity"]
    assert ds.questions[1].answers == ("no",)
    bad = rows("pubmedqa")
    bad[1]["final_decision"] = "perhaps"
    with pytest.raises(InputError, match=r"\[pqa_labeled/train\]:2: 'final_decision' must be one of yes, no, maybe"):
        parse_pubmedqa_rows(bad)


def test_scifact_records_carry_their_judged_abstracts():
    ds = scifact_records(load_beir(FIXTURES / "beir_tiny", split="test"))
    assert [q.id for q in ds.questions] == ["scifact-1", "scifact-2", "scifact-3"]
    assert [q.gold_passage_ids for q in ds.questions] == [("doc1",), ("doc2", "doc1"), ()]
    assert [[p.id for p in q.passages] for q in ds.questions] == [["doc1"], ["doc2", "doc1"], []]
    assert all(q.answers == () for q in ds.questions)
    assert ds.questions[1].meta["qrels"] == {"doc2": 2, "doc1": 1}
    assert [p.id for p in ds.corpus] == ["doc1", "doc2", "doc3", "doc4"]


def test_scifact_fetch_unzips_a_beir_archive(tmp_path):
    archive = tmp_path / "scifact.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for f in (FIXTURES / "beir_tiny").rglob("*"):
            if f.is_file():
                zf.write(f, Path("scifact") / f.relative_to(FIXTURES / "beir_tiny"))
    ds = fetch_scifact(archive.as_uri())
    assert [q.id for q in ds.questions] == ["scifact-1", "scifact-2", "scifact-3"] and len(ds.corpus) == 4
    empty = tmp_path / "empty.zip"
    zipfile.ZipFile(empty, "w").close()
    with pytest.raises(InputError, match="the archive holds no BEIR folder"):
        fetch_scifact(empty.as_uri())


@pytest.mark.parametrize(("module", "fetch", "expected"), [
    (squad, "fetch_squad", ("rajpurkar/squad", "validation", None)),
    (hotpotqa, "fetch_hotpotqa", ("hotpotqa/hotpot_qa", "validation", "distractor")),
    (pubmedqa, "fetch_pubmedqa", ("qiaojin/PubMedQA", "train", "pqa_labeled")),
])
def test_hub_fetchers_stream_the_documented_split(monkeypatch, module, fetch, expected):
    asked = []

    def stream(repo, split, *, config=None, feature):
        asked.append((repo, split, config))
        return rows(module.__name__.rsplit(".", 1)[1])

    monkeypatch.setattr(module, "stream_rows", stream)
    ds = getattr(module, fetch)()
    assert asked == [expected] and len(ds.questions) >= 2


# --- records round trip -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["squad", "hotpotqa", "pubmedqa", "scifact"])
def test_written_records_load_back_the_same(tmp_path, name):
    parse = {"squad": lambda: parse_squad_rows(rows("squad")),
             "hotpotqa": lambda: parse_hotpotqa_rows(rows("hotpotqa")),
             "pubmedqa": lambda: parse_pubmedqa_rows(rows("pubmedqa")),
             "scifact": lambda: scifact_records(load_beir(FIXTURES / "beir_tiny"))}[name]
    ds = parse()
    spec = PUBLIC_SETS[name]
    path = write_records(ds, tmp_path / spec.file, tmp_path / spec.corpus_file if spec.corpus_file else None)
    back = load_records(path)
    assert back.questions == ds.questions  # ids, text, answers, passages, gold
    assert [dict(q.meta) for q in back.questions] == [json.loads(json.dumps(dict(q.meta))) for q in ds.questions]
    assert back.global_corpus() == ds.global_corpus()
    assert (back.corpus is None) == (ds.corpus is None)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(filter(None, [spec.file, spec.corpus_file]))


# --- where a name finds its file ----------------------------------------------------------------


def _fake_fetch(monkeypatch, name: str, dataset_fn):
    calls = []

    def fetch():
        calls.append(name)
        return dataset_fn()

    monkeypatch.setitem(named.PUBLIC_SETS, name, dataclasses.replace(PUBLIC_SETS[name], fetch=fetch))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    return calls


def test_first_use_fetches_and_caches_then_runs_offline(tmp_path, monkeypatch):
    calls = _fake_fetch(monkeypatch, "squad", lambda: parse_squad_rows(rows("squad")))
    path = public_set_path("squad")
    assert path == tmp_path / "cache" / "datasets" / "squad_v11_dev.jsonl"
    assert (path.parent / "squad_v11_dev.corpus.jsonl").is_file()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    ds = load_dataset(load_config(None, ["data.path=squad", "data.limit=2"]).data)
    assert calls == ["squad"]  # the second use read the cache
    assert [q.id for q in ds.questions] == ["sq1", "sq2"] and len(ds.global_corpus()) == 3
    assert ds.corpus is not None  # the corpus file beside it was found


def test_the_override_folder_wins_when_it_has_the_file(tmp_path, monkeypatch):
    calls = _fake_fetch(monkeypatch, "pubmedqa", lambda: parse_pubmedqa_rows(rows("pubmedqa")))
    folder = tmp_path / "shared"
    sample = parse_pubmedqa_rows(rows("pubmedqa")[:1])
    write_records(sample, folder / "pubmedqa_pqal.jsonl")
    monkeypatch.setenv(named.DATA_DIR_ENV, str(folder))
    assert public_set_path("pubmedqa") == folder / "pubmedqa_pqal.jsonl"
    assert len(load_dataset(DataConfig(path="pubmedqa")).questions) == 1  # the file as given
    # a folder without that file falls back to the cache (here: a fetch)
    (folder / "pubmedqa_pqal.jsonl").unlink()
    assert public_set_path("pubmedqa") == tmp_path / "cache" / "datasets" / "pubmedqa_pqal.jsonl"
    assert calls == ["pubmedqa"]


def test_offline_without_a_copy_says_what_to_provide(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(InputError, match=r"dataset 'hotpotqa' \(HotpotQA dev \(distractor\)\) is not cached and "
                                         r"HF_HUB_OFFLINE is set\. .*hotpotqa/hotpot_qa.*RAGRAY_DATA_DIR to a folder "
                                         r"holding hotpotqa_distractor_dev\.jsonl, or pass a local records file"):
        load_dataset(DataConfig(path="hotpotqa"))


def test_a_failed_fetch_is_an_input_error(monkeypatch):
    def down():
        raise OSError("Name or service not known")

    _fake_fetch(monkeypatch, "scifact", down)
    with pytest.raises(InputError, match=r"'scifact' .*fetching it failed \(OSError: Name or service not known\).*"
                                         r"scifact\.jsonl \(and scifact\.corpus\.jsonl\.gz\)"):
        public_set_path("scifact")


def test_without_the_datasets_package_the_error_names_the_extra(monkeypatch):
    _fake_fetch(monkeypatch, "squad", lambda: pytest.fail("must not fetch"))
    real = named.importlib.util.find_spec
    monkeypatch.setattr(named.importlib.util, "find_spec", lambda n: None if n == "datasets" else real(n))
    with pytest.raises(MissingDependencyError, match=r"pip install 'ragray\[data\]' \(or set RAGRAY_DATA_DIR"):
        public_set_path("squad")


def test_a_named_set_is_never_a_path(tmp_path, monkeypatch):
    (tmp_path / "squad").mkdir()  # a folder of that name in the cwd does not shadow the name
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(InputError, match="dataset 'squad'"):
        load_dataset(load_config(None, ["data.path=squad"]).data)
    with pytest.raises(InputError, match="unknown dataset name 'squad3'; valid: hotpotqa, pubmedqa, scifact, squad, squad2"):
        public_set_path("squad3")


@pytest.mark.realdata
def test_the_shared_folder_serves_as_the_override(shared_data, monkeypatch):
    monkeypatch.setenv(named.DATA_DIR_ENV, str(shared_data))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    ds = load_dataset(load_config(None, ["data.path=hotpotqa", "data.limit=2"]).data)
    assert len(ds.questions) == 2
    assert all(len(q.gold_passage_ids) == 2 for q in ds.questions)
    ids = {p.id for p in ds.global_corpus()}
    assert all(g in ids for q in ds.questions for g in q.gold_passage_ids)
    squad_ds = load_dataset(DataConfig(path="squad", limit=3))
    assert squad_ds.corpus is not None and len(squad_ds.corpus) == 2067  # the corpus file beside it


@pytest.mark.realdata
def test_the_squad_sweep_loads_its_data_from_any_folder(shared_data, tmp_path, monkeypatch):
    from ragray.adapters.sweep.spec import load_spec

    monkeypatch.setenv(named.DATA_DIR_ENV, str(shared_data))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    spec_file = Path(__file__).resolve().parents[2] / "configs" / "sweeps" / "squad_small.yaml"
    _, trials = load_spec(spec_file, ["data.limit=3"])
    ds = load_dataset(trials[0].config.data)
    assert len(ds.questions) == 3 and len(ds.global_corpus()) == 2067
