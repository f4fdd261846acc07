"""Versions as versions: parsing, the order, the encoding the backends store, the checks at ingest and in
filters, validity for an asked version, and the local evaluation of the version operators."""

from __future__ import annotations

import random
import re
from datetime import UTC, datetime
from typing import Any

import jsonschema_rs
import pytest
from pydantic import ValidationError as PydanticValidationError

from citewise.domain.errors import ValidationError
from citewise.domain.matching import matches, metadata_view
from citewise.domain.models import Chunk, DocumentMetadata, Filter, Routing, VersionPreference
from citewise.domain.versions import (
    MAX_COMPONENT_DIGITS,
    VERSION_PATTERN,
    check_versions,
    declared_versions,
    parse_version,
    valid_for,
)
from citewise.ports.blobstore import stored_object
from citewise.ports.index import ScoredChunk
from citewise.ports.router import RoutingContext, VersionMention
from citewise.query.candidates import Candidate
from citewise.query.routing import DeterministicRouter
from citewise.query.versioning import prefer_valid
from citewise_local.render import render_routing

IN_ORDER = [
    "0.99",
    "0.100",
    "v0.115.2",
    "1.4.dev3",
    "1.4a2",
    "1.4b1",
    "1.4rc1",
    "1.4rc1.post1",
    "1.4",
    "1.4.post1",
    "1.4.1",
    "2.0.0-alpha",
    "2.0.0-alpha.1",
    "2.0.0-beta.2",
    "2.0.0-rc.1",
    "2.0.0",
    "3.9",
    "3.12",
    "3.12.0.1",
    "2024.10.1",
    "99999.99999.99999.99999",
]


def test_versions_order_as_versions_and_their_sort_keys_order_alike() -> None:
    # Given versions written in order, shuffled
    shuffled = IN_ORDER[:]
    random.Random(7).shuffle(shuffled)

    # When sorted by their sort keys and by their (high, low) pairs
    by_key = sorted(shuffled, key=lambda text: parse_version(text).sort_key)
    by_pair = sorted(shuffled, key=lambda text: (parse_version(text).high, parse_version(text).low))

    # Then both give the version order: numbers as numbers, pre-releases before their release
    assert by_key == IN_ORDER
    assert by_pair == IN_ORDER


@pytest.mark.parametrize(
    ("a", "b"), [("1.0", "1.0.0"), ("1", "1.0.0.0"), ("v3.12", "3.12"), ("3.09", "3.9"), ("1.0+build.7", "1.0")]
)
def test_equal_versions_share_one_key(a: str, b: str) -> None:
    assert parse_version(a).sort_key == parse_version(b).sort_key


def test_the_two_halves_are_exact_integers_of_a_double() -> None:
    largest = parse_version("99999.99999.99999.99999rc9999.post9999")
    assert largest.high < 2**53 and largest.low < 2**53
    assert len(largest.sort_key) == len(parse_version("0").sort_key) == 29


@pytest.mark.parametrize(
    "text",
    ["latest", "", "3.", ".3", "3..12", "1.2.3.4.5", "1" * (MAX_COMPONENT_DIGITS + 1), "1.0-alpha.beta", "3.12 ", "x3"],
)
def test_what_is_not_a_version_is_refused_with_what_is_accepted(text: str) -> None:
    if text == "3.12 ":  # surrounding space is trimmed, not refused
        assert parse_version(text).text == "3.12"
        return
    with pytest.raises(ValueError, match="dot-separated numbers"):
        parse_version(text)


def test_a_very_long_version_is_refused_before_matching() -> None:
    with pytest.raises(ValueError, match="at most 100 characters"):
        parse_version("1.0+" + "a" * 200)


@pytest.mark.parametrize(
    ("attributes", "message"),
    [
        ({"version": "latest"}, "metadata 'version' is not a version: 'latest'"),
        ({"introduced_in": 3.10}, "metadata 'introduced_in' must be a version string \\(write it as a string"),
        ({"deprecated_in": ["3.12"]}, "metadata 'deprecated_in' must be a version string"),
    ],
)
def test_version_attributes_that_are_no_versions_are_refused_naming_the_key(
    attributes: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError, match=message) as refused:
        check_versions(attributes)
    assert refused.value.details["key"] == next(iter(attributes))


def test_valid_version_attributes_and_other_keys_pass() -> None:
    check_versions({"version": "3.12", "introduced_in": "v3.8", "deprecated_in": "3.13rc1", "release": "latest"})


def test_an_upload_whose_version_is_no_version_carries_the_reason_as_its_defect() -> None:
    # Given an object whose user metadata says version "latest"
    obj = stored_object(
        tenant_id="acme",
        path="docs/page.md",
        size=10,
        version="v1",
        etag="e",
        content_type="text/markdown",
        metadata={"version": "latest"},
        load=lambda: b"# Page",
        sidecar=None,
        channel="local",
        max_bytes=1000,
    )

    # Then it is kept, with the reason the pipeline records it FAILED with (as for a date that is no date)
    assert obj.defect is not None and "metadata 'version' is not a version" in obj.defect.message


