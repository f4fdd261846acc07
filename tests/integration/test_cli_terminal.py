"""What another user's document can do to the terminal of whoever reads it through the CLI: nothing.

A document (text, title, section) or a request line carrying C0/C1 controls and bidi overrides reaches the
terminal with each of them escaped (`citewise_local.render.escape_terminal_controls`), in plain output and in
JSON alike, and the JSON still reads back as the document's own text.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from citewise.client import CitewiseClientError
from citewise_local.render import escape_terminal_controls
from citewise_local.servelog import ServeLog
from citewise_local.upload import _client_failure

CSI, RLO, ESC = "\u009b", "\u202e", "\x1b"
# What a terminal would act on: a C1 CSI sequence, an ESC sequence, a carriage return, a bidi override.
HOSTILE = f"# Heron{RLO}gnp.exe\n\n## Nests{CSI}2J\n\nThe heron nests{ESC}[31m by the river.\rFAKE {RLO}txet\n"
RAW_CONTROLS = [CSI, RLO, ESC, "\r"]


@pytest.fixture
def cli(cli: Any, tmp_path: Path) -> Any:
    """`citewise --home <tmp> ARGS...` after bob ingested the hostile note into tenant acme."""
    note = tmp_path / "shared" / "heron.md"
    note.parent.mkdir()
    note.write_text(HOSTILE, encoding="utf-8")
    assert cli("ingest", str(note), "--tenant", "acme", "--user", "bob")[0] == 0
    return cli


@pytest.mark.parametrize(
    "command",
    [
        ("search", "heron nests"),
        ("query", "Where does the heron nest?"),
        ("docs", "show", "{doc_id}"),
        ("search", "heron nests", "--json"),
        ("query", "Where does the heron nest?", "--json"),
        ("docs", "show", "{doc_id}", "--json"),
    ],
    ids=" ".join,
)
def test_another_users_document_reaches_the_terminal_with_its_controls_escaped(
    cli: Any, command: tuple[str, ...]
) -> None:
    # When alice reads bob's note through the CLI
    [listed] = json.loads(cli("docs", "list", "--tenant", "acme", "--json")[1])["items"]
    command = tuple(part.format(doc_id=listed["doc_id"]) for part in command)
    status, out, err = cli(*command, "--tenant", "acme", "--user", "alice")
    assert status == 0, err
    # Then no control reaches her terminal raw, and the escapes show where they were
    assert [c for c in RAW_CONTROLS if c in out + err] == []
    assert "\\u202e" in out
    if "--json" in command:  # And JSON still reads back as the document's own text
        assert RLO in json.dumps(json.loads(out), ensure_ascii=False)


def test_escaping_keeps_tab_and_newline_and_every_other_character() -> None:
    text = 'a\tb\nc café 日本 😀 \u200d \\ "q"'
    assert escape_terminal_controls(text) == text


@pytest.mark.parametrize(
    ("character", "escape"),
    [
        ("\x00", "\\u0000"),
        ("\x1b", "\\u001b"),
        ("\r", "\\u000d"),
        ("\x7f", "\\u007f"),
        (CSI, "\\u009b"),
        ("\x85", "\\u0085"),
        (RLO, "\\u202e"),
        ("\u2066", "\\u2066"),
        ("\u200f", "\\u200f"),
        ("\u061c", "\\u061c"),
        ("\u2028", "\\u2028"),
    ],
)
def test_each_control_becomes_its_json_escape(character: str, escape: str) -> None:
    assert escape_terminal_controls(f"x{character}y") == f"x{escape}y"
    # and a JSON document escaped this way parses to the same value
    assert json.loads(escape_terminal_controls(json.dumps({"k": character}, ensure_ascii=False))) == {"k": character}


def test_a_request_line_with_a_raw_c1_byte_is_escaped_in_the_serve_log() -> None:
    # Given a request line as http.server decodes it (latin-1: the byte 0x9b is U+009B)
    stream = io.StringIO()
    ServeLog(stream).request("GET", f"/v1/documents/{CSI}2J{RLO}x", 404, 1.0, "r-1")
    # Then the server's terminal gets the escapes, not the controls
    assert stream.getvalue() == "GET /v1/documents/\\u009b2J\\u202ex 404 1.0ms r-1\n"


def test_an_api_error_naming_another_users_path_is_escaped_by_citewise_upload(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given an API error whose message and details quote a path someone else chose
    error = CitewiseClientError("CONFLICT", f"taken: a{RLO}b", status=409, details={"path": f"a{CSI}b"})
    # When `citewise upload` reports it
    assert _client_failure(error) == 2
    # Then stderr shows the escapes, not the controls
    err = capsys.readouterr().err
    assert RLO not in err and CSI not in err and "taken: a\\u202eb" in err
