"""The notebook API with the scripted model: DataFrames in and out, nothing written without
``out``, one question equals its row of a run, passage kinds of LangChain and LlamaIndex shapes."""

import json
import re
import os
from types import SimpleNamespace

import pandas as pd
import pytest

import ragray
from ragray.errors import InputError

ROWS = [
    {"id": "q1", "question": "Which ferry sails to Kell?", "answers": ["tern"],
     "passages": ["Kell has a lighthouse.", "The ferry to Kell is the Tern ANSWER=tern", "Tickets cost five crowns."]},
    {"id": "q2", "question": "Which bird nests on Myrrin?", "answers": "puffin",
     "passages": [{"id": "b1", "title": "Birds", "text": "Puffins arrive in spring ANSWER=puffin"},
                  {"id": "b2", "title": "Count", "text": "Nesting season on Myrrin."}]},
]


@pytest.fixture()
def in_empty_folder(tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


def test_run_on_a_dataframe_writes_nothing_and_returns_dataframes(in_empty_folder):
    run = ragray.run(pd.DataFrame(ROWS), backend="scripted", progress=False)
    assert os.listdir(in_empty_folder) == []  # no run directory, no history database
    assert run.path is None and isinstance(run.questions.to_pandas(), pd.DataFrame)
    assert list(run.questions["question_id"]) == ["q1", "q2"]
    passages = run.passages.to_pandas()
    p = passages[passages["question_id"] == "q1"].sort_values("retrieval_rank")
    # the given passages, in the given order, are the ones measured
    assert list(p["text"]) == ROWS[0]["passages"] and list(p["retrieval_rank"]) == [1, 2, 3]
    assert list(p["used"]) == [False, True, False]
    assert run.summary["n_questions"] == 2 and "<h2>Questions</h2>" in str(run.report())
    # the plain repr stays one line (Jupyter shows it beside the HTML; the tables are attributes)
    assert repr(run) == "Run(kind='run', questions=2, tables=[calls, passages, questions, subsets], path=None)"
    assert repr(run.report()).startswith("<HTML, ") and "\n" not in repr(run.report())
    saved = run.save(in_empty_folder / "mine")
    again = ragray.load_run(saved)
    assert again.path == saved and again.questions.to_pandas().equals(run.questions.to_pandas())
    assert (saved / "report.html").is_file() and (saved / "progress.jsonl").is_file()
    with pytest.raises(AttributeError, match="has no table 'arms'"):
        run.arms


def test_attribute_equals_that_question_in_a_run(in_empty_folder):
    many = ragray.run(ROWS, backend="scripted", progress=False)  # both questions in one run
    cols = ["retrieval_rank", "title", "text", "influence", "used", "group", "credit", "keep_alone_gain", "logprob_drop",
            "retrieval_score", "is_gold"]
    for row, answer, verdict in zip(ROWS, ("tern", "puffin"), ("MISALIGNED", "aligned")):
        one = ragray.attribute(row["question"], row["passages"], answers=row["answers"], backend="scripted")
        assert os.listdir(in_empty_folder) == []
        q = many.questions.to_pandas().set_index("question_id").loc[row["id"]]
        assert one.answer == q["baseline_answer"] == answer
        assert one.correct is True and bool(q["answer_correct"]) is True
        assert one.verdict.startswith(verdict) and one.misaligned == bool(q["misaligned"])
        assert one.usage_ndcg == pytest.approx(q["usage_ndcg"])
        expect = many.passages.to_pandas()
        expect = expect[expect["question_id"] == row["id"]].sort_values("retrieval_rank")
        expect = expect.reset_index(drop=True)
        pd.testing.assert_frame_equal(one.passages.to_pandas()[cols], expect[cols])
        if isinstance(row["passages"][0], dict):  # ids given: kept by both
            assert list(one.passages["passage_id"]) == list(expect["passage_id"]) == ["b1", "b2"]
    one = ragray.attribute(ROWS[0]["question"], ROWS[0]["passages"], answers=["tern"], backend="scripted")
    assert '<article class=qcard' in one._repr_html_() and "Tern ANSWER=tern" in one._repr_html_()
    assert re.search(r"used: \S+ \(\d\.\d\d, #2\); ", repr(one))


#: rows a user has as a DataFrame and as a JSONL file (the CLI's format: passages are objects)
FILE_ROWS = [
    {"id": "q1", "question": "Which ferry sails to Kell?", "answers": ["tern"],
     "passages": [{"id": "k1", "title": "Kell", "text": "Kell has a lighthouse."},
                  {"id": "k2", "title": "Ferry", "text": "The ferry to Kell is the Tern ANSWER=tern"},
                  {"id": "k3", "title": "Fares", "text": "Tickets cost five crowns. DISTRACT"}]},
    {"id": "q2", "question": "Which bird nests on Myrrin?", "answers": ["puffin"],
     "passages": [{"id": "b1", "title": "Birds", "text": "Puffins arrive in spring ANSWER=puffin"},
                  {"id": "b2", "title": "Count", "text": "Nesting season on Myrrin. DISTRACT"}]},
    {"id": "q3", "question": "Who keeps the light?", "answers": ["Ada Penhallow"],
     "passages": [{"id": "l1", "title": "Keeper", "text": 'The keeper is ANSWER="Ada Penhallow"'}]},
]


def _untimed(df: pd.DataFrame) -> pd.DataFrame:
    """A table without its wall-clock columns (``seconds``, ``seconds_checks`` ...)."""
    return df[[c for c in df.columns if not c.startswith("seconds")]]


def test_a_run_on_a_dataframe_equals_the_cli_on_the_same_rows(in_empty_folder):
    from ragray.adapters.cli import main

    api = ragray.run(pd.DataFrame(FILE_ROWS), backend="scripted", progress=False)
    path = in_empty_folder / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in FILE_ROWS), encoding="utf-8")
    # rows that carry passages are measured in their own order: the API picks retriever `given` for them
    assert main(["run", "--dataset", str(path), "--backend", "scripted", "--retriever", "given",
                 "--out", str(in_empty_folder / "cli"), "--no-progress"]) == 0
    cli = ragray.load_run(in_empty_folder / "cli")
    assert "seconds" in api.questions.columns  # what is left out below
    for name in ("questions", "passages", "calls"):
        pd.testing.assert_frame_equal(_untimed(api.tables[name].to_pandas()), _untimed(cli.tables[name].to_pandas()), obj=name)
    assert list(api.passages["passage_id"]) == ["k1", "k2", "k3", "b1", "b2", "l1"]
    assert list(api.questions["baseline_answer"]) == ["tern", "puffin", "Ada Penhallow"]
    assert api.summary["n_questions"] == cli.summary["n_questions"] == 3


