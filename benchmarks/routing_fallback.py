"""What the routed-filter check (issue 26) costs a query: local index, MiniLM, synthetic documents.

A routed question now runs one more search of the same text without the routed filter (to tell a much
weaker routed result), and a third, of the question as written, when it falls back. This times
`Retriever.retrieve` for four questions over documents of four sources and three years: unrouted, routed
with the filter kept, routed by source only, and routed to a year no document has (the fallback).
Each figure is the median (and 90th percentile) of `rounds` timings after one warm-up.

`python -m benchmarks.routing_fallback [--documents 1000] [--rounds 30] [--home DIR]`; an existing
`--home` is reused as it is (run it on two checkouts against one home to compare them).
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from citewise.domain.models import Caller, SearchRequest
from citewise.domain.objects import SourceObject
from citewise.ingest.pipeline import IngestResult, Outcome
from citewise.runtime.services import Services, build_services
from citewise.runtime.settings import Settings

TOPICS = (
    "queue retries",
    "billing invoices",
    "login errors",
    "database failover",
    "cache eviction",
    "deploy pipeline",
    "on-call rotation",
    "api rate limits",
    "pydantic models",
    "cors origins",
)
SOURCES = ("jira", "confluence", "runbooks", "slack")
QUESTIONS = {
    "unrouted (route false)": ("queue retries in Jira in 2024", False),
    "routed, filter kept": ("queue retries in Jira in 2024", True),
    "routed, source only": ("billing invoices in the runbooks", True),
    "routed, no match: fallback": ("queue retries in 1999", True),
}
CALLER = Caller(tenant_id="acme", user_id="bench")


def corpus(count: int, rng: random.Random) -> list[SourceObject]:
    """`count` Markdown notes, each of one source (its folder) and one date in 2023-2025."""
    objects = []
    for number in range(count):
        topic = rng.choice(TOPICS)
        date = f"{rng.choice((2023, 2024, 2025))}-{rng.randint(1, 9):02d}-{rng.randint(10, 19)}"
        words = " ".join(rng.choice(TOPICS) for _ in range(30))
        body = f"---\nupdated: {date}\n---\n# {topic.title()} {number}\n\nNotes on {topic}: {words}.\n"
        path = f"{rng.choice(SOURCES)}/note-{number}.md"
        objects.append(
            SourceObject(
                tenant_id=CALLER.tenant_id,
                path=path,
                size=len(body),
                version=str(number),
                load=body.encode,
                owner=CALLER.user_id,
            )
        )
    return objects


def timings(services: Services, question: str, route: bool, rounds: int) -> tuple[list[float], str | None]:
    """Milliseconds per `retrieve` of `question`, and the fallback reason it reported."""
    request = SearchRequest(query=question, route=route)
    services.retriever.retrieve(CALLER, request)
    runs = []
    for _ in range(rounds):
        start = time.perf_counter()
        retrieval = services.retriever.retrieve(CALLER, request)
        runs.append((time.perf_counter() - start) * 1000)
    fallback = retrieval.routing.filter_fallback
    return runs, fallback.reason if fallback else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--home", type=Path, default=None, help="reused if it exists (default: a new temporary one)")
    args = parser.parse_args()
    home = args.home or Path(tempfile.mkdtemp(prefix="citewise-routing-"))
    fresh = not home.exists() or not any(home.iterdir())
    services = build_services(Settings(home=home, embedder="minilm"))
    try:
        if fresh:
            start = time.perf_counter()
            objects = corpus(args.documents, random.Random(7))  # noqa: S311 - synthetic data, not security
            results = [result for _, result in services.ingestor.ingest_many(objects)]
            new = sum(1 for result in results if isinstance(result, IngestResult) and result.outcome is Outcome.NEW)
            print(f"ingested {new} of {args.documents} documents in {time.perf_counter() - start:.0f} s ({home})")
        for name, (question, route) in QUESTIONS.items():
            runs, fallback = timings(services, question, route, args.rounds)
            p90 = sorted(runs)[int(0.9 * len(runs))]
            print(f"{name:28} p50 {statistics.median(runs):6.1f} ms  p90 {p90:6.1f} ms  fallback {fallback}")
    finally:
        services.close()


if __name__ == "__main__":
    main()
