"""An in-memory Amazon S3 Vectors behind a real boto3 client, for what moto 5.2 does not do (QueryVectors).

`FakeS3Vectors().client()` (or any `s3vectors` client given to `serve`) is a boto3 client whose requests
never leave the process: botocore builds and validates each one against the service model it ships
(parameter validation is botocore's own, so a request the real service's model refuses fails here too),
then the double answers it at `before-call`, and its answer is validated against the operation's output
shape before botocore hands it back, as botocore's Stubber does. Errors come back as the service's
modelled exceptions (`ValidationException`, `NotFoundException`, `ConflictException`, ...).

Semantics held to the S3 User Guide ("Metadata filtering", "Limitations and restrictions"):
- filters: `$eq`, `$ne`, `$gt`/`$gte`/`$lt`/`$lte` (numbers only), `$in`, `$nin`, `$exists`, `$and`, `$or`;
  an array value matches `$eq`/`$in` when an element does (and `$ne`/`$nin` when none does); a value of
  another type never compares equal (`1` is not `true` nor `"1"`); an implicit `{"k": v}` is `$eq`;
  a non-filterable key in a filter is a ValidationException;
- full-text search over keys of the index's `textSearchConfigurations`, BM25 (k1 1.2, b 0.75) over the terms
  of `citewise_local.analysis.keyword_terms` (Snowball English, the English stop set) standing in for
  the `en` analyzer, with per-key `bm25Scores` when `returnScores`; only in `ENHANCED` mode (the only mode
  of a bucket created now);
- vector search: exact, cosine distance `1 - cos` (`returnDistance`), filters applied before the search;
- hybrid search (both `queryVector` and `queryTexts`): the full-text and the vector search each rank the
  filtered vectors `topK` deep, Reciprocal Rank Fusion (`1 / (RRF_CONSTANT + rank)` summed over the two
  lists) ranks their union and the best `topK` are returned; with `returnScores` each result has `fused`,
  the `bm25Scores` of the keys its text matched and the `vectorDistance` when the vector search found it
  (the API reference's `QueryScores`). The constant and the depth of each search are not documented:
  60 is the usual constant, and docs/aws.md lists both as what a real account must confirm;
- vectors: the index's dimension, finite values, no zero vector under `cosine` (the API reference's
  PutInputVector), stored as float32;
- an index's own `encryptionConfiguration` (a key per tenant) is kept and shown by GetIndex, `kmsKeyArn`
  only with `aws:kms`; the key itself is not used (KMS is moto's, and the encryption is the service's);
- limits: `topK` at most 100, 50 metadata keys, 2 KB filterable and 40 KB in all per vector, 20 MiB per
  request, the dimension of the index; the 500 per PutVectors/DeleteVectors and 100 per GetVectors are
  the model's own and botocore refuses them before the double sees them.
What only a real account can confirm is listed in docs/s3vectors-design.md.

Faults on demand: `fail_next(operation, code)` answers the next call of that operation with an error;
`ignore_filters` makes QueryVectors disregard filters (to show the adapter's defence in depth).
"""

from __future__ import annotations

import json
import math
import struct
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from operator import ge, gt, le, lt
from typing import Any

import boto3
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from botocore.validate import validate_parameters

from citewise_local.analysis import keyword_terms

ACCOUNT = "123456789012"
REGION = "eu-west-1"
MAX_TOP_K = 100
MAX_KEYS = 50
MAX_FILTERABLE_BYTES = 2048
MAX_METADATA_BYTES = 40 * 1024
MAX_PAYLOAD_BYTES = 20 * 1024 * 1024
RRF_CONSTANT = 60
Json = dict[str, Any]


