"""Per-tenant settings: reading and saving the settings document (the API and the CLI), and the query
path's short-lived cache of it.

Every query needs its tenant's settings (ranking signals, routing vocabulary), and a registry read per
query would add a round trip to each one; settings change rarely, so each tenant's document is kept for
`ttl` seconds per process (a saved change applies within that time on every warm function). A failed
read never fails the query: the last value read is used (or the deployment's defaults), and it is
logged, because ranking signals are an optional refinement of a search that is otherwise complete.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Generic, TypeVar

from citewise.domain.access import require_admin, require_write
from citewise.domain.errors import CitewiseError
from citewise.domain.models import Caller
from citewise.domain.tenant_settings import TenantSettings
from citewise.ports.registry import DocumentRegistry

logger = logging.getLogger(__name__)

DEFAULT_TTL_SECONDS = 60.0
_Value = TypeVar("_Value")


class TenantSettingsCache(Generic[_Value]):
    """`cache(tenant_id)`: the tenant's settings (None: it has none), read through `read` at most once per
    `ttl` seconds per tenant. Any per-tenant value the query path reads on every request is cached alike
    (the feedback tallies of `citewise.ports.feedback`)."""

    def __init__(
        self,
        read: Callable[[str], _Value],
        *,
        ttl: float = DEFAULT_TTL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read = read
        self._ttl = ttl
        self._clock = clock
        self._entries: dict[str, tuple[float, _Value | None]] = {}
        self._lock = threading.Lock()

    def __call__(self, tenant_id: str) -> _Value | None:
        now = self._clock()
        with self._lock:
            cached = self._entries.get(tenant_id)
        if cached is not None and now - cached[0] < self._ttl:
            return cached[1]
        value: _Value | None
        try:
            value = self._read(tenant_id)
        except CitewiseError as exc:
            logger.warning("tenant settings unreadable, using the last known", extra={"code": exc.code})
            value = cached[1] if cached is not None else None
        with self._lock:
            self._entries[tenant_id] = (now, value)
        return value


def tenant_settings_of(registry: DocumentRegistry, caller: Caller) -> TenantSettings:
    """The caller's tenant's settings (empty when it saved none: every default applies)."""
    return registry.tenant_settings(caller.tenant_id) or TenantSettings()


def save_tenant_settings(
    registry: DocumentRegistry, caller: Caller, settings: TenantSettings, now: datetime
) -> TenantSettings:
    """Replace the tenant's settings, stamped with who saved them and when; admins only (ForbiddenError)."""
    require_write(caller)
    require_admin(caller, "change its settings")
    stamped = settings.model_copy(update={"updated_at": now, "updated_by": caller.user_id})
    registry.put_tenant_settings(caller.tenant_id, stamped)
    return stamped
