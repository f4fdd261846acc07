"""What the S3 Vectors adapter sends, built by pure functions: index names, vector metadata, filters.

docs/s3vectors-design.md says why each piece is as it is. In short: one index per tenant (`index_name`);
every chunk carries the filterable fields of `domain.matching.metadata_view` plus keys derived at write
time (`DERIVED`: names starting with `#`, which no user attribute can take) so that operators S3 Vectors
lacks become ones it has; the chunk itself and its BM25 text ride in the two non-filterable keys; and
citewise's filter grammar is translated to S3 Vectors' (`$eq`, `$in`, ...) or refused with a
ValidationError naming the operator and the mode (`translate_filter`).
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from citewise.domain.errors import UnsupportedFilterError, ValidationError
from citewise.domain.matching import metadata_view
from citewise.domain.models import VERSION_OPERATORS, Caller, Chunk, Comparison, DocumentMetadata, Filter, Visibility
from citewise.domain.textutil import keyword_text
from citewise.domain.versions import declared_versions, parse_version

Body = dict[str, Any]

MODE = "s3vectors"
INDEX_PREFIX = "t-"  # every tenant index's name starts so: what the grants and the tenant-reader role name (`t-*`)
TEXT_KEY = "#text"  # non-filterable, full-text searchable (`en`): `textutil.keyword_text`
CHUNK_KEY = "#chunk"  # non-filterable: the whole Chunk as JSON
KIND_KEY = "#kind"
SOURCE_KIND = "source"  # the `#kind` of a document's source marker (`chunk` and `staged` are the others)
GENERATION_KEY = "#generation"
HASH_KEY = "#hash"
PATH_PREFIXES_KEY = "#path_prefixes"
LIST_KEYS_KEY = "#lists"
DATE_KEYS = ("created_at", "updated_at", "source_date")
VERSION_HIGH_PREFIX = "#vh:"  # + a version key: `Version.high`, a number
VERSION_LOW_PREFIX = "#vl:"  # + a version key: `Version.low`, a number
NON_FILTERABLE = (CHUNK_KEY, TEXT_KEY)

MAX_TOP_K = 100
MAX_QUERY_TEXT = 1024
MAX_PUT_VECTORS = 500
MAX_DELETE_VECTORS = 500
MAX_GET_VECTORS = 100
MAX_PAYLOAD_BYTES = 20 * 1024 * 1024
MAX_KEYS = 50
MAX_FILTERABLE_BYTES = 2 * 1024
MAX_METADATA_BYTES = 40 * 1024
MAX_METADATA_KEY = 63

_SLUG_RE = re.compile(r"[^a-z0-9]+")
_DATE_PREFIX_RE = re.compile(r"^(\d{4})(?:-(\d{2})(?:-(\d{2}))?)?$")
NOTHING: Body = {"doc_id": {"$exists": False}}  # every vector has a doc_id
EVERYTHING: Body = {"doc_id": {"$exists": True}}
_ORDERED = {"greaterThan": "$gt", "greaterThanOrEquals": "$gte", "lessThan": "$lt", "lessThanOrEquals": "$lte"}


def index_name(tenant_id: str) -> str:
    """The tenant's index: `t-<slug>-<hash>`, within S3 Vectors' 3-63 characters of `[a-z0-9.-]`.

    The slug (the id lowercased, other characters made `-`) is for people reading a listing; the 96-bit
    SHA-256 prefix of the exact id is what keeps `Acme` and `acme` apart."""
    slug = _SLUG_RE.sub("-", tenant_id.lower()).strip("-")[:24].strip("-")
    digest = hashlib.sha256(tenant_id.encode()).hexdigest()[:24]
    return f"{INDEX_PREFIX}{slug}-{digest}" if slug else f"{INDEX_PREFIX}{digest}"


def chunk_key(chunk_id: str) -> str:
    return f"c:{chunk_id}"


def staged_key(doc_id: str, content_hash: str) -> str:
    return f"s:{doc_id}:{content_hash}"


def source_key(doc_id: str) -> str:
    """The key of a document's source marker: one per document, so a write or a delete of the document
    keeps it without counting references across documents."""
    return f"m:{doc_id}"


def index_request(dimension: int) -> Body:
    """CreateIndex's arguments but the names: cosine, float32, the chunk and its text non-filterable,
    the text searchable with the English analyzer."""
    return {
        "dataType": "float32",
        "dimension": dimension,
        "distanceMetric": "cosine",
        "metadataConfiguration": {
            "nonFilterableMetadataKeys": list(NON_FILTERABLE),
            "textSearchConfigurations": [{"metadataKey": TEXT_KEY, "language": "en"}],
        },
    }


# --- metadata ------------------------------------------------------------------------------------------


def chunk_metadata(chunk: Chunk, generation: str) -> Body:
    """A chunk's metadata, checked against the per-vector limits (`check_metadata`)."""
    filterable: Body = {key: value for key, value in metadata_view(chunk).items() if value not in (None, [])}
    doc = chunk.document
    derived: Body = {KIND_KEY: "chunk", GENERATION_KEY: generation, HASH_KEY: chunk.content_hash}
    if prefixes := path_prefixes(doc.path):
        derived[PATH_PREFIXES_KEY] = prefixes
    for key in DATE_KEYS:
        moment = getattr(doc, key)
        if moment is not None:
            derived[f"#{key}"] = moment.timestamp()
    if lists := sorted(key for key, value in filterable.items() if isinstance(value, list)):
        derived[LIST_KEYS_KEY] = lists
    for key, version in declared_versions(doc.attributes).items():
        derived[VERSION_HIGH_PREFIX + key] = version.high
        derived[VERSION_LOW_PREFIX + key] = version.low
    metadata = {
        **filterable,
        **derived,
        CHUNK_KEY: chunk.model_dump_json(),
        TEXT_KEY: keyword_text(doc.title, chunk.heading_path, chunk.text),
    }
    check_metadata(chunk.chunk_id, metadata, user_keys=set(doc.attributes))
    return metadata