class ServiceError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class Index:
    name: str
    arn: str
    dimension: int
    metric: str
    non_filterable: frozenset[str]
    text_keys: dict[str, str]  # metadata key: language
    tags: dict[str, str]
    encryption: Json | None = None  # CreateIndex's `encryptionConfiguration`; None: the bucket's
    building: bool = False
    vectors: dict[str, tuple[list[float], Json]] = field(default_factory=dict)
    terms: dict[tuple[str, str], Counter[str]] = field(default_factory=dict)  # (vector, metadata key): analysed

    def analysed(self, key: str, metadata_key: str) -> Counter[str] | None:
        """The analysed terms of a vector's searchable text, cached until the vector is written again."""
        metadata = self.vectors[key][1]
        if metadata_key not in metadata:
            return None
        if (key, metadata_key) not in self.terms:
            self.terms[(key, metadata_key)] = Counter(keyword_terms(str(metadata[metadata_key])))
        return self.terms[(key, metadata_key)]

    def forget(self, key: str) -> None:
        for metadata_key in self.text_keys:
            self.terms.pop((key, metadata_key), None)


@dataclass
class Bucket:
    name: str
    arn: str
    tags: dict[str, str] = field(default_factory=dict)
    indexes: dict[str, Index] = field(default_factory=dict)


