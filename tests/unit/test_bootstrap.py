"""The index bootstrap custom resource: Create/Update ensure the index, retrying only what waiting can fix;
Delete never touches data. No network: a fake index, or the real OpenSearch adapter over a fake client."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from opensearchpy.exceptions import AuthorizationException, ConnectionTimeout, NotFoundError, TransportError

from citewise.aws import opensearch_queries as q
from citewise.aws.opensearch import OpenSearchIndex
from citewise.domain.errors import (
    CitewiseError,
    EmbeddingServiceError,
    SearchBackendError,
    ThrottledError,
    ValidationError,
)
from citewise.runtime.bootstrap import Backoff, ensure_index, handle_event, is_transient
from citewise.runtime.services import Services, build_services
from citewise.runtime.settings import Settings


class FakeClock:
    """A monotonic clock that only `sleep` moves; records every wait."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.waits: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds


@dataclass
class ScriptedIndex:
    """Raises the scripted errors in order on `ensure`, then succeeds; records the calls."""

    errors: list[CitewiseError] = field(default_factory=list)
    calls: list[tuple[str, int]] = field(default_factory=list)

    def ensure(self, embedder_name: str, dimension: int) -> None:
        self.calls.append((embedder_name, dimension))
        if self.errors:
            raise self.errors.pop(0)


def forbidden() -> SearchBackendError:
    # What the OpenSearch adapter raises for HTTP 403 (a data access policy not propagated yet).
    return SearchBackendError("HTTP 403", details={"action": "create or check the index", "status": 403})


NO_JITTER: Callable[[], float] = lambda: 0.0  # noqa: E731 - waits of exactly half the backoff


def test_the_backoff_grows_geometrically_up_to_its_cap() -> None:
    backoff = Backoff(initial=2.0, multiplier=2.0, maximum=10.0)
    assert [backoff.delay(n, 0.0) for n in range(1, 6)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert backoff.delay(1, 0.999) == pytest.approx(2.0, rel=1e-3)


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (forbidden(), True),
        (SearchBackendError("x", details={"status": 503}), True),
        (SearchBackendError("x", details={"status": 429}), True),
        (ThrottledError("x"), True),
        (SearchBackendError("x", details={"status": 400}), False),
        (SearchBackendError("embedder mismatch", details={"index": "i", "indexed_embedder": "other"}), False),
        (EmbeddingServiceError("x", details={"status": 503}), False),
        (ValidationError("x"), False),
    ],
)
def test_only_errors_that_waiting_can_fix_are_transient(error: CitewiseError, transient: bool) -> None:
    assert is_transient(error) is transient


def test_ensure_retries_403_with_backoff_until_the_policy_propagates() -> None:
    # Given an index refused with 403 three times (a new Serverless data access policy)
    clock = FakeClock()
    index = ScriptedIndex(errors=[forbidden(), forbidden(), forbidden()])
    # When the bootstrap ensures it with five minutes to go
    attempts = ensure_index(
        index, "bedrock:titan:1024", 1024, deadline=clock() + 300, clock=clock, sleep=clock.sleep, jitter=NO_JITTER
    )
    # Then it succeeds on the fourth attempt after growing waits, always with the same arguments
    assert attempts == 4
    assert clock.waits == [1.0, 2.0, 4.0]
    assert index.calls == [("bedrock:titan:1024", 1024)] * 4


def test_ensure_gives_up_before_the_deadline_naming_the_last_error() -> None:
    clock = FakeClock()
    index = ScriptedIndex(errors=[forbidden() for _ in range(100)])
    with pytest.raises(SearchBackendError) as raised:
        ensure_index(index, "e", 8, deadline=clock() + 20, clock=clock, sleep=clock.sleep, jitter=NO_JITTER)
    # 1 + 2 + 4 + 8 = 15 s waited; the next wait (15 s) would end past the deadline, so it stops there
    assert clock.waits == [1.0, 2.0, 4.0, 8.0]
    assert clock.now <= 1000.0 + 20
    assert raised.value.details == {"attempts": 5, "last_error": "SEARCH_BACKEND_ERROR", "last_status": 403}
    assert isinstance(raised.value.__cause__, SearchBackendError)


def test_a_permanent_error_fails_at_once() -> None:
    clock = FakeClock()
    mismatch = SearchBackendError("holds vectors of embedder 'x'", details={"indexed_embedder": "x"})
    index = ScriptedIndex(errors=[mismatch])
    with pytest.raises(SearchBackendError) as raised:
        ensure_index(index, "e", 8, deadline=clock() + 300, clock=clock, sleep=clock.sleep)
    assert raised.value is mismatch
    assert clock.waits == [] and len(index.calls) == 1


# --- the real OpenSearch adapter over a fake client: its translated errors drive the retries ---------


