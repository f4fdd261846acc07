"""The naming policy for new document paths (`citewise.domain.tenancy.validate_document_name`): NFC, segment
bytes, no control/format/invisible characters, one script a word; and the OpenAPI pattern admits only
names the policy accepts, so a schema-driven client is never refused for a name the document allows."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from citewise.api.documents import FILENAME_PATTERN
from citewise.domain.errors import ValidationError
from citewise.domain.tenancy import MAX_PATH_BYTES, validate_document_name, validate_path


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("j\u0456ra/PROJ-7.md", "the word 'j\u0456ra' mixes the scripts CYRILLIC, LATIN"),
        ("\u0440aypal.md", "mixes the scripts CYRILLIC, LATIN"),  # a Cyrillic р
        ("\u03a9mega.md", "mixes the scripts GREEK, LATIN"),
        ("5\u00b5m.md", "mixes the scripts GREEK, LATIN"),  # MICRO SIGN decomposes to Greek mu
        ("invoice\u202efdp.exe", "U+202E RIGHT-TO-LEFT OVERRIDE (category Cf)"),
        ("a\u009bb.md", "U+009B (category Cc)"),
        ("a\u200db.md", "U+200D ZERO WIDTH JOINER (category Cf)"),
        ("a\u3000b.md", "U+3000 IDEOGRAPHIC SPACE (category Zs)"),
        ("a\u2028b.md", "U+2028 LINE SEPARATOR (category Zl)"),
        ("cafe\u0301.md", "not in Unicode NFC; send 'caf\u00e9.md'"),
        ("x" * 201, "a segment (between '/') is longer than 200 bytes of UTF-8"),
        ("\u00e9" * 101, "longer than 200 bytes"),  # 202 bytes in 101 characters
    ],
)
def test_a_refused_name_says_why(path: str, reason: str) -> None:
    # Given a path that is a safe key (it may be read and deleted)
    assert validate_path(path) == path
    # Then as a new name it is refused, with the reason
    with pytest.raises(ValidationError) as refused:
        validate_document_name(path)
    assert refused.value.message.startswith("invalid document path: ") and reason in refused.value.message
    assert refused.value.details == {"field": "path"}


@pytest.mark.parametrize(
    "path",
    [
        "jira/PROJ-7.md",
        "x" * 200,
        "x" * 200 + ".metadata.json",  # the sidecar of the longest name
        "r\u00e9sum\u00e9 na\u00efve.md",
        "stra\u00dfe/\u0149a.md",  # ŉ decomposes to a modifier apostrophe and a Latin n
        "\u041c\u043e\u0441\u043a\u0432\u0430/\u043e\u0442\u0447\u0451\u0442.md",  # Cyrillic words, Latin extension
        "\u041e\u0442\u0447\u0451\u0442 \u043f\u043e API.pdf",
        "\u8cc7\u6599/\uff21\uff22\uff23\u5831\u544a.pdf",  # Han with fullwidth Latin
        "\u30c7\u30fc\u30bf_\u30d5\u30a1\u30a4\u30eb.txt",  # katakana with the shared ー
        "\ud55c\uad6d\uc5b4 \ubb38\uc11c.md",
        "\u03b5\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac.md",
        "\u0645\u0644\u0641.md",
        "\u0939\u093f\u0928\u094d\u0926\u0940.md",
    ],
)
def test_names_of_one_script_a_word_are_accepted(path: str) -> None:
    assert validate_document_name(path) == path


def test_the_structural_rules_still_come_first() -> None:
    with pytest.raises(ValidationError, match="'..' segments"):
        validate_document_name("a/../b.md")


@settings(max_examples=400, deadline=None)
@given(st.from_regex(FILENAME_PATTERN, fullmatch=True))
def test_every_name_the_openapi_pattern_admits_is_accepted(name: str) -> None:
    # The document's maxLength counts characters, the rule bytes: past 950 bytes is the length rule's refusal
    if len(name.encode()) <= MAX_PATH_BYTES:
        assert validate_document_name(name) == name


def test_the_openapi_pattern_refuses_what_the_policy_refuses_that_a_pattern_can_see() -> None:
    pattern = re.compile(FILENAME_PATTERN)
    for name in ("j\u0456ra.md", "a\u202eb.md", "a\u009bb.md", "x" * 201, "a/../b", "a\\b"):
        assert pattern.fullmatch(name) is None, name