def test_passages_of_langchain_and_llamaindex_shapes_keep_ids_titles_scores():
    from ragray.api_inputs import passage_dicts

    doc = SimpleNamespace(page_content="A text.", metadata={"title": "T", "source": "s.txt"}, id="d1")
    node = SimpleNamespace(node=SimpleNamespace(get_content=lambda: "Node text.", node_id="n1",
                                                metadata={"file_name": "f.md"}), score=0.7)
    got = passage_dicts(["plain", {"text": "dict", "title": "D"}, doc, node])
    assert [g["text"] for g in got] == ["plain", "dict", "A text.", "Node text."]
    assert [g["id"] for g in got] == ["p1", "p2", "d1", "n1"] and got[3]["score"] == 0.7
    assert got[2]["title"] == "T" and got[3]["title"] == "f.md"


@pytest.mark.parametrize("passages, message", [
    ("one string", "passages must be a list of passages"),
    ([], "passages is empty"),
    (["ok", "  "], r"passages\[1\] is empty"),
    (["ok", 3], r"passages\[1\]: a int is not a passage"),
])
def test_bad_passages_say_which(passages, message):
    with pytest.raises(InputError, match=message):
        ragray.attribute("Q?", passages, backend="scripted")


def test_bad_keywords_and_rows_say_what():
    with pytest.raises(InputError, match="unknown keyword"):
        ragray.run(ROWS, backend="scripted", top_kk=3)
    with pytest.raises(InputError, match=r"data row 0: 'question' is missing or empty \(columns: \['query'\]\); "
                                         r"name the one that holds the questions: columns=\{'question': '<column>'\}"):
        ragray.run([{"query": "x"}], backend="scripted")
    with pytest.raises(InputError, match=r"data row 0: 'question' is missing or empty \(columns: \['question'\]\)$"):
        ragray.run([{"question": " "}], backend="scripted")


