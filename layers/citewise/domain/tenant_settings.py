"""A tenant's own settings: ranking signals and routing vocabulary that override the deployment's defaults.

One document per tenant, kept in the registry (`DocumentRegistry.tenant_settings`), edited by a tenant
admin through `PUT /v1/settings` or `citewise settings set`. Every field is optional: an absent one means
"the deployment's default" (the `CITEWISE_RANKING_*` and `CITEWISE_ROUTING_*` settings), so a tenant
states only what it changes. Validation is here, once, so the API, the CLI and both registries refuse
the same values with the same message.
"""

from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Annotated, Any

from pydantic import Field, StringConstraints, field_validator

from citewise.domain.models import Frozen

# Numbers are strict: a JSON number (an integer is one), never a string such as "0.5" or a boolean, which
# pydantic would otherwise convert (`true` to 1.0): a setting that ranks every answer is typed on purpose.
Weight = Annotated[float, Field(ge=0.0, le=1.0, strict=True)]
SourceName = Annotated[str, StringConstraints(min_length=1, max_length=256)]
Phrase = Annotated[str, StringConstraints(min_length=1, max_length=100)]
MAX_ENTRIES = 200
"""Entries of the credibility table and of the aliases: a vocabulary, not a data store (and one item)."""


@cache
def time_zone_names() -> frozenset[str]:
    """The IANA time zone names a tenant may choose: those of python-dateutil's bundled database (in the
    Lambda layer), the same on every machine, so the OpenAPI document can list them. Loaded on first use
    (about 0.1 s): a cold start that reads no time zone pays nothing, not even for `tarfile`."""
    from dateutil.zoneinfo import get_zonefile_instance

    return frozenset(get_zonefile_instance().zones)


def known_time_zone(name: str) -> str:
    """`name` if it is one of `time_zone_names`, else ValueError: the one rule for the deployment's
    default (`CITEWISE_ROUTING_TIME_ZONE`) and a tenant's own, so a zone one accepts the other does too."""
    if name not in time_zone_names():
        raise ValueError(f"unknown time zone {name!r}: use an IANA name such as Europe/Berlin or UTC")
    return name


def _time_zone_enum(schema: dict[str, Any]) -> None:
    """The OpenAPI document lists the names (or null), so a client knows the rule without trying."""
    schema["enum"] = [*sorted(time_zone_names()), None]


class TenantSettings(Frozen):
    """What a tenant changes in ranking and routing; None (or absent) keeps the deployment's default."""

    freshness_weight: Weight | None = Field(
        default=None,
        description="0-1: how much freshness (age of `source_date`) scales the fused score; 0 turns it off.",
    )
    freshness_half_life_days: float | None = Field(
        default=None,
        gt=0,
        le=36_500,
        strict=True,
        description="Days after which a document's freshness is halved (> 0).",
    )
    credibility_weight: Weight | None = Field(
        default=None, description="0-1: how much the source's credibility scales the fused score; 0 turns it off."
    )
    source_credibility: dict[SourceName, Weight] = Field(
        default_factory=dict,
        max_length=MAX_ENTRIES,
        description='Source -> credibility in 0-1 (`{"handbook": 1, "community": 0.3}`); an unlisted source is 1.',
    )
    feedback_weight: Weight | None = Field(
        default=None,
        description="0-1: how much the helpfulness users gave a source's answers (POST /v1/feedback) scales the "
        "fused score; 0 turns it off.",
    )
    feedback_min_votes: int | None = Field(
        default=None,
        ge=1,
        le=10_000,
        strict=True,
        description="Ratings a source needs before the feedback signal moves its score.",
    )
    routing_aliases: dict[Phrase, SourceName] | None = Field(
        default=None,
        max_length=MAX_ENTRIES,
        description="Phrase -> source, added to the deployment's aliases (yours win on the same phrase).",
    )
    routing_time_zone: str | None = Field(
        default=None,
        description="IANA time zone dates in queries are read in (`Europe/Berlin`).",
        json_schema_extra=_time_zone_enum,
    )
    updated_at: datetime | None = Field(default=None, description="When the settings were last saved (set by the API).")
    updated_by: str | None = Field(default=None, description="Who saved them last (set by the API).")

    @field_validator("routing_time_zone")
    @classmethod
    def _known_time_zone(cls, value: str | None) -> str | None:
        return None if value is None else known_time_zone(value)