class FakeS3Vectors:
    """The service's state (buckets, indexes, vectors) and its answers; `requests` records each call."""

    def __init__(self, *, max_indexes: int = 10_000, region: str = REGION) -> None:
        self.region = region
        self.buckets: dict[str, Bucket] = {}
        self.max_indexes = max_indexes
        self.requests: list[tuple[str, Json]] = []
        self._faults: dict[str, str] = {}
        self.ignore_filters = False  # a fault: QueryVectors answers as if no filter had been sent

    def client(self) -> Any:
        """A boto3 client answered by this double (parameter validation on, no retries, no network)."""
        made = boto3.client(
            "s3vectors",
            region_name=self.region,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",  # noqa: S106 - never a real credential
            config=Config(retries={"total_max_attempts": 1}, parameter_validation=True),
        )
        self.attach(made.meta.events)
        return made

    def attach(self, events: Any) -> None:
        """Answer the `s3vectors` calls of every client whose events are `events` (a client's, or a boto3
        session's: then the clients the code under test makes itself, with its own configuration)."""
        events.register("before-parameter-build.s3vectors.*", self._keep_params)
        events.register("before-call.s3vectors.*", self._answer)

    def create_bucket(self, name: str) -> Bucket:
        bucket = Bucket(name, f"arn:aws:s3vectors:{self.region}:{ACCOUNT}:bucket/{name}")
        self.buckets[name] = bucket
        return bucket

    def fail_next(self, operation: str, code: str) -> None:
        self._faults[operation] = code

    # --- the wire ----------------------------------------------------------------------------------

    @staticmethod
    def _keep_params(params: Json, context: Json, **_: Any) -> None:
        context["double_params"] = json.loads(json.dumps(params, default=str))  # a copy, as sent

    def _answer(self, model: Any, context: Json, **_: Any) -> tuple[AWSResponse, Json]:
        # Reached after botocore validated the parameters against the model (before-call follows it).
        operation, params = model.name, context["double_params"]
        self.requests.append((operation, params))
        try:
            if (code := self._faults.pop(operation, None)) is not None:
                raise ServiceError(code, f"injected {code}")
            handler = getattr(self, f"_op_{operation}", None)
            if handler is None:
                raise ServiceError("ValidationException", f"the double does not implement {operation}")
            answer: Json = handler(params)
        except ServiceError as error:
            status = model.service_model.shape_for(error.code).metadata.get("error", {}).get("httpStatusCode", 400)
            body = {
                "Error": {"Code": error.code, "Message": error.message},
                "ResponseMetadata": {"HTTPStatusCode": status},
            }
            return AWSResponse(None, status, {}, None), body
        validate_parameters(answer, model.output_shape)
        return AWSResponse(None, 200, {}, None), {**answer, "ResponseMetadata": {"HTTPStatusCode": 200}}

    # --- buckets and indexes ------------------------------------------------------------------------

    def _bucket(self, params: Json) -> Bucket:
        name = params.get("vectorBucketName") or str(params.get("vectorBucketArn", "")).rpartition("/")[2]
        if name not in self.buckets:
            raise ServiceError("NotFoundException", f"vector bucket {name} not found")
        return self.buckets[name]

    def _index(self, params: Json) -> Index:
        if "indexArn" in params:
            bucket_arn, _, name = str(params["indexArn"]).partition("/index/")
            bucket = self._bucket({"vectorBucketArn": bucket_arn})
        else:
            bucket, name = self._bucket(params), params.get("indexName", "")
        if name not in bucket.indexes:
            raise ServiceError("NotFoundException", f"index {name} not found")
        return bucket.indexes[name]

    def _op_GetVectorBucket(self, params: Json) -> Json:  # noqa: N802 - named after the operation
        bucket = self._bucket(params)
        return {"vectorBucket": {"vectorBucketName": bucket.name, "vectorBucketArn": bucket.arn, "creationTime": _NOW}}

    def _op_ListTagsForResource(self, params: Json) -> Json:  # noqa: N802
        return {"tags": dict(self._tagged(params["resourceArn"]))}

    def _op_TagResource(self, params: Json) -> Json:  # noqa: N802
        self._tagged(params["resourceArn"]).update(params["tags"])
        return {}

    def _tagged(self, arn: str) -> dict[str, str]:
        if "/index/" in arn:
            return self._index({"indexArn": arn}).tags
        return self._bucket({"vectorBucketArn": arn}).tags

    def _op_CreateIndex(self, params: Json) -> Json:  # noqa: N802
        bucket = self._bucket(params)
        name = params["indexName"]
        if not _valid_name(name):
            raise ServiceError("ValidationException", f"invalid index name {name}")
        if name in bucket.indexes:
            raise ServiceError("ConflictException", f"index {name} already exists")
        if len(bucket.indexes) >= self.max_indexes:
            raise ServiceQuotaExceeded()
        config = params.get("metadataConfiguration", {})
        bucket.indexes[name] = Index(
            name=name,
            arn=f"{bucket.arn}/index/{name}",
            dimension=params["dimension"],
            metric=params["distanceMetric"],
            non_filterable=frozenset(config.get("nonFilterableMetadataKeys", [])),
            text_keys={
                c["metadataKey"]: c.get("language", "standard") for c in config.get("textSearchConfigurations", [])
            },
            tags=dict(params.get("tags", {})),
            encryption=_encryption(params.get("encryptionConfiguration")),
        )
        return {"indexArn": bucket.indexes[name].arn}

    def _op_GetIndex(self, params: Json) -> Json:  # noqa: N802
        index = self._index(params)
        status = "BUILDING" if index.building else "ACTIVE"
        return {
            "index": {
                "vectorBucketName": index.arn.split("/")[1],
                "indexName": index.name,
                "indexArn": index.arn,
                "creationTime": _NOW,
                "dataType": "float32",
                "dimension": index.dimension,
                "distanceMetric": index.metric,
                "indexMode": "ENHANCED",
                **({"encryptionConfiguration": index.encryption} if index.encryption else {}),
                "metadataConfiguration": {
                    "nonFilterableMetadataKeys": sorted(index.non_filterable),
                    "textSearchConfigurations": [
                        {"metadataKey": key, "language": language, "status": status}
                        for key, language in index.text_keys.items()
                    ],
                },
            }
        }

    def _op_DeleteIndex(self, params: Json) -> Json:  # noqa: N802
        index = self._index(params)
        del self._bucket({"vectorBucketArn": index.arn.partition("/index/")[0]}).indexes[index.name]
        return {}

    # --- vectors -----------------------------------------------------------------------------------

    def _op_PutVectors(self, params: Json) -> Json:  # noqa: N802
        index = self._index(params)
        if len(json.dumps(params).encode()) > MAX_PAYLOAD_BYTES:
            raise ServiceError("ValidationException", "request payload exceeds 20 MiB")
        staged: dict[str, tuple[list[float], Json]] = {}
        for vector in params["vectors"]:
            data = vector["data"]["float32"]
            if len(data) != index.dimension:
                raise ServiceError(
                    "ValidationException",
                    f"vector dimension {len(data)} does not match index dimension {index.dimension}",
                )
            if not all(math.isfinite(x) for x in data):
                raise ServiceError("ValidationException", "vector data must be finite")
            if index.metric == "cosine" and not any(data):
                raise ServiceError("ValidationException", "zero vectors are not allowed for the cosine metric")
            metadata = vector.get("metadata", {})
            _check_metadata(index, metadata)
            staged[vector["key"]] = ([_float32(x) for x in data], metadata)
        index.vectors.update(staged)  # all or nothing
        for key in staged:
            index.forget(key)
        return {}

    def _op_GetVectors(self, params: Json) -> Json:  # noqa: N802
        index = self._index(params)
        found = []
        for key in params["keys"]:
            if key in index.vectors:
                found.append(self._out(key, index.vectors[key], params))
        return {"vectors": found}

    def _op_DeleteVectors(self, params: Json) -> Json:  # noqa: N802
        index = self._index(params)
        for key in params["keys"]:
            index.vectors.pop(key, None)
            index.forget(key)
        return {}

    def _op_ListVectors(self, params: Json) -> Json:  # noqa: N802
        index = self._index(params)
        keys = sorted(index.vectors)
        start = int(params.get("nextToken", "0"))
        size = params.get("maxResults", 500)
        page = keys[start : start + size]
        answer: Json = {"vectors": [self._out(key, index.vectors[key], params) for key in page]}
        if start + size < len(keys):
            answer["nextToken"] = str(start + size)
        return answer

    @staticmethod
    def _out(key: str, stored: tuple[list[float], Json], params: Json) -> Json:
        out: Json = {"key": key}
        if params.get("returnData"):
            out["data"] = {"float32": list(stored[0])}
        if params.get("returnMetadata"):
            out["metadata"] = stored[1]
        return out

    def _op_QueryVectors(self, params: Json) -> Json:  # noqa: N802
        index = self._index(params)
        top_k = params["topK"]
        if top_k > MAX_TOP_K:
            raise ServiceError("ValidationException", f"topK must be at most {MAX_TOP_K}")
        query_vector = params.get("queryVector", {}).get("float32")
        texts = params.get("queryTexts")
        if query_vector is None and texts is None:
            raise ServiceError("ValidationException", "a request must include queryVector, queryTexts, or both")
        flt = params.get("filter")
        if flt is not None:
            _check_filter(index, flt)
        applies = flt is not None and not self.ignore_filters
        candidates = [key for key, stored in index.vectors.items() if not applies or _matches(flt, stored[1])]
        if query_vector is not None and len(query_vector) != index.dimension:
            raise ServiceError("ValidationException", "query vector dimension does not match the index")
        if texts is None:
            nearest = _nearest(index, query_vector, candidates, top_k)
            distance = params.get("returnDistance")
            hits = [{"key": key, **({"distance": d} if distance else {})} for key, d in nearest]
        elif query_vector is None:
            matched = _full_text(index, texts, candidates, top_k)
            hits = [{"key": key, **_scores(params, bm25=parts)} for key, parts in matched]
        else:
            hits = _hybrid(index, query_vector, texts, candidates, top_k, params)
        if params.get("returnMetadata"):
            hits = [{**hit, "metadata": index.vectors[hit["key"]][1]} for hit in hits]
        return {"distanceMetric": index.metric, "vectors": hits}


