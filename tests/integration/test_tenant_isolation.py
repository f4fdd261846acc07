"""Isolation by resource in search mode s3vectors, proved on the synthesized template (issue 28, section 3).

IAM allows a role session what both the role's policies and the session's inline policy allow. The
tenant-reader role's policy is read from the real CDK app synthesized with `search.mode: s3vectors`
(intrinsics resolved to the names below); the session policy is the one `TenantSessions` sends to STS;
moto's policy engine evaluates both (`tests/integration/handlers/iam.py`, `session_allows`).

Then end to end: the S3 Vectors adapter reads on clients of real session credentials (moto's STS), and
every S3 Vectors request they make is allowed or refused as IAM would, from the template's role policy
and the policy STS recorded for those credentials, before the double answers it. Tenant A's client asked
for tenant B's index is refused, however the code came to ask.
"""

from __future__ import annotations

import copy
import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.sts.models import sts_backends

from citewise.aws import clients
from citewise.aws.s3vectors import S3VectorsIndex
from citewise.aws.s3vectors_requests import index_name
from citewise.aws.tenant_sessions import READ_ACTIONS, TenantSessions, bucket_arn, session_policy
from citewise.domain.errors import SearchBackendError
from citewise.domain.models import Caller
from tests.contract.test_index_contract import DIMENSION, EMBEDDER, make_chunk, put
from tests.doubles.s3vectors import FakeS3Vectors
from tests.integration.handlers.iam import (
    ACCOUNT,
    PARTITION,
    REGION,
    Deployment,
    Request,
    policies_allow,
    s3vectors_requests,
    session_allows,
)

BUCKET = "citewise-dev-vectors"
BUCKET_ARN = bucket_arn(PARTITION, REGION, ACCOUNT, BUCKET)
READER_ARN = f"arn:{PARTITION}:iam::{ACCOUNT}:role/citewise-dev-tenant-reader"
KEY_ARN = f"arn:{PARTITION}:kms:{REGION}:{ACCOUNT}:key/11111111-2222-3333-4444-555555555555"
VIA_S3VECTORS = {"kms:ViaService": f"s3vectors.{REGION}.amazonaws.com"}
WRITES = ("PutVectors", "DeleteVectors", "CreateIndex", "DeleteIndex")


def index_arn(tenant_id: str, bucket: str = BUCKET_ARN) -> str:
    return f"{bucket}/index/{index_name(tenant_id)}"


@dataclass(frozen=True)
class Template:
    """The synthesized s3vectors stack: the reader role's policies and the functions' roles, resolved."""

    deploy: Deployment

    @property
    def reader(self) -> list[dict[str, Any]]:
        return self.deploy.policies("tenant_reader")

    def session(self, tenant_id: str) -> dict[str, Any]:
        """The session policy `TenantSessions` sends for `tenant_id` (in this template's region)."""
        return json.loads(session_policy(index_arn(tenant_id), REGION))  # type: ignore[no-any-return]

    def allows(self, tenant_id: str, request: Request) -> bool:
        return session_allows(self.reader, self.session(tenant_id), request)


@pytest.fixture(scope="module")
def template() -> Template:
    from tests.infrastructure.conftest import synthesize

    account = os.environ.pop("CDK_DEFAULT_ACCOUNT", None)
    try:
        with tempfile.TemporaryDirectory(prefix="citewise-synth-") as outdir:
            synth = synthesize(Path(outdir), "dev", {"search": {"mode": "s3vectors"}})
    finally:
        if account is not None:
            os.environ["CDK_DEFAULT_ACCOUNT"] = account
    stack = synth.stack
    functions = stack.functions
    role_ids = {
        "tenant_reader": synth.logical_id(stack.tenant_reader.role),
        "query": synth.logical_id(functions.query.role),
        "mcp": synth.logical_id(functions.mcp.role),
        "documents": synth.logical_id(functions.documents.role),
    }
    physical = {
        stack.get_logical_id(stack.vectors.bucket): {"VectorBucketArn": BUCKET_ARN},
        synth.logical_id(stack.storage.key): {"Arn": KEY_ARN},
        role_ids["tenant_reader"]: {"Arn": READER_ARN},
    }
    return Template(Deployment(template=synth.template, role_ids=role_ids, physical=physical))


# --- the policy evaluation ----------------------------------------------------------------------------------


