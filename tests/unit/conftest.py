"""Fixtures of the unit tests: a real Bedrock runtime client answered by botocore's Stubber."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber


@pytest.fixture
def client(aws_credentials: None) -> Any:
    """A `bedrock-runtime` client with fake credentials: the Stubber answers before any network."""
    return boto3.client("bedrock-runtime", region_name="us-east-1")


@pytest.fixture
def stub(client: Any) -> Iterator[Stubber]:
    """Queue expected requests and their responses; every queued response must be used."""
    with Stubber(client) as stubber:
        yield stubber
        stubber.assert_no_pending_responses()
