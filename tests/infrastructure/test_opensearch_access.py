"""Every OpenSearch request a function sends is allowed to that function's role in the synthesized
template: on a managed domain by its IAM `es:ESHttp<Method>` statements on `<domain ARN>/<path>`, on a
Serverless collection by `aoss:APIAccessAll` on the collection and its data access policy.

The requests are not a list written here: each function's short scenario (the index operations its code
calls) runs `OpenSearchIndex` against the OpenSearch double, and what the double received is checked.
The permission each request needs on Serverless is from the Developer Guide's table
[Supported OpenSearch API operations and permissions](https://docs.aws.amazon.com/opensearch-service/latest/developerguide/serverless-genref.html#serverless-operations):
`aoss:CreateIndex` for PUT <index>; `aoss:DescribeIndex` for GET and HEAD <index> and GET <index>/_mapping;
`aoss:WriteDocument` for POST <index>/_bulk; `aoss:ReadDocument` for the searches (that row was not
readable here: taken from the permission's name and the data access policy docs). A request the table
does not cover is refused.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest
from citewise_infra.constants import FUNCTION_KEYS, FunctionKey
from opensearchpy import OpenSearch

from citewise.aws.opensearch import OpenSearchIndex
from citewise.builtin.hashing import HashingEmbedder
from citewise.domain.models import Caller
from citewise.ports.sweeps import StaleSweep
from tests.contract.test_index_contract import make_chunk
from tests.doubles.opensearch_server import FakeOpenSearch, Recorded, running

from .conftest import Synth
from .templates import as_list, flat, role_statements

DIMENSION = 8
EMBEDDER = HashingEmbedder(DIMENSION)
ALICE = Caller(tenant_id="acme", user_id="alice")
Scenario = Callable[[OpenSearchIndex], None]

# The data access permission a request needs, by (method, path below the index).
AOSS_PERMISSIONS = {
    ("GET", "/_search"): "aoss:ReadDocument",
    ("POST", "/_search"): "aoss:ReadDocument",
    ("POST", "/_bulk"): "aoss:WriteDocument",
    ("HEAD", ""): "aoss:DescribeIndex",
    ("GET", ""): "aoss:DescribeIndex",
    ("GET", "/_mapping"): "aoss:DescribeIndex",
    ("PUT", ""): "aoss:CreateIndex",
}


def write(index: OpenSearchIndex, doc_id: str, *texts: str) -> None:
    chunks = [make_chunk("acme", doc_id, n, text) for n, text in enumerate(texts)]
    index.replace_document("acme", doc_id, chunks, EMBEDDER.embed_documents(list(texts)))


def bootstrap(index: OpenSearchIndex) -> None:
    index.ensure(EMBEDDER.name, DIMENSION)  # creates it
    index.ensure(EMBEDDER.name, DIMENSION)  # an update: checks the existing mapping


def ingest(index: OpenSearchIndex) -> None:
    index.ensure(EMBEDDER.name, DIMENSION)
    index.vectors_by_hash("acme", {"hash:ginger tea"})
    write(index, "doc", "ginger tea", "mint tea")
    write(index, "doc", "ginger beer")
    index.sweep_stale(StaleSweep(tenant_id="acme", doc_id="doc", before="0"))
    index.delete_document("acme", "doc")


def read(index: OpenSearchIndex) -> None:
    index.keyword_search(ALICE, "ginger", None, 5)
    index.vector_search(ALICE, EMBEDDER.embed_query("ginger"), None, 5)
    index.sources(ALICE)


def documents(index: OpenSearchIndex) -> None:
    index.delete_document("acme", "doc")


def erasure(index: OpenSearchIndex) -> None:
    index.erase_tenant("acme")
    index.count_tenant("acme")


SCENARIOS: dict[FunctionKey, Scenario] = {
    "bootstrap": bootstrap,
    "ingest": ingest,
    "query": read,
    "mcp": read,
    "documents": documents,
    "erasure": erasure,
}
SEARCHING: tuple[FunctionKey, ...] = tuple(key for key in FUNCTION_KEYS if key != "refresh")
"""The functions that reach the index: the refresh function stores pages in the bucket, no more."""


def sent_by(key: FunctionKey, synth: Synth) -> list[Recorded]:
    """The requests `key`'s scenario sends, against an index that exists (but for the bootstrap)."""
    name = synth.stack.config.search.index_name
    with running(FakeOpenSearch(serverless=synth.stack.search.service == "aoss")) as server:
        client = OpenSearch(hosts=[server.url], timeout=10)
        if key != "bootstrap":
            seeded = OpenSearchIndex(client, name, serverless=server.fake.serverless)
            seeded.ensure(EMBEDDER.name, DIMENSION)
            write(seeded, "doc", "ginger tea")
            server.fake.wire.clear()
        SCENARIOS[key](OpenSearchIndex(client, name, serverless=server.fake.serverless))
        client.close()
        return list(server.fake.wire)


