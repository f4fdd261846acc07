"""One error hierarchy with stable codes: adapters raise these, one module maps them to HTTP.

Callers branch on the class (or `code`), never on message text; `details` carries structured context
that is safe to show the caller (never document text or secrets).
"""

from __future__ import annotations

from typing import Any, ClassVar


class CitewiseError(Exception):
    """Base of every error citewise raises on purpose."""

    code: ClassVar[str] = "INTERNAL_ERROR"
    http_status: ClassVar[int] = 500

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}

    def headers(self) -> dict[str, str]:
        """HTTP headers the error's response must carry besides the body (none by default)."""
        return {}

    def to_dict(self) -> dict[str, Any]:
        """The `error` object of an API response body (the request id is added by the caller)."""
        return {"code": self.code, "message": self.message, "details": self.details}


def error_body(error: Exception, request_id: str) -> tuple[int, dict[str, Any]]:
    """The HTTP status and body `{"error": {code, message, details, request_id}}` for any exception.

    A CitewiseError keeps its code and message; anything else is an INTERNAL_ERROR whose message says
    nothing of its cause (no stack trace, no internal text ever reaches a client).
    """
    known = error if isinstance(error, CitewiseError) else CitewiseError("an internal error occurred")
    return known.http_status, {"error": {**known.to_dict(), "request_id": request_id}}


class ValidationError(CitewiseError):
    """The input is malformed or violates a rule (bad key, bad filter, bad tenant id)."""

    code = "VALIDATION_ERROR"
    http_status = 400


class UnsupportedFilterError(ValidationError):
    """A filter operator the configured index cannot evaluate exactly (S3 Vectors has no substring
    operator, for one): a 400 for a caller's filter; a filter citewise builds itself (a pinned identifier)
    is left out instead. `details` names the operator, the key and the search mode."""


class UnauthorizedError(CitewiseError):
    """No usable identity came with the request."""

    code = "UNAUTHORIZED"
    http_status = 401


class ForbiddenError(CitewiseError):
    """The identity is known but may not do this."""

    code = "FORBIDDEN"
    http_status = 403


class NotFoundError(CitewiseError):
    """Nothing by that id is visible to the caller (whether or not it exists elsewhere)."""

    code = "NOT_FOUND"
    http_status = 404


class MethodNotAllowedError(CitewiseError):
    """The path names a resource that does not answer this method; `Allow` lists those it does."""

    code = "METHOD_NOT_ALLOWED"
    http_status = 405

    def __init__(self, method: str, allowed: tuple[str, ...]) -> None:
        super().__init__(
            f"{method} is not allowed here; use {', '.join(allowed)}",
            details={"method": method, "allowed": list(allowed)},
        )
        self.allowed = allowed

    def headers(self) -> dict[str, str]:
        return {"Allow": ", ".join(self.allowed)}


class ConflictError(CitewiseError):
    """A write lost to a newer one: the stored record moved on, so this work is superseded."""

    code = "CONFLICT"
    http_status = 409


class PreconditionFailedError(CitewiseError):
    """A conditional write found the object changed since the write was allowed (S3's 412)."""

    code = "PRECONDITION_FAILED"
    http_status = 412


class PayloadTooLargeError(CitewiseError):
    """A document or request exceeds a configured size or page limit."""

    code = "PAYLOAD_TOO_LARGE"
    http_status = 413


class UnsupportedMediaTypeError(ValidationError):
    """The document's format is not one citewise can parse."""

    code = "UNSUPPORTED_MEDIA_TYPE"
    http_status = 415


class ParseError(ValidationError):
    """The document claims a supported format but its bytes are corrupt or empty."""

    code = "PARSE_ERROR"
    http_status = 422


class ThrottledError(CitewiseError):
    """A backend asked us to slow down and retries did not help."""

    code = "THROTTLED"
    http_status = 429


class EmbeddingServiceError(CitewiseError):
    """The embedding model failed or answered something unusable."""

    code = "EMBEDDING_SERVICE_ERROR"
    http_status = 502


class SearchBackendError(CitewiseError):
    """The search index failed, or is inconsistent with the configured embedder."""

    code = "SEARCH_BACKEND_ERROR"
    http_status = 502


class GenerationError(CitewiseError):
    """The answer model failed or answered something unusable."""

    code = "GENERATION_ERROR"
    http_status = 502


class IngestDeferredError(CitewiseError):
    """An ingest stopped before the function's time ran out, its progress kept: retry the message.

    Raised between embedding batches of a long document when the invocation's budget
    (`citewise.domain.deadline`) could not fit another batch and the index write; the vectors embedded
    so far are staged (`VectorIndex.stage_vectors`), so the next attempt embeds only the rest."""

    code = "INGEST_DEFERRED"
    http_status = 503


class FunctionTimeoutError(CitewiseError):
    """A function did not answer within its timeout, and its work was stopped.

    Lambda stops an invocation at the function's timeout and API Gateway stops waiting at its
    integration timeout (29 s); `citewise serve` does both to its execution environments. The caller
    gets this instead of an answer that came too late to count.
    """

    code = "TIMEOUT"
    http_status = 504