def test_a_retriever_of_the_users_feeds_the_run(in_empty_folder):
    class Retriever:  # LangChain's shape: invoke(question) -> Documents
        def __init__(self):
            self.asked = []

        def invoke(self, q):
            self.asked.append(q)
            return [SimpleNamespace(page_content="It is, it was ANSWER=yes", metadata={"id": "a"}),
                    SimpleNamespace(page_content="Unrelated.", metadata={"id": "b"})]

    r = Retriever()
    run = ragray.run_retriever(r, ["Is it?", "Was it?"], backend="scripted", progress=False)
    assert r.asked == ["Is it?", "Was it?"]  # once per question
    p = run.passages.to_pandas().sort_values(["question_id", "retrieval_rank"])
    assert list(p["passage_id"]) == ["a", "b", "a", "b"] and list(p["retrieval_rank"]) == [1, 2, 1, 2]
    # limit: the questions past it are neither retrieved nor measured
    r = Retriever()
    run = ragray.run_retriever(r, ["Is it?", "Was it?", "Will it be?"], limit=2, backend="scripted", progress=False)
    assert r.asked == ["Is it?", "Was it?"] and len(run.questions) == 2


def test_columns_map_a_dataframe_with_other_names(in_empty_folder):
    df = pd.DataFrame([{"query": "Which ferry sails to Kell?", "docs": ROWS[0]["passages"], "gold": ["tern"]}])
    run = ragray.run(df, backend="scripted", progress=False,
                     columns={"question": "query", "passages": "docs", "answers": "gold"})
    q = run.questions[0]
    assert q["question"] == "Which ferry sails to Kell?" and bool(q["answer_correct"]) is True
    assert run.passages["text"] == ROWS[0]["passages"]


def test_the_api_without_out_makes_no_temporary_folder(in_empty_folder, monkeypatch):
    """Rows in, DataFrames out, no run on disk: no temporary folder is made (refused here; the
    caches keep writing their own files), and the in-memory run's files are what a run directory
    would hold."""
    import tempfile

    made = {name: getattr(tempfile, name) for name in ("TemporaryDirectory", "mkdtemp")}

    def refusing(name):
        def make(*args, **kwargs):
            if kwargs.get("dir") is None:  # the system's temp folder (a cache's own folder is its business)
                raise AssertionError(f"a temporary folder was made: tempfile.{name}")
            return made[name](*args, **kwargs)
        return make

    for name in made:
        monkeypatch.setattr(tempfile, name, refusing(name))
    run = ragray.run(ROWS, backend="scripted", progress=False)
    assert run.path is None and run.result.out is None
    assert {"config.yaml", "progress.jsonl", "summary.json", "report.html", "questions.parquet",
            "questions.csv"} <= set(run.files)
    # the rows were given in memory: kept among the run's files, and its config names them there
    assert "data:\n  path: input_rows.jsonl\n" in run.files["config.yaml"].decode()
    assert [json.loads(line)["id"] for line in run.files["input_rows.jsonl"].splitlines()] == [r["id"] for r in ROWS]
    # the report names the kept file too, not the token the rows had while the run lasted
    assert "dataset input_rows.jsonl" in run.files["report.html"].decode() and "rows:" not in run.files["report.html"].decode()
    interpreted = ragray.interpret(ROWS, backend="scripted", progress=False)
    assert interpreted.path is None and len(interpreted.cases) > 0
    audited = ragray.audit_retrieval(ROWS, progress=False, retriever="bm25", top_k=2,
                                     settings={"retrieval.scope": "global"})
    assert audited.path is None and len(audited.audit) == 2
    scored = ragray.score([{"question": "Which ferry?", "answer": "The Tern.", "answers": ["tern"]}],
                          settings={"metrics.embedding": False})
    assert scored.path is None and scored.scores["em"] == [1.0]
    assert os.listdir(in_empty_folder) == []
    with pytest.raises(InputError, match=r"data row 1: .question. is missing"):
        ragray.run([ROWS[0], {"id": "q9"}], backend="scripted", progress=False)
    with pytest.raises(InputError, match="history=True records a run with its folder: give out"):
        ragray.run(ROWS, backend="scripted", progress=False, history=True)


