"""The `stack` fixture: each handler test runs on the local stack, on the AWS adapters with the real
OpenSearch node (`aws`, marked `opensearch`), and on the AWS adapters in search mode s3vectors
(`s3vectors`: the S3 Vectors double answers every `s3vectors` client the functions make); `aws-double`
puts the HTTP double in the node's place, for the tests that inject faults into OpenSearch or count its
requests.

On the AWS stack every AWS call a handler makes is held to its function's role in the synthesized
template (`tests.integration.handlers.iam`): a call the role does not allow fails the test.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from citewise.aws.dynamodb import TABLE_SCHEMA
from tests.doubles.opensearch_server import FakeOpenSearch, running
from tests.doubles.s3vectors import FakeS3Vectors
from tests.integration.handlers.cognito import UserPool
from tests.integration.handlers.harness import BUCKET, CurrentStdout, Stack
from tests.integration.handlers.iam import REGION, Names, RoleCheck
from tests.opensearch_node import NODE, fresh_index_name

TABLE = "citewise-registry"
QUEUE = "citewise-ingest"
"""The ingest queue's name (the stack's queue; the Serverless sweeps are sent to it)."""
ERASURE_QUEUE = "citewise-erasure"
"""The erasure function's queue: the operator's erasure starts there and the job re-queues itself there."""
REFRESH_QUEUE = "citewise-refresh"
"""The refresh function's queue: a web source's refresh runs there, one batch a message."""
AUDIT_LOG_GROUP = "citewise-audit"
"""The audit trail's log group (`citewise.aws.cloudwatch_audit`)."""
VECTOR_BUCKET = "citewise-dev-vectors"
"""Search mode s3vectors: the vector bucket (the stack's name for dev, which the roles' grants name)."""


@pytest.fixture
def powertools(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "Citewise")
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "citewise-test")
    monkeypatch.setenv("CITEWISE_EMBEDDER", "hashing")


@pytest.fixture(autouse=True)
def _logs_on_stdout(powertools: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Send the Powertools logger to the current stdout, so `capsys` sees logs beside the EMF metrics.

    Imported here, after `powertools` set the environment: the logger and metrics read their service
    name and namespace once, when `citewise.runtime.observability` is first imported, as at a cold start.
    """
    from citewise.runtime.observability import logger

    monkeypatch.setattr(logger.registered_handler, "stream", CurrentStdout())


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark `opensearch` every handler test on the AWS stack with the real node, whether it got that
    stack from the fixture's own parameters or from an indirect parametrization of its own."""
    here = Path(__file__).parent
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("stack") == "aws" and here in Path(item.path).parents:
            item.add_marker(pytest.mark.opensearch)


@pytest.fixture(params=["local", "aws", "s3vectors"])
def stack(
    request: pytest.FixtureRequest, powertools: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Stack]:
    if request.param == "local":
        monkeypatch.setenv("CITEWISE_HOME", str(tmp_path / "home"))
        yield Stack("local")
        return
    request.getfixturevalue("aws_credentials")
    if request.param == "s3vectors":
        with s3vectors_stack(monkeypatch) as aws:
            yield aws
        return
    with aws_stack(monkeypatch, FakeOpenSearch() if request.param == "aws-double" else None) as aws:
        yield aws


@contextmanager
def s3vectors_stack(monkeypatch: pytest.MonkeyPatch, **settings: str) -> Iterator[Stack]:
    """The AWS stack under moto in search mode s3vectors, with these extra `CITEWISE_` settings: the
    functions build their own `s3vectors` clients, which the double answers (moto 5.2 has no
    QueryVectors); the calls are held to the roles of the s3vectors template."""
    fake = FakeS3Vectors(region=REGION)
    fake.create_bucket(VECTOR_BUCKET)
    with _moto_stack(monkeypatch, {"VECTOR_BUCKET": VECTOR_BUCKET}, settings, vectors=fake) as aws:
        aws.vectors = fake
        yield aws


@contextmanager
def aws_stack(monkeypatch: pytest.MonkeyPatch, fake: FakeOpenSearch | None = None, **settings: str) -> Iterator[Stack]:
    """The AWS stack under moto, with these extra `CITEWISE_` settings, on a fresh index of the real
    OpenSearch node (deleted afterwards), or on `fake` when one is given; the functions' calls are held
    to their roles in the template of that configuration."""
    if fake is not None:
        with running(fake) as opensearch:
            index = {"OPENSEARCH_ENDPOINT": opensearch.url, "INDEX_NAME": "citewise-chunks"}
            with _moto_stack(monkeypatch, index, settings) as aws:
                aws.opensearch = opensearch.fake
                yield aws
        return
    client, name = NODE.client(), fresh_index_name()
    try:
        # the node is a one-node domain, as dev's: the stack tells the functions 0 replicas there
        index = {"OPENSEARCH_ENDPOINT": NODE.ensure(), "INDEX_NAME": name, "INDEX_REPLICAS": "0"}
        with _moto_stack(monkeypatch, index, settings) as aws:
            aws.search_index = (client, name)
            yield aws
    finally:
        client.indices.delete(index=name, ignore_unavailable=True)
        client.close()


@contextmanager
def _moto_stack(
    monkeypatch: pytest.MonkeyPatch,
    index: dict[str, str],
    settings: dict[str, str],
    vectors: FakeS3Vectors | None = None,
) -> Iterator[Stack]:
    """S3, DynamoDB, SQS and CloudWatch Logs under moto, the functions' settings for them, `index` (the
    settings of the chunk index) and `settings`; `vectors` answers the S3 Vectors calls, if given."""
    roles = RoleCheck(
        Names(table=TABLE, bucket=BUCKET, queue=QUEUE, erasure_queue=ERASURE_QUEUE, audit_log_group=AUDIT_LOG_GROUP)
    )
    with mock_aws():
        boto3.setup_default_session()  # moto starts without one; every client below is made from it
        roles.attach(boto3.DEFAULT_SESSION.events)
        if vectors is not None:
            vectors.attach(boto3.DEFAULT_SESSION.events)
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        boto3.client("dynamodb", region_name="us-east-1").create_table(TableName=TABLE, **TABLE_SCHEMA)
        erasure_queue = boto3.client("sqs", region_name="us-east-1").create_queue(QueueName=ERASURE_QUEUE)
        refresh_queue = boto3.client("sqs", region_name="us-east-1").create_queue(QueueName=REFRESH_QUEUE)
        boto3.client("logs", region_name="us-east-1").create_log_group(logGroupName=AUDIT_LOG_GROUP)
        for name, value in {
            "BACKEND": "aws",
            **index,
            "REGISTRY_TABLE": TABLE,
            "DOCUMENTS_BUCKET": BUCKET,
            "AUDIT_LOG_GROUP": AUDIT_LOG_GROUP,
            "AUDIT_HASH_KEY": "the-stack-generated-key",
            "AWS_REGION": "us-east-1",
            "ERASURE_QUEUE_URL": erasure_queue["QueueUrl"],
            "REFRESH_QUEUE_URL": refresh_queue["QueueUrl"],
            **settings,
        }.items():
            monkeypatch.setenv(f"CITEWISE_{name}", value)
        yield Stack("aws", s3=s3, roles=roles)


@pytest.fixture
def pool(stack: Stack, request: pytest.FixtureRequest) -> Iterator[UserPool]:
    """A user pool in moto: the AWS stack's mock already covers cognito-idp; the local stack needs one."""
    if stack.kind == "aws":
        yield UserPool.create()
        return
    request.getfixturevalue("aws_credentials")
    with mock_aws():
        yield UserPool.create()
