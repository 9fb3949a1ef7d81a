"""The argument parser: every command's help page, the flags that set config values, the old
spellings of renamed flags, and argparse's errors for values the config would reject."""

import argparse
import re
import shlex
from pathlib import Path
from typing import get_args

import pytest

from ragray import config as cfg
from ragray.adapters.cli import _flag_values, build_parser, main

REPO = Path(__file__).resolve().parents[2]
#: phrases that belong to the project's bookkeeping, not to a user's help page (--seed, the RNG
#: flag, is fine: the phrases are banned, not the word)
BANNED = re.compile(r"(?i:\bissues?\b|seed's|\bthe seed\b)|\bSPEC\b|§")


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _commands() -> dict[str, argparse.ArgumentParser]:
    """Every command and action by its path ("runs list"), the top level as "ragray"."""
    found, todo = {}, [("ragray", build_parser())]
    while todo:
        path, parser = todo.pop()
        found[path] = parser
        todo += [(name if path == "ragray" else f"{path} {name}", p) for name, p in _subparsers(parser).items()]
    return found


COMMANDS = _commands()


def test_the_walk_finds_every_command_and_action():
    assert set(COMMANDS) == {
        "ragray", "retrieve", "run", "interpret", "audit", "score", "serve", "simulate", "dashboard", "sweep",
        "runs", "runs list", "runs show", "presets", "presets save", "presets get", "presets delete",
        "presets list", "cleanup", "report",
    }


