"""The two adapters of a store kept in the registry table, for a contract suite's `store` fixture: the
local one on a SQLite file, or the DynamoDB one on a moto registry table."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol, TypeVar

import boto3
import pytest
from moto import mock_aws

from citewise.aws.dynamodb import TABLE_SCHEMA

TABLE = "citewise-documents"


class _Closing(Protocol):
    def close(self) -> None: ...


Local = TypeVar("Local", bound=_Closing)
Dynamo = TypeVar("Dynamo")


def local_or_dynamo(
    request: pytest.FixtureRequest, local: Callable[[], Local], dynamo: Callable[[Any], Dynamo]
) -> Iterator[Local | Dynamo]:
    """`local()` (closed after the test) when the fixture's param is "local", else `dynamo(client)` with
    the client of a fresh moto registry table named `TABLE`."""
    if request.param == "local":
        store = local()
        yield store
        store.close()
        return
    request.getfixturevalue("aws_credentials")
    with mock_aws():
        client = boto3.client("dynamodb")
        client.create_table(TableName=TABLE, **TABLE_SCHEMA)
        yield dynamo(client)
