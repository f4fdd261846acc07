"""What the quota checks of one query cost locally: `QuotaGate.admit_query` for a generated answer (a token
from the tenant's bucket in `rates.db`, then today's usage read from `usage.db`), on a fresh home with
limits set so that every check passes and does its reads and writes. `python -m benchmarks.quota_overhead`
runs it; the figures are the median and p95 in milliseconds."""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from citewise.domain.quotas import QuotaOverrides
from citewise.runtime.services import build_services
from citewise.runtime.settings import Settings

LIMITS = QuotaOverrides(queries_per_minute=10**6, query_burst=10**6, generation_tokens_per_day=10**9)


def run(checks: int = 2000) -> dict[str, float]:
    """The figures of `checks` checks, after 50 to warm the files."""
    with tempfile.TemporaryDirectory() as home:
        services = build_services(Settings(home=Path(home), embedder="hashing"))
        try:
            services.registry.put_tenant_quotas("acme", LIMITS)
            gate = services.quotas
            for _ in range(50):
                gate.admit_query("acme", generative=True)
            timings = []
            for _ in range(checks):
                started = time.perf_counter()
                gate.admit_query("acme", generative=True)
                timings.append((time.perf_counter() - started) * 1000)
        finally:
            services.close()
    return {
        "checks": checks,
        "p50_ms": round(statistics.median(timings), 3),
        "p95_ms": round(statistics.quantiles(timings, n=20)[-1], 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--checks", type=int, default=2000, help="checks to time (default 2000)")
    print(json.dumps(run(parser.parse_args().checks), indent=2))


if __name__ == "__main__":
    main()
