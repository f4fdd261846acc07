"""Follow-up questions: the retrieval hit rate of raw follow-ups against rewritten ones, and what a turn costs.

Hit rate. `benchmarks/conversations.json` is a labelled set of conversations over the repository's own
docs/ folder (written for issue 29: ours, not a public set), taken at a fixed commit (`CORPUS_COMMIT`)
so later doc edits do not move the figures. The folder is ingested into a fresh home; each
conversation's first question is asked as it is, and each follow-up twice: as asked (raw), and as the
rewriter makes it from the turns before (their standalone questions, as the service passes them). A
follow-up hits when a document its label names is among the first k hits (k = 1 and 3).

Turn cost. What `Conversations.begin` (the conversation's summary and its newest turns, within the
history budget) and `Conversations.record` (one turn appended) take, on a conversation already `turns`
turns long: locally on SQLite, and on DynamoDB under moto (moto's time is no service's time: what
carries over to AWS is the number of requests and the capacity units they consume, computed from the
items' sizes as DynamoDB bills them).

`python -m benchmarks.conversations [--embedder minilm|hashing] [--rounds N]`.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks.common import REPO
from citewise.builtin.rewriter import DeterministicRewriter
from citewise.domain.models import Answer, Caller, Citation, SearchRequest, Visibility
from citewise.ports.conversations import ConversationStore
from citewise.ports.rewriter import Exchange, HistoryBudget
from citewise.query.conversations import Conversations
from citewise.runtime.services import build_services
from citewise.runtime.settings import Settings
from citewise_local.folders import scan

CALLER = Caller(tenant_id="acme", user_id="alice")
LABELS = REPO / "benchmarks" / "conversations.json"
CORPUS_COMMIT = "31ae7e7"
"""The commit whose docs/ folder is the corpus (main when the set was written)."""


def _corpus(into: Path) -> Path:
    """docs/ at CORPUS_COMMIT, extracted under `into`."""
    archive = subprocess.run(  # noqa: S603 - a fixed git command on this repository
        ["git", "-C", str(REPO), "archive", CORPUS_COMMIT, "docs"],  # noqa: S607 - git from PATH
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "docs"


def hit_rates(embedder: str) -> dict[str, Any]:
    """Hit@1 and hit@3 of first questions, raw follow-ups and deterministically rewritten ones."""
    conversations = json.loads(LABELS.read_text())["conversations"]
    rewriter = DeterministicRewriter()
    counts: dict[str, list[int]] = {"first": [0, 0], "raw": [0, 0], "deterministic": [0, 0]}
    asked = {"first": 0, "follow_ups": 0}
    with tempfile.TemporaryDirectory() as home:
        services = build_services(Settings(home=Path(home), embedder=embedder))  # type: ignore[arg-type]
        try:
            found = scan([_corpus(Path(home) / "corpus")], CALLER.tenant_id, CALLER.user_id, Visibility.SHARED)
            for _ in services.ingestor.ingest_many(found.objects):
                pass

            def ranks(question: str, expect: list[str]) -> tuple[int, int]:
                hits = services.retriever.retrieve(CALLER, SearchRequest(query=question, top_k=3)).hits
                names = [hit.chunk.document.path.rsplit("/", 1)[-1] for hit in hits]
                return int(names[:1] != [] and names[0] in expect), int(any(name in expect for name in names[:3]))

            for conversation in conversations:
                history: list[Exchange] = []
                for index, turn in enumerate(conversation["turns"]):
                    question, expect = turn["question"], turn["expect"]
                    if index == 0:
                        _add(counts["first"], ranks(question, expect))
                        asked["first"] += 1
                        standalone = question
                    else:
                        standalone = rewriter.rewrite(question, history)
                        _add(counts["raw"], ranks(question, expect))
                        _add(counts["deterministic"], ranks(standalone, expect))
                        asked["follow_ups"] += 1
                    history.append(Exchange(question=question, standalone_question=standalone, answer=""))
        finally:
            services.close()
    return {
        "embedder": embedder,
        "conversations": len(conversations),
        **asked,
        "first": _rates(counts["first"], asked["first"]),
        "raw": _rates(counts["raw"], asked["follow_ups"]),
        "deterministic": _rates(counts["deterministic"], asked["follow_ups"]),
    }


def _add(total: list[int], hits: tuple[int, int]) -> None:
    total[0] += hits[0]
    total[1] += hits[1]


def _rates(hits: list[int], of: int) -> dict[str, float]:
    return {"hit@1": hits[0] / of, "hit@3": hits[1] / of}


# --- the cost of a turn --------------------------------------------------------------------------------

ANSWER = Answer(
    answer="A message that fails five receives moves to the dead-letter queue, where it is kept for 14 days [1]. " * 3,
    citations=[
        Citation(
            source=n,
            doc_id="d" * 32,
            chunk_id=f"{'d' * 32}:{n}",
            path="runbooks/operations.md",
            title="Operations",
            section="Dead-letter queue",
            quote="A message that fails five receives moves to the dead-letter queue." * 2,
            score=0.8,
        )
        for n in (1, 2, 3)
    ],
    sources=[],
    grounded=True,
)


def turn_costs(rounds: int, turns: int) -> dict[str, Any]:
    """The medians of begin and record on a conversation `turns` long, on SQLite and on DynamoDB (moto)."""
    from citewise_local.conversations import LocalConversations

    results: dict[str, Any] = {"turns_before": turns, "rounds": rounds}
    with tempfile.TemporaryDirectory() as home:
        local = LocalConversations(Path(home) / "conversations.db")
        try:
            results["sqlite"] = _time_turns(local, rounds, turns)
        finally:
            local.close()
    results["dynamodb_moto"] = _dynamodb_turns(rounds, turns)
    return results


def _dynamodb_turns(rounds: int, turns: int) -> dict[str, Any]:
    import boto3
    from moto import mock_aws

    from citewise.aws.dynamodb import TABLE_SCHEMA
    from citewise.aws.dynamodb_conversations import DynamoConversations

    with ExitStack() as stack:
        stack.enter_context(mock_aws())
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(TableName="registry", **TABLE_SCHEMA)
        calls: list[str] = []
        client.meta.events.register("before-call.dynamodb", lambda model, **_: calls.append(model.name))
        store = DynamoConversations("registry", client=client)
        figures = _time_turns(store, rounds, turns, calls)
        items = client.scan(TableName="registry")["Items"]
        sizes = sorted(_item_bytes(item) for item in items if "#t#" in item["doc_id"]["S"])
        turn_kb = statistics.median(sizes) / 1024
        # Billing (on-demand): a transactional write costs 2 WCU per KB of each item (the turn and the
        # conversation's item), a strongly consistent read 1 RCU per 4 KB of what a request returns.
        head_kb = max(_item_bytes(item) for item in items if "#c#" in item["doc_id"]["S"]) / 1024
        history = min(turns, HistoryBudget().turns)
        figures["turn_item_kb"] = round(turn_kb, 2)
        figures["record_wcu"] = 2 * (_ceil(turn_kb) + _ceil(head_kb))
        figures["begin_rcu"] = _ceil(head_kb / 4) + _ceil(history * turn_kb / 4)
        return figures


def _time_turns(store: ConversationStore, rounds: int, turns: int, calls: list[str] | None = None) -> dict[str, Any]:
    conversations = Conversations(store, DeterministicRewriter(), ttl=timedelta(days=30), budget=HistoryBudget())
    begin, record = [], []
    requests: dict[str, list[str]] = {}
    for _ in range(rounds):
        draft = conversations.begin(CALLER, None, "How does the dead-letter queue work?")
        conversations.record(draft, ANSWER)
        conversation_id = draft.context.conversation_id
        for _ in range(turns - 1):
            conversations.record(conversations.begin(CALLER, conversation_id, "And what does it cost?"), ANSWER)
        draft = _timed(begin, partial(conversations.begin, CALLER, conversation_id, "And?"), calls, requests, "begin")
        _timed(record, partial(conversations.record, draft, ANSWER), calls, requests, "record")
    return {
        "begin_ms": statistics.median(begin) * 1000,
        "record_ms": statistics.median(record) * 1000,
        **({"requests": {name: ", ".join(made) for name, made in requests.items()}} if calls is not None else {}),
    }


def _timed(
    timings: list[float], step: Callable[[], Any], calls: list[str] | None, requests: dict[str, list[str]], name: str
) -> Any:
    if calls is not None:
        calls.clear()
    started = time.perf_counter()
    result = step()
    timings.append(time.perf_counter() - started)
    if calls is not None:
        requests[name] = list(calls)
    return result


def _item_bytes(item: dict[str, Any]) -> int:
    """An item's size as DynamoDB counts it: attribute names and values (strings as UTF-8, numbers ~ digits)."""
    total = 0
    for name, value in item.items():
        ((kind, raw),) = value.items()
        total += len(name.encode()) + (len(str(raw).encode()) if kind in ("S", "N") else len(json.dumps(raw)))
    return total


def _ceil(value: float) -> int:
    return max(1, -int(-value // 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", choices=["minilm", "hashing"], default="minilm")
    parser.add_argument("--rounds", type=int, default=50, help="conversations timed per backend")
    parser.add_argument("--turns", type=int, default=10, help="turns a timed conversation holds already")
    args = parser.parse_args()
    print(
        json.dumps({"hit_rates": hit_rates(args.embedder), "turn_cost": turn_costs(args.rounds, args.turns)}, indent=2)
    )


if __name__ == "__main__":
    main()
