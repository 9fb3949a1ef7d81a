"""Starting a command: a bad ``--out`` is one error line naming it, a refused start records nothing
in the run history, and the ``--resume`` hint of a changed config is a command that runs."""

import json
import re
import shlex

import pytest

from ragray.adapters.cli import build_parser
from ragray.errors import InputError
from ragray.store.history import History
from tests.cli.test_history_cli import run


@pytest.fixture()
def island(tmp_path):
    rows = [{"id": f"q{i}", "question": f"Which ferry goes to Corran {i}?", "answers": ["tern"],
             "passages": [{"id": "ferry", "text": "The night ferry to Corran leaves from pier nine. ANSWER=tern"},
                          {"id": "birds", "text": "Arctic terns nest on the northern cliffs every summer."}],
             "gold_passage_ids": ["ferry"]} for i in range(2)]
    path = tmp_path / "island.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture()
def commands(tmp_path, island, db):
    """Every command that takes --out, as ``name -> argv before --out`` (a valid start otherwise)."""
    sets, _ = db
    data = ["--dataset", str(island), "--set", "metrics.embedding=false", *sets, "--no-progress"]
    records = tmp_path / "records.jsonl"
    records.write_text(json.dumps({"question": "q?", "answer": "a", "answers": ["a"]}) + "\n")
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"name: s\nretrieval: {{top_k: [1, 2]}}\nset: [\"data.path={island}\"]\n")
    return {
        "run": ["run", "--backend", "scripted", *data],
        "interpret": ["interpret", "--backend", "scripted", *data],
        "audit": ["audit", *data],
        "score": ["score", "--records", str(records), "--set", "metrics.embedding=false", *sets],
        "retrieve": ["retrieve", *data],
        "simulate": ["simulate", "--questions", "2", "--top-k", "2", *sets, "--no-progress"],
        "sweep": ["sweep", str(spec), *sets],
    }


COMMANDS = ["run", "interpret", "audit", "score", "retrieve", "simulate", "sweep"]


def test_every_command_with_out_is_checked_here():
    """The list above is every subcommand that has --out (a new one must be added to it)."""
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    with_out = sorted(name for name, p in sub.choices.items() if any("--out" in a.option_strings for a in p._actions))
    assert with_out == sorted(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_out_naming_a_file_is_one_error_line_and_records_nothing(command, commands, tmp_path, db, capsys):
    target = tmp_path / "taken.txt"
    target.write_text("not a folder")
    code, out, err = run([*commands[command], "--out", str(target)], capsys)
    assert code == 2
    assert err == f"ragray {command}: error: --out {target}: exists and is a file, not a folder\n"
    assert "Traceback" not in out + err
    assert target.read_text() == "not a folder"
    assert History(db[1]).list_runs() == []


@pytest.mark.parametrize("command", ["run", "score", "retrieve"])
def test_out_under_a_file_or_where_nothing_can_be_created_is_one_error_line(command, commands, tmp_path, db,
                                                                              capsys):
    (tmp_path / "taken.txt").write_text("x")
    code, _, err = run([*commands[command], "--out", str(tmp_path / "taken.txt" / "sub")], capsys)
    assert code == 2
    assert err == (f"ragray {command}: error: --out {tmp_path / 'taken.txt' / 'sub'}: {tmp_path / 'taken.txt'} "
                   "is a file, not a folder\n")
    code, _, err = run([*commands[command], "--out", "/proc/x"], capsys)
    assert code == 2
    # the reason is the OS's (as root: no such file or directory; else permission denied)
    assert re.fullmatch(rf"ragray {command}: error: --out /proc/x: cannot create a folder in /proc \([^)]+\)\n", err)
    assert History(db[1]).list_runs() == []


def test_a_folder_that_cannot_be_written_is_refused():
    from ragray.store.rundir import prepare_run_dir

    with pytest.raises(InputError, match=r"^--out /proc: cannot write in this folder \("):
        prepare_run_dir("/proc")


def test_out_holding_a_finished_run_is_refused_without_a_failed_record(commands, tmp_path, db, capsys):
    sets, url = db
    good = tmp_path / "good"
    assert run([*commands["run"], "--out", str(good)], capsys)[0] == 0
    (first,) = History(url).list_runs()
    assert (first.status, first.out) == ("done", str(good))
    code, _, err = run([*commands["run"], "--out", str(good)], capsys)
    assert code == 2
    assert err == (f"ragray run: error: {good} already holds a run; pass --resume to continue it or choose "
                   "a new --out\n")
    code, _, err = run([*commands["run"], "--top-k", "1", "--out", str(good), "--resume"], capsys)
    assert code == 2 and "the config differs from the one" in err  # --limit alone may change (tests/cli/test_streaming.py)
    assert History(url).list_runs() == [first]  # neither refusal left a record, failed or otherwise


def test_the_resume_hint_of_a_changed_config_is_a_command_that_runs(commands, tmp_path, db, capsys):
    sets, url = db
    out = tmp_path / "r"
    assert run([*commands["run"], "--out", str(out)], capsys)[0] == 0
    code, _, err = run([*commands["run"], "--limit", "1", "--top-k", "1", "--out", str(out), "--resume"], capsys)
    assert code == 2
    assert re.search(r"data\.limit None there, 1 now; retrieval\.top_k \d+ there, 1 now", err), err
    hint = err.rstrip("\n").splitlines()[-1]
    assert hint == "  " + shlex.join(["ragray", "run", str(out / "config.yaml"), "--out", str(out), "--resume"])
    argv = shlex.split(hint)[1:]
    args = build_parser().parse_args(argv)  # every word is a real argument
    assert (args.command, args.config, args.out, args.resume) == ("run", str(out / "config.yaml"), str(out), True)
    code, stdout, err = run(argv, capsys)
    assert code == 0, err
    assert "2 questions (2 resumed)" in stdout
