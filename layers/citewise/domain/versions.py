"""Versions as versions: the `version`, `introduced_in` and `deprecated_in` attributes of a document, their
validation, their order, and the sortable encoding every backend filters on (docs/versions.md).

A version is a dotted release of 1 to `MAX_COMPONENTS` numbers of at most `MAX_COMPONENT_DIGITS` digits,
optionally led by `v`, followed optionally by one pre-release tag (PEP 440 `a1`, `b2`, `rc1`, `.dev3`;
semver `-alpha.1`, `-beta`, `-rc.2`), optionally by a post-release (`.post1`), optionally by build metadata
(`+local.7`, ignored for the order, as semver and PEP 440 say). Numbers compare as numbers (`3.9 < 3.12`,
`0.100 > 0.99`), missing components are zeros (`1.0 == 1.0.0 == 1`), and a pre-release orders before its
release: `dev < a (alpha) < b (beta) < rc (c, pre, preview) < release < post`.

The bounds exist so that a version fits one fixed-width key made of two integers below 10**15 (exact in a
double): `high` holds the first three components, `low` the fourth and the tags. S3 Vectors compares
numbers only, so it stores both and a comparison becomes `(high, low)` compared lexicographically;
OpenSearch compares their concatenation (`sort_key`, 29 digits) as a keyword; the local index the same
string. One encoding, one order, on every backend.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal, get_args

from citewise.domain.errors import ValidationError

VersionKey = Literal["version", "introduced_in", "deprecated_in"]
VERSION_KEYS: tuple[VersionKey, ...] = get_args(VersionKey)
"""The attributes that hold versions: what a document is about, and when what it describes appeared and was
deprecated. The only keys the version operators take."""
MAX_COMPONENTS = 4
MAX_COMPONENT_DIGITS = 5
MAX_TAG_NUMBER_DIGITS = 4
MAX_VERSION_CHARS = 100
"""Characters of a version string, build metadata included."""

_PHASES = {"dev": 0, "a": 1, "alpha": 1, "b": 2, "beta": 2, "c": 3, "rc": 3, "pre": 3, "preview": 3}
_RELEASE_PHASE = 4


def _any_case(word: str) -> str:
    """`word` in any case, spelled with classes: JSON Schema's patterns (ECMA-262) take no inline flags."""
    return "".join(f"[{letter}{letter.upper()}]" for letter in word)


# One grammar, written in the common part of Python's, Rust's (pydantic) and ECMA-262's (JSON Schema) regular
# expressions: ASCII digits as [0-9] (`\d` is Unicode in the first two), no flags, no named groups in
# VERSION_PATTERN. `_PATTERN` is the same fragments with groups, for reading the parts.
_RELEASE = rf"[0-9]{{1,{MAX_COMPONENT_DIGITS}}}(?:\.[0-9]{{1,{MAX_COMPONENT_DIGITS}}}){{0,{MAX_COMPONENTS - 1}}}"
_NUMBER = rf"[0-9]{{1,{MAX_TAG_NUMBER_DIGITS}}}"
_TAG = "|".join(_any_case(tag) for tag in ("dev", "alpha", "a", "beta", "b", "rc", "c", "preview", "pre"))
_POST = "|".join(_any_case(tag) for tag in ("post", "rev", "r"))
_BUILD = r"(?:\+[0-9A-Za-z.-]+)?"
VERSION_PATTERN = (
    rf"^[vV]?{_RELEASE}(?:[-_.]?(?:{_TAG})(?:[-_.]?{_NUMBER})?)?(?:[-_.]?(?:{_POST})[-_.]?{_NUMBER})?{_BUILD}$"
)
"""What a version string is, as a pattern for schemas (the filter's `value`, docs/openapi.json)."""
_PATTERN = re.compile(
    rf"[vV]?(?P<release>{_RELEASE})(?:[-_.]?(?P<tag>{_TAG})(?:[-_.]?(?P<tag_number>{_NUMBER}))?)?"
    rf"(?:[-_.]?(?:{_POST})[-_.]?(?P<post>{_NUMBER}))?{_BUILD}"
)
ACCEPTED = (
    f"a version is 1-{MAX_COMPONENTS} dot-separated numbers of at most {MAX_COMPONENT_DIGITS} digits, optionally "
    "led by 'v', then optionally a pre-release (a1, b2, rc1, .dev3, -alpha.1, -beta, -rc.2), a post-release "
    "(.post1) and build metadata (+build.7), e.g. 3.12, v0.115.2, 2.0.0-rc.1, 1.4a2"
)


