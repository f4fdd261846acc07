"""One RateLimiter contract (a token bucket per tenant), run against the local SQLite buckets and DynamoDB
(under moto).

Each factory call is a new adapter on the same store: another thread of `citewise serve`, another process
on the home, another Lambda instance. The bucket must be theirs to share: together they admit exactly the
burst and then the rate, never more, whatever the interleaving. As in the usage contract, moto gets one
guarantee DynamoDB gives and moto lacks, each item request atomic (`atomic_requests`); what is tested is
that the adapter needs nothing more.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from citewise.aws.dynamodb import TABLE_SCHEMA
from citewise.aws.dynamodb_rates import DynamoRates
from citewise.ports.quotas import RateLimiter, admit
from citewise_local.rates import LocalRates
from tests.contract.test_usage_contract import atomic_requests  # noqa: F401 - a fixture

TABLE = "citewise-documents"
NOW = 1_800_000_000_000_000  # microseconds since the epoch
SECOND = 1_000_000

Factory = Callable[[], RateLimiter]


@pytest.fixture(params=["local", "dynamodb"])
def limiter(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Factory]:
    if request.param == "local":
        made: list[LocalRates] = []

        def local() -> RateLimiter:
            made.append(LocalRates(tmp_path / "rates.db"))
            return made[-1]

        yield local
        for rates in made:
            rates.close()
    else:
        request.getfixturevalue("aws_credentials")
        request.getfixturevalue("atomic_requests")
        with mock_aws():
            boto3.client("dynamodb").create_table(TableName=TABLE, **TABLE_SCHEMA)
            yield lambda: DynamoRates(TABLE, client=boto3.client("dynamodb"))


def test_gcra_admits_the_burst_then_the_rate() -> None:
    tat, admitted = None, 0
    for _ in range(5):
        tat, wait = admit(tat, NOW, SECOND, 3)
        if tat is None:
            break
        admitted += 1
    assert admitted == 3 and wait == SECOND  # the fourth waits one period


def test_a_burst_is_admitted_then_refused_with_the_time_to_wait(limiter: Factory) -> None:
    # Given a bucket of 60 a minute (one a second) and a burst of 5
    rates = limiter()
    # When 7 requests arrive at once
    waits = [rates.take("acme", per_minute=60, burst=5, now_us=NOW) for _ in range(7)]
    # Then 5 are admitted and the rest wait a second: the bucket refills one token a second
    assert waits == [0, 0, 0, 0, 0, SECOND, SECOND]
    # And a second later one more is admitted, and only one
    assert rates.take("acme", per_minute=60, burst=5, now_us=NOW + SECOND) == 0
    assert rates.take("acme", per_minute=60, burst=5, now_us=NOW + SECOND) == SECOND
    # And after an idle minute the whole burst is back
    later = NOW + 60 * SECOND
    assert [rates.take("acme", per_minute=60, burst=5, now_us=later) for _ in range(6)].count(0) == 5


def test_tenants_have_their_own_buckets(limiter: Factory) -> None:
    rates = limiter()
    assert [rates.take("acme", per_minute=60, burst=2, now_us=NOW) for _ in range(3)] == [0, 0, SECOND]
    # a neighbour whose id shares the prefix is untouched
    assert rates.take("acme-eu", per_minute=60, burst=2, now_us=NOW) == 0


def test_instances_share_one_bucket(limiter: Factory) -> None:
    # Given two instances (Lambda instances, or server threads and a CLI) and a burst of 4
    first, second = limiter(), limiter()
    # When they take in turns, each with its own idea of the bucket
    taken = [
        first.take("acme", per_minute=60, burst=4, now_us=NOW),
        first.take("acme", per_minute=60, burst=4, now_us=NOW),
        second.take("acme", per_minute=60, burst=4, now_us=NOW),
        second.take("acme", per_minute=60, burst=4, now_us=NOW),
        first.take("acme", per_minute=60, burst=4, now_us=NOW),
        second.take("acme", per_minute=60, burst=4, now_us=NOW),
    ]
    # Then together they admitted the burst, not a burst each
    assert taken.count(0) == 4 and taken[4:] == [SECOND, SECOND]


def test_parallel_takers_never_admit_more_than_the_bucket_holds(limiter: Factory) -> None:
    # Given 8 instances taking 25 tokens each at the same instant from a burst of 50
    instances = [limiter() for _ in range(8)]

    def take(rates: RateLimiter) -> int:
        return sum(rates.take("acme", per_minute=600, burst=50, now_us=NOW) == 0 for _ in range(25))

    with ThreadPoolExecutor(max_workers=8) as pool:
        admitted = sum(pool.map(take, instances))
    # Then exactly the burst was admitted
    assert admitted == 50


def test_erasing_a_tenant_forgets_its_bucket_only(limiter: Factory) -> None:
    # Given the buckets of three tenants whose ids share a prefix, each with its burst spent
    rates = limiter()
    for tenant in ("acme", "acme-eu", "acme2"):
        for _ in range(2):
            rates.take(tenant, per_minute=1, burst=2, now_us=NOW)
        assert rates.take(tenant, per_minute=1, burst=2, now_us=NOW) > 0
        assert rates.count_tenant(tenant) == 1
    # When acme's bucket is erased (twice: the second finds nothing)
    assert (rates.erase_tenant("acme"), rates.erase_tenant("acme")) == (1, 0)
    # Then acme has none (a full burst again), and the others keep theirs, spent
    assert rates.count_tenant("acme") == 0
    assert limiter().take("acme", per_minute=1, burst=2, now_us=NOW) == 0
    for tenant in ("acme-eu", "acme2"):
        assert rates.count_tenant(tenant) == 1 and limiter().take(tenant, per_minute=1, burst=2, now_us=NOW) > 0
