"""Ranking signals after fusion (`citewise.query.ranking`) and the per-tenant settings cache
(`citewise.query.tenant_config`): bounded, off by default, overridden per tenant, and never a failed query."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from citewise.domain.errors import ThrottledError
from citewise.domain.models import Caller, SearchRequest
from citewise.domain.tenant_settings import TenantSettings, time_zone_names
from citewise.ports.index import ScoredChunk
from citewise.ports.router import Route, RoutingContext
from citewise.query.candidates import Candidate
from citewise.query.ranking import UNKNOWN_FRESHNESS, Signals, freshness, rescore
from citewise.query.retrieval import Retriever, RoutingOptions
from citewise.query.tenant_config import TenantSettingsCache
from citewise.runtime.services import Services
from citewise.runtime.settings import Settings
from tests.factories import hit

NOW = datetime(2026, 3, 11, 12, tzinfo=UTC)


def _hit(number: int, score: float, *, source: str, age_days: float | None) -> Candidate:
    base = hit(number, f"chunk {number}")
    dated = None if age_days is None else NOW - timedelta(days=age_days)
    document = base.chunk.document.model_copy(update={"source": source, "source_date": dated})
    chunk = base.chunk.model_copy(update={"document": document})
    return Candidate(ScoredChunk(chunk, score), score, relevance_score=0.5)


def test_freshness_halves_every_half_life_and_is_neutral_without_a_date() -> None:
    assert freshness(NOW, NOW, 30) == 1.0
    assert freshness(NOW - timedelta(days=30), NOW, 30) == pytest.approx(0.5)
    assert freshness(NOW - timedelta(days=90), NOW, 30) == pytest.approx(0.125)
    assert freshness(NOW + timedelta(days=3), NOW, 30) == 1.0  # a future date counts as now
    assert freshness(None, NOW, 30) == UNKNOWN_FRESHNESS


def test_signals_off_keep_the_fused_order_and_scores() -> None:
    hits = [_hit(1, 0.9, source="community", age_days=900), _hit(2, 0.8, source="handbook", age_days=1)]
    ranked = rescore(hits, Signals(), NOW)
    assert [(h.chunk.document.doc_id, h.score) for h in ranked] == [("d1", 0.9), ("d2", 0.8)]
    assert all(h.components is not None and h.components.freshness is None for h in ranked)


def test_signals_reorder_by_freshness_and_credibility_within_bounds() -> None:
    # Given a stale community note fused first and a fresh official document second
    hits = [_hit(1, 0.9, source="community", age_days=900), _hit(2, 0.8, source="handbook", age_days=1)]
    signals = Signals(freshness_weight=0.5, half_life_days=90, credibility_weight=0.5, credibility={"community": 0.2})
    # When re-scored
    ranked = rescore(hits, signals, NOW)
    # Then the official one is first, and each score is fused x (1 - w (1 - signal)) per signal
    assert [h.chunk.document.doc_id for h in ranked] == ["d2", "d1"]
    official, note = (h.components for h in ranked)
    assert official is not None and note is not None
    assert official.credibility == 1.0 and note.credibility == 0.2
    expected = 0.9 * (1 - 0.5 * (1 - 0.5 ** (900 / 90))) * (1 - 0.5 * (1 - 0.2))
    assert note.final == pytest.approx(expected, abs=1e-6) and ranked[1].score == note.final
    # And no signal can take a score above its fused score or below (1 - w) of it per signal
    for item in (official, note):
        assert 0.25 * item.fused - 1e-6 <= item.final <= item.fused


def test_weight_one_lets_a_signal_scale_all_the_way() -> None:
    (only,) = rescore(
        [_hit(1, 0.8, source="spam", age_days=0)], Signals(credibility_weight=1.0, credibility={"spam": 0}), NOW
    )
    assert only.score == 0.0


def test_tenant_settings_override_the_defaults_field_by_field() -> None:
    defaults = Signals(freshness_weight=0.2, half_life_days=180, credibility={"wiki": 0.5})
    tenant = TenantSettings(credibility_weight=0.4, source_credibility={"community": 0.3})
    merged = defaults.for_tenant(tenant)
    assert merged == Signals(
        freshness_weight=0.2, half_life_days=180, credibility_weight=0.4, credibility={"wiki": 0.5, "community": 0.3}
    )
    assert defaults.for_tenant(TenantSettings(freshness_weight=0.0)).active is False
    assert defaults.for_tenant(None) is defaults


@pytest.mark.parametrize(
    "bad",
    [
        {"freshness_weight": 1.01},
        {"credibility_weight": -0.1},
        {"freshness_half_life_days": 0},
        {"source_credibility": {"x": 2}},
        {"routing_time_zone": "Nowhere/Atlantis"},
        {"routing_aliases": {"": "jira"}},
        {"unknown": 1},
    ],
)
def test_invalid_tenant_settings_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        TenantSettings.model_validate(bad)


def test_the_cache_reads_each_tenant_once_per_ttl_and_survives_a_failed_read() -> None:
    clock = [0.0]
    reads: list[str] = []
    stored = {"acme": TenantSettings(freshness_weight=0.5)}
    failing = {"fail": False}

    def read(tenant_id: str) -> TenantSettings | None:
        reads.append(tenant_id)
        if failing["fail"]:
            raise ThrottledError("DynamoDB GetItem was throttled")
        return stored.get(tenant_id)

    cache = TenantSettingsCache(read, ttl=60, clock=lambda: clock[0])
    assert cache("acme") == stored["acme"] and cache("acme") == stored["acme"] and cache("beta") is None
    assert reads == ["acme", "beta"]
    # After the TTL a change is read; a failed read keeps the last value instead of failing the query
    stored["acme"] = TenantSettings(freshness_weight=0.9)
    clock[0] = 61
    assert cache("acme") == TenantSettings(freshness_weight=0.9)
    failing["fail"], clock[0] = True, 130
    assert cache("acme") == TenantSettings(freshness_weight=0.9) and cache("other") is None
    assert reads == ["acme", "beta", "acme", "acme", "other"]


def test_a_tenants_time_zone_and_aliases_override_the_routing_defaults(services: Services) -> None:
    # Given deployment defaults, and a tenant that sets its own time zone and one alias
    seen: list[RoutingContext] = []

    class Recording:
        name = "recording"

        def route(self, query: str, context: RoutingContext) -> Route:
            seen.append(context)
            return Route(text=query, router=self.name)

    tenants = {"acme": TenantSettings(routing_time_zone="Asia/Tokyo", routing_aliases={"wiki": "notion"})}
    options = RoutingOptions(
        router=Recording(), time_zone="Europe/Berlin", aliases={"wiki": "confluence", "chat": "slack"}
    )
    retriever = Retriever(services.index, services.embedder, routing=options, tenant_settings=tenants.get)
    # When each tenant searches
    for tenant in ("acme", "beta"):
        retriever.retrieve(Caller(tenant_id=tenant, user_id="alice"), SearchRequest(query="anything"))
    # Then the tenant's values win where it sets them, the defaults apply elsewhere
    acme, beta = seen
    assert (acme.time_zone, dict(acme.sources)) == ("Asia/Tokyo", {"wiki": "notion", "chat": "slack"})
    assert (beta.time_zone, dict(beta.sources)) == ("Europe/Berlin", {"wiki": "confluence", "chat": "slack"})


@pytest.mark.parametrize("zone", ["Europe/Berlin", "UTC", "UTC+3", "Mars/Olympus"])
def test_the_deployment_default_and_a_tenant_accept_the_same_time_zones(zone: str) -> None:
    """One rule for both (the names of dateutil's bundled database): `UTC+3`, a POSIX string `tz.gettz`
    would take, is refused by both, so a zone that works as a default also works for a tenant."""

    def accepted(make: Callable[[], object]) -> bool:
        try:
            make()
        except ValidationError:
            return False
        return True

    deployment = accepted(lambda: Settings(routing_time_zone=zone))
    tenant = accepted(lambda: TenantSettings(routing_time_zone=zone))
    assert deployment == tenant == (zone in {"Europe/Berlin", "UTC"})


def test_the_default_time_zone_is_a_known_one_though_settings_do_not_check_it() -> None:
    """Settings skip validating the default zone (it would load the zone database at every cold start),
    so the default itself must pass the rule a configured zone is held to."""
    time_zone_names.cache_clear()
    assert Settings().routing_time_zone == "UTC"
    assert time_zone_names.cache_info().misses == 0
    assert Settings.model_fields["routing_time_zone"].default in time_zone_names()