@pytest.mark.parametrize("action", READ_ACTIONS)
def test_a_tenants_session_may_read_its_own_index(template: Template, action: str) -> None:
    assert template.allows("acme", Request(action, index_arn("acme")))


@pytest.mark.parametrize("action", READ_ACTIONS)
def test_a_tenants_session_may_not_read_another_tenants_index(template: Template, action: str) -> None:
    # The role alone would allow it: what fences the tenant is the session policy.
    assert policies_allow(template.reader, Request(action, index_arn("globex")))
    assert not template.allows("acme", Request(action, index_arn("globex")))
    assert not template.allows("Acme", Request(action, index_arn("acme")))  # tenant ids are case-sensitive


@pytest.mark.parametrize("operation", WRITES)
def test_no_session_may_write_anywhere(template: Template, operation: str) -> None:
    for tenant_id, target in (("acme", "acme"), ("acme", "globex")):
        assert not template.allows(tenant_id, Request(f"s3vectors:{operation}", index_arn(target)))
        assert not policies_allow(template.reader, Request(f"s3vectors:{operation}", index_arn(target)))


def test_a_session_may_not_read_an_index_of_the_same_name_in_another_bucket(template: Template) -> None:
    other = bucket_arn(PARTITION, REGION, ACCOUNT, "someone-elses-vectors")
    assert not template.allows("acme", Request("s3vectors:QueryVectors", index_arn("acme", other)))
    assert not template.allows("acme", Request("s3vectors:GetVectorBucket", BUCKET_ARN))
    assert not template.allows("acme", Request("s3vectors:ListIndexes", BUCKET_ARN))


def test_a_session_decrypts_with_the_buckets_key_only_through_s3_vectors(template: Template) -> None:
    assert template.allows("acme", Request("kms:Decrypt", KEY_ARN, VIA_S3VECTORS))
    via_s3 = {"kms:ViaService": f"s3.{REGION}.amazonaws.com"}
    assert not template.allows("acme", Request("kms:Decrypt", KEY_ARN, via_s3))
    other_key = KEY_ARN.replace("11111111", "99999999")
    assert not template.allows("acme", Request("kms:Decrypt", other_key, VIA_S3VECTORS))


@pytest.mark.parametrize("function", ["query", "mcp"])
def test_the_reading_functions_reach_the_indexes_only_through_the_reader_role(
    template: Template, function: str
) -> None:
    deploy = template.deploy
    for action in (*READ_ACTIONS, *(f"s3vectors:{op}" for op in WRITES)):
        assert not deploy.allows(function, Request(action, index_arn("acme")))
    assert deploy.allows(function, Request("sts:AssumeRole", READER_ARN))
    assert not deploy.allows("documents", Request("sts:AssumeRole", READER_ARN))  # not a reader


def test_the_reader_role_is_trusted_by_the_reading_functions_only(template: Template) -> None:
    deploy = template.deploy
    role = deploy.resources[deploy.role_ids["tenant_reader"]]["Properties"]
    [statement] = role["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Action"] == "sts:AssumeRole"  # no sts:TagSession: no session tags are used
    trusted = {principal["Fn::GetAtt"][0] for principal in statement["Principal"]["AWS"]}
    assert trusted == {deploy.role_ids["query"], deploy.role_ids["mcp"]}


# --- end to end: the adapter's reads on real session credentials, held to IAM's answer -------------------