def staged_metadata(doc_id: str, content_hash: str) -> Body:
    """A staged vector's metadata: no access field, so no read's access filter ever matches it."""
    return {KIND_KEY: "staged", "doc_id": doc_id, HASH_KEY: content_hash}


def source_metadata(document: DocumentMetadata, generation: str) -> Body:
    """A document's source marker: its source and access fields, nothing to search (`sources` reads it)."""
    return {
        KIND_KEY: SOURCE_KIND,
        GENERATION_KEY: generation,
        "doc_id": document.doc_id,
        "source": document.source,
        "visibility": document.visibility.value,
        "owner": document.owner,
    }


def path_prefixes(path: str) -> list[str]:
    """The directory prefixes of a path, each ending in `/`: what `startsWith` on `path` matches."""
    parts = path.split("/")[:-1]
    return ["/".join(parts[: n + 1]) + "/" for n in range(len(parts))]


def check_metadata(chunk_id: str, metadata: Body, *, user_keys: set[str]) -> None:
    """Refuse metadata over S3 Vectors' per-vector limits, naming the user attributes that do not fit
    (largest first): they cannot be filterable here, and a filter on them would silently miss."""
    too_long = sorted(key for key in user_keys if len(key) > MAX_METADATA_KEY)
    if too_long:
        raise _metadata_error(chunk_id, f"attribute names longer than {MAX_METADATA_KEY} characters", too_long)
    if len(metadata) > MAX_KEYS:
        raise _metadata_error(chunk_id, f"more than {MAX_KEYS} metadata keys", _largest(metadata, user_keys))
    filterable = {key: value for key, value in metadata.items() if key not in NON_FILTERABLE}
    if _size(filterable) > MAX_FILTERABLE_BYTES:
        raise _metadata_error(
            chunk_id, f"more than {MAX_FILTERABLE_BYTES} bytes of filterable metadata", _largest(metadata, user_keys)
        )
    if _size(metadata) > MAX_METADATA_BYTES:
        raise _metadata_error(chunk_id, f"more than {MAX_METADATA_BYTES} bytes of metadata", [])


def _size(metadata: Body) -> int:
    return len(json.dumps(metadata, ensure_ascii=False, separators=(",", ":")).encode())


def _largest(metadata: Body, user_keys: set[str]) -> list[str]:
    return sorted((key for key in metadata if key in user_keys), key=lambda key: -_size({key: metadata[key]}))


def _metadata_error(chunk_id: str, limit: str, keys: list[str]) -> ValidationError:
    named = f"; attributes, largest first: {', '.join(keys)}" if keys else ""
    return ValidationError(
        f"chunk '{chunk_id}' needs {limit}, over what search mode {MODE} stores per vector{named}",
        details={"chunk_id": chunk_id, "mode": MODE, "attributes": keys},
    )


# --- filters -------------------------------------------------------------------------------------------


def read_filter(caller: Caller, filters: Filter | None) -> Body:
    """The filter of every read: the caller's access (the tenant is the index), and the user's filter."""
    clauses = [{KIND_KEY: {"$eq": "chunk"}}, access_filter(caller)]
    if filters is not None:
        clauses.append(translate_filter(filters))
    return {"$and": clauses}


def sources_filter(caller: Caller, known: list[str]) -> Body:
    """The source markers the caller may read whose source is not among `known` (already found)."""
    clauses = [{KIND_KEY: {"$eq": SOURCE_KIND}}, access_filter(caller)]
    if known:
        clauses.append({"source": {"$nin": known}})
    return {"$and": clauses}


def access_filter(caller: Caller) -> Body:
    """`visibility = shared OR owner = caller`: `domain.access.may_read` inside the tenant's index."""
    return {"$or": [{"visibility": {"$eq": Visibility.SHARED.value}}, {"owner": {"$eq": caller.user_id}}]}


