"""Tenant ids, document keys and document ids: the identifiers isolation depends on.

Everything that becomes part of a storage key or an index filter passes through here first, so a
tenant id with `/` or `*`, or a key with `..`, is refused before it can reach S3, SQLite or OpenSearch.

Two checks of a document path. `validate_path` says a path is safe as a key (it cannot leave its
tenant's prefix): every read, write and delete applies it. `validate_document_name` adds the naming
policy every new name must meet, on both backends alike: NFC, segments of at most `MAX_SEGMENT_BYTES`,
no control, format or invisible characters, and no word mixing scripts (`_name_problem`). It is
applied where a name is created (presign, the local store's writes, a folder scan) and, for an object
written straight to the bucket, where the object is read for ingestion: such a document is FAILED with
the reason rather than dropped, and stays readable and deletable under its name.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Collection, Mapping
from typing import Any, TypeVar

import pydantic

from citewise.domain.access import OPERATOR_GROUP
from citewise.domain.errors import ForbiddenError, UnauthorizedError, ValidationError
from citewise.domain.metadata import SIDECAR_SUFFIX
from citewise.domain.models import TENANT_ID_PATTERN, Caller, Operator

_TENANT_RE = re.compile(TENANT_ID_PATTERN)
_Identity = TypeVar("_Identity", Caller, Operator)
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
_WORD_RE = re.compile(r"[^\W_]+")
# S3 keys and DynamoDB sort keys are limited to 1,024 UTF-8 bytes; `tenants/{64-char tenant}/` takes 73.
MAX_PATH_BYTES = 950
# A file name is at most 255 bytes on ext4, XFS and APFS (255 UTF-16 units on NTFS). The local store
# keeps a document as a file under its name, writes it through `.{name}.{8 random}.tmp` (14 bytes more)
# and its sidecar as `{name}.metadata.json` (14 more): 200 leaves room for both. S3 would take more; the
# limit is the same there so that both backends accept the same paths.
MAX_SEGMENT_BYTES = 200
# Controls (Cc: C0, DEL, C1 such as U+009B, a terminal's CSI), format characters (Cf: bidi embeddings,
# overrides and isolates, LRM/RLM, zero-width spaces and joiners, the BOM, tag characters), surrogates,
# private use, unassigned code points, and the line and paragraph separators.
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
# The letters whose script is asked: modifier letters (`Lm`, such as the Japanese `ー`) are shared across
# scripts.
_SCRIPT_CATEGORIES = frozenset({"Lu", "Ll", "Lt", "Lo"})
# The scripts one word of a path may combine, after UTS #39's "highly restrictive" level: Latin with the
# scripts Japanese, Chinese and Korean writing mix. Any other mixture (Latin with Cyrillic or Greek: the
# homoglyphs of `jіra`) is refused. A word is a run of letters and digits, so `отчёт.md` or `Отчёт по
# API.pdf` (words of one script each) pass. A script is the first word of a letter's Unicode name
# (`_script`).
_SCRIPT_MIXES = (
    frozenset({"LATIN", "CJK", "HIRAGANA", "KATAKANA"}),
    frozenset({"LATIN", "CJK", "BOPOMOFO"}),
    frozenset({"LATIN", "CJK", "HANGUL"}),
)


def validate_tenant_id(tenant_id: str) -> str:
    """Return `tenant_id` if it is 1-64 letters, digits, `_`, `-` or `.` starting alphanumerically."""
    if not _TENANT_RE.fullmatch(tenant_id):
        raise ValidationError(
            "tenant id must be 1-64 characters of letters, digits, '_', '-' or '.', starting with a letter or digit",
            details={"field": "tenant_id"},
        )
    return tenant_id


def validate_path(path: str) -> str:
    """Return a document path (relative, `/`-separated) or refuse one that could escape its prefix."""
    problem = _path_problem(path)
    if problem:
        raise ValidationError(f"invalid document path: {problem}", details={"field": "path"})
    return path


def validate_document_name(path: str) -> str:
    """Return `path` if it is a safe key (`validate_path`) that also meets the naming policy for new
    documents (see the module docstring), else ValidationError saying what is wrong."""
    problem = _path_problem(path) or _name_problem(path)
    if problem:
        raise ValidationError(f"invalid document path: {problem}", details={"field": "path"})
    return path


def _path_problem(path: str) -> str | None:
    if not path:
        return "it is empty"
    if len(path.encode("utf-8")) > MAX_PATH_BYTES:
        return f"it is longer than {MAX_PATH_BYTES} bytes of UTF-8"
    if _CONTROL_RE.search(path):
        return "it contains control characters"
    if path.startswith("/") or "\\" in path:
        return "it must be relative and use '/' separators"
    if any(part in ("", ".", "..") for part in path.split("/")):
        return "it must not contain empty, '.' or '..' segments"
    return None


def _name_problem(path: str) -> str | None:
    """Why `path` may not name a new document, or None: confusable and invisible names are refused.

    Refused, not rewritten, so a name is stored as its owner sent it or not at all (clients normalise
    to NFC themselves: `citewise upload` and folder scans do).
    """
    if not unicodedata.is_normalized("NFC", path):
        return f"it is not in Unicode NFC; send {unicodedata.normalize('NFC', path)!r}"
    # A sidecar's name is its document's plus the suffix: the document's name is what is limited.
    for segment in path.removesuffix(SIDECAR_SUFFIX).split("/"):
        if len(segment.encode("utf-8")) > MAX_SEGMENT_BYTES:
            return f"a segment (between '/') is longer than {MAX_SEGMENT_BYTES} bytes of UTF-8"
    for character in path:
        category = unicodedata.category(character)
        if category in _REFUSED_CATEGORIES or (category == "Zs" and character != " "):
            name = f" {unicodedata.name(character, '')}".rstrip()
            return (
                f"it contains U+{ord(character):04X}{name} (category {category}): no control, format or "
                "invisible characters"
            )
    for word in _WORD_RE.findall(path):
        scripts = {_script(c) for c in word if unicodedata.category(c) in _SCRIPT_CATEGORIES}
        if len(scripts) > 1 and not any(scripts <= mix for mix in _SCRIPT_MIXES):
            return (
                f"the word {word!r} mixes the scripts {', '.join(sorted(scripts))}; a word's letters must be "
                "of one script (or Latin with Chinese, Japanese or Korean)"
            )
    return None


def _script(letter: str) -> str:
    """A letter's script as the first word of its Unicode name, after compatibility decomposition.

    The standard library has no Script property; the names carry it (`LATIN SMALL LETTER I`, `CYRILLIC
    SMALL LETTER BYELORUSSIAN-UKRAINIAN I`, `CJK UNIFIED IDEOGRAPH-4E2D`, `HANGUL CHOSEONG KIYEOK`), and
    the decomposition reads a fullwidth or mathematical `Ａ` as the Latin letter it stands for.
    """
    decomposed = unicodedata.normalize("NFKD", letter)
    # The first letter of the decomposition: `ŉ` decomposes to a modifier apostrophe and a Latin `n`.
    base = next((c for c in decomposed if unicodedata.category(c) in _SCRIPT_CATEGORIES), letter)
    return unicodedata.name(base, "UNNAMED").split(" ", 1)[0]


def document_id(tenant_id: str, path: str) -> str:
    """A stable id for the document at `path`: re-ingesting the same path updates the same document."""
    return hashlib.sha256(f"{tenant_id}\x00{path}".encode()).hexdigest()[:32]


def caller_from_claims(claims: Mapping[str, Any], *, tenant_claim: str = "custom:tenant_id") -> Caller:
    """The Caller of a Cognito identity: `sub` is the user, `tenant_claim` the tenant, groups from
    `cognito:groups` (see `_groups` for the forms it takes).

    No `sub`, or one the models cannot hold as a user id (longer than 256 characters, control
    characters), means no usable identity (401); a missing or malformed tenant means an identity that
    belongs to no tenant (403). Nothing here ever reads a request body.
    """
    user = claims.get("sub")
    if not isinstance(user, str) or not user:
        raise UnauthorizedError("the request carries no authenticated identity")
    tenant = claims.get(tenant_claim)
    groups = _groups(claims.get("cognito:groups"))
    if tenant is None and OPERATOR_GROUP in groups:
        raise ForbiddenError(
            "the platform operator is no member of any tenant: only the /v1/admin/ routes take it",
            details={"claim": tenant_claim},
        )
    if not isinstance(tenant, str) or not _TENANT_RE.fullmatch(tenant):
        raise ForbiddenError("the identity is not assigned to a tenant", details={"claim": tenant_claim})
    return _caller(tenant, user, groups)


_NOT_OPERATOR = "only the platform operator may use this route"


def operator_from_claims(claims: Mapping[str, Any], *, tenant_claim: str = "custom:tenant_id") -> Operator:
    """The Operator of a Cognito identity: a member of `OPERATOR_GROUP` that carries no tenant claim.

    Both halves are required. The group alone is not enough because a tenant's user put in it by mistake
    keeps its tenant (the attribute is immutable), and an identity with a tenant is always a tenant
    identity: refused here with 403, its tenant admins included. No `sub` is 401, as for a Caller.
    """
    user = claims.get("sub")
    if not isinstance(user, str) or not user:
        raise UnauthorizedError("the request carries no authenticated identity")
    if tenant_claim in claims or OPERATOR_GROUP not in _groups(claims.get("cognito:groups")):
        raise ForbiddenError(_NOT_OPERATOR, details={"group": OPERATOR_GROUP})
    return _identity(Operator, user_id=user)


def operator_from_iam(
    principal_arn: str | None, operator_principals: Collection[str], tenant_map: Mapping[str, str]
) -> Operator:
    """The Operator of an IAM principal named (by its exact ARN or its role's) in `operator_principals`.

    A principal the tenant map also names is a tenant identity and refused (the settings refuse such a
    configuration too), so an operator can never be a tenant member by a second route.
    """
    if not principal_arn:
        raise UnauthorizedError("the request carries no authenticated identity")
    names = {principal_arn, _role_arn(principal_arn) or principal_arn}
    if not names & set(operator_principals) or names & set(tenant_map):
        raise ForbiddenError(_NOT_OPERATOR, details={"group": OPERATOR_GROUP})
    return _identity(Operator, user_id=principal_arn)


def caller_from_iam(principal_arn: str | None, tenant_map: Mapping[str, str]) -> Caller:
    """The Caller of an IAM principal, by a configured principal ARN -> tenant map.

    An assumed-role session (`arn:aws:sts::A:assumed-role/R/S`) is looked up by its exact ARN, then by
    its role (`arn:aws:iam::A:role/R`), so one mapping covers every session of a role; the user is the
    exact principal ARN, so private documents stay private to one session name. An ARN the models cannot
    hold as a user id (an IAM path can make it longer than 256 characters) is refused with 401.
    """
    if not principal_arn:
        raise UnauthorizedError("the request carries no authenticated identity")
    tenant = tenant_map.get(principal_arn) or tenant_map.get(_role_arn(principal_arn) or "")
    if tenant is None:
        raise ForbiddenError("this IAM principal is not mapped to a tenant")
    return _caller(validate_tenant_id(tenant), principal_arn)


def _caller(tenant_id: str, user_id: str, groups: tuple[str, ...] = ()) -> Caller:
    return _identity(Caller, tenant_id=tenant_id, user_id=user_id, groups=groups)


def _identity(kind: type[_Identity], **fields: Any) -> _Identity:
    """The identity, or UnauthorizedError when its user id breaks the model's rules (the tenant was
    checked already): an identity citewise cannot record as an owner is no usable identity."""
    try:
        return kind(**fields)
    except pydantic.ValidationError as exc:
        raise UnauthorizedError(
            "the identity's user id is not usable: it must be 1-256 characters without control characters"
        ) from exc


def _role_arn(principal_arn: str) -> str | None:
    match = re.fullmatch(r"arn:(aws[\w-]*):sts::(\d{12}):assumed-role/([^/]+)/[^/]+", principal_arn)
    return f"arn:{match[1]}:iam::{match[2]}:role/{match[3]}" if match else None


def _groups(raw: Any) -> tuple[str, ...]:
    """The group names of a `cognito:groups` claim, each exactly as Cognito has it.

    Two forms only: a list of strings (a decoded ID token, as `citewise serve` and tests may pass) and
    the string API Gateway's Cognito authorizer hands a REST integration, the names joined with commas
    ("analysts" or "analysts,admin"). Nothing is stripped or split on spaces or brackets, so `ops admin`,
    `[admin]` or `admin]` never make a caller an `admin`. A group whose own name holds a comma cannot be
    told apart in the joined form; `citewise token` refuses such names (and Cognito pool admins should).
    """
    if isinstance(raw, list):
        return tuple(group for group in raw if isinstance(group, str) and group)
    if isinstance(raw, str):
        return tuple(group for group in raw.split(",") if group)
    return ()
