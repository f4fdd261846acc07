"""The `stack` fixture: each handler test runs on the local stack and on the AWS adapters.

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
from tests.integration.handlers.harness import BUCKET, CurrentStdout, Stack
from tests.integration.handlers.iam import Names, RoleCheck

TABLE = "citewise-registry"
QUEUE = "citewise-ingest"
"""The ingest queue's name (the stack's queue; the Serverless sweeps are sent to it)."""


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


@pytest.fixture(params=["local", "aws"])
def stack(
    request: pytest.FixtureRequest, powertools: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Stack]:
    if request.param == "local":
        monkeypatch.setenv("CITEWISE_HOME", str(tmp_path / "home"))
        yield Stack("local")
        return
    request.getfixturevalue("aws_credentials")
    with aws_stack(monkeypatch, FakeOpenSearch()) as aws:
        yield aws


@contextmanager
def aws_stack(monkeypatch: pytest.MonkeyPatch, fake: FakeOpenSearch, **settings: str) -> Iterator[Stack]:
    """The AWS stack under moto with `fake` as OpenSearch, and these extra `CITEWISE_` settings; the
    functions' calls are held to their roles in the template of that configuration."""
    roles = RoleCheck(Names(table=TABLE, bucket=BUCKET, queue=QUEUE))
    with mock_aws(), running(fake) as opensearch:
        boto3.setup_default_session()  # moto starts without one; every client below is made from it
        roles.attach(boto3.DEFAULT_SESSION.events)
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        boto3.client("dynamodb", region_name="us-east-1").create_table(TableName=TABLE, **TABLE_SCHEMA)
        for name, value in {
            "BACKEND": "aws",
            "OPENSEARCH_ENDPOINT": opensearch.url,
            "REGISTRY_TABLE": TABLE,
            "DOCUMENTS_BUCKET": BUCKET,
            "AWS_REGION": "us-east-1",
            **settings,
        }.items():
            monkeypatch.setenv(f"CITEWISE_{name}", value)
        yield Stack("aws", s3=s3, opensearch=opensearch.fake, roles=roles)