def translate_filter(flt: Filter) -> Body:
    """citewise's filter in S3 Vectors' operators (the table in docs/s3vectors-design.md)."""
    operator, operand = flt.operator, flt.operand
    if operator in ("andAll", "orAll"):
        return {"$and" if operator == "andAll" else "$or": [translate_filter(child) for child in operand]}
    comparison: Comparison = operand
    key, value = comparison.key, comparison.value
    if operator in VERSION_OPERATORS:
        return _version(VERSION_OPERATORS[operator], key, str(value))  # a version string: `Filter` checked it
    if operator == "equals":
        return {key: {"$eq": _scalar(operator, key, value)}}
    if operator == "notEquals":
        return _or_missing(key, {key: {"$ne": _scalar(operator, key, value)}})
    if operator in ("in", "notIn"):
        options = value if isinstance(value, list) else [value]
        if not options:  # S3 Vectors takes no empty list: nothing is in it, everything is not
            return EVERYTHING if operator == "notIn" else NOTHING
        if operator == "in":
            return {key: {"$in": options}}
        return _or_missing(key, {key: {"$nin": options}})
    if operator in _ORDERED:
        return _ordered(operator, key, value)
    if operator == "listContains":
        return {"$and": [{key: {"$eq": _scalar(operator, key, value)}}, {LIST_KEYS_KEY: {"$eq": key}}]}
    if operator == "startsWith":
        return _starts_with(key, value)
    raise unsupported(operator, key, "S3 Vectors has no substring operator")


def unsupported(operator: str, key: str, why: str) -> UnsupportedFilterError:
    """The 400 for a filter this mode cannot evaluate exactly: never dropped, never approximated."""
    return UnsupportedFilterError(
        f"{operator} on '{key}' is not supported in search mode {MODE}: {why}",
        details={"operator": operator, "key": key, "mode": MODE},
    )


def _scalar(operator: str, key: str, value: Any) -> Any:
    if isinstance(value, list):
        raise unsupported(operator, key, "S3 Vectors compares single values only (use `in` for a list)")
    return value


def _or_missing(key: str, clause: Body) -> Body:
    """A negation: a missing key matches it, as on every backend."""
    return {"$or": [{key: {"$exists": False}}, clause]}


def _ordered(operator: str, key: str, value: Any) -> Body:
    if isinstance(value, bool):
        return NOTHING  # booleans are not ordered, on any backend
    if not isinstance(value, str):
        return {key: {_ORDERED[operator]: value}}
    if key not in DATE_KEYS:
        raise unsupported(operator, key, "S3 Vectors orders numbers only; strings only on the date fields")
    try:
        moment = datetime.fromisoformat(value)
    except ValueError as exc:
        raise unsupported(operator, key, f"'{value}' is not an ISO-8601 date") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    if "T" not in value and len(value) == 10:
        # A date alone is a prefix of every timestamp of its day, which sorts after it as a string: so
        # "after the date" includes the whole day and "before" excludes it (as the other backends say).
        wanted = "$gte" if operator.startswith("greater") else "$lt"
        return {f"#{key}": {wanted: moment.timestamp()}}
    return {f"#{key}": {_ORDERED[operator]: moment.timestamp()}}


def _version(plain: str, key: str, value: str) -> Body:
    """A version operator on the two numbers stored per version (`#vh:`, `#vl:`), compared as a pair:
    (high, low) > (h, l) is high > h, or high = h and low > l. A document without the version (or with a
    value that is none) has neither number, so it matches only the negation, as on every backend."""
    version = parse_version(value)
    high, low = VERSION_HIGH_PREFIX + key, VERSION_LOW_PREFIX + key
    if plain == "equals":
        return {"$and": [{high: {"$eq": version.high}}, {low: {"$eq": version.low}}]}
    if plain == "notEquals":
        return {"$or": [{high: {"$exists": False}}, {high: {"$ne": version.high}}, {low: {"$ne": version.low}}]}
    strict = "$gt" if plain.startswith("greater") else "$lt"
    last = _ORDERED[plain]  # the bound on `low` keeps the operator's own strictness
    return {
        "$or": [{high: {strict: version.high}}, {"$and": [{high: {"$eq": version.high}}, {low: {last: version.low}}]}]
    }


def _starts_with(key: str, value: Any) -> Body:
    if key == "path" and isinstance(value, str) and value.endswith("/"):
        return {PATH_PREFIXES_KEY: {"$eq": value}}
    if key in DATE_KEYS and isinstance(value, str) and (found := _DATE_PREFIX_RE.match(value)):
        _, month, day = (int(part) if part else None for part in found.groups())
        try:
            start, end = _period(int(value[:4]), month, day)
        except ValueError as exc:
            raise unsupported("startsWith", key, f"'{value}' is no date") from exc
        return {"$and": [{f"#{key}": {"$gte": start.timestamp()}}, {f"#{key}": {"$lt": end.timestamp()}}]}
    raise unsupported(
        "startsWith",
        key,
        "only a directory prefix of 'path' (ending in '/') or a YYYY, YYYY-MM or YYYY-MM-DD prefix of a date field",
    )


def _period(year: int, month: int | None, day: int | None) -> tuple[datetime, datetime]:
    """The UTC period a date prefix names: a year, a month or a day."""
    if day is not None and month is not None:
        start = datetime(year, month, day, tzinfo=UTC)
        return start, start + timedelta(days=1)
    if month is not None:
        start = datetime(year, month, 1, tzinfo=UTC)
        return start, datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
    return datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)
