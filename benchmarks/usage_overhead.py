"""What usage metering costs a query, locally: the p50 of a query answered as `POST /v1/query` answers it
(`answer_question`, then `Meter.record` into the home's `usage.db`) against the same query unmetered.

The sample corpus is ingested into a fresh home (hashing embedder: the fastest query, so the largest
ratio); then `rounds` rounds each ask every question once metered and once unmetered, alternating which
goes first, so drift on a shared machine falls on both alike. The figures are the medians over all
queries of each kind, their difference and ratio, and the median of `Meter.record` alone (the write:
one upsert per counter in one SQLite transaction). `python -m benchmarks.usage_overhead` runs it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.common import REPO
from citewise.domain.models import Caller, SearchRequest, Visibility
from citewise.ports.usage import UNMETERED, Meter
from citewise.query.answering import answer_question
from citewise.query.metering import query_usage
from citewise.runtime.services import Services, build_services
from citewise.runtime.settings import Settings
from citewise_local.folders import scan

CALLER = Caller(tenant_id="acme", user_id="alice")
QUESTIONS = (
    "How do I deploy the stack?",
    "How often are keys rotated?",
    "What does the ingest function do with a failed document?",
    "Which regions are supported?",
)


def _ask(services: Services, meter: Meter, question: str) -> tuple[float, float]:
    """One query as the route runs it: (whole seconds, seconds in `meter.record`)."""
    started = time.perf_counter()
    answer = answer_question(services.retriever, services.synthesizer, CALLER, SearchRequest(query=question))
    recording = time.perf_counter()
    meter.record(CALLER.tenant_id, query_usage(answer, "rest"))
    ended = time.perf_counter()
    return ended - started, ended - recording


def run(rounds: int = 100) -> dict[str, float]:
    """The figures, in milliseconds (and the ratio)."""
    with tempfile.TemporaryDirectory() as home:
        services = build_services(Settings(home=Path(home), embedder="hashing"))
        try:
            found = scan([REPO / "samples" / "corpus"], CALLER.tenant_id, CALLER.user_id, Visibility.SHARED)
            for _ in services.ingestor.ingest_many(found.objects):
                pass
            timings: dict[str, list[float]] = {"metered": [], "unmetered": [], "record": []}
            for question in QUESTIONS:  # warm: the index's caches, the usage file's first write
                _ask(services, services.meter, question)
            for round_ in range(rounds):
                order = ("metered", "unmetered") if round_ % 2 == 0 else ("unmetered", "metered")
                for question in QUESTIONS:
                    for kind in order:
                        whole, record = _ask(services, services.meter if kind == "metered" else UNMETERED, question)
                        timings[kind].append(whole)
                        if kind == "metered":
                            timings["record"].append(record)
        finally:
            services.close()
    metered, unmetered = (statistics.median(timings[k]) * 1000 for k in ("metered", "unmetered"))
    return {
        "queries_each": len(timings["metered"]),
        "p50_unmetered_ms": round(unmetered, 3),
        "p50_metered_ms": round(metered, 3),
        "difference_ms": round(metered - unmetered, 3),
        "ratio": round(metered / unmetered, 3),
        "p50_record_ms": round(statistics.median(timings["record"]) * 1000, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100, help="rounds of every question, each way (default 100)")
    print(json.dumps(run(parser.parse_args().rounds), indent=2))


if __name__ == "__main__":
    main()
