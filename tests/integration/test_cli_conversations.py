"""`citewise query --conversation` and `citewise conversations list|show|delete` on a local home."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DLQ = (
    "# Dead-letter queue\n\nA message that fails five receives moves to the dead-letter queue.\n\n"
    "## Pricing\n\nThe dead-letter queue costs nothing beyond its messages.\n"
)


def test_a_conversation_from_the_command_line(cli: Any, tmp_path: Path) -> None:
    # Given an ingested document
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "dlq.md").write_text(DLQ)
    assert cli("ingest", str(docs), "--tenant", "acme")[0] == 0
    # When alice starts a conversation and asks a follow-up in it
    status, out, _ = cli(
        "query", "How does the dead-letter queue work?", "--tenant", "acme", "--conversation", "new", "--json"
    )
    assert status == 0
    conversation_id = json.loads(out)["conversation"]["conversation_id"]
    status, out, _ = cli("query", "And what does it cost?", "--tenant", "acme", "--conversation", conversation_id)
    # Then the follow-up says where it sits and what retrieval was asked
    assert status == 0
    assert f"Conversation {conversation_id}, turn 2" in out
    assert "Asked as (deterministic): And what does it cost? (dead-letter queue)" in out
    # And the conversation lists and shows for her, and for no one else
    status, out, _ = cli("conversations", "list", "--tenant", "acme", "--json")
    assert [(c["conversation_id"], c["turns"]) for c in json.loads(out)["conversations"]] == [(conversation_id, 2)]
    status, out, _ = cli("conversations", "show", conversation_id, "--tenant", "acme")
    assert status == 0 and "asked as: And what does it cost? (dead-letter queue)" in out
    status, _, err = cli("conversations", "show", conversation_id, "--tenant", "acme", "--user", "bob")
    assert status != 0 and "NOT_FOUND" in err
    # And once deleted it is gone
    assert cli("conversations", "delete", conversation_id, "--tenant", "acme")[0] == 0
    assert json.loads(cli("conversations", "list", "--tenant", "acme", "--json")[1])["conversations"] == []
    # And a query without --conversation keeps none
    cli("query", "How does the dead-letter queue work?", "--tenant", "acme")
    assert json.loads(cli("conversations", "list", "--tenant", "acme", "--json")[1])["conversations"] == []
