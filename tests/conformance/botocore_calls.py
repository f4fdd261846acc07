"""Every botocore API call made during a test, as the adapter made it, checked against the service's own
model: botocore's `ParamValidator` over the operation's input shape, run here explicitly so a client built
with `parameter_validation=False`, or a double that answers before botocore would validate, is covered
too. Bedrock `InvokeModel` bodies of the embedding models are JSON the service model only knows as a blob;
they are checked against the request schemas of the AWS model-parameter pages (`invoke_model_schemas`).

A call is recorded on `before-parameter-build`, after boto3's high-level layers (the DynamoDB resource's
type serialisation runs on `provide-client-params`, earlier) and before any handler that fills in
parameters for the caller, so what is checked is what the adapter asked for.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import jsonschema_rs
from botocore.client import BaseClient
from botocore.model import OperationModel
from botocore.validate import ParamValidator

from tests.conformance.invoke_model_schemas import schema_for

_HANDLER_ID = "citewise-conformance-record-call"


@dataclass(frozen=True)
class Call:
    """One API call: the service, the operation and its parameters as the caller gave them."""

    service: str
    operation: OperationModel
    params: dict[str, Any]

    @property
    def name(self) -> str:
        return f"{self.service}.{self.operation.name}"


def problems(call: Call) -> list[str]:
    """What in `call` the service model (and, for an embedding InvokeModel, the model's page) rejects."""
    found: list[str] = []
    report = ParamValidator().validate(call.params, call.operation.input_shape)
    if report.has_errors():
        found.append(f"{call.name}: {report.generate_report()}")
    if call.operation.name == "InvokeModel":
        found += [f"{call.name} body: {problem}" for problem in _body_problems(call.params)]
    return found


def _body_problems(params: dict[str, Any]) -> list[str]:
    schema = schema_for(str(params.get("modelId", "")))
    if schema is None:
        return []
    try:
        body = json.loads(params.get("body", b""))
    except (TypeError, ValueError) as exc:
        return [f"not JSON: {exc}"]
    errors = jsonschema_rs.validator_for(schema).iter_errors(body)
    return ["/" + "/".join(map(str, error.instance_path)) + f": {error.message[-300:]}" for error in errors]


@dataclass
class CallRecorder:
    """The calls every botocore client made while `recording` was open, and what was wrong with them
    (checked at the call, before later handlers add their own parameters or a stream is read)."""

    calls: list[str] = field(default_factory=list)
    found: list[str] = field(default_factory=list)

    def record(self, call: Call) -> None:
        self.calls.append(call.name)
        self.found += problems(call)

    @contextmanager
    def recording(self) -> Iterator[CallRecorder]:
        """Record every call of every client, including clients created before (module-level, cached):
        each client gets the recording handler on its first call through `_make_api_call`."""
        global _current
        original: Callable[..., Any] = BaseClient._make_api_call

        def make_api_call(client: BaseClient, operation_name: str, api_params: dict[str, Any]) -> Any:
            client.meta.events.register_last("before-parameter-build", _record, unique_id=_HANDLER_ID)
            return original(client, operation_name, api_params)

        outer, _current = _current, self
        BaseClient._make_api_call = make_api_call  # type: ignore[method-assign]
        try:
            yield self
        finally:
            BaseClient._make_api_call = original  # type: ignore[method-assign]
            _current = outer


_current: CallRecorder | None = None


def _record(params: dict[str, Any], model: OperationModel, **_: Any) -> None:
    """The handler every client keeps once registered: it records into whichever recorder is open."""
    if _current is not None:
        _current.record(Call(model.service_model.service_id.hyphenize(), model, params))
