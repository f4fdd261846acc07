"""The AuditLog port: one structured record per access to a tenant's data, and the Auditor that writes it.

A record says who (tenant, user, or the platform operator), did what (`action`), to which ids
(`resources`: the documents a read returned, the document changed), with what outcome (`ok` or the
error code the caller got), under which request id and when. It never holds document text. A question
(query, search, the MCP tools that take one) is kept only as `question_hash` unless the operator turns
full questions on (`CITEWISE_AUDIT_QUESTIONS=full`): see `question_hash` for why the hash is keyed.

The trail is append-only from the functions' side: the port writes and reads, it has no update or
delete (what erasing a tenant means for the trail: docs/operations.md, "Audit trail"). Each adapter passes
`tests/contract/test_audit_contract.py`.

`Auditor` is what the logic holds. Auditing must never fail or noticeably slow the request it records:
the access has happened (a read was answered, a document deleted), and refusing the answer because the
trail could not be written would turn a bookkeeping fault into an outage. But a record that cannot be
written must not vanish quietly either: the Auditor logs it at ERROR with the record's request id,
counts it (`failures`, and `on_failure`, which the functions wire to the `AuditWriteFailures` metric an
alarm watches), and goes on.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Literal, Protocol

from pydantic import Field

from citewise.domain.models import Frozen

logger = logging.getLogger(__name__)

Channel = Literal["rest", "mcp", "cli"]
QuestionMode = Literal["hash", "full"]
OK = "ok"
"""The `outcome` of an access that succeeded; any other outcome is the error code the caller got."""
MAX_RESOURCES = 100
"""Ids one record lists at most (a listing's page is at most 100 documents); more are cut, and counted."""


class AuditRecord(Frozen):
    """One access: who, what, which ids, the outcome, the request and the time. Never document text."""

    time: datetime = Field(description="When the access ended (UTC).")
    request_id: str = Field(description="API Gateway's request id (the MCP call's, the CLI's run id).")
    channel: Channel
    tenant_id: str | None = Field(
        description="The tenant whose data was accessed; None for an operator action on no tenant, or an "
        "identity that named none."
    )
    user_id: str | None = Field(description="Who: the tenant's user, or the operator's id; None if unknown.")
    operator: bool = Field(default=False, description="Whether `user_id` is the platform operator.")
    action: str = Field(description="What was done: `query`, `document.delete`, `mcp.search` ...")
    resources: list[str] = Field(
        default_factory=list, description="The ids read or changed: documents returned, the document deleted."
    )
    resources_omitted: int = Field(default=0, ge=0, description="Ids beyond MAX_RESOURCES, not listed.")
    outcome: str = Field(description="`ok`, or the error code the caller got (`FORBIDDEN`, `NOT_FOUND` ...).")
    question_hash: str | None = Field(
        default=None, description="`hmac-sha256:<hex>` of the normalised question (see `question_hash`)."
    )
    question: str | None = Field(default=None, description="The question itself, only with full questions on.")


class AuditQuery(Frozen):
    """Which records a reader wants; every field given narrows the result."""

    tenant_id: str | None = None
    user_id: str | None = None
    action: str | None = None
    start: datetime | None = Field(default=None, description="From this time (included).")
    end: datetime | None = Field(default=None, description="Up to this time (excluded).")

    def matches(self, record: AuditRecord) -> bool:
        """Whether `record` is one this query asks for (what an adapter filters with in memory)."""
        return (
            (self.tenant_id is None or record.tenant_id == self.tenant_id)
            and (self.user_id is None or record.user_id == self.user_id)
            and (self.action is None or record.action == self.action)
            and (self.start is None or record.time >= self.start)
            and (self.end is None or record.time < self.end)
        )


class AuditPage(Frozen):
    """One page of a trail, oldest first; pass `next_cursor` back (with the same query) for the next."""

    records: list[AuditRecord]
    next_cursor: str | None = None


class AuditLog(Protocol):
    """Where the trail lives: appended to by every function, read back by the operator."""

    def write(self, record: AuditRecord) -> None:
        """Append `record`; safe under parallel writers (threads, processes, function instances)."""
        ...

    def read(self, query: AuditQuery, *, limit: int, cursor: str | None = None) -> AuditPage:
        """At most `limit` records matching `query`, oldest first, from where `cursor` left off. A cursor
        is bound to the query's tenant: one issued for another tenant is VALIDATION_ERROR. A page may
        hold fewer than `limit` records and still have a next one."""
        ...


def question_hash(key: bytes, tenant_id: str | None, question: str) -> str:
    """`hmac-sha256:<hex>` of the tenant and the question with its case and spacing normalised.

    Keyed, not a bare SHA-256: questions are short and guessable, so a bare hash would let anyone who
    reads the trail confirm a guess ("did someone ask about the merger?") by hashing it. With a secret
    key (the deployment's, never in the trail) only its holder can, while equal questions still hash
    equal, so the operator can count repeats or check a reported question. The tenant is hashed with it,
    so the same question in two tenants cannot be linked. Normalised (case-folded, spaces collapsed) so
    that trivially different spellings of one question match.
    """
    normalised = " ".join(question.split()).casefold()
    message = f"{tenant_id or ''}\x00{normalised}".encode()
    return "hmac-sha256:" + hmac.new(key, message, hashlib.sha256).hexdigest()


class Auditor:
    """Writes the logic's audit records (see the module docstring): the time, the question's hash, and
    failures that are loud but never raised.

    `log` gives the adapter when first needed (None: record nothing, as where a function has no trail
    configured), inside the same guard as the write, so an adapter that cannot even be built fails no
    request either. `key` gives the question-hashing key, also on first use.
    """

    def __init__(
        self,
        log: Callable[[], AuditLog] | None,
        *,
        key: Callable[[], bytes] = lambda: b"",
        questions: QuestionMode = "hash",
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        on_failure: Callable[[], None] = lambda: None,
    ) -> None:
        self._log = log
        self._key = key
        self._questions = questions
        self._clock = clock
        self._on_failure = on_failure
        self.failures = 0
        """Records that could not be written since this Auditor was made."""

    @property
    def enabled(self) -> bool:
        """Whether records are written at all."""
        return self._log is not None

    def record(
        self,
        *,
        request_id: str,
        channel: Channel,
        action: str,
        tenant_id: str | None,
        user_id: str | None,
        operator: bool = False,
        outcome: str = OK,
        resources: Iterable[str] = (),
        question: str | None = None,
    ) -> None:
        """Write one access's record. Never raises: a failure is logged at ERROR and counted.

        Other parts (quotas, erasure, credentials) record their changes with this one call, e.g.
        `services.auditor.record(request_id=..., channel="rest", action="tenant.erase", tenant_id=t,
        user_id=operator.user_id, operator=True, outcome="ok")`.
        """
        if self._log is None:
            return
        try:
            ids = list(dict.fromkeys(resources))  # each id once, in the order met
            record = AuditRecord(
                time=self._clock().astimezone(UTC),
                request_id=request_id,
                channel=channel,
                tenant_id=tenant_id,
                user_id=user_id,
                operator=operator,
                action=action,
                resources=ids[:MAX_RESOURCES],
                resources_omitted=max(0, len(ids) - MAX_RESOURCES),
                outcome=outcome,
                question_hash=None if question is None else question_hash(self._key(), tenant_id, question),
                question=question if self._questions == "full" else None,
            )
            self._log().write(record)
        except Exception:  # noqa: BLE001 - never fail the access; loud instead (module docstring)
            self.failures += 1
            logger.error(
                "AUDIT RECORD NOT WRITTEN",
                exc_info=True,
                extra={"audit_action": action, "audit_tenant_id": tenant_id, "audit_request_id": request_id},
            )
            try:
                self._on_failure()
            except Exception:  # noqa: BLE001 - the counter is best effort; the error line is written
                logger.exception("could not count an audit failure")


UNAUDITED = Auditor(None)
"""An auditor that records nothing: the default of the logic (evaluation, benchmarks)."""
