"""What per-tenant read sessions cost a query in search mode s3vectors, offline (docs/s3vectors-design.md,
"Isolation by resource").

A tenant's first read in a warm process assumes the tenant-reader role and builds an `s3vectors` client on
the session's credentials; later reads reuse that client until shortly before the credentials expire.
Measured here, in-process: `AssumeRole` as botocore sends it and moto answers it (so the client-side part
only: building, signing and parsing the request; no network, no STS), the client's construction, a cache
hit, the memory of one cached client, and a vector search through the S3 Vectors double on a cold tenant
(session made first) against a warm one. STS's own latency needs an account (docs/aws.md).
`python -m benchmarks.tenant_sessions` runs it.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import boto3
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID

from citewise.aws import clients
from citewise.aws.s3vectors import S3VectorsIndex
from citewise.aws.tenant_sessions import TenantSessions
from citewise.builtin.hashing import HashingEmbedder
from citewise.domain.models import Caller
from tests.contract.test_index_contract import make_chunk
from tests.doubles.s3vectors import FakeS3Vectors

REGION = "us-east-1"
ROLE = f"arn:aws:iam::{DEFAULT_ACCOUNT_ID}:role/citewise-tenant-reader"
BUCKET = "citewise-vectors"
EMBEDDER = HashingEmbedder(64)
KEPT = 20  # clients whose memory is measured together


def _ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 3)


def _timed(action: Callable[[], Any]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def run(tenants: int = 200) -> dict[str, float]:
    """The figures, in milliseconds (and KiB), medians over `tenants` cold tenants."""
    with mock_aws():
        sts = boto3.client("sts", region_name=REGION)
        assume = [
            _timed(lambda n=n: sts.assume_role(RoleArn=ROLE, RoleSessionName=f"t-bench-{n}", DurationSeconds=3600))
            for n in range(tenants)
        ]
        credentials = sts.assume_role(RoleArn=ROLE, RoleSessionName="t-bench")["Credentials"]

        def build_client() -> Any:
            return clients.session_client("s3vectors", credentials, region=REGION)

        build = [_timed(build_client) for _ in range(tenants)]
        gc.collect()
        tracemalloc.start()
        kept = [build_client() for _ in range(KEPT)]
        memory, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        del kept

        fake = FakeS3Vectors()
        fake.create_bucket(BUCKET)
        own = S3VectorsIndex(fake.client(), BUCKET)
        own.ensure(EMBEDDER.name, EMBEDDER.dimension)
        callers = [Caller(tenant_id=f"tenant-{n}", user_id="u") for n in range(tenants)]
        for caller in callers:
            chunk = make_chunk(caller.tenant_id, "doc", 0, "walnut harvest")
            own.replace_document(caller.tenant_id, "doc", [chunk], EMBEDDER.embed_documents([chunk.text]))

        def session_client(made: Any) -> Any:
            client = clients.session_client("s3vectors", made, region=REGION)
            fake.attach(client.meta.events)
            return client

        sessions = TenantSessions(sts, ROLE, BUCKET, region=REGION, make_client=session_client, capacity=tenants)
        index = S3VectorsIndex(fake.client(), BUCKET, reader=sessions.client)
        vector = EMBEDDER.embed_query("walnut harvest")
        cold = [_timed(lambda c=c: index.vector_search(c, vector, None, 10)) for c in callers]
        warm = [_timed(lambda c=c: index.vector_search(c, vector, None, 10)) for c in callers]
        hit = [_timed(lambda c=c: sessions.client(c.tenant_id)) for c in callers]
    return {
        "tenants": tenants,
        "p50_assume_role_client_side_ms": _ms(assume),
        "p50_session_client_build_ms": _ms(build),
        "p50_cache_hit_ms": _ms(hit),
        "session_client_kib": round(memory / KEPT / 1024, 1),
        "p50_query_cold_tenant_ms": _ms(cold),
        "p50_query_warm_tenant_ms": _ms(warm),
        "cold_minus_warm_ms": round(_ms(cold) - _ms(warm), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tenants", type=int, default=200, help="cold tenants measured (default 200)")
    print(json.dumps(run(parser.parse_args().tenants), indent=2))


if __name__ == "__main__":
    main()
