"""What the CLI's text output shows: a search hit readable in the terminal, an evaluation as a table."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime

from citewise.ports.erasure import Erasure, ErasureStatus, KeyDeletion, StoreReceipt
from citewise_local.render import HIT_LINES, WIDTH, render_erasure, render_evaluation, render_hits
from tests.factories import hit

# The first paragraph as a PDF gives it: its lines broken where the page broke them.
PARAGRAPH = (
    "Redrive the dead-letter queue once the cause is fixed. The ingest function handles each SQS message on "
    "its own and reports partial batch failures, so one bad document never blocks the others in its batch."
)
RUNBOOK = (
    "\n".join(textwrap.wrap(PARAGRAPH, 70)) + "\n"
    "\n"
    "Before redriving:\n"
    "- fix the parser or replace the document\n"
    "- check that the queue's alarm has cleared\n"
    "\n"
    "aws sqs start-message-move-task --source-arn $DLQ_ARN --destination-arn $QUEUE_ARN"
)


def test_a_hit_shows_its_whole_chunk_wrapped_with_its_lines_kept_under_its_place_and_scores() -> None:
    shown = render_hits([hit(1, RUNBOOK, page=2, heading=("Operations", "Dead letters"), relevance=0.42)])
    header, *body = shown.splitlines()
    # The header: rank, relevance, score, the document, page and section
    assert header.startswith(" 1. relevance 0.42  score 1.000  docs/1.md, page 2 - Operations > Dead letters")
    # The chunk: every word, in order, within the terminal's width, indented under the header
    assert " ".join(body).split() == RUNBOOK.split()
    assert all(len(line) <= WIDTH and line.startswith("    ") for line in body if line)
    # The paragraph wrapped again at the terminal's width, not at the page's
    assert body[: body.index("")] == textwrap.wrap(PARAGRAPH, WIDTH, initial_indent="    ", subsequent_indent="    ")
    # Its own line breaks kept: the list items and the command each start a line, paragraphs stay apart
    assert "    - fix the parser or replace the document" in body
    assert "    aws sqs start-message-move-task --source-arn $DLQ_ARN --destination-arn $QUEUE_ARN" in body
    assert body.count("") == 2


def test_a_long_chunk_is_cut_at_a_bound_that_says_what_is_left_and_where_to_find_it() -> None:
    long = " ".join(f"word{n}" for n in range(2000))
    first, second = render_hits([hit(1, long), hit(2, "Short.")]).split("\n\n")
    lines = first.splitlines()[1:]
    assert len(lines) == HIT_LINES + 1
    shown_words = " ".join(lines[:-1]).split()
    assert shown_words == long.split()[: len(shown_words)]
    whole = textwrap.wrap(long, WIDTH - 4)
    assert lines[-1] == f"    [... {len(whole) - HIT_LINES} more lines: --json shows the whole chunk]"
    assert second.splitlines()[1:] == ["    Short."]


def test_no_hits_say_so() -> None:
    assert render_hits([]) == "No matching chunks."


def test_an_evaluation_on_opensearch_names_the_node_and_the_index_in_its_last_line() -> None:
    summary = {
        "mode": "hybrid",
        "embedder": "minilm-l6-v2",
        "backend": {"name": "opensearch", "version": "2.19.1", "index": "citewise-eval-1a2b", "kept": False},
        "queries": 809,
        **dict.fromkeys(("ndcg@10", "recall@10", "recall@100", "mrr@10"), 0.5),
        "ingest_s": 412.3,
        "query_p50_ms": 31.0,
        "query_p95_ms": 52.5,
        "fusion": {"search_mode": "hybrid", "method": "relevance", "candidates": 100},
        "elapsed_s": 450.0,
    }
    lines = render_evaluation([summary]).splitlines()
    assert lines[1].split() == ["hybrid", "0.5000", "0.5000", "0.5000", "0.5000", "31.0", "52.5"]
    assert lines[3] == "hybrid  search_mode hybrid, method relevance, candidates 100"
    assert lines[4] == (
        "809 queries, embedder minilm-l6-v2, backend opensearch 2.19.1, index citewise-eval-1a2b (deleted), "
        "ingest 412.3 s, 450.0 s in all"
    )


def test_an_erasure_receipt_names_the_tenants_destroyed_key() -> None:
    arn = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    key = KeyDeletion(key_arn=arn, alias="alias/citewise-dev/t-acme", deletion_date=datetime(2026, 12, 4, tzinfo=UTC))
    erasure = Erasure(
        tenant_id="acme",
        status=ErasureStatus.ERASED,
        requested_by="ops",
        started_at=datetime(2026, 11, 27, tzinfo=UTC),
        stores=[StoreReceipt(store="index", deleted=2, remaining=0, key=key)],
    )
    assert f"index: key {arn} deleted by KMS on 2026-12-04T00:00:00+00:00" in render_erasure(erasure)
