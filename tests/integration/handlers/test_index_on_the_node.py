"""The index the functions create on the real OpenSearch node: the production mapping as the engine
stores it, and a one-node domain's index that is green (every shard placed), not yellow forever."""

from __future__ import annotations

import pytest

from citewise_local.emulator import LambdaContext
from tests.integration.handlers.harness import Stack, claims

ALICE = claims("acme", "alice")
NOTE = b"# Herons\n\nThe grey heron's nests stand in reedbeds.\n"


@pytest.mark.parametrize("stack", ["aws"], indirect=True)
def test_the_index_the_functions_create_is_green_and_holds_the_production_mapping(stack: Stack) -> None:
    # Given the AWS stack on the real node, a one-node domain as dev's is (the stack says 0 replicas)
    assert stack.search_index is not None
    client, name = stack.search_index

    # When a document is uploaded and ingested (the ingest function creates the index on first use)
    stack.upload_and_ingest(ALICE, "birds/herons.md", NOTE)

    # Then the index is green: no replica waits for a second node
    health = client.cluster.health(index=name, wait_for_status="green")  # at most 30 s
    assert (health["status"], health["timed_out"]) == ("green", False)
    assert client.indices.get_settings(index=name)[name]["settings"]["index"]["number_of_replicas"] == "0"
    # And the engine holds the production mapping: faiss HNSW with inner product, the English analyzer
    # citewise defines, nested metadata
    properties = client.indices.get_mapping(index=name)[name]["mappings"]["properties"]
    assert properties["vector"]["method"]["engine"] == "faiss"
    assert properties["vector"]["method"]["space_type"] == "innerproduct"
    assert properties["text"]["analyzer"] == "citewise_english"
    assert properties["attributes"]["type"] == "nested"
    # And the English analyzer stems and drops stop words on the engine as citewise expects
    tokens = client.indices.analyze(index=name, body={"analyzer": "citewise_english", "text": "The heron's nests"})
    assert [t["token"] for t in tokens["tokens"]] == ["heron", "nest"]


@pytest.mark.parametrize("stack", ["aws"], indirect=True)
@pytest.mark.parametrize("request_type", ["Create", "Update"])
def test_the_bootstrap_function_creates_the_index_on_the_node_and_finds_it_again(
    stack: Stack, request_type: str
) -> None:
    # Given the AWS stack on the real node, with no index yet
    assert stack.search_index is not None
    client, name = stack.search_index
    assert not client.indices.exists(index=name)

    # When CloudFormation sends the custom resource request, then the same request again (an Update)
    event = {"RequestType": request_type, "ResourceProperties": {}, "PhysicalResourceId": name}
    first = stack.handler("bootstrap")(event, LambdaContext())
    again = stack.handler("bootstrap")(event, LambdaContext())

    # Then the index exists on the node, ensured on the first attempt each time, with citewise's _meta
    data = first["Data"]
    assert first == again == {"PhysicalResourceId": name, "Data": {**data, "IndexName": name, "Attempts": 1}}
    meta = client.indices.get_mapping(index=name)[name]["mappings"]["_meta"]
    assert (meta["embedder"], meta["dimension"]) == (data["Embedder"], data["Dimension"])
