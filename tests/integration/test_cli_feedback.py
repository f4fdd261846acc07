"""`citewise feedback give|stats` on a local home: feedback on one's own answer, counted for its source."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

DLQ = "# Dead-letter queue\n\nA message that fails five receives moves to the dead-letter queue.\n"


def test_feedback_from_the_command_line(cli: Any, tmp_path: Path) -> None:
    # Given a document under ops/ (its source) and alice's answer in a conversation
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "dlq.md").write_text(DLQ)
    assert cli("ingest", str(tmp_path / "ops"), "--tenant", "acme")[0] == 0  # the folder's name is the path's first
    status, out, _ = cli(
        "query", "When does a message move to the dead-letter queue?", "--tenant", "acme", "--conversation", "new"
    )
    assert status == 0
    (line,) = [line for line in out.splitlines() if "citewise feedback give" in line]
    response_id = line.split("citewise feedback give ")[1].split()[0]
    # When she rates the answer unhelpful, then helpful (the second replaces the first)
    status, out, _ = cli("feedback", "give", response_id, "--not-helpful", "--comment", "vague", "--tenant", "acme")
    assert status == 0 and out.startswith("kept: the answer") and "counts for ops" in out
    status, out, _ = cli("feedback", "give", response_id, "--helpful", "--tenant", "acme", "--json")
    assert status == 0 and json.loads(out)["replaced"] is True
    # Then the source counts her once, as helpful
    status, out, _ = cli("feedback", "stats", "ops", "--tenant", "acme", "--json")
    stats = json.loads(out)
    assert (stats["helpful"], stats["not_helpful"], stats["ranks"]) == (1, 0, False)
    # And nobody else can rate her answer; a verdict is required
    status, _, err = cli("feedback", "give", response_id, "--helpful", "--tenant", "acme", "--user", "bob")
    assert status != 0 and "NOT_FOUND" in err
    with pytest.raises(SystemExit):  # argparse's usage error
        cli("feedback", "give", response_id, "--tenant", "acme")