class FakeIndices:
    """`client.indices` answering from a script: each entry is an exception to raise or a value."""

    def __init__(self, exists: list[Any], mapping: dict[str, Any]) -> None:
        self._exists = exists
        self._mapping = mapping
        self.created: list[dict[str, Any]] = []

    def exists(self, index: str) -> bool:
        answer = self._exists.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return bool(answer)

    def create(self, index: str, body: dict[str, Any]) -> None:
        self.created.append(body)

    def get_mapping(self, index: str) -> dict[str, Any]:
        return {index: {"mappings": self._mapping}}


class FakeClient:
    def __init__(self, indices: FakeIndices) -> None:
        self.indices = indices


def test_the_opensearch_adapter_403_and_timeouts_are_retried_then_the_index_is_created() -> None:
    # Given a collection that refuses twice (policy propagating), times out once, then has no index yet
    body = q.index_body(16, embedder="hashing-16")
    indices = FakeIndices(
        exists=[
            AuthorizationException(403, "security_exception", {}),
            AuthorizationException(403, "security_exception", {}),
            ConnectionTimeout("TIMEOUT", "read timed out", TimeoutError()),
            False,
        ],
        mapping=body["mappings"],
    )
    index = OpenSearchIndex(FakeClient(indices), "citewise-chunks", serverless=True)
    clock = FakeClock()
    # When the bootstrap ensures it
    attempts = ensure_index(
        index, "hashing-16", 16, deadline=clock() + 300, clock=clock, sleep=clock.sleep, jitter=NO_JITTER
    )
    # Then the index is created once, with the embedder's mapping, on the fourth attempt
    assert attempts == 4
    assert indices.created == [body]


def test_the_opensearch_adapter_a_400_is_not_retried() -> None:
    indices = FakeIndices(exists=[TransportError(400, "illegal_argument_exception", {})], mapping={})
    index = OpenSearchIndex(FakeClient(indices), "citewise-chunks", serverless=False)
    clock = FakeClock()
    with pytest.raises(SearchBackendError) as raised:
        ensure_index(index, "e", 16, deadline=clock() + 300, clock=clock, sleep=clock.sleep)
    assert raised.value.details["status"] == 400
    assert clock.waits == []


def test_a_404_is_not_retried() -> None:
    # opensearch-py answers a HEAD 404 with False; an error 404 (a wrong endpoint path) will not heal by waiting
    error = NotFoundError(404, "index_not_found_exception", {})
    indices = FakeIndices(exists=[error], mapping={})
    index = OpenSearchIndex(FakeClient(indices), "citewise-chunks", serverless=False)
    with pytest.raises(SearchBackendError):
        ensure_index(index, "e", 16, deadline=1e9, sleep=lambda _: pytest.fail("must not wait"))


# --- the custom resource requests ---------------------------------------------------------------------


class ServicesBuilder:
    """Builds the real local stack (hashing embedder) on call and keeps what it built, to close it."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.built: list[Services] = []

    def __call__(self) -> Services:
        self.built.append(build_services(self.settings))
        return self.built[-1]


@pytest.fixture
def builder(settings: Settings) -> Iterator[ServicesBuilder]:
    built = ServicesBuilder(settings)
    yield built
    for services in built.built:
        services.close()


@pytest.mark.parametrize("request_type", ["Create", "Update"])
def test_create_and_update_ensure_the_index_and_name_it(request_type: str, builder: ServicesBuilder) -> None:
    event = {"RequestType": request_type, "ResourceProperties": {}, "PhysicalResourceId": "citewise-chunks"}
    answer = handle_event(event, builder, deadline=1e12)
    assert len(builder.built) == 1
    embedder = builder.built[0].embedder
    assert answer == {
        "PhysicalResourceId": builder.settings.index_name,
        "Data": {
            "IndexName": builder.settings.index_name,
            "Embedder": embedder.name,
            "Dimension": builder.settings.hashing_dimension,
            "Attempts": 1,
        },
    }
    # and the index now exists for that embedder: ensuring it again with another dimension fails
    with pytest.raises(CitewiseError):
        builder().index.ensure(embedder.name, builder.settings.hashing_dimension * 2)


def test_delete_is_a_no_op_that_builds_nothing() -> None:
    def build() -> Services:
        raise AssertionError("a Delete must not touch the search backend")

    answer = handle_event({"RequestType": "Delete", "PhysicalResourceId": "citewise-chunks"}, build, deadline=0)
    assert answer == {"PhysicalResourceId": "citewise-chunks", "Data": {}}


def test_an_unknown_request_type_fails() -> None:
    with pytest.raises(ValidationError):
        handle_event({"RequestType": "Replace"}, lambda: pytest.fail("must not build"), deadline=0)


def test_a_failed_ensure_fails_the_request_and_closes_the_services(settings: Settings) -> None:
    closed: list[bool] = []

    def build() -> Services:
        mismatch = ScriptedIndex(errors=[SearchBackendError("other embedder", details={"indexed_embedder": "x"})])
        services = Services(settings, index=mismatch)
        services.closers.append(lambda: closed.append(True))
        return services

    with pytest.raises(SearchBackendError):
        handle_event({"RequestType": "Create"}, build, deadline=1e12)
    assert closed == [True]