def test_audit_and_score_follow_the_same_pattern(in_empty_folder):
    audited = ragray.audit_retrieval("demo", limit=2, progress=False)
    assert os.listdir(in_empty_folder) == [] and audited.kind == "audit"
    assert len(audited.audit) == 2 and len(audited.summary["queries"]) == 2
    assert set(audited.audit["status"]) <= {"PASS", "FAIL"}
    scored = ragray.score([{"question": "Which ferry?", "answer": "The Tern.", "answers": ["tern"]}],
                          settings={"metrics.embedding": False})
    assert os.listdir(in_empty_folder) == [] and scored.kind == "score"
    assert scored.tables["scores"]["em"] == [1.0]
    # the notebook card leads with what each answers, as the console does
    assert "answered correctly: 1 of 1 with gold answers" in scored._repr_html_()
    assert "cannot PASS at top-3 whatever is retrieved" in audited._repr_html_()


def test_the_cli_and_the_http_api_take_the_notebook_functions(in_empty_folder, monkeypatch):
    """One code path: `ragray run`/`interpret`/`audit` and a run started over HTTP call ragray.run /
    interpret / audit_retrieval (the notebook's functions), not the pipeline beside them."""
    from ragray import api
    from ragray.adapters.cli import main
    from ragray.adapters.serving.runs import RunManager

    called = []
    for name in ("run", "interpret", "audit_retrieval"):
        real = getattr(api, name)

        def spy(*args, _real=real, _name=name, **kwargs):
            called.append((_name, kwargs.get("resume")))
            return _real(*args, **kwargs)

        monkeypatch.setattr(api, name, spy)
    path = in_empty_folder / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in FILE_ROWS), encoding="utf-8")
    common = ["--dataset", str(path), "--backend", "scripted", "--retriever", "given", "--no-progress"]
    assert main(["run", *common, "--out", str(in_empty_folder / "r")]) == 0
    assert main(["run", *common, "--out", str(in_empty_folder / "r"), "--resume"]) == 0
    main(["audit", "--dataset", str(path), "--out", str(in_empty_folder / "a"), "--no-progress"])  # 1: unscored
    assert called == [("run", False), ("run", True), ("audit_retrieval", None)]
    # a run started over HTTP (POST /runs hands it to RunManager._work in a thread)
    from ragray.config import load_config
    from ragray.generation.scripted import ScriptedGenerator

    config = load_config(None, [f"data.path={path}", "generation.backend=scripted", "retrieval.retriever=given",
                                f"history.url=sqlite:///{in_empty_folder / 'h.sqlite'}"])
    from ragray.adapters.serving.inflight import Inflight, RunModel
    from ragray.cancel import CancelToken

    manager = RunManager.__new__(RunManager)  # its presets and Serve app are not what is tested here
    manager.history = SimpleNamespace(finish_run=lambda *a, **k: None)
    manager.inflight = Inflight()
    monkeypatch.setattr("ragray.adapters.serving.runs.recording", lambda *a: __import__("contextlib").nullcontext())
    called.clear()
    model = RunModel(config, ScriptedGenerator(), CancelToken())
    manager._work("r1", "run", config, in_empty_folder / "http", model)
    manager._work("r2", "interpret", config, in_empty_folder / "http2", model)
    assert called == [("run", True), ("interpret", True)]
    assert (in_empty_folder / "http" / "summary.json").is_file()


