"""The botocore call check (`tests.conformance.botocore_calls`, run over every test by tests/conftest.py)
catches what botocore's service model and the Bedrock model pages refuse, even from a client that
skips its own validation. Body schemas are from
https://docs.aws.amazon.com/bedrock/latest/userguide/model-parameters-titan-embed-text.html and
https://docs.aws.amazon.com/bedrock/latest/userguide/model-parameters-embed.html (see
`tests.conformance.invoke_model_schemas`)."""

from __future__ import annotations

import io
import json
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.response import StreamingBody
from botocore.stub import Stubber

from citewise.aws.bedrock_embeddings import CohereEmbedder, TitanEmbedder
from tests.conformance.botocore_calls import CallRecorder
from tests.conformance.invoke_model_schemas import COHERE_EMBED_V3, TITAN_TEXT_EMBEDDINGS_V2, schema_for

UNVALIDATED = Config(parameter_validation=False)


def unvalidated(service: str) -> Any:
    """A client that does not validate its own parameters: only the recorder's check can catch them."""
    return boto3.client(service, region_name="us-east-1", config=UNVALIDATED)


def invoke_response(payload: Any) -> dict[str, Any]:
    data = json.dumps(payload).encode()
    return {"body": StreamingBody(io.BytesIO(data), len(data)), "contentType": "application/json"}


def test_an_invalid_call_is_caught_with_the_operation_and_the_report(aws_credentials: None) -> None:
    client = unvalidated("dynamodb")
    with CallRecorder().recording() as recorder, Stubber(client) as stub:
        # Given a GetItem with no Key and a string for a boolean, which the client sends unchecked
        stub.add_response("get_item", {})
        client.get_item(TableName="registry", ConsistentRead="yes")
    # Then the check names the operation and says what botocore's validator says
    assert recorder.calls == ["dynamodb.GetItem"]
    [problem] = recorder.found
    assert problem.startswith("dynamodb.GetItem: ")
    assert 'Missing required parameter in input: "Key"' in problem
    assert "Invalid type for parameter ConsistentRead" in problem


def test_a_valid_call_passes_and_is_recorded(aws_credentials: None) -> None:
    client = unvalidated("sqs")
    with CallRecorder().recording() as recorder, Stubber(client) as stub:
        stub.add_response("send_message", {"MessageId": "1"})
        client.send_message(QueueUrl="https://sqs.us-east-1.amazonaws.com/1/q", MessageBody="{}", DelaySeconds=180)
    assert recorder.calls == ["sqs.SendMessage"]
    assert recorder.found == []


def test_a_client_used_before_records_into_the_recorder_open_now(aws_credentials: None) -> None:
    # A client used before (its handler already registered), as a module-level cached client would be
    client = unvalidated("sqs")
    with Stubber(client) as stub:
        stub.add_response("send_message", {"MessageId": "1"})
        client.send_message(QueueUrl="https://sqs.us-east-1.amazonaws.com/1/q", MessageBody="{}")
        stub.add_response("send_message", {"MessageId": "2"})
        with CallRecorder().recording() as recorder:
            client.send_message(QueueUrl="https://sqs.us-east-1.amazonaws.com/1/q")
    assert recorder.calls == ["sqs.SendMessage"]
    assert 'Missing required parameter in input: "MessageBody"' in recorder.found[0]


@pytest.mark.parametrize(
    ("model_id", "body", "problem"),
    [
        ("amazon.titan-embed-text-v2:0", {"inputText": "x", "dimensions": 768}, "768 is not one of"),
        ("amazon.titan-embed-text-v2:0", {"dimensions": 256}, '"inputText" is a required property'),
        ("amazon.titan-embed-text-v2:0", {"inputText": "x", "texts": ["x"]}, "Additional properties"),
        ("cohere.embed-english-v3", {"texts": ["x"] * 97, "input_type": "search_document"}, "has more than 96 items"),
        ("cohere.embed-multilingual-v3", {"texts": ["x" * 2049], "input_type": "search_query"}, "longer than 2048"),
        ("us.cohere.embed-english-v3", {"texts": ["x"], "input_type": "query"}, '"query" is not one of'),
    ],
)
def test_an_embedding_body_outside_its_model_page_is_caught(
    aws_credentials: None, model_id: str, body: dict[str, Any], problem: str
) -> None:
    client = unvalidated("bedrock-runtime")
    with CallRecorder().recording() as recorder, Stubber(client) as stub:
        stub.add_response("invoke_model", invoke_response({}))
        client.invoke_model(modelId=model_id, body=json.dumps(body))
    [found] = recorder.found
    assert found.startswith("bedrock-runtime.InvokeModel body: ")
    assert problem in found


def test_the_adapters_bodies_match_their_model_pages(aws_credentials: None) -> None:
    client = unvalidated("bedrock-runtime")
    titan = TitanEmbedder(dimension=512, client=client)
    cohere = CohereEmbedder(client=client)
    with CallRecorder().recording() as recorder, Stubber(client) as stub:
        stub.add_response("invoke_model", invoke_response({"embedding": [1.0] + [0.0] * 511, "inputTextTokenCount": 1}))
        stub.add_response("invoke_model", invoke_response({"embeddings": [[1.0] + [0.0] * 1023] * 2}))
        titan.embed_query("what is kept?")
        cohere.embed_documents(["one", "two"])
    assert recorder.calls == ["bedrock-runtime.InvokeModel"] * 2
    assert recorder.found == []


def test_model_ids_find_their_schema_through_profiles_and_arns() -> None:
    assert schema_for("amazon.titan-embed-text-v2:0") is TITAN_TEXT_EMBEDDINGS_V2
    assert schema_for("arn:aws:bedrock:us-east-1::foundation-model/amazon.titan-embed-text-v2:0") is (
        TITAN_TEXT_EMBEDDINGS_V2
    )
    assert schema_for("eu.cohere.embed-multilingual-v3") is COHERE_EMBED_V3
    assert schema_for("amazon.nova-lite-v1:0") is None