@dataclass(frozen=True)
class Version:
    """A parsed version: its release numbers as written, and its place in the order (`sort_key`)."""

    text: str
    release: tuple[int, ...]
    phase: int = _RELEASE_PHASE
    tag_number: int = 0
    post: int = 0

    @property
    def high(self) -> int:
        """The first three release components, 5 digits each: the first half of the order."""
        padded = (*self.release, 0, 0, 0)
        return int("".join(f"{part:0{MAX_COMPONENT_DIGITS}d}" for part in padded[:3]))

    @property
    def low(self) -> int:
        """The fourth component, the phase, its number and the post-release: the second half."""
        fourth = self.release[3] if len(self.release) == MAX_COMPONENTS else 0
        tags = f"{self.phase}{self.tag_number:0{MAX_TAG_NUMBER_DIGITS}d}{self.post:0{MAX_TAG_NUMBER_DIGITS}d}"
        return int(f"{fourth:0{MAX_COMPONENT_DIGITS}d}{tags}")

    @property
    def sort_key(self) -> str:
        """`high` and `low` as one fixed-width string of digits: ordered as strings as versions are."""
        return f"{self.high:015d}{self.low:014d}"

    def same_line(self, other: Version) -> bool:
        """Whether the two name the same release line at the precision both give (`3.12` and `3.12.4`;
        `3` and `3.12`; not `3.11` and `3.12`): what "for Python 3.12" asks of a document's `version`."""
        common = min(len(self.release), len(other.release))
        return self.release[:common] == other.release[:common]


@lru_cache(maxsize=4096)
def parse_version(text: str) -> Version:
    """The version `text` names; ValueError saying what is accepted (`ACCEPTED`) otherwise. Cached: filters
    and the router's preference read the same few versions for every candidate chunk."""
    value = text.strip()
    if len(value) > MAX_VERSION_CHARS:
        raise ValueError(f"a version has at most {MAX_VERSION_CHARS} characters")
    found = _PATTERN.fullmatch(value)
    if found is None:
        raise ValueError(ACCEPTED)
    tag = found["tag"]
    return Version(
        text=value,
        release=tuple(int(part) for part in found["release"].split(".")),
        phase=_PHASES[tag.lower()] if tag else _RELEASE_PHASE,
        tag_number=int(found["tag_number"] or 0),
        post=int(found["post"] or 0),
    )


def try_version(value: object) -> Version | None:
    """`parse_version` of a stored attribute value, None when it is not a version string (a record stored
    before versions were checked): such a value matches no version comparison, on any backend."""
    if not isinstance(value, str):
        return None
    try:
        return parse_version(value)
    except ValueError:
        return None


def check_versions(attributes: Mapping[str, object]) -> None:
    """Refuse a document whose version attributes are not versions, naming the key and what is accepted (the
    pipeline records it FAILED with that reason, as for a metadata date that is not a date)."""
    for key in VERSION_KEYS:
        if key not in attributes:
            continue
        value = attributes[key]
        if not isinstance(value, str):
            hint = " (write it as a string: the number 3.10 reads 3.1)" if isinstance(value, int | float) else ""
            raise ValidationError(f"metadata '{key}' must be a version string{hint}", details={"key": key})
        try:
            parse_version(value)
        except ValueError as exc:
            raise ValidationError(
                f"metadata '{key}' is not a version: {value[:120]!r}; {exc}", details={"key": key}
            ) from exc


def declared_versions(attributes: Mapping[str, object]) -> dict[str, Version]:
    """The version attributes of a document that parse, by key."""
    found = {key: try_version(attributes.get(key)) for key in VERSION_KEYS}
    return {key: version for key, version in found.items() if version is not None}


def valid_for(declared: Mapping[str, Version], asked: Version) -> bool:
    """Whether a document declaring these versions (`declared_versions`) is valid for the version `asked`:
    its `version` (if any) on the same release line, not introduced after it, not deprecated before it
    (deprecated in `asked` itself still documents it). A document that declares none is valid for any."""
    if (version := declared.get("version")) is not None and not version.same_line(asked):
        return False
    if (introduced := declared.get("introduced_in")) is not None and introduced.sort_key > asked.sort_key:
        return False
    deprecated = declared.get("deprecated_in")
    return deprecated is None or deprecated.sort_key >= asked.sort_key
