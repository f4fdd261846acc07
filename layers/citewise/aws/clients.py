"""Shared AWS plumbing for the adapters: one client configuration and one error translation.

Every adapter raises `CitewiseError`s, never botocore's: throttling becomes `ThrottledError` (a queue
retries it, the API answers 429), anything else the adapter's own backend error, chained with `from`
so the original stays in the logs.
"""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from citewise.domain.errors import CitewiseError, ThrottledError, ValidationError

THROTTLING_CODES = frozenset(
    {
        "ThrottlingException",
        "Throttling",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "SlowDown",
        "ServiceQuotaExceededException",
        "ModelNotReadyException",
    }
)


def client_config(*, max_attempts: int = 5, read_timeout: int = 60) -> Config:
    """Adaptive retries (client-side rate limiting plus backoff) and bounded timeouts for every client.

    `max_attempts` counts the first request too (botocore's `total_max_attempts`).
    """
    return Config(
        retries={"mode": "adaptive", "total_max_attempts": max_attempts},
        connect_timeout=5,
        read_timeout=read_timeout,
        user_agent_extra="citewise",
    )


def client(service: str, *, region: str | None = None, **config: int) -> Any:
    """A boto3 client with `client_config`; `region` None means the environment's region."""
    return boto3.client(service, region_name=region, config=client_config(**config))


def region() -> str:
    """The region the environment configures (AWS_REGION in a Lambda); a clear error if none."""
    name = boto3.session.Session().region_name
    if not name:
        raise ValidationError("no AWS region configured: set CITEWISE_AWS_REGION or AWS_REGION")
    return str(name)


def error_code(exc: ClientError) -> str:
    """The AWS error code of a ClientError ('' if absent)."""
    return str(exc.response.get("Error", {}).get("Code", ""))


def translate(exc: ClientError | BotoCoreError, backend: type[CitewiseError], action: str) -> CitewiseError:
    """The CitewiseError for a failed AWS call: ThrottledError for throttling, else `backend`."""
    if isinstance(exc, ClientError):
        code = error_code(exc)
        message = exc.response.get("Error", {}).get("Message", "") or str(exc)
        details = {"aws_error": code, "action": action}
        if code in THROTTLING_CODES:
            return ThrottledError(f"{action} was throttled: {message}", details=details)
        return backend(f"{action} failed: {code}: {message}", details=details)
    return backend(f"{action} failed: {type(exc).__name__}: {exc}", details={"action": action})
