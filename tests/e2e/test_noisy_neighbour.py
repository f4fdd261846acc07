"""A noisy neighbour on `citewise serve`: tenant A bursts far over its query rate while tenant B asks
questions as usual (the scenario of `benchmarks.noisy_neighbour`, figures in docs/benchmarks.md).

What must hold: A is refused with 429 QUOTA_EXCEEDED beyond its bucket, B's requests never fail, and B's
p95 under the burst stays within `P95_FACTOR` times its p95 alone, or within `P95_SLACK_MS` of it,
whichever is more: B's queries take a few milliseconds here, where a factor alone would measure this
two-core machine's scheduler rather than the isolation."""

from __future__ import annotations

from benchmarks.noisy_neighbour import A_QUOTAS, RUNBOOK, measure
from tests.e2e.helpers import Api, mint_operator, new_tenant, upload, wait_for_status

P95_FACTOR = 10
P95_SLACK_MS = 500.0


def test_a_tenant_bursting_over_its_rate_is_refused_and_its_neighbour_is_served(api: Api) -> None:
    # Given two tenants with a document each, and A limited to 60 a minute with a burst of 10
    a, b = new_tenant(), new_tenant()
    for tenant in (a, b):
        token = api.token(tenant, "alice")
        assert (
            wait_for_status(api, token, upload(api, token, "keys.md", RUNBOOK, "text/markdown"))["status"] == "INDEXED"
        )
    reply = api.request("PUT", f"/v1/admin/tenants/{a}/quotas", token=mint_operator(api, "ops"), json_body=A_QUOTAS)
    assert reply.status == 200, reply.body
    # When A sends 240 searches from 4 processes while B asks 40 questions, after B asked 40 alone
    figures = measure(api.url, api.token(a, "alice"), api.token(b, "alice"), a_requests=240, a_processes=4)
    # Then A was refused beyond its bucket (10, plus 1 a second), with QUOTA_EXCEEDED and nothing else
    assert figures["a_other"] == {}, figures
    assert figures["a_refused"] > 0 and figures["a_admitted"] <= 10 + 60, figures
    # And B's requests never failed, and its p95 stayed within the stated bound
    assert figures["b_failed"] == 0, figures
    bound = max(P95_FACTOR * figures["b_alone_p95_ms"], figures["b_alone_p95_ms"] + P95_SLACK_MS)
    assert figures["b_contended_p95_ms"] <= bound, figures