def matches(pattern: str, value: str) -> bool:
    """An IAM resource pattern (`*` any characters, `?` one) against a value."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value) is not None


def role_id(synth: Synth, key: FunctionKey) -> str:
    return synth.logical_id(getattr(synth.stack.functions, key).role)


def domain_refusals(synth: Synth, key: FunctionKey, requests: list[Recorded]) -> list[str]:
    """Requests no IAM statement of the role allows (`es:ESHttp<Method>` on `<domain ARN><path>`)."""
    (domain_id,) = synth.of_type("AWS::OpenSearchService::Domain")
    statements = role_statements(synth, role_id(synth, key))
    refused = []
    for request in requests:
        action = f"es:ESHttp{request.method.capitalize()}"
        resource = f"<{domain_id}.Arn>{request.path}"
        if not any(action in s.actions and any(matches(r, resource) for r in s.resources) for s in statements):
            refused.append(f"{key} role: {request.method} {request.path} needs {action} on {resource}")
    return refused


def serverless_refusals(synth: Synth, key: FunctionKey, requests: list[Recorded]) -> list[str]:
    """Requests the role's data access policy does not permit on the index (or IAM keeps off the collection)."""
    role = f"<{role_id(synth, key)}.Arn>"
    ((collection_id, collection),) = synth.of_type("AWS::OpenSearchServerless::Collection").items()
    statements = role_statements(synth, role_id(synth, key))
    if not any("aoss:APIAccessAll" in s.actions and f"<{collection_id}.Arn>" in s.resources for s in statements):
        return [f"{key} role: no aoss:APIAccessAll on the collection"]
    resource = f"index/{collection['Properties']['Name']}/{synth.stack.config.search.index_name}"
    permitted: set[str] = set()
    for policy in synth.of_type("AWS::OpenSearchServerless::AccessPolicy").values():
        for rule_set in json.loads(flat(policy["Properties"]["Policy"])):
            if role in as_list(rule_set["Principal"]):
                for rule in rule_set["Rules"]:
                    if rule["ResourceType"] == "index" and any(matches(r, resource) for r in rule["Resource"]):
                        permitted |= set(rule["Permission"])
    refused = []
    for request in requests:
        below = request.path.removeprefix(f"/{synth.stack.config.search.index_name}")
        needed = AOSS_PERMISSIONS.get((request.method, below), f"<no known permission for {request.method} {below}>")
        if needed not in permitted and "aoss:*" not in permitted:
            refused.append(f"{key} role: {request.method} {request.path} needs {needed} on {resource}")
    return refused


def refusals(synth: Synth, key: FunctionKey, requests: list[Recorded]) -> list[str]:
    check = serverless_refusals if synth.stack.search.service == "aoss" else domain_refusals
    return check(synth, key, requests)


@pytest.mark.parametrize("key", SEARCHING)
def test_every_request_of_each_function_is_allowed_to_its_role(synth: Synth, key: FunctionKey) -> None:
    requests = sent_by(key, synth)
    assert requests, f"the {key} scenario sent nothing"
    assert not refusals(synth, key, requests)


def test_the_scenarios_cover_what_each_capability_sends(dev: Synth, serverless_iam: Synth) -> None:
    # The bootstrap creates and describes, ingest writes in bulk, the readers search: each kind is checked
    for synth in (dev, serverless_iam):
        kinds = {key: {(r.method, r.path.rsplit("/", 1)[-1]) for r in sent_by(key, synth)} for key in SEARCHING}
        index = synth.stack.config.search.index_name
        assert {("PUT", index), ("HEAD", index)} <= kinds["bootstrap"]
        assert ("POST", "_bulk") in kinds["ingest"] and ("POST", "_search") in kinds["ingest"]
        assert kinds["query"] == kinds["mcp"] == {("POST", "_search")}


def test_the_refresh_function_may_not_reach_the_index(dev: Synth, serverless_iam: Synth) -> None:
    for synth in (dev, serverless_iam):
        actions = {a for s in role_statements(synth, role_id(synth, "refresh")) for a in s.actions}
        assert not {a for a in actions if a.startswith(("es:", "aoss:"))}, actions


def test_a_request_outside_the_role_is_reported_with_the_request_and_the_role(
    dev: Synth, serverless_iam: Synth
) -> None:
    # The query function creating the index, or writing chunks: neither is granted, in either mode
    index = dev.stack.config.search.index_name
    forbidden = [Recorded("PUT", f"/{index}", {}, b"", 200), Recorded("POST", f"/{index}/_bulk", {}, b"", 200)]
    (domain_id,) = dev.of_type("AWS::OpenSearchService::Domain")
    assert domain_refusals(dev, "query", forbidden) == [
        f"query role: PUT /{index} needs es:ESHttpPut on <{domain_id}.Arn>/{index}",
        f"query role: POST /{index}/_bulk needs es:ESHttpPost on <{domain_id}.Arn>/{index}/_bulk",
    ]
    found = serverless_refusals(serverless_iam, "query", forbidden)
    assert [line.split(" needs ")[1].split(" on ")[0] for line in found] == ["aoss:CreateIndex", "aoss:WriteDocument"]
    assert all(line.startswith("query role: ") for line in found)
    # A request no permission is known for is refused rather than passed
    delete_by_query = Recorded("POST", f"/{index}/_delete_by_query", {}, b"", 200)
    unknown = serverless_refusals(serverless_iam, "ingest", [delete_by_query])
    assert unknown and "no known permission" in unknown[0]