@pytest.mark.parametrize(
    ("attributes", "asked", "valid"),
    [
        ({}, "3.12", True),
        ({"version": "3.12"}, "3.12", True),
        ({"version": "3.12.4"}, "3.12", True),
        ({"version": "3.12"}, "3.12.1", True),
        ({"version": "3"}, "3.12", True),
        ({"version": "3.11"}, "3.12", False),
        ({"introduced_in": "3.12"}, "3.12", True),
        ({"introduced_in": "3.13"}, "3.12", False),
        ({"deprecated_in": "3.12"}, "3.12", True),
        ({"deprecated_in": "3.11"}, "3.12", False),
        ({"introduced_in": "0.95", "deprecated_in": "0.120"}, "0.115", True),
        ({"introduced_in": "0.116"}, "0.115", False),
        ({"version": "not one"}, "3.12", True),
    ],
)
def test_valid_for(attributes: dict[str, Any], asked: str, valid: bool) -> None:
    assert valid_for(declared_versions(attributes), parse_version(asked)) is valid


# --- the filter operators -------------------------------------------------------------------------


def _chunk(attributes: dict[str, Any]) -> Chunk:
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    document = DocumentMetadata(
        tenant_id="acme",
        doc_id="d",
        owner="alice",
        source="docs",
        path="d.md",
        title="D",
        created_at=moment,
        updated_at=moment,
        attributes=attributes,
    )
    return Chunk(chunk_id="d-0", ordinal=0, text="t", start=0, end=1, content_hash="h", document=document)


def _flt(operator: str, key: str, value: Any) -> Filter:
    return Filter.model_validate({operator: {"key": key, "value": value}})


@pytest.mark.parametrize(
    ("operator", "value", "expected"),
    [
        ("versionEquals", "3.12", True),
        ("versionEquals", "3.12.0", True),
        ("versionEquals", "3.1", False),
        ("versionNotEquals", "3.1", True),
        ("versionNotEquals", "3.12.0", False),
        ("versionGreaterThan", "3.9", True),
        ("versionGreaterThan", "3.12", False),
        ("versionGreaterThanOrEquals", "3.12", True),
        ("versionLessThan", "3.100", True),
        ("versionLessThan", "3.12rc1", False),
        ("versionLessThanOrEquals", "3.12", True),
        ("versionLessThanOrEquals", "3.11.9", False),
    ],
)
def test_version_operators_compare_as_versions_where_strings_would_not(
    operator: str, value: str, expected: bool
) -> None:
    assert matches(_flt(operator, "version", value), metadata_view(_chunk({"version": "3.12"}))) is expected


@pytest.mark.parametrize("attributes", [{}, {"version": "latest"}, {"version": 3}])
def test_a_missing_or_non_version_value_matches_only_the_negation(attributes: dict[str, Any]) -> None:
    view = metadata_view(_chunk(attributes))
    assert not matches(_flt("versionEquals", "version", "3"), view)
    assert not matches(_flt("versionGreaterThan", "version", "0"), view)
    assert not matches(_flt("versionLessThan", "version", "99999"), view)
    assert matches(_flt("versionNotEquals", "version", "3"), view)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ({"versionEquals": {"key": "year", "value": "3.12"}}, "'version', 'introduced_in' or 'deprecated_in'"),
        ({"versionEquals": {"key": "version", "value": 3.12}}, "takes a version string"),
        ({"versionLessThan": {"key": "deprecated_in", "value": "latest"}}, "'latest' is not a version"),
        ({"versionLessThan": {"key": "version", "value": ["3.12"]}}, "takes a version string"),
        ({"versionLessThan": {"key": "version", "value": " 3.12"}}, "' 3.12' is not a version"),
        ({"versionLessThan": {"key": "version", "value": "1.0+" + "a" * 100}}, "at most 100 characters"),
    ],
)
def test_a_version_operator_on_another_key_or_value_is_refused(raw: dict[str, Any], reason: str) -> None:
    with pytest.raises(PydanticValidationError, match=reason):
        Filter.model_validate(raw)


@pytest.mark.parametrize(
    "text",
    [
        *IN_ORDER,
        "1.4RC1",
        "2.0.0-Alpha.1",
        "V3",
        "1.0c",
        "1.0r1",
        "1.0-rev.2",
        "1.0+x.Y-z",
        "latest",
        "3.",
        "1.2.3.4.5",
        "٣.١٢",
        "3.12\n",
        " 3.12",
        "1.0-alpha.beta",
        "1" * 6,
        "1.0++b",
        "1.0.post",
        "1.0rc12345",
    ],
)
def test_the_schema_pattern_and_the_parser_accept_the_same_versions(text: str) -> None:
    # The filter's value is checked by VERSION_PATTERN (the schema's, in Rust and ECMA-262 alike), stored values
    # by the parser: the two must agree on every string, Unicode digits and a final newline included
    try:
        parse_version(text)
        parsed = text == text.strip()
    except ValueError:
        parsed = False
    assert (re.fullmatch(VERSION_PATTERN, text) is not None) is parsed
    assert (jsonschema_rs.validator_for({"type": "string", "pattern": VERSION_PATTERN}).is_valid(text)) is parsed


