"""S3 object keys <-> (tenant, path): the layout isolation depends on, and notification keys' encoding."""

from __future__ import annotations

from urllib.parse import quote_plus

import pytest
from hypothesis import given
from hypothesis import strategies as st

from citewise.domain.errors import ValidationError
from citewise.domain.models import TENANT_ID_PATTERN
from citewise.ports.blobstore import key_to_location, object_key, parse_key


@pytest.mark.parametrize(
    ("event_key", "location"),
    [
        ("tenants/acme/My+Report%281%29.pdf", ("acme", "My Report(1).pdf")),
        ("tenants/acme/a%2Bb.md", ("acme", "a+b.md")),
        ("tenants/acme/100%25.txt", ("acme", "100%.txt")),
        ("tenants/acme/reports/2026/q1.md", ("acme", "reports/2026/q1.md")),
        ("tenants/acme/%C3%A9t%C3%A9.md", ("acme", "été.md")),
        ("tenants/acme-eu.1/x.md.metadata.json", ("acme-eu.1", "x.md.metadata.json")),
    ],
)
def test_notification_keys_are_decoded(event_key: str, location: tuple[str, str]) -> None:
    assert key_to_location(event_key) == location


@pytest.mark.parametrize(
    "event_key",
    [
        "uploads/acme/x.md",  # outside the layout
        "tenants/acme",  # no path
        "tenants/acme/",  # empty path
        "tenants//x.md",  # empty tenant
        "tenants/acme/..%2Fbeta%2Fx.md",  # '..' once decoded
        "tenants/acme/a%2F%2Fb.md",  # empty segment once decoded
        "tenants/%2E%2E/x.md",  # tenant '..'
        "tenants/ac%2Ame/x.md",  # tenant 'ac*me'
        "tenants/acme/x%00.md",  # control character
        "Tenants/acme/x.md",  # the prefix is case-sensitive, as S3 keys are
    ],
)
def test_keys_outside_the_layout_are_refused(event_key: str) -> None:
    with pytest.raises(ValidationError):
        key_to_location(event_key)


def test_raw_keys_are_not_decoded() -> None:
    assert parse_key("tenants/acme/a+b%20c.md") == ("acme", "a+b%20c.md")


def test_a_custom_prefix() -> None:
    assert object_key("acme", "a.md", prefix="docs/tenants/") == "docs/tenants/acme/a.md"
    assert key_to_location("docs/tenants/acme/a+b.md", prefix="docs/tenants/") == ("acme", "a b.md")
    with pytest.raises(ValidationError):
        key_to_location("tenants/acme/a.md", prefix="docs/tenants/")


_segment = st.text(
    alphabet=st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="/\\"), min_size=1, max_size=12
).filter(lambda part: part not in (".", ".."))


@given(
    tenant_id=st.from_regex(TENANT_ID_PATTERN, fullmatch=True),
    path=st.lists(_segment, min_size=1, max_size=4).map("/".join),
)
def test_keys_round_trip_through_notifications(tenant_id: str, path: str) -> None:
    key = object_key(tenant_id, path)
    assert parse_key(key) == (tenant_id, path)
    # S3 notifications form-encode the key (space as '+', '/' kept)
    assert key_to_location(quote_plus(key, safe="/")) == (tenant_id, path)
