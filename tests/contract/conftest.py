"""Every request an OpenSearch double accepted during a contract test is checked against the official
OpenSearch API specification (`tests.conformance.opensearch_wire`): what the adapter put on the wire,
not what a query builder returned. Requests the double refused (the tests' deliberate mistakes, faults
it injected) are left out: a refusal already fails any test that did not expect it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conformance.opensearch_wire import problems
from tests.doubles.opensearch_server import FakeOpenSearch


@pytest.fixture(autouse=True)
def requests_conform_to_the_opensearch_specification() -> Iterator[None]:
    FakeOpenSearch.created.clear()
    yield
    found = [
        f"{request.method} {request.path} {request.params}: {problem}"
        for fake in FakeOpenSearch.created
        for request in fake.wire
        if request.status < 400
        for problem in problems(request)
    ]
    FakeOpenSearch.created.clear()
    assert not found, "requests outside the OpenSearch API specification:\n" + "\n".join(found[:10])
