"""Shared AWS plumbing for the adapters: one client configuration and one error translation.

Every adapter raises `CitewiseError`s, never botocore's: throttling becomes `ThrottledError` (a queue
retries it, the API answers 429), anything else the adapter's own backend error, chained with `from`
so the original stays in the logs.

Time: every client follows the invocation's budget (`citewise.domain.deadline`). A retry whose
back-off sleep (at most 2^(n-1) s before retry n) would leave less than `MIN_CALL_SECONDS` is not
made: the last failure (a throttling error, a read timeout) is raised as it is. Before each attempt the
read timeout is cut to the time left, through botocore's per-request `read_timeout` override; an attempt
with less than `MIN_CALL_SECONDS` left is not sent (`DeadlineExceeded`, which `translate` turns into
`ThrottledError` when the attempt before was throttled, else into the adapter's backend error). So a
slow or throttled Bedrock call inside the query function's 24 s ends as `THROTTLED` or
`GENERATION_ERROR`, never as API Gateway's 504.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from citewise.domain import deadline
from citewise.domain.errors import CitewiseError, ThrottledError, ValidationError

logger = logging.getLogger(__name__)

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
        "RequestThrottled",  # SQS
        # Bedrock's 503 "try again later": capacity, not a fault of the request.
        "ServiceUnavailableException",
        # The same two as error events of a ConverseStream response, named as its event stream names them.
        "throttlingException",
        "serviceUnavailableException",
    }
)
_LAST_FAILURE = "citewise_last_failure"


class DeadlineExceeded(BotoCoreError):  # type: ignore[misc]  # botocore ships no type hints
    """The invocation's time budget ran out before (another) attempt could be made."""

    fmt = "no time left in the function's budget for another attempt (last failure: {last})"


def client_config(*, max_attempts: int = 3, read_timeout: int = 60) -> Config:
    """Adaptive retries (client-side rate limiting plus backoff) and bounded timeouts for every client.

    `max_attempts` counts the first request too (botocore's `total_max_attempts`); the invocation's
    budget may cut both the attempts and the read timeout shorter (see the module doc).
    """
    return Config(
        retries={"mode": "adaptive", "total_max_attempts": max_attempts},
        connect_timeout=3,
        read_timeout=read_timeout,
        user_agent_extra="citewise",
    )


def client(service: str, *, region: str | None = None, **config: int) -> Any:
    """A boto3 client with `client_config`, following the invocation's time budget; `region` None means
    the environment's region."""
    made = boto3.client(service, region_name=region, config=client_config(**config))
    follow_deadline(made)
    return made


def session_client(service: str, credentials: Mapping[str, Any], *, region: str | None = None) -> Any:
    """`client(service)`, signing with `credentials` (STS's `Credentials`: AccessKeyId, SecretAccessKey,
    SessionToken) instead of the environment's: a tenant's read session (`citewise.aws.tenant_sessions`)."""
    made = boto3.client(
        service,
        region_name=region,
        config=client_config(),
        aws_access_key_id=credentials["AccessKeyId"],
        aws_secret_access_key=credentials["SecretAccessKey"],
        aws_session_token=credentials["SessionToken"],
    )
    follow_deadline(made)
    return made


def follow_deadline(aws_client: Any) -> None:
    """Make every attempt of `aws_client` fit the invocation's budget (see the module doc)."""
    service = aws_client.meta.service_model.service_id.hyphenize()
    # First on the service's own event: before botocore's retry handler, which would otherwise decide.
    aws_client.meta.events.register_first(f"needs-retry.{service}", _retry_fits)
    aws_client.meta.events.register("response-received", _remember_failure)
    # Last: after the adaptive rate limiter, which may sleep before sending.
    aws_client.meta.events.register_last("before-send", _fit_attempt)


def _retry_fits(attempts: int, **_: Any) -> bool | None:
    """False (no retry) when the back-off before the next attempt would leave it too little time;
    None lets botocore's retry handler decide."""
    left = deadline.remaining()
    if left is not None and left < deadline.MIN_CALL_SECONDS + 2 ** (attempts - 1):
        return False
    return None


def _remember_failure(context: dict[str, Any], exception: Exception | None, parsed_response: Any, **_: Any) -> None:
    """Keep what the last attempt failed with, for the error if the budget stops the next one."""
    if isinstance(exception, DeadlineExceeded):
        return
    if exception is not None:
        context[_LAST_FAILURE] = type(exception).__name__
    elif isinstance(parsed_response, dict) and "Error" in parsed_response:
        context[_LAST_FAILURE] = str(parsed_response["Error"].get("Code", ""))


def _fit_attempt(request: Any, **_: Any) -> None:
    """Cut this attempt's read timeout to the time left, or refuse to send it when too little is left."""
    left = deadline.remaining()
    if left is None:
        return
    context = request.context
    if left < deadline.MIN_CALL_SECONDS:
        raise DeadlineExceeded(last=context.get(_LAST_FAILURE, "none"))
    context["read_timeout"] = deadline.bounded(context["client_config"].read_timeout)


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
    """The CitewiseError for a failed AWS call: ThrottledError for throttling (also when the budget ran
    out after a throttled attempt), else `backend`.

    The error names the action and AWS's error code; AWS's own message goes to the log only. It can name
    the account, the function's role and its resources (`User: arn:aws:sts::123456789012:assumed-role/...
    is not authorized`), an endpoint's host, or a value of the request: nothing a caller may learn."""
    if isinstance(exc, DeadlineExceeded):
        last = str(exc.kwargs["last"])
        details = {"aws_error": last, "action": action}
        if last in THROTTLING_CODES:
            return ThrottledError(f"{action} was throttled until the time budget ran out", details=details)
        return backend(f"{action} did not finish in the function's time budget (last failure: {last})", details=details)
    if isinstance(exc, ClientError):
        code = error_code(exc)
        message = exc.response.get("Error", {}).get("Message", "") or str(exc)
        logger.warning("AWS call failed", extra={"action": action, "aws_error": code, "aws_message": message})
        details = {"aws_error": code, "action": action}
        if code in THROTTLING_CODES:
            return ThrottledError(f"{action} was throttled ({code})", details=details)
        return backend(f"{action} failed: {code}", details=details)
    failure = type(exc).__name__
    logger.warning("AWS call failed", extra={"action": action, "aws_error": failure, "aws_message": str(exc)})
    return backend(f"{action} failed: {failure}", details={"action": action})


def call(action: str, operation: Callable[[], Any]) -> dict[str, Any]:
    """The response of one AWS request (`operation()`), a failure `translate`d to a CitewiseError naming
    `action` (`"DynamoDB Query"`): what every adapter without error codes of its own does."""
    try:
        result: dict[str, Any] = operation()
        return result
    except (ClientError, BotoCoreError) as exc:
        raise translate(exc, CitewiseError, action) from exc
