"""The conventions of the `citewise` command: where option values come from (flag > environment > config
file > default), `--home` anywhere, `-` for standard input, help for every option, filter errors that
name the operators, and shell completion."""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from citewise.domain.models import Filter
from citewise_local import config
from citewise_local.cli import _parser, main
from tests.builders import make_damaged_pdf

REPO = Path(__file__).parents[2]
CITEWISE = Path(sys.executable).parent / "citewise"


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory (no citewise.toml) and the hashing embedder."""
    folder = tmp_path / "work"
    folder.mkdir()
    monkeypatch.chdir(folder)
    monkeypatch.setenv("CITEWISE_EMBEDDER", "hashing")
    return folder


@pytest.fixture
def corpus(tmp_path: Path, workdir: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A home where tenants acme and globex each hold one note; returns the home."""
    home = tmp_path / "home"
    for tenant, text in (("acme", "Acme ships anvils by rail."), ("globex", "Globex ships anvils by sea.")):
        note = tmp_path / tenant / "note.md"
        note.parent.mkdir()
        note.write_text(text)
        assert main(["--home", str(home), "ingest", str(note), "--tenant", tenant]) == 0
    capsys.readouterr()
    return home


def _search_tenant(home: Path, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """The tenant whose note `search anvils` found, with the given extra arguments."""
    status = main(["search", "anvils", "--home", str(home), "--json", *args])
    out, err = capsys.readouterr()
    assert status == 0, err
    [hit] = json.loads(out)["hits"]
    return str(hit["chunk"]["document"]["tenant_id"])


def test_the_tenant_comes_from_the_flag_then_the_environment_then_the_file(
    corpus: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given no tenant anywhere, the command refuses with a usage error naming every source
    with pytest.raises(SystemExit) as refused:
        main(["search", "anvils", "--home", str(corpus)])
    assert refused.value.code == 2
    assert (
        "--tenant is required (give the flag, CITEWISE_TENANT, or tenant in citewise.toml)" in capsys.readouterr().err
    )
    # The file alone gives it
    (workdir / "citewise.toml").write_text('tenant = "acme"\n')
    assert _search_tenant(corpus, capsys) == "acme"
    # The environment beats the file
    monkeypatch.setenv("CITEWISE_TENANT", "globex")
    assert _search_tenant(corpus, capsys) == "globex"
    # The flag beats both
    assert _search_tenant(corpus, capsys, "--tenant", "acme") == "acme"


def test_the_home_config_is_read_when_the_working_directory_has_none(
    corpus: Path, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (corpus / "config.toml").write_text('tenant = "globex"\n[search]\ntop_k = 1\n')
    assert _search_tenant(corpus, capsys) == "globex"
    # ./citewise.toml, when present, is the one file read
    (workdir / "citewise.toml").write_text('tenant = "acme"\n')
    assert _search_tenant(corpus, capsys) == "acme"


def test_a_command_table_sets_defaults_that_flags_override(tmp_path: Path, workdir: Path) -> None:
    (workdir / "citewise.toml").write_text(
        'tenant = "acme"\nuser = "alice"\ngroup = ["admin"]\n[query]\ntop-k = 8\nno_route = true\n'
        "[docs.list]\nlimit = 7\n"
    )
    parser = _parser()
    config.apply_defaults(parser, config.load_config(workdir / "citewise.toml"), {})
    query = parser.parse_args(["query", "q"])
    assert (query.tenant, query.user, query.group, query.top_k, query.no_route) == ("acme", "alice", ["admin"], 8, True)
    assert parser.parse_args(["query", "q", "--top-k", "3"]).top_k == 3
    assert parser.parse_args(["search", "q"]).top_k == 5  # [query] is query's alone
    assert parser.parse_args(["docs", "list"]).limit == 7


def test_settings_come_from_the_environment_before_the_file(workdir: Path) -> None:
    found = config.ConfigFile(workdir / "citewise.toml", settings={"embedder": "minilm", "search_mode": "bm25"})
    known = {"embedder": None, "search_mode": None}
    # CITEWISE_EMBEDDER (in any case, as pydantic-settings reads it) wins; the file's search mode is used
    overrides = config.settings_overrides(found, {"citewise_embedder": "hashing"}, known)
    assert overrides == {"search_mode": "bm25"}


def test_a_setting_in_the_file_reaches_the_command(
    tmp_path: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the home named only in the file's [settings]
    monkeypatch.delenv("CITEWISE_HOME", raising=False)
    home = tmp_path / "from-file"
    (workdir / "citewise.toml").write_text(f'tenant = "acme"\n[settings]\nhome = "{home}"\n')
    note = workdir / "note.md"
    note.write_text("Rail freight.")
    # When a command runs without --home, then the index is there
    assert main(["ingest", str(note)]) == 0
    assert (home / "registry.db").is_file()
    capsys.readouterr()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tenant = ", "config file"),
        ('tenat = "acme"', "no command has an option 'tenat'"),
        ("[query]\ntopk = 3", "[query] has no option 'topk'; it has: "),
        ('[query]\ntop_k = "many"', "[query] top_k: invalid literal"),
        ("[query]\njson = 1", "[query] json: must be true or false"),
        ('[ingest]\nvisibility = "public"', "must be one of shared, private"),
        ("[qurey]\njson = true", "no command 'qurey'"),
        ('[settings]\nembeder = "hashing"', "[settings] has no setting 'embeder'"),
        ('home = "/x"', "home is a setting: put it under [settings]"),
    ],
)
def test_a_wrong_config_file_fails_naming_the_file_and_the_key(
    workdir: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    (workdir / "citewise.toml").write_text(text + "\n")
    assert main(["docs", "list", "--tenant", "acme"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: VALIDATION_ERROR: config file {workdir / 'citewise.toml'}")
    assert message in err and err.count("\n") == 1


@pytest.mark.parametrize("position", ["before", "after"])
def test_home_is_accepted_before_or_after_the_command(
    corpus: Path, position: str, capsys: pytest.CaptureFixture[str]
) -> None:
    home = ["--home", str(corpus)]
    command = ["docs", "list", "--tenant", "acme", "--json"]
    assert main(home + command if position == "before" else command + home) == 0
    assert [d["path"] for d in json.loads(capsys.readouterr().out)["items"]] == ["note.md"]


def test_a_dash_reads_the_question_from_standard_input(
    corpus: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("who ships anvils?\n"))
    assert main(["query", "-", "--tenant", "acme", "--home", str(corpus), "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["citations"] and answer["citations"][0]["path"] == "note.md"


def test_a_filter_with_an_unknown_operator_lists_the_operators(
    corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = '{"andAll": [{"equal": {"key": "team", "value": "a"}}, {"equals": {"key": "b", "value": 1}}]}'
    assert main(["search", "x", "--tenant", "acme", "--home", str(corpus), "--filter", bad]) == 2
    err = capsys.readouterr().err
    # The operators are the model's (derived), and the message says where the mistake is
    assert err == (
        "error: VALIDATION_ERROR: --filter: andAll.0: unknown filter operator 'equal'; the operators are: "
        + ", ".join(Filter.operators())
        + "\n"
    )
    assert Filter.operators()[:2] == ["equals", "notEquals"] and "in" in Filter.operators()


def _all_parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    return [("", _parser()), *config.subcommands(_parser())]


@pytest.mark.parametrize(("name", "parser"), _all_parsers(), ids=lambda value: value if isinstance(value, str) else "")
def test_every_option_has_help_and_every_command_examples(name: str, parser: argparse.ArgumentParser) -> None:
    undocumented = [action.dest for action in parser._actions if not action.help]
    assert undocumented == [], f"citewise {name}: options without help: {undocumented}"
    is_group = any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)
    if name and not is_group:
        assert parser.epilog and parser.epilog.startswith("examples:\n  "), f"citewise {name} has no examples"


def test_the_help_states_limits_precedence_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    top = capsys.readouterr().out
    assert "first found wins: the flag, the environment, the config file, the default" in top
    assert "./citewise.toml, else $CITEWISE_HOME/config.toml" in top
    assert "  3  the answer model's endpoint failed" in top
    with pytest.raises(SystemExit):
        main(["query", "--help"])
    query = capsys.readouterr().out
    assert "chunks to retrieve, 1-50 (default 5)" in " ".join(query.split())
    assert "- reads it from standard input" in query


def _complete(line: str, tmp_path: Path) -> list[str]:
    """What argcomplete answers the shell for `line` (the protocol the completion script speaks)."""
    answer = tmp_path / "completions"
    environment = {
        **os.environ,
        "_ARGCOMPLETE": "1",
        "_ARGCOMPLETE_IFS": "\n",
        "COMP_LINE": line,
        "COMP_POINT": str(len(line)),
        "_ARGCOMPLETE_STDOUT_FILENAME": str(answer),
    }
    subprocess.run([str(CITEWISE)], env=environment, check=False, timeout=60, cwd=tmp_path)
    return answer.read_text().split("\n")


def test_completion_answers_commands_and_options(tmp_path: Path) -> None:
    assert {"query", "search", "serve", "completion"} <= set(_complete("citewise ", tmp_path))
    assert {"--top-k", "--tenant", "--home"} <= {c.strip() for c in _complete("citewise query --", tmp_path)}
    assert {"list", "show", "delete"} <= set(_complete("citewise docs ", tmp_path))


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_the_completion_script_calls_citewise(shell: str) -> None:
    script = subprocess.run(
        [str(CITEWISE), "completion", shell], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert "_ARGCOMPLETE" in script and "citewise" in script
    if shell == "bash":  # it is valid bash
        subprocess.run(["bash", "-n"], input=script, text=True, check=True, timeout=30)


def test_library_warnings_go_to_the_log_file_not_the_terminal(
    tmp_path: Path, workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a parsing library that warns on its logger while it reads (as pypdf did about a damaged PDF it
    # still read; PDFium, today's parser, reads that PDF silently)
    from citewise.ingest.parsing import pdf_lines

    paragraphs = pdf_lines.paragraphs

    def warning_paragraphs(*args: object, **kwargs: object) -> object:
        logging.getLogger("somelibrary.reader").warning("incorrect startxref pointer")
        return paragraphs(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr("citewise.ingest.parsing.pdf.paragraphs", warning_paragraphs)
    damaged = workdir / "damaged.pdf"
    damaged.write_bytes(make_damaged_pdf())
    home = tmp_path / "home"
    # When it is ingested
    assert main(["ingest", str(damaged), "--tenant", "acme", "--home", str(home)]) == 0
    # Then stderr is empty and the warnings are in the home's log
    assert capsys.readouterr().err == ""
    log = (home / "logs" / "citewise.log").read_text()
    assert "WARNING somelibrary.reader: incorrect startxref pointer" in log


def test_a_reader_that_closes_the_pipe_early_ends_the_command_quietly(corpus: Path) -> None:
    # Given a search whose reader has gone before it prints (`true` reads nothing and exits at once)
    command = f"'{CITEWISE}' search anvils --tenant acme --home '{corpus}' --json | true; echo \" $?\""
    env = {**os.environ, "CITEWISE_EMBEDDER": "hashing"}
    # When it runs
    run = subprocess.run(
        ["bash", "-o", "pipefail", "-c", f"{command}"], capture_output=True, text=True, env=env, timeout=120
    )
    # Then citewise stops with 141 (128 + SIGPIPE) and no traceback
    assert run.stderr == "", run.stderr
    assert run.stdout.split()[-1] == "141", run.stdout


def test_query_stream_prints_the_answer_then_its_citations_and_one_event_per_line_in_json(
    corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the plain answer
    assert main(["query", "who ships anvils?", "--tenant", "acme", "--home", str(corpus), "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    # When streamed as text, then as JSON events
    assert main(["query", "who ships anvils?", "--tenant", "acme", "--home", str(corpus), "--stream"]) == 0
    text = capsys.readouterr().out
    assert main(["query", "who ships anvils?", "--tenant", "acme", "--home", str(corpus), "--stream", "--json"]) == 0
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    # Then the text is the answer's, followed by its citations; the JSON events end with the same answer
    assert text.startswith(plain["answer"]) and "Citations:" in text and "note.md" in text
    assert [e["event"] for e in events][0] == "sources" and events[-1] == {"event": "answer", "data": plain}
    assert "".join(e["data"]["text"] for e in events if e["event"] == "text") == plain["answer"]