@pytest.mark.slow  # over 2 s: outside the fast subset (README)
def test_the_cli_runs_with_only_what_ragray_generate_installs(tmp_path):
    """``ragray[generate]`` brings no pandas, no sentence-transformers and no Ray: the CLI reads the
    pipeline's result, ``ragray.attribute`` and ``ragray.run`` hand tables of rows (a DataFrame only
    from ``.to_pandas()``, which then says what to install), and the
    embedding metrics (``metrics.embedding: auto``) stay off instead of failing the run. The packages
    of the other extras are hidden as if never installed, and the embedding cache is empty, so no
    cached vector spares the encoder."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "HIDDEN = ('pandas', 'sentence_transformers', 'datasets', 'faiss', 'ray', 'FlagEmbedding')\n"
        "class NotInstalled:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in HIDDEN:\n"
        "            raise ImportError(f'{name} is not installed here')\n"
        "sys.meta_path.insert(0, NotInstalled())\n"
        "from ragray.adapters.cli import main\n"
        f"code = main(['run', '--limit', '2', '--backend', 'scripted', '--out', {str(tmp_path / 'out')!r}, '--no-progress'])\n"
        "import ragray\n"  # the notebook verbs hand tables, not DataFrames: no pandas needed
        "r = ragray.attribute('Which ferry?', ['The ferry is the Tern ANSWER=tern', 'Tickets.'], answers=['tern'], "
        "backend='scripted', progress=False)\n"
        "assert r.correct and r.passages['used'] == [True, False] and 'used: ' in repr(r), repr(r)\n"
        "run = ragray.run([{'question': 'Which ferry?', 'passages': ['The Tern ANSWER=tern']}], backend='scripted', "
        "progress=False)\n"
        "assert len(run.passages) == 1 and run.questions[0]['baseline_answer'] == 'tern'\n"
        "try:\n"
        "    run.passages.to_pandas()\n"
        "except ImportError as e:\n"
        "    assert 'ragray[notebook]' in str(e), e\n"
        "else:\n"
        "    raise AssertionError('to_pandas without pandas')\n"
        "assert not [m for m in sys.modules if m.split('.')[0] in HIDDEN], 'a hidden package was imported'\n"
        "sys.exit(code)\n"
    )
    env = {**os.environ, "RAGRAY_HOME": str(tmp_path / "home"), "RAGRAY_CACHE": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "ragray run: 2 questions" in done.stdout
    run = ragray.load_run(tmp_path / "out")  # here pandas is installed: the tables read on access
    assert sorted(run.tables) == ["calls", "passages", "questions", "subsets"] and len(run.questions) == 2


def test_a_run_of_rows_in_a_folder_resumes_from_python_and_the_cli(tmp_path):
    """Rows handed to ragray.run with out are kept in that folder and the run reads them there, so
    an interrupted run resumes: from Python with the same rows, or with the command the error
    prints; other rows are refused with what to do instead. A run in memory, saved, re-runs too."""
    from ragray.adapters.cli import main

    out = tmp_path / "r"
    first = ragray.run(ROWS[:1], backend="scripted", progress=False, out=out)
    assert len(first.questions) == 1 and (out / "input_rows.jsonl").is_file()
    again = ragray.run(ROWS[:1], backend="scripted", progress=False, out=out, resume=True)
    assert len(again.questions) == 1
    with pytest.raises(InputError, match=r"these 2 rows differ from the 1 rows .* started with"):
        ragray.run(ROWS, backend="scripted", progress=False, out=out, resume=True)
    with pytest.raises(InputError, match="already holds a run"):
        ragray.run(ROWS[:1], backend="scripted", progress=False, out=out)
    assert (out / "input_rows.jsonl").read_bytes().count(b"\n") == 1  # a refused start kept the run's rows
    assert main(["run", str(out / "config.yaml"), "--out", str(out), "--resume", "--no-progress"]) == 0

    memory = ragray.run(ROWS, backend="scripted", progress=False)
    saved = memory.save(tmp_path / "saved")
    assert main(["run", str(saved / "config.yaml"), "--out", str(saved), "--resume", "--no-progress"]) == 0
    assert len(ragray.load_run(saved).questions) == len(ROWS)


def test_a_runs_tables_are_rows_in_memory_and_dataframes_only_when_asked(in_empty_folder, monkeypatch):
    """An in-memory run hands the Arrow tables the pipeline built: no Parquet is read back (refused
    here); rows, columns and cells without pandas; ``to_pandas()`` gives the DataFrame; a notebook
    shows a page of the table."""
    import pyarrow.parquet as pq

    monkeypatch.setattr(pq, "read_table", lambda *a, **k: pytest.fail("an in-memory run read its Parquet back"))
    run = ragray.run(ROWS, backend="scripted", progress=False)
    passages = run.passages
    assert len(passages) == 5 and "influence" in passages.columns
    assert passages["question_id"] == ["q1", "q1", "q1", "q2", "q2"]
    assert passages[1]["used"] is True and passages[1]["text"] == ROWS[0]["passages"][1]
    rows = list(passages)
    rows[0]["used"] = "changed"  # the caller's copy
    assert passages[0]["used"] is False
    with pytest.raises(KeyError, match="passages has no column 'nope'"):
        passages["nope"]
    df = passages.to_pandas()
    assert isinstance(df, pd.DataFrame) and list(df["used"]) == [False, True, False, True, False]
    assert "<table>" in passages._repr_html_() and ".to_pandas()" in repr(passages)
    assert passages.to_arrow().num_rows == 5
    monkeypatch.undo()
    saved = ragray.load_run(run.save(in_empty_folder / "saved"))  # a folder's tables: read from Parquet
    assert saved.passages.to_pylist() == run.passages.to_pylist()


def test_the_pipeline_takes_a_data_set_object(tmp_path):
    """The commands take an in-memory data set in place of ``data.path`` (no file, no name): the
    run's config may name a file that does not exist and nothing reads it."""
    from ragray import pipeline
    from ragray.api_inputs import question_records
    from ragray.config import load_config
    from ragray.data.records import rows_dataset

    cfg = load_config(None, [], {"generation.backend": "scripted", "data.path": str(tmp_path / "absent.jsonl"),
                                 "retrieval.retriever": "given", "retrieval.scope": "per_question",
                                 "history.record": False})
    dataset = rows_dataset(question_records(ROWS))
    done = pipeline.run_influence(cfg, None, progress=False, dataset=dataset)
    assert [r.question_id for r in done.records] == ["q1", "q2"] and done.tables["passages"].num_rows == 5
    audited = pipeline.run_audit(cfg.model_copy(update={"retrieval": cfg.retrieval.model_copy(
        update={"retriever": "bm25", "scope": "global", "top_k": 2})}), None, progress=False, dataset=dataset)
    assert len(audited.entries) == 2
    with pytest.raises(InputError, match="dataset not found"):
        pipeline.run_influence(cfg, None, progress=False)


