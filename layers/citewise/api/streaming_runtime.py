"""A Lambda runtime loop that streams: the query function's, so `POST /v1/query` can answer as it writes.

The Python managed runtime returns a handler's whole result; only Node.js streams natively, and other
languages need a runtime speaking the Runtime API's streamed response mode (docs/aws.md, "Streamed answers
on AWS"). This is that runtime, on the managed Python runtime's own interpreter: the function's
`AWS_LAMBDA_EXEC_WRAPPER` (`citewise-stream-runtime` in the layer) starts it instead of AWS's loop.

For each invocation (`GET .../invocation/next`), it runs the function's `stream_handler` when the event is
a route that streams (`Route.streams`, the route API Gateway invokes with `ResponseTransferMode.STREAM`,
through `InvokeWithResponseStream`), and posts its bytes as they come, chunked, with
`Lambda-Runtime-Function-Response-Mode: streaming` and the `application/vnd.awslambda.http-integration-response`
type (the bytes start with the status and headers, then eight NUL bytes: `citewise.api.streaming`). A
failure after the first byte goes in the `Lambda-Runtime-Function-Error-Type` / `-Body` trailers. Any
other event runs `lambda_handler` and posts its result whole, as AWS's own loop does.

Only the standard library is used (`http.client`), so the loop adds nothing to the layer.
"""

from __future__ import annotations

import base64
import http.client
import importlib
import json
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from citewise.api.routes import match_route

API_VERSION = "2018-06-01"
STREAMED_TYPE = "application/vnd.awslambda.http-integration-response"
ERROR_TYPE, ERROR_BODY = "Lambda-Runtime-Function-Error-Type", "Lambda-Runtime-Function-Error-Body"

Handler = Callable[[dict[str, Any], Any], Any]


@dataclass
class Context:
    """The Lambda context object the handlers read (the attributes Powertools uses)."""

    aws_request_id: str
    invoked_function_arn: str
    deadline_ms: int
    function_name: str = field(default_factory=lambda: os.environ.get("AWS_LAMBDA_FUNCTION_NAME", ""))
    function_version: str = field(default_factory=lambda: os.environ.get("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST"))
    memory_limit_in_mb: int = field(default_factory=lambda: int(os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "0")))
    log_group_name: str = field(default_factory=lambda: os.environ.get("AWS_LAMBDA_LOG_GROUP_NAME", ""))
    log_stream_name: str = field(default_factory=lambda: os.environ.get("AWS_LAMBDA_LOG_STREAM_NAME", ""))

    def get_remaining_time_in_millis(self) -> int:
        return max(self.deadline_ms - int(time.time() * 1000), 0)


def streams(event: dict[str, Any]) -> bool:
    """Whether API Gateway invoked this event on a streamed route (so it expects the streamed format)."""
    matched = match_route(str(event.get("httpMethod", "")), str(event.get("resource", "")))
    return matched is not None and matched[0].streams