class ServiceQuotaExceeded(ServiceError):
    def __init__(self) -> None:
        super().__init__("ServiceQuotaExceededException", "the vector bucket holds its maximum of indexes")


_NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _encryption(configuration: Json | None) -> Json | None:
    """An index's own encryption, as the API reference's EncryptionConfiguration says: `kmsKeyArn` if and
    only if `sseType` is `aws:kms` (the model checks the ARN's pattern, not this pairing)."""
    if configuration is None:
        return None
    if (configuration.get("sseType") == "aws:kms") != ("kmsKeyArn" in configuration):
        raise ServiceError("ValidationException", "kmsKeyArn is allowed if and only if sseType is aws:kms")
    return dict(configuration)


def _valid_name(name: str) -> bool:
    allowed = set("abcdefghijklmnopqrstuvwxyz0123456789-.")
    return 3 <= len(name) <= 63 and set(name) <= allowed and name[0] not in "-." and name[-1] not in "-."


def _float32(value: float) -> float:
    return float(struct.unpack("f", struct.pack("f", value))[0])


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def _check_metadata(index: Index, metadata: Json) -> None:
    if len(metadata) > MAX_KEYS:
        raise ServiceError("ValidationException", f"metadata has more than {MAX_KEYS} keys")
    filterable = {key: value for key, value in metadata.items() if key not in index.non_filterable}
    if _size(filterable) > MAX_FILTERABLE_BYTES:
        raise ServiceError("ValidationException", "filterable metadata exceeds 2 KB")
    if _size(metadata) > MAX_METADATA_BYTES:
        raise ServiceError("ValidationException", "metadata exceeds 40 KB")
    for key, value in metadata.items():
        values = value if isinstance(value, list) else [value]
        if not all(isinstance(v, str | int | float | bool) for v in values):
            raise ServiceError("ValidationException", f"metadata {key} has a value of an unsupported type")