def test_an_attributor_loads_its_model_once_and_offers_the_verbs(in_empty_folder, monkeypatch):
    """``ragray.Attributor`` builds its generator once; ``attribute``, ``run`` and ``interpret`` use it
    with the settings given when it was made; a model setting at call time is refused (it would
    need another model); ``close()`` frees it and later calls say so."""
    import ragray.pipeline.generators as generators

    built = []
    real = generators.build_generator
    monkeypatch.setattr(generators, "build_generator", lambda config: built.append(config.model) or real(config))
    with ragray.Attributor(backend="scripted", top_k=3, progress=False) as a:
        assert len(built) == 1 and "loaded" in repr(a)
        one = a.attribute(ROWS[0]["question"], ROWS[0]["passages"], answers=["tern"])
        many = a.run(ROWS)
        faithful = a.interpret(ROWS[:1])
        assert len(built) == 1  # no call loaded another
        assert one.answer == "tern" and one.passages["used"] == [False, True, False]
        assert many.passages.to_pylist()[:3] == ragray.run(ROWS, backend="scripted", top_k=3,
                                                           progress=False).passages.to_pylist()[:3]
        assert len(faithful.cases) > 0
        with pytest.raises(InputError, match="dtype: this Attributor holds"):
            a.run(ROWS, dtype="float16")
        with pytest.raises(InputError, match="generation.temperature: this Attributor holds"):
            a.run(ROWS, settings={"generation.temperature": 0.5})
    assert "closed" in repr(a)
    with pytest.raises(InputError, match="this Attributor is closed"):
        a.run(ROWS)
