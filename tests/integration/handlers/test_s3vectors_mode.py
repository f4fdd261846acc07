"""Search mode s3vectors through the functions, beyond the suites that run on every stack: the functions
that answer questions read their caller's own index only, and the ingest function records the vector
space on the bucket once."""

from __future__ import annotations

import pytest

from citewise.aws.s3vectors import DIMENSION_TAG, EMBEDDER_TAG
from citewise.aws.s3vectors_requests import index_name
from tests.integration.handlers.conftest import VECTOR_BUCKET
from tests.integration.handlers.harness import Stack, claims
from tests.integration.handlers.iam import REGION, TENANT_READS

pytestmark = pytest.mark.parametrize("stack", ["s3vectors"], indirect=True)

NOTE = b"# Vault\n\nThe vault opens at nine.\n"


def index_arn(tenant: str) -> str:
    return f"arn:aws:s3vectors:{REGION}:123456789012:bucket/{VECTOR_BUCKET}/index/{index_name(tenant)}"


def test_the_answering_functions_read_their_callers_index_only(stack: Stack) -> None:
    # Given two tenants with a document each
    for tenant in ("acme", "globex"):
        stack.upload_and_ingest(claims(tenant, "alice"), "vault.md", NOTE)
    assert stack.roles is not None
    for tenant in ("acme", "globex"):
        stack.roles.tenant_reads.clear()
        # When a member searches and asks
        alice = claims(tenant, "alice")
        assert stack.api("POST", "/v1/search", body={"query": "vault"}, identity=alice)[0] == 200
        assert stack.api("POST", "/v1/query", body={"query": "when does the vault open?"}, identity=alice)[0] == 200
        # Then every S3 Vectors call of the query function was a read of that tenant's index
        reads = stack.roles.tenant_reads
        assert reads and {call.function for call, _ in reads} == {"query"}
        assert {request.action for _, request in reads} <= TENANT_READS
        assert {request.resource for _, request in reads} == {index_arn(tenant)}


def test_the_first_document_records_the_embedder_on_the_bucket(stack: Stack) -> None:
    assert stack.vectors is not None
    stack.upload_and_ingest(claims("acme", "alice"), "vault.md", NOTE)
    stack.upload_and_ingest(claims("globex", "alice"), "vault.md", NOTE)
    # the ingest function tagged the bucket (once), as the embedder the stack configures
    assert stack.vectors.buckets[VECTOR_BUCKET].tags == {EMBEDDER_TAG: "hashing-384", DIMENSION_TAG: "384"}
    assert [name for name, _ in stack.vectors.requests].count("TagResource") == 1