def _check_filter(index: Index, flt: Any) -> None:
    if not isinstance(flt, dict) or not flt:
        raise ServiceError("ValidationException", "a filter is a non-empty object")
    for key, condition in flt.items():
        if key in ("$and", "$or"):
            if not isinstance(condition, list) or not condition:
                raise ServiceError("ValidationException", f"{key} takes a non-empty array of filters")
            for child in condition:
                _check_filter(index, child)
            continue
        if key.startswith("$"):
            raise ServiceError("ValidationException", f"unknown operator {key}")
        if key in index.non_filterable:
            raise ServiceError("ValidationException", f"metadata key {key} is not filterable")
        if isinstance(condition, dict):
            for operator, operand in condition.items():
                _check_operand(operator, operand)


def _check_operand(operator: str, operand: Any) -> None:
    primitive = (str, int, float, bool)
    if operator in ("$eq", "$ne"):
        ok = isinstance(operand, primitive)
    elif operator in ("$gt", "$gte", "$lt", "$lte"):
        ok = isinstance(operand, int | float) and not isinstance(operand, bool)
    elif operator in ("$in", "$nin"):
        ok = isinstance(operand, list) and bool(operand) and all(isinstance(v, primitive) for v in operand)
    elif operator == "$exists":
        ok = isinstance(operand, bool)
    else:
        raise ServiceError("ValidationException", f"unknown operator {operator}")
    if not ok:
        raise ServiceError("ValidationException", f"invalid operand for {operator}")


