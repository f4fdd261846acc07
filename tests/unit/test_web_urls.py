"""What may be fetched: public addresses only, http(s) URLs without credentials (citewise.ports.web), and
the local-only switch for loopback that no Lambda function's settings accept."""

from __future__ import annotations

import pytest

from citewise.domain.errors import ValidationError
from citewise.ingest.parsing import SUPPORTED_CONTENT_TYPES
from citewise.ports.web import (
    ACCEPTED_CONTENT_TYPES,
    PAGE_CONTENT_TYPES,
    SITEMAP_CONTENT_TYPES,
    address_refusal,
    check_public_url,
)
from citewise.runtime.services import page_fetcher
from citewise.runtime.settings import Settings, load_settings

REFUSED = [
    "127.0.0.1",
    "127.255.0.9",
    "10.1.2.3",
    "172.16.0.1",
    "172.31.255.255",
    "192.168.1.1",
    "169.254.169.254",  # the instance metadata service
    "169.254.170.2",  # the ECS / Lambda container credentials endpoint
    "100.64.0.1",  # carrier-grade NAT
    "100.127.255.254",
    "0.0.0.0",
    "0.1.2.3",
    "224.0.0.1",
    "239.255.255.250",
    "240.0.0.1",
    "255.255.255.255",
    "192.0.0.8",
    "192.0.2.10",  # documentation ranges are not global either
    "198.18.0.1",
    "::1",
    "::",
    "fe80::1",
    "fe80::1%eth0",
    "fc00::1",
    "fd12:3456::1",
    "fec0::1",
    "ff02::1",
    "::ffff:127.0.0.1",  # IPv4-mapped
    "::ffff:169.254.169.254",
    "::ffff:8.8.8.8",  # mapped: refused whatever it maps
    "::127.0.0.1",  # IPv4-compatible
    "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
    "64:ff9b:1::a00:1",
    "2002:7f00:1::1",  # 6to4 of 127.0.0.1
    "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo
    "fd00:ec2::254",  # the EC2 metadata service over IPv6
]
PUBLIC = ["8.8.8.8", "1.1.1.1", "93.184.216.34", "151.101.0.223", "2606:4700:4700::1111", "2a00:1450:4001:81b::200e"]


@pytest.mark.parametrize("address", REFUSED)
def test_non_public_addresses_are_refused_with_what_they_are(address: str) -> None:
    refusal = address_refusal(address)

    assert refusal is not None and "address" in refusal


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_pass(address: str) -> None:
    assert address_refusal(address) is None


@pytest.mark.parametrize("address", ["127.0.0.1", "127.1.2.3", "::1"])
def test_the_loopback_switch_lets_loopback_through(address: str) -> None:
    assert address_refusal(address, allow_loopback=True) is None


@pytest.mark.parametrize("address", ["10.0.0.1", "169.254.169.254", "::ffff:127.0.0.1", "fe80::1", "0.0.0.0"])
def test_the_loopback_switch_lets_nothing_else_through(address: str) -> None:
    assert address_refusal(address, allow_loopback=True) is not None


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("ftp://docs.example/file.txt", "scheme"),
        ("file:///etc/passwd", "scheme"),
        ("javascript:alert(1)", "scheme"),
        ("gopher://docs.example:70/", "scheme"),
        ("//docs.example/page", "scheme"),
        ("docs.example/page", "scheme"),
        ("https://user:secret@docs.example/", "credentials"),
        ("https://user@docs.example/", "credentials"),
        ("https://docs.example@169.254.169.254/", "credentials"),
        ("http:///path-only", "host"),
        ("https://docs.example:99999/", "host"),
        ("https://docs.example:port/", "host"),
        ("https://docs.exa mple/", "host"),
        ("https://docs.example/\r\nHost: evil", "host"),
        ("http://localhost/", "private_address"),
        ("http://api.localhost:8080/", "private_address"),
        ("http://127.0.0.1:8080/", "private_address"),
        ("http://[::1]/", "private_address"),
        ("http://169.254.169.254/latest/meta-data/", "private_address"),
        ("http://[::ffff:a9fe:a9fe]/", "private_address"),
        ("http://10.0.0.8/", "private_address"),
    ],
)
def test_a_url_that_cannot_be_fetched_is_a_validation_error_naming_the_reason(url: str, reason: str) -> None:
    with pytest.raises(ValidationError) as raised:
        check_public_url(url)

    assert raised.value.details["reason"] == reason
    assert raised.value.http_status == 400


def test_a_public_url_comes_back_without_its_fragment_and_with_a_lower_case_scheme() -> None:
    assert check_public_url("HTTPS://Docs.Example/a/b?q=1#part") == "https://Docs.Example/a/b?q=1"


def test_loopback_urls_pass_only_with_the_switch() -> None:
    assert check_public_url("http://localhost:8000/docs/", allow_loopback=True) == "http://localhost:8000/docs/"
    assert check_public_url("http://127.0.0.1:8000/", allow_loopback=True) == "http://127.0.0.1:8000/"
    with pytest.raises(ValidationError):
        check_public_url("http://192.168.0.1/", allow_loopback=True)


def test_a_host_name_is_left_to_the_fetch_that_resolves_it() -> None:
    assert check_public_url("https://internal.corp.example/") == "https://internal.corp.example/"


def test_the_fetcher_accepts_exactly_the_media_types_the_parsers_and_sitemaps_take() -> None:
    assert PAGE_CONTENT_TYPES == frozenset(SUPPORTED_CONTENT_TYPES)
    assert ACCEPTED_CONTENT_TYPES == PAGE_CONTENT_TYPES | SITEMAP_CONTENT_TYPES


def _settings_classes(cls: type[Settings]) -> list[type[Settings]]:
    return [sub for direct in cls.__subclasses__() for sub in (direct, *_settings_classes(direct))]


def test_the_local_settings_may_turn_loopback_fetching_on_and_the_fetcher_gets_it() -> None:
    settings = load_settings(
        Settings, web_allow_loopback=True, web_host_delay=0.25, web_contact_url="https://x.example"
    )

    fetcher = page_fetcher(settings)

    assert fetcher.limits.host_delay == 0.25
    assert fetcher.agent.startswith("citewise/") and fetcher.agent.endswith("(+https://x.example)")
    assert fetcher._allow_loopback is True
    assert page_fetcher(load_settings(Settings))._allow_loopback is False


@pytest.mark.parametrize("kind", _settings_classes(Settings), ids=lambda kind: kind.__name__)
def test_no_lambda_functions_settings_accept_loopback_fetching(kind: type[Settings]) -> None:
    with pytest.raises(ValidationError, match="CITEWISE_WEB_ALLOW_LOOPBACK"):
        load_settings(kind, web_allow_loopback=True)


def test_the_lambda_settings_are_enumerated() -> None:
    names = {kind.__name__ for kind in _settings_classes(Settings)}

    assert {"ApiSettings", "QuerySettings", "DocumentsSettings", "IngestSettings", "ErasureSettings"} <= names


def test_the_aws_backend_refuses_loopback_fetching_even_in_the_cli_settings() -> None:
    with pytest.raises(ValidationError, match="CITEWISE_WEB_ALLOW_LOOPBACK"):
        load_settings(
            Settings,
            backend="aws",
            web_allow_loopback=True,
            opensearch_endpoint="https://search.example",
            registry_table="t",
            documents_bucket="b",
        )


def test_loopback_fetching_is_off_by_default_everywhere() -> None:
    assert load_settings(Settings).web_allow_loopback is False