@dataclass
class Enforcing:
    """Makes the reading clients: on session credentials, served by the double, refused as IAM would."""

    fake: FakeS3Vectors
    reader: list[dict[str, Any]]
    refused: list[Request]

    def make_client(self, credentials: Any) -> Any:
        client = clients.session_client("s3vectors", credentials, region=REGION)
        self.fake.attach(client.meta.events)
        access_key = credentials["AccessKeyId"]

        def keep(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
            context["iam_params"] = copy.deepcopy(params)

        def authorize(model: Any, context: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
            session = sts_backends[ACCOUNT]["global"].get_assumed_role_from_access_key(access_key)
            assert session is not None and session.role_arn == READER_ARN
            for request in s3vectors_requests(model.name, context["iam_params"]):
                if not session_allows(self.reader, json.loads(session.policy), request):
                    self.refused.append(request)
                    message = f"{session.session_name} is not authorized to perform {request}"
                    body = {"Error": {"Code": "AccessDeniedException", "Message": message}}
                    return AWSResponse(None, 403, {}, None), {**body, "ResponseMetadata": {"HTTPStatusCode": 403}}
            return None

        client.meta.events.register("before-parameter-build.s3vectors.*", keep)
        client.meta.events.register_first("before-call.s3vectors.*", authorize)
        return client


@dataclass
class Deployed:
    """The double holding both tenants' chunks, written on a writer's own client; the reading sessions."""

    own_client: Any  # a writing function's client, on its own role
    sessions: TenantSessions
    enforcing: Enforcing


@pytest.fixture
def deployed(template: Template, aws_credentials: None) -> Iterator[Deployed]:
    assert ACCOUNT == DEFAULT_ACCOUNT_ID  # moto's STS issues the sessions in its default account
    with mock_aws():
        fake = FakeS3Vectors()
        fake.create_bucket(BUCKET)
        own_client = fake.client()
        own = S3VectorsIndex(own_client, BUCKET)
        own.ensure(EMBEDDER.name, DIMENSION)
        put(own, make_chunk("acme", "plan", 0, "the walnut harvest plan of acme"))
        put(own, make_chunk("globex", "plan", 0, "the walnut harvest plan of globex"))
        enforcing = Enforcing(fake, template.reader, [])
        sts = boto3.client("sts", region_name=REGION)
        sessions = TenantSessions(sts, READER_ARN, BUCKET, region=REGION, make_client=enforcing.make_client)
        yield Deployed(own_client, sessions, enforcing)


ALICE = Caller(tenant_id="acme", user_id="alice")
BOB = Caller(tenant_id="globex", user_id="bob")


def test_each_tenant_reads_its_own_index_through_its_session(deployed: Deployed) -> None:
    index = S3VectorsIndex(deployed.own_client, BUCKET, reader=deployed.sessions.client)
    for caller in (ALICE, BOB):
        found = index.keyword_search(caller, "walnut harvest", None, 10)
        assert [hit.chunk.document.tenant_id for hit in found] == [caller.tenant_id]
        vectors = index.vector_search(caller, EMBEDDER.embed_query("walnut harvest"), None, 10)
        assert {hit.chunk.document.tenant_id for hit in vectors} == {caller.tenant_id}
    assert deployed.enforcing.refused == []


def test_code_asking_for_tenant_bs_index_with_tenant_as_session_is_refused(deployed: Deployed) -> None:
    # Given code that hands every tenant's reads tenant A's client (the bug the filter alone could not stop)
    wrong = S3VectorsIndex(deployed.own_client, BUCKET, reader=lambda _tenant_id: deployed.sessions.client("acme"))
    # When it reads as a caller of tenant B
    with pytest.raises(SearchBackendError) as raised:
        wrong.keyword_search(BOB, "walnut harvest", None, 10)
    # Then IAM refused it, on B's index, and nothing of B's was read
    assert raised.value.details["aws_error"] == "AccessDeniedException"
    assert {request.resource for request in deployed.enforcing.refused} == {index_arn("globex")}


@pytest.mark.parametrize(
    ("operation", "params"),
    [
        ("query_vectors", {"topK": 10, "queryVector": {"float32": [1.0] * DIMENSION}, "returnMetadata": True}),
        ("list_vectors", {"returnMetadata": True}),
        ("get_vectors", {"keys": ["c:globex-plan-00000"], "returnMetadata": True}),
        ("get_index", {}),
    ],
)
def test_tenant_as_client_is_refused_every_read_of_tenant_bs_index(
    deployed: Deployed, operation: str, params: dict[str, Any]
) -> None:
    client = deployed.sessions.client("acme")
    with pytest.raises(ClientError) as raised:
        getattr(client, operation)(vectorBucketName=BUCKET, indexName=index_name("globex"), **params)
    assert raised.value.response["Error"]["Code"] == "AccessDeniedException"
    getattr(client, operation)(vectorBucketName=BUCKET, indexName=index_name("acme"), **params)  # its own: allowed


def test_a_tenants_session_cannot_write_even_its_own_index(deployed: Deployed) -> None:
    client = deployed.sessions.client("acme")
    with pytest.raises(ClientError) as raised:
        client.delete_vectors(vectorBucketName=BUCKET, indexName=index_name("acme"), keys=["c:acme-plan-00000"])
    assert raised.value.response["Error"]["Code"] == "AccessDeniedException"
