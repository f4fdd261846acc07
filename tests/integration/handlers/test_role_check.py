"""The role check the AWS stack applies to every handler call (`tests.integration.handlers.iam`) is not
vacuous: on the synthesized dev template it refuses what a role does not grant, including a grant whose
`kms:ViaService` names another service, and allows what it does."""

from __future__ import annotations

import pytest

from tests.integration.handlers.conftest import ERASURE_QUEUE, QUEUE, TABLE
from tests.integration.handlers.harness import BUCKET
from tests.integration.handlers.iam import (
    ACCOUNT,
    REGION,
    STORAGE_KEY_ID,
    Call,
    Deployment,
    Environment,
    Names,
    Request,
    denied_calls,
    deployment,
)

TABLE_ARN = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{TABLE}"
KEY_ARN = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/{STORAGE_KEY_ID}"


@pytest.fixture(scope="module")
def dev() -> Deployment:
    return deployment(Environment(), Names(table=TABLE, bucket=BUCKET, queue=QUEUE, erasure_queue=ERASURE_QUEUE))


@pytest.mark.parametrize(
    ("function", "request_", "allowed"),
    [
        ("documents", Request("dynamodb:UpdateItem", TABLE_ARN), True),
        ("documents", Request("dynamodb:PutItem", TABLE_ARN), False),
        ("documents", Request("dynamodb:Query", f"{TABLE_ARN}/index/by_path"), True),
        # The query role may Query the table for its quotas' and counters' attributes only, and delete only in
        # the conversation partitions; moto evaluates no `ForAllValues`/`IfExists` condition, so those limits
        # are asserted on the template (test_iam.py). It may scan nothing.
        ("query", Request("dynamodb:Scan", TABLE_ARN), False),
        ("documents", Request("s3:PutObject", f"arn:aws:s3:::{BUCKET}/tenants/acme/a.md"), True),
        ("documents", Request("s3:PutObject", f"arn:aws:s3:::{BUCKET}/elsewhere/a.md"), False),
        ("documents", Request("s3:PutObject", "arn:aws:s3:::other-bucket/tenants/acme/a.md"), False),
        ("query", Request("s3:GetObject", f"arn:aws:s3:::{BUCKET}/tenants/acme/a.md"), False),
        ("documents", Request("kms:GenerateDataKey", KEY_ARN, {"kms:ViaService": f"s3.{REGION}.amazonaws.com"}), True),
        ("documents", Request("kms:Decrypt", KEY_ARN, {"kms:ViaService": f"dynamodb.{REGION}.amazonaws.com"}), True),
        ("documents", Request("kms:Decrypt", KEY_ARN, {"kms:ViaService": f"sqs.{REGION}.amazonaws.com"}), False),
        ("ingest", Request("sqs:SendMessage", f"arn:aws:sqs:{REGION}:{ACCOUNT}:{QUEUE}"), False),
    ],
)
def test_a_role_allows_only_what_its_statements_grant(
    dev: Deployment, function: str, request_: Request, allowed: bool
) -> None:
    assert dev.allows(function, request_) is allowed


def test_a_refused_call_names_the_function_the_action_and_the_resource(dev: Deployment) -> None:
    # Given a call the documents role does not allow (a whole-item write of the registry)
    call = Call("documents", "dynamodb", "PutItem", {"TableName": TABLE, "Item": {}})
    # Then the check names it, with the key use DynamoDB makes on the caller's behalf allowed
    assert denied_calls(dev, [call]) == [f"documents function: dynamodb:PutItem on {TABLE_ARN} (for dynamodb PutItem)"]


def test_a_call_without_a_mapping_fails_rather_than_passing(dev: Deployment) -> None:
    with pytest.raises(NotImplementedError, match="bedrock-runtime"):
        denied_calls(dev, [Call("query", "bedrock-runtime", "Converse", {"modelId": "m"})])


def test_the_template_follows_the_functions_configuration() -> None:
    # Given the configuration of a Serverless collection with reranking on in another region
    names = Names(table=TABLE, bucket=BUCKET, queue=QUEUE, erasure_queue=ERASURE_QUEUE)
    environment = Environment.of(
        {"CITEWISE_OPENSEARCH_SERVICE": "aoss", "CITEWISE_RERANKER": "bedrock", "CITEWISE_RERANK_REGION": "us-west-2"}
    )
    assert environment == Environment(serverless=True, rerank_region="us-west-2")
    deploy = deployment(environment, names)
    # Then its template lets the ingest function queue its delayed sweeps, and the query function rerank
    assert deploy.allows("ingest", Request("sqs:SendMessage", f"arn:aws:sqs:{REGION}:{ACCOUNT}:{QUEUE}"))
    reranker = "arn:aws:bedrock:us-west-2::foundation-model/amazon.rerank-v1:0"
    assert deploy.allows("query", Request("bedrock:Rerank", "*"))
    assert deploy.allows("query", Request("bedrock:InvokeModel", reranker))
    # And the default one does neither
    dev = deployment(Environment(), names)
    assert not dev.allows("query", Request("bedrock:Rerank", "*"))
    assert not dev.allows("query", Request("bedrock:InvokeModel", reranker))