@pytest.fixture(autouse=True)
def _fixed_width(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_help_page_has_a_paragraph_and_examples_and_no_bookkeeping(path):
    parser = COMMANDS[path]
    page = parser.format_help()
    assert parser.description and len(parser.description.split()) >= 5, path
    assert parser.description.replace("\n", " ") in page.replace("\n", " ")
    assert re.search(r"^examples?:\n  ragray ", page, re.MULTILINE), page
    assert not BANNED.search(page), BANNED.search(page)


def _example_commands(page: str) -> list[list[str]]:
    """The argv of every ``ragray ...`` in a page's examples (``# ...`` comments, ``> file`` and
    ``&&`` chains taken apart)."""
    block = re.split(r"^examples?:$", page, flags=re.MULTILINE)[-1]
    argvs = []
    for line in block.strip().splitlines():
        words, start = shlex.split(line, comments=True), 0
        for end in [*(i for i, w in enumerate(words) if w == "&&"), len(words)]:
            part = words[start:end]
            argvs.append([w for i, w in enumerate(part) if w != ">" and (i == 0 or part[i - 1] != ">")])
            start = end + 1
    return argvs


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_examples_parse_and_name_files_that_exist(path):
    page = COMMANDS[path].format_help()
    argvs = _example_commands(page)
    assert argvs and all(a[0] == "ragray" for a in argvs), argvs
    if path != "ragray":  # each page shows its own command
        assert any(a[1:1 + len(path.split())] == path.split() for a in argvs), argvs
    for argv in argvs:
        if "COMMAND" in argv:  # the top level's "ragray COMMAND --help"
            continue
        build_parser().parse_args(argv[1:])  # exits 2 on an unknown flag or a bad value
        for word in argv:
            if word.startswith(("configs/", "tests/")):
                assert (REPO / word).exists(), word
            assert "../shared" not in word


def test_the_command_list_has_one_line_per_command():
    page = COMMANDS["ragray"].format_help()
    for name in _subparsers(build_parser()):
        (line,) = [ln for ln in page.splitlines() if ln.startswith(f"    {name} ")]
        summary = line.split(None, 1)[1]
        assert len(summary) > 10 and not summary.endswith(("(", ",")), line


@pytest.mark.parametrize("argv, expected", [
    (["run", "--mode", "logprob_share", "--dtype", "float32", "--position-control", "reversed"],
     {"influence.mode": "logprob_share", "generation.dtype": "float32", "influence.position_control": "reversed"}),
    (["run", "--mode", "surrogate", "--top-k", "4"], {"influence.mode": "surrogate", "retrieval.top_k": 4}),
    (["interpret", "--mode", "logprob", "--dtype", "bfloat16"],
     {"faithfulness.mode": "logprob", "generation.dtype": "bfloat16"}),
    (["interpret", "--delete-k", "top-1", "--delete-k", "top-20%", "--top-k", "5"],
     {"faithfulness.k_values": ["top-1", "top-20%"], "retrieval.top_k": 5}),
    (["simulate", "--mode", "loo", "--position-control", "shuffled"],
     {"influence.mode": "loo", "influence.position_control": "shuffled"}),
    (["serve", "--dtype", "float16", "--mode", "logprob_share"],
     {"generation.dtype": "float16", "influence.mode": "logprob_share"}),
    (["interpret", "--explainer", "logprob_drop"], {"faithfulness.explainer": "logprob_drop"}),
    (["audit", "--top-docs", "2", "--dtype", "auto"], {"audit.k": 2, "generation.dtype": "auto"}),
    (["score", "--records", "r.csv", "--columns", "question=query, passages=docs"],
     {"data.columns": {"question": "query", "passages": "docs"}}),
    (["run", "--columns", "id=qid"], {"data.columns": {"id": "qid"}}),
])
def test_flags_set_their_settings(argv, expected):
    values = _flag_values(build_parser().parse_args(argv))
    assert values == expected
    cfg.load_config(None, (), values)  # and the config accepts what the flags chose


def test_flags_are_absent_where_they_mean_nothing():
    assert _flag_values(build_parser().parse_args(["run"])) == {}
    assert _flag_values(build_parser().parse_args(["interpret"])) == {}
    for argv in (["retrieve", "--mode", "logprob"], ["interpret", "--position-control", "reversed"],
                 ["simulate", "--dtype", "float32"], ["score", "--records", "x", "--dtype", "float32"]):
        with pytest.raises(SystemExit) as info:
            build_parser().parse_args(argv)
        assert info.value.code == 2


def _choices(command: str, flag: str) -> tuple[str, ...]:
    (action,) = [a for a in COMMANDS[command]._actions if flag in a.option_strings]
    return tuple(action.choices)


@pytest.mark.parametrize("command, flag, annotation", [
    ("run", "--mode", cfg.InfluenceConfig.model_fields["mode"].annotation),
    ("simulate", "--mode", cfg.InfluenceConfig.model_fields["mode"].annotation),
    ("serve", "--mode", cfg.InfluenceConfig.model_fields["mode"].annotation),
    ("interpret", "--mode", cfg.FaithfulnessConfig.model_fields["mode"].annotation),
    ("run", "--dtype", cfg.GenerationConfig.model_fields["dtype"].annotation),
    ("interpret", "--dtype", cfg.GenerationConfig.model_fields["dtype"].annotation),
    ("run", "--position-control", cfg.InfluenceConfig.model_fields["position_control"].annotation),
    ("interpret", "--level", cfg.FaithfulnessConfig.model_fields["level"].annotation),
    ("interpret", "--explainer", cfg.FaithfulnessConfig.model_fields["explainer"].annotation),
    ("run", "--executor", cfg.ExecutionConfig.model_fields["executor"].annotation),
    ("retrieve", "--scope", cfg.RetrievalConfig.model_fields["scope"].annotation),
])
def test_choices_are_the_values_the_config_validates(command, flag, annotation):
    assert _choices(command, flag) == get_args(annotation)


@pytest.mark.parametrize("argv, message", [
    (["run", "--mode", "fast"], r"argument --mode: invalid choice: 'fast' \(choose from 'auto', 'interactions', 'loo', "
                                r"'logprob_share', 'jsd', 'surrogate'\)"),
    (["interpret", "--mode", "jsd"], r"argument --mode: invalid choice: 'jsd' \(choose from 'generate', 'logprob'\)"),
    (["run", "--dtype", "fp16"], r"argument --dtype: invalid choice: 'fp16'"),
    (["simulate", "--position-control", "random"], r"argument --position-control: invalid choice: 'random'"),
    (["audit", "--top-docs", "0"], r"argument --top-docs: must be >= 1, got 0"),
    (["simulate", "--top-k", "1"], r"argument --top-k: must be >= 2, got 1"),
    (["retrieve", "--columns", "question"], r"argument --columns: expected FIELD=COLUMN pairs separated by commas"),
    (["score", "--records", "r", "--columns", "question=a,question=b"], r"argument --columns: field 'question' is "
                                                                        r"mapped twice"),
])
def test_bad_values_are_argparse_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert re.search(message, capsys.readouterr().err)


@pytest.mark.parametrize("old, new, dest", [
    (["simulate", "--k", "4"], ["simulate", "--top-k", "4"], "k"),
    (["interpret", "--k", "top-1", "--k", "top-3"], ["interpret", "--delete-k", "top-1", "--delete-k", "top-3"],
     "k_values"),
    (["interpret", "--k", "top-1", "--delete-k", "top-3"], ["interpret", "--delete-k", "top-1", "--delete-k", "top-3"],
     "k_values"),
    (["audit", "--top-k", "2"], ["audit", "--top-docs", "2"], "audit_k"),
])
def test_old_spellings_still_work_and_say_the_new_name(old, new, dest, capsys):
    parser = build_parser()
    by_old, by_new = parser.parse_args(old), parser.parse_args(new)
    assert getattr(by_old, dest) == getattr(by_new, dest) and _flag_values(by_old) == _flag_values(by_new)
    notices = capsys.readouterr().err.splitlines()
    flag = "--top-k" if old[0] == "audit" else "--k"
    assert notices and set(notices) == {f"ragray {old[0]}: {flag} is deprecated; use {new[1]}"}
    assert len(notices) == old.count(flag)


def test_old_spellings_are_hidden_and_checked_like_the_new_flag(capsys):
    assert not re.search(r"--k\b", COMMANDS["interpret"].format_help())
    assert not re.search(r"--k\b", COMMANDS["simulate"].format_help())
    assert "--top-k" not in COMMANDS["audit"].format_help()
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(["audit", "--top-k", "0"])
    assert info.value.code == 2 and "must be >= 1, got 0" in capsys.readouterr().err


def test_defaults_survive_the_old_spelling():
    parser = build_parser()
    assert parser.parse_args(["simulate"]).k == 10
    assert parser.parse_args(["interpret"]).k_values is None
    assert parser.parse_args(["audit"]).audit_k is None


def test_top_k_means_passages_per_question_everywhere():
    for path, parser in COMMANDS.items():
        for action in parser._actions:
            if "--top-k" in action.option_strings and action.help != argparse.SUPPRESS:
                assert "passages per question" in action.help, path


def test_simulate_retrieves_every_simulated_passage(tmp_path, monkeypatch):
    """``--top-k`` above retrieval.top_k's default still measures every passage."""
    import ragray.simulate
    from ragray.errors import InputError

    seen = {}

    def fake(out, *, k, base, **kwargs):
        seen.update(k=k, base=base)
        raise InputError("stop here")

    monkeypatch.setattr(ragray.simulate, "simulate", fake)
    assert main(["simulate", "--top-k", "14", "--mode", "logprob_share", "--out", str(tmp_path / "s")]) == 2
    assert seen["k"] == 14 and seen["base"].retrieval.top_k == 14 and seen["base"].influence.mode == "logprob_share"


def test_columns_field_names_are_checked_by_the_config():
    from ragray.errors import ConfigError

    values = _flag_values(build_parser().parse_args(["retrieve", "--columns", "query=question"]))
    with pytest.raises(ConfigError, match=r"data\.columns: unknown record field\(s\) 'query'; valid: id, question, "):
        cfg.load_config(None, (), values)


@pytest.mark.parametrize("argv, setting, new", [
    (["run", "--mode", "logprob"], "influence.mode", "logprob_share"),
    (["run", "--mode", "generate"], "influence.mode", "loo"),
    (["interpret", "--explainer", "logprob"], "faithfulness.explainer", "logprob_drop"),
])
def test_old_measure_names_still_pass_with_a_warning_naming_the_new_one(argv, setting, new):
    values = _flag_values(build_parser().parse_args(argv))
    with pytest.warns(FutureWarning, match=rf"{setting}: '\w+' is now '{new}'; the old name is accepted until ragray 0\.3\.0"):
        config = cfg.load_config(None, (), values)
    section, key = setting.split(".")
    assert getattr(getattr(config, section), key) == new


@pytest.mark.filterwarnings("default::FutureWarning")  # shown, as outside the tests
def test_the_cli_prints_an_old_name_warning_as_one_line(monkeypatch, tmp_path, capsys):
    import ragray.simulate
    from ragray.errors import InputError

    monkeypatch.setattr(ragray.simulate, "simulate", lambda *a, **k: (_ for _ in ()).throw(InputError("stop here")))
    assert main(["simulate", "--mode", "logprob", "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "ragray: warning: influence.mode: 'logprob' is now 'logprob_share'; the old name is accepted until " \
           "ragray 0.3.0\n" in err and "FutureWarning" not in err
