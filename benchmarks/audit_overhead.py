"""What the audit trail costs a query, locally: the p50 of a query answered as `POST /v1/query` answers it
(`answer_question`, then `Auditor.record` of its record into the home's `audit.jsonl`: the question's
HMAC, the document ids, one locked append) against the same query unaudited.

As `benchmarks.usage_overhead`: the sample corpus in a fresh home (hashing embedder: the fastest query,
so the largest ratio), `rounds` rounds each asking every question once audited and once not, alternating
which goes first. The figures are the medians of each kind, their difference and ratio, and the median
of `Auditor.record` alone. `python -m benchmarks.audit_overhead` runs it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.common import REPO
from benchmarks.usage_overhead import CALLER, QUESTIONS
from citewise.domain.models import SearchRequest, Visibility
from citewise.ports.audit import UNAUDITED, Auditor
from citewise.query.answering import answer_question
from citewise.runtime.services import Services, build_services
from citewise.runtime.settings import Settings
from citewise_local.folders import scan


def _ask(services: Services, auditor: Auditor, question: str, request_id: str) -> tuple[float, float]:
    """One query as the route and the handler run it: (whole seconds, seconds in `auditor.record`)."""
    started = time.perf_counter()
    answer = answer_question(services.retriever, services.synthesizer, CALLER, SearchRequest(query=question))
    recording = time.perf_counter()
    auditor.record(
        request_id=request_id,
        channel="rest",
        action="query",
        tenant_id=CALLER.tenant_id,
        user_id=CALLER.user_id,
        resources=[hit.chunk.document.doc_id for hit in answer.sources],
        question=question,
    )
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
            timings: dict[str, list[float]] = {"audited": [], "unaudited": [], "record": []}
            for question in QUESTIONS:  # warm: the index's caches, the trail's first write, the key
                _ask(services, services.auditor, question, "warm")
            for round_ in range(rounds):
                order = ("audited", "unaudited") if round_ % 2 == 0 else ("unaudited", "audited")
                for n, question in enumerate(QUESTIONS):
                    for kind in order:
                        auditor = services.auditor if kind == "audited" else UNAUDITED
                        whole, record = _ask(services, auditor, question, f"r-{round_}-{n}")
                        timings[kind].append(whole)
                        if kind == "audited":
                            timings["record"].append(record)
            assert services.auditor.failures == 0, "the benchmark's trail failed to write"
        finally:
            services.close()
    audited, unaudited = (statistics.median(timings[k]) * 1000 for k in ("audited", "unaudited"))
    return {
        "queries_each": len(timings["audited"]),
        "p50_unaudited_ms": round(unaudited, 3),
        "p50_audited_ms": round(audited, 3),
        "difference_ms": round(audited - unaudited, 3),
        "ratio": round(audited / unaudited, 3),
        "p50_record_ms": round(statistics.median(timings["record"]) * 1000, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100, help="rounds of every question, each way (default 100)")
    print(json.dumps(run(parser.parse_args().rounds), indent=2))


if __name__ == "__main__":
    main()