def test_the_version_operators_are_listed_among_the_operators() -> None:
    assert {"versionEquals", "versionGreaterThanOrEquals", "versionLessThan"} <= set(Filter.operators())


# --- the router's reading and the preference ------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "read"),
    [
        ("How do I use TaskGroup for Python 3.12?", [("3.12", "Python 3.12")]),
        ("what changed in FastAPI 0.115", [("0.115", "FastAPI 0.115")]),
        ("3.12 release notes", [("3.12", "3.12")]),
        ("v3.12 or 3.9? and 3.12.0 again", [("3.12", "v3.12"), ("3.9", "3.9")]),
        ("version 3.12.", [("3.12", "version 3.12")]),
        ("our 2024 roadmap, Python 3, py3.12, 1.2.3.4.5, 2.5% and 2026-03-03", []),
        ("can a 3.5 GB file take 1.5 s, cost $3.50 or 2.5 times more on 10.4 MiB?", []),
        ("is 3.5 GB enough for 3.12?", [("3.12", "3.12")]),  # the quantity is no version; the version still is
        (" ".join(f"{n}.0" for n in range(1, 20)), [(f"{n}.0", f"{n}.0") for n in range(1, 6)]),
    ],
)
def test_the_router_reads_the_versions_a_question_names(question: str, read: list[tuple[str, str]]) -> None:
    route = DeterministicRouter().route(question, RoutingContext(now=datetime(2026, 3, 1, tzinfo=UTC)))
    assert [(mention.version, mention.phrase) for mention in route.constraints.versions] == read
    assert route.text == question.strip()  # a version is a preference: its phrase stays in the searched text


def _candidate(doc_id: str, attributes: dict[str, Any]) -> Candidate:
    chunk = _chunk(attributes)
    chunk = chunk.model_copy(update={"document": chunk.document.model_copy(update={"doc_id": doc_id})})
    return Candidate(ScoredChunk(chunk, 0.5), 0.5, 0.5)


def test_the_preference_ranks_valid_documents_first_each_group_in_its_order_and_drops_none() -> None:
    # Given candidates ranked: 3.11, none declared, 3.12, introduced in 3.13, deprecated in 3.12
    ranked = [
        _candidate("py311", {"version": "3.11"}),
        _candidate("plain", {}),
        _candidate("py312", {"version": "3.12.2"}),
        _candidate("later", {"introduced_in": "3.13"}),
        _candidate("deprecated-here", {"deprecated_in": "3.12"}),
    ]

    # When a question names 3.12
    preferred, report = prefer_valid(ranked, [VersionMention(version="3.12", phrase="Python 3.12")])

    # Then the valid ones come first in their order, the others after in theirs, and the report names them
    assert [c.doc_id for c in preferred] == ["plain", "py312", "deprecated-here", "py311", "later"]
    assert report is not None and report.demoted_documents == ["py311", "later"]
    assert (report.versions, report.phrases) == (["3.12"], ["Python 3.12"])


def test_two_versions_prefer_documents_valid_for_either() -> None:
    ranked = [_candidate("py39", {"version": "3.9"}), _candidate("py311", {"version": "3.11"})]
    mentions = [VersionMention(version="3.11", phrase="3.11"), VersionMention(version="3.12", phrase="3.12")]
    preferred, report = prefer_valid(ranked, mentions)
    assert [c.doc_id for c in preferred] == ["py311", "py39"] and report is not None


def test_no_preference_without_a_version_or_without_a_document_declaring_one() -> None:
    ranked = [_candidate("a", {}), _candidate("b", {"release": "3.11"})]
    assert prefer_valid(ranked, []) == (ranked, None)
    assert prefer_valid(ranked, [VersionMention(version="3.12", phrase="3.12")]) == (ranked, None)


def test_the_clis_routing_line_says_which_version_was_preferred() -> None:
    # Given a search whose question named Python 3.12, which demoted two documents
    versions = VersionPreference(versions=["3.12"], phrases=["Python 3.12"], demoted_documents=["d1", "d2"])

    # When its routing is rendered / Then the line says which version was preferred and how many came after
    line = render_routing(Routing(router="deterministic", versions=versions))
    assert line == (
        "routed (deterministic): no phrase; preferred version 3.12 (2 documents after) (--no-route to search the "
        "whole text)"
    )
    assert render_routing(Routing(router="deterministic")) == ""