def _same(a: Any, b: Any) -> bool:
    """Equal and of one kind: a bool is no number, a number no string; 2023 is 2023.0."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers):
        return bool(a == b)
    return type(a) is type(b) and a == b


def _matches(flt: Json, metadata: Json) -> bool:
    for key, condition in flt.items():
        if key == "$and" and not all(_matches(child, metadata) for child in condition):
            return False
        if key == "$or" and not any(_matches(child, metadata) for child in condition):
            return False
        if key.startswith("$"):
            continue
        conditions = condition if isinstance(condition, dict) else {"$eq": condition}
        if not all(_holds(operator, operand, key, metadata) for operator, operand in conditions.items()):
            return False
    return True


def _holds(operator: str, operand: Any, key: str, metadata: Json) -> bool:
    if operator == "$exists":
        return (key in metadata) is operand
    if key not in metadata:
        return operator in ("$ne", "$nin")
    value = metadata[key]
    values = value if isinstance(value, list) else [value]
    if operator == "$eq":
        return any(_same(v, operand) for v in values)
    if operator == "$ne":
        return not any(_same(v, operand) for v in values)
    if operator == "$in":
        return any(_same(v, option) for v in values for option in operand)
    if operator == "$nin":
        return not any(_same(v, option) for v in values for option in operand)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return bool(_ORDER[operator](value, operand))


_ORDER: dict[str, Any] = {"$gt": gt, "$gte": ge, "$lt": lt, "$lte": le}


def _nearest(index: Index, query: list[float], candidates: list[str], top_k: int) -> list[tuple[str, float]]:
    """The `top_k` candidates nearest to `query`, with their cosine distance (exact search)."""
    norm = math.sqrt(sum(x * x for x in query))
    distances = [(key, _cosine_distance(query, norm, index.vectors[key][0])) for key in candidates]
    return sorted(distances, key=lambda hit: (hit[1], hit[0]))[:top_k]


def _full_text(index: Index, texts: list[Json], candidates: list[str], top_k: int) -> list[tuple[str, list[Json]]]:
    """The `top_k` candidates by BM25 summed over the query texts, each with its per-key scores."""
    seen = set()
    for entry in texts:
        if entry["metadataKey"] not in index.text_keys:
            raise ServiceError("ValidationException", f"metadata key {entry['metadataKey']} is not searchable")
        if entry["metadataKey"] in seen:
            raise ServiceError("ValidationException", "each query text must target a distinct metadata key")
        seen.add(entry["metadataKey"])
    if index.building:
        raise ServiceError("ValidationException", "the text search analyzer is BUILDING")
    parts: dict[str, list[Json]] = {}
    for entry in texts:
        scores = _bm25(index, entry["text"], entry["metadataKey"])
        for key in candidates:
            if (score := scores.get(key, 0.0)) > 0:
                parts.setdefault(key, []).append({"metadataKey": entry["metadataKey"], "score": score})
    totals = {key: sum(part["score"] for part in found) for key, found in parts.items()}
    return [(key, parts[key]) for key in sorted(totals, key=lambda key: (-totals[key], key))[:top_k]]


def _hybrid(
    index: Index, query: list[float], texts: list[Json], candidates: list[str], top_k: int, params: Json
) -> list[Json]:
    """Both searches `top_k` deep, fused by Reciprocal Rank Fusion; the best `top_k` of their union."""
    matched = dict(_full_text(index, texts, candidates, top_k))
    nearest = dict(_nearest(index, query, candidates, top_k))
    fused: dict[str, float] = {}
    for ranking in (list(matched), list(nearest)):
        for rank, key in enumerate(ranking, start=1):
            fused[key] = fused.get(key, 0.0) + 1.0 / (RRF_CONSTANT + rank)
    best = sorted(fused, key=lambda key: (-fused[key], key))[:top_k]
    return [
        {"key": key, **_scores(params, bm25=matched.get(key), fused=fused[key], distance=nearest.get(key))}
        for key in best
    ]


def _scores(
    params: Json, *, bm25: list[Json] | None, fused: float | None = None, distance: float | None = None
) -> Json:
    """A result's `scores` (`QueryScores`) when `returnScores` is asked: what it has of the three."""
    if not params.get("returnScores"):
        return {}
    scores: Json = {"bm25Scores": bm25} if bm25 else {}
    if fused is not None:
        scores["fused"] = fused
    if distance is not None:
        scores["vectorDistance"] = distance
    return {"scores": scores}


def _cosine_distance(a: list[float], a_norm: float, b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norms = a_norm * math.sqrt(sum(y * y for y in b))
    return _float32(1.0 - dot / norms) if norms else 1.0


def _bm25(index: Index, text: str, metadata_key: str, k1: float = 1.2, b: float = 0.75) -> dict[str, float]:
    """BM25 of every vector holding `metadata_key`, by vector key, statistics over the whole index."""
    analysed = [(key, terms) for key in index.vectors if (terms := index.analysed(key, metadata_key)) is not None]
    if not analysed:
        return {}
    lengths = {key: sum(terms.values()) for key, terms in analysed}
    average = sum(lengths.values()) / len(analysed)
    scores: dict[str, float] = {}
    for term in set(keyword_terms(text)):
        having = [(key, terms[term]) for key, terms in analysed if term in terms]
        if not having:
            continue
        idf = math.log(1 + (len(analysed) - len(having) + 0.5) / (len(having) + 0.5))
        for key, tf in having:
            saturation = tf + k1 * (1 - b + b * lengths[key] / average)
            scores[key] = scores.get(key, 0.0) + idf * tf * (k1 + 1) / saturation
    return scores
