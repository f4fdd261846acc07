"""Ranking signals after fusion: freshness, source credibility and feedback, an optional and bounded re-scoring.

    final = fused * (1 - wf * (1 - freshness)) * (1 - wc * (1 - credibility)) * (1 - wb * (1 - effectiveness))

- freshness = 0.5 ** (age / half-life), the age of the chunk's `source_date` at request time (a document
  without one counts 0.5: neither fresh nor stale; a date in the future counts as now);
- credibility = the tenant's weight of the chunk's `source` (0-1), 1 for a source it does not list;
- effectiveness = how helpful the tenant's users found the chunk's source (`citewise.ports.feedback`):
  (helpful + prior/2) / (rated + prior), a Beta prior of `prior_votes` votes at 0.5, and 0.5 itself (as
  unknown as an undated chunk's freshness) until the source has `min_votes` ratings, so a few votes move
  nothing and many can move the score at most by the weight's share;
- wf, wc, wb in 0-1 (settings, overridden per tenant): 0 leaves the fused score untouched, 1 lets the signal
  scale it all the way (a stale or discredited chunk can drop to 0).

Multiplicative on purpose: each signal can only lower a score by at most its weight's share, so a fresh,
official but irrelevant chunk never climbs above a relevant one by its signals alone, and the final score
stays in 0-1 like the fused one (`min_score` keeps its meaning). With both weights 0 (the default) the
ranking is exactly the fused one, so retrieval metrics do not move unless a tenant turns signals on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TypeVar

from citewise.domain.tenant_settings import TenantSettings
from citewise.ports.feedback import SourceTally, source_key
from citewise.query.candidates import Candidate

_Number = TypeVar("_Number", int, float)
UNKNOWN_FRESHNESS = 0.5
UNKNOWN_EFFECTIVENESS = 0.5
_DAY_SECONDS = 86_400.0


@dataclass(frozen=True)
class FeedbackPrior:
    """How a source's tally becomes its effectiveness: a Beta prior of `prior_votes` votes at 0.5, and the
    volume below which the signal leaves the source at 0.5."""

    prior_votes: float = 4.0
    min_votes: int = 5

    def smoothed(self, tally: SourceTally) -> float:
        """(helpful + prior/2) / (rated + prior): the share pulled towards 0.5, the less so the more votes."""
        return (tally.helpful + self.prior_votes / 2) / (tally.rated + self.prior_votes)

    def effectiveness(self, tally: SourceTally | None) -> float:
        """`smoothed` once the source has `min_votes` ratings; UNKNOWN_EFFECTIVENESS before."""
        if tally is None or tally.rated < self.min_votes:
            return UNKNOWN_EFFECTIVENESS
        return self.smoothed(tally)


@dataclass(frozen=True)
class Signals:
    """The effective ranking signals of one request: the deployment's defaults with the tenant's overrides,
    and (when its weight is on) the tenant's feedback tallies per source."""

    freshness_weight: float = 0.0
    half_life_days: float = 180.0
    credibility_weight: float = 0.0
    credibility: Mapping[str, float] = field(default_factory=dict)
    feedback_weight: float = 0.0
    feedback_prior: FeedbackPrior = FeedbackPrior()
    feedback: Mapping[str, SourceTally] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return self.freshness_weight > 0 or self.credibility_weight > 0 or self.feedback_weight > 0

    def for_tenant(self, tenant: TenantSettings | None) -> Signals:
        """These defaults with what the tenant's settings state in their place."""
        if tenant is None:
            return self
        min_votes = _given(tenant.feedback_min_votes, self.feedback_prior.min_votes)
        return Signals(
            freshness_weight=_given(tenant.freshness_weight, self.freshness_weight),
            half_life_days=_given(tenant.freshness_half_life_days, self.half_life_days),
            credibility_weight=_given(tenant.credibility_weight, self.credibility_weight),
            credibility={**self.credibility, **tenant.source_credibility},
            feedback_weight=_given(tenant.feedback_weight, self.feedback_weight),
            feedback_prior=replace(self.feedback_prior, min_votes=min_votes),
            feedback=self.feedback,
        )


def _given(value: _Number | None, default: _Number) -> _Number:
    return default if value is None else value


def freshness(source_date: datetime | None, now: datetime, half_life_days: float) -> float:
    """0.5 ** (age in days / half-life), in (0, 1]; UNKNOWN_FRESHNESS without a date."""
    if source_date is None:
        return UNKNOWN_FRESHNESS
    moment = source_date if source_date.tzinfo is not None else source_date.replace(tzinfo=UTC)
    age_days = max(0.0, (now - moment).total_seconds() / _DAY_SECONDS)
    return float(0.5 ** (age_days / half_life_days))


def rescore(candidates: list[Candidate], signals: Signals, now: datetime) -> list[Candidate]:
    """Each candidate with its score components and `score` the final one, best final first (ties keep the
    fused order). Without active signals the candidates keep their order and score, and read no chunk;
    the components still say so."""
    if not signals.active:
        return [candidate._replace(fused=candidate.score) for candidate in candidates]
    scored = []
    for candidate in candidates:
        document = candidate.chunk.document
        fresh = freshness(document.source_date, now, signals.half_life_days)
        credible = signals.credibility.get(document.source, 1.0)
        effective = signals.feedback_prior.effectiveness(signals.feedback.get(source_key(document)))
        final = candidate.score * (1 - signals.freshness_weight * (1 - fresh))
        final *= 1 - signals.credibility_weight * (1 - credible)
        final *= 1 - signals.feedback_weight * (1 - effective)
        scored.append(
            candidate._replace(
                score=round(final, 6),
                fused=candidate.score,
                freshness=round(fresh, 6),
                credibility=credible,
                feedback=round(effective, 6) if signals.feedback_weight > 0 else None,
            )
        )
    return sorted(scored, key=lambda candidate: -candidate.score)
