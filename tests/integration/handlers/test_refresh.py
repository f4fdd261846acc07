"""The refresh function on the AWS adapters under moto (every call held to its role in the synthesized
template): the schedule's tick starts what is due, each message continues a run until the invocation's
budget runs low and re-queues the rest, pages land in the bucket for the ingest function; the same
source then refreshed with one page changed costs one store."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import boto3
import pytest

from citewise.domain import deadline
from citewise.domain.sources import page_path
from citewise.runtime import refresh_handler as module
from citewise.runtime.refresh_handler import SCHEDULE_EVENT
from citewise.runtime.services import Services
from citewise_local.emulator import LambdaContext
from tests.doubles.web import FakeSite, Page, html, sitemap
from tests.integration.handlers.conftest import REFRESH_QUEUE
from tests.integration.handlers.harness import Stack, claims, lambda_sqs_event

ADMIN = claims("acme", "carol", groups="admin")
SITE = "https://docs.example.com"
QUEUE_ARN = f"arn:aws:sqs:us-east-1:123456789012:{REFRESH_QUEUE}"


def refresh_messages() -> Iterator[list[dict[str, Any]]]:
    """The refresh queue's messages, one receive at a time (as the event source mapping, batch size 1)."""
    sqs = boto3.client("sqs", region_name="us-east-1")
    url = sqs.get_queue_url(QueueName=REFRESH_QUEUE)["QueueUrl"]
    while True:
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, AttributeNames=["All"]).get("Messages", [])
        if not messages:
            return
        sqs.delete_message(QueueUrl=url, ReceiptHandle=messages[0]["ReceiptHandle"])
        yield messages


@pytest.fixture
def site(monkeypatch: pytest.MonkeyPatch) -> FakeSite:
    """A site of 12 pages, which the functions' `Services` fetch from (the real fetcher comes with web-fetch)."""
    urls = [f"{SITE}/3.12/p{i}.html" for i in range(12)]
    fake = FakeSite({url: Page(html(f"P{i}", f"Text {i}.")) for i, url in enumerate(urls)})
    fake.pages[f"{SITE}/sitemap.xml"] = Page(sitemap(*urls), content_type="application/xml", validators=False)
    monkeypatch.setattr(Services, "page_fetcher", property(lambda _: fake))
    return fake


def run_refreshes(stack: Stack, monkeypatch: pytest.MonkeyPatch, *, budget_per_run: int) -> int:
    """Deliver the refresh queue's messages to the function until it is empty, each invocation allowed
    `budget_per_run` pages (the run's clock); how many invocations it took."""
    runs = 0
    for messages in refresh_messages():
        runs += 1
        budget = iter([120.0] * budget_per_run)
        clock = SimpleNamespace(remaining=lambda left=budget: next(left, 0.0), budget=deadline.budget)
        monkeypatch.setattr(module, "deadline", clock)
        answer = stack.handler("refresh")(lambda_sqs_event(messages, QUEUE_ARN), LambdaContext())
        assert answer == {"batchItemFailures": []}
        assert runs < 50
    return runs


@pytest.mark.parametrize("stack", ["s3vectors"], indirect=True)
def test_the_schedule_starts_due_sources_and_the_queue_runs_them_in_batches(
    stack: Stack, site: FakeSite, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a registered sitemap source (due at once)
    body = {"kind": "sitemap", "url": f"{SITE}/sitemap.xml", "category": "official_docs"}
    status, source = stack.api("POST", "/v1/sources", body=body, identity=ADMIN)
    assert status == 201, source
    # When the schedule ticks
    tick = stack.handler("refresh")({"type": SCHEDULE_EVENT}, LambdaContext())
    assert tick == {"started": 1}
    assert stack.handler("refresh")({"type": SCHEDULE_EVENT}, LambdaContext()) == {"started": 0}  # running
    # Then the run goes through the queue in several invocations, each re-queuing the rest
    assert run_refreshes(stack, monkeypatch, budget_per_run=5) >= 3
    status, done = stack.api("GET", f"/v1/sources/{source['source_id']}", identity=ADMIN)
    assert done["running"] is None and done["last_run"]["status"] == "completed"
    assert done["last_run"]["summary"]["new"] == 12 and done["last_run"]["summary"]["requests"] == 13
    # And each page is an object of the tenant with the contract's metadata, for the ingest function
    url = f"{SITE}/3.12/p0.html"
    key = f"tenants/acme/{page_path(source['source_id'], url, 'html')}"
    head = stack.s3.head_object(Bucket="citewise-docs", Key=key)
    assert head["Metadata"]["url"] == url and head["Metadata"]["source"] == "official_docs"
    assert head["Metadata"]["owner"] == "carol" and head["Metadata"]["visibility"] == "shared"

    # When one page changes and the admin asks for a refresh now
    site.pages[url] = Page(html("P0", "New text."))
    site.log.clear()
    status, queued = stack.api("POST", f"/v1/sources/{source['source_id']}/refresh", identity=ADMIN)
    assert status == 202, queued
    run_refreshes(stack, monkeypatch, budget_per_run=100)
    # Then it cost one request a page and the sitemap's, and one page stored
    summary = stack.api("GET", f"/v1/sources/{source['source_id']}", identity=ADMIN)[1]["last_run"]["summary"]
    assert (summary["requests"], summary["not_modified"], summary["changed"]) == (13, 11, 1)
    assert b"New text." in stack.read_object(key)