class RuntimeApi:
    """The Runtime API at `address` (`AWS_LAMBDA_RUNTIME_API`, host:port)."""

    def __init__(self, address: str) -> None:
        self.address = address

    def next(self) -> tuple[dict[str, Any], Context]:
        """The next event and its context (blocks until there is one)."""
        connection = http.client.HTTPConnection(self.address)
        try:
            connection.request("GET", f"/{API_VERSION}/runtime/invocation/next")
            response = connection.getresponse()
            event = json.loads(response.read())
            context = Context(
                aws_request_id=response.getheader("Lambda-Runtime-Aws-Request-Id", ""),
                invoked_function_arn=response.getheader("Lambda-Runtime-Invoked-Function-Arn", ""),
                deadline_ms=int(response.getheader("Lambda-Runtime-Deadline-Ms", "0")),
            )
            trace = response.getheader("Lambda-Runtime-Trace-Id")
        finally:
            connection.close()
        if trace:
            os.environ["_X_AMZN_TRACE_ID"] = trace  # where the X-Ray SDK reads the invocation's trace
        return event, context

    def respond(self, request_id: str, result: Any) -> None:
        """A whole (buffered) response."""
        self._post(f"/{API_VERSION}/runtime/invocation/{request_id}/response", json.dumps(result).encode())

    def fail(self, request_id: str | None, error: BaseException) -> None:
        """An invocation's error (before any byte of its response), or the init's without `request_id`."""
        path = "init/error" if request_id is None else f"invocation/{request_id}/error"
        self._post(f"/{API_VERSION}/runtime/{path}", json.dumps(_error(error)).encode(), _error_type(error))

    def stream(self, request_id: str, chunks: Iterable[bytes]) -> None:
        """A streamed response: each chunk as it comes; a failure part-way goes in the trailers."""
        connection = http.client.HTTPConnection(self.address)
        try:
            connection.putrequest("POST", f"/{API_VERSION}/runtime/invocation/{request_id}/response")
            connection.putheader("Lambda-Runtime-Function-Response-Mode", "streaming")
            connection.putheader("Content-Type", STREAMED_TYPE)
            connection.putheader("Transfer-Encoding", "chunked")
            connection.putheader("Trailer", f"{ERROR_TYPE}, {ERROR_BODY}")
            connection.endheaders()
            trailers = b""
            try:
                for chunk in chunks:
                    if chunk:
                        connection.send(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            except Exception as exc:  # noqa: BLE001 - reported to Lambda in the trailers, as the spec says
                traceback.print_exc()
                body = base64.b64encode(json.dumps(_error(exc)).encode()).decode()
                trailers = f"{ERROR_TYPE}: {_error_type(exc)}\r\n{ERROR_BODY}: {body}\r\n".encode()
            connection.send(b"0\r\n" + trailers + b"\r\n")
            connection.getresponse().read()
        finally:
            connection.close()

    def _post(self, path: str, body: bytes, error_type: str | None = None) -> None:
        connection = http.client.HTTPConnection(self.address)
        try:
            headers = {"Content-Type": "application/json"} | ({ERROR_TYPE: error_type} if error_type else {})
            connection.request("POST", path, body, headers)
            connection.getresponse().read()
        finally:
            connection.close()


def invoke_once(api: RuntimeApi, handler: Handler, stream_handler: Callable[..., Iterator[bytes]]) -> None:
    """Serve one invocation (see the module docstring)."""
    event, context = api.next()
    try:
        result = stream_handler(event, context) if streams(event) else handler(event, context)
    except Exception as exc:  # noqa: BLE001 - reported to Lambda, which records the invocation as failed
        traceback.print_exc()
        api.fail(context.aws_request_id, exc)
        return
    if streams(event):
        api.stream(context.aws_request_id, result)
    else:
        api.respond(context.aws_request_id, result)


def main() -> None:
    """Load the handler named by `_HANDLER` (`handler.lambda_handler`) and its module's `stream_handler`,
    then serve invocations until Lambda ends the environment."""
    api = RuntimeApi(os.environ["AWS_LAMBDA_RUNTIME_API"])
    try:
        module_name, _, name = os.environ["_HANDLER"].rpartition(".")
        module = importlib.import_module(module_name)
        handler, stream_handler = getattr(module, name), module.stream_handler
    except Exception as exc:  # noqa: BLE001 - an init failure is Lambda's to report
        traceback.print_exc()
        api.fail(None, exc)
        sys.exit(1)
    while True:
        invoke_once(api, handler, stream_handler)


def _error(error: BaseException) -> dict[str, Any]:
    """The error document Lambda records (its message only: no stack trace leaves the function)."""
    return {"errorMessage": str(error), "errorType": type(error).__name__}


def _error_type(error: BaseException) -> str:
    return f"Runtime.{type(error).__name__}"


if __name__ == "__main__":
    main()
