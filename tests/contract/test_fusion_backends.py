"""Fusion runs in the client, so the local index, the OpenSearch adapter (on the real node, and as a
domain and a Serverless collection over the HTTP double) and the S3 Vectors adapter (on its double) give
the same fused hits for the same settings, with fixed vectors."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from citewise.domain.models import SearchHit, SearchRequest
from citewise.ports.embedder import Vector
from citewise.query.fusion import FusionMethod
from citewise.query.retrieval import Retriever
from tests.contract.test_index_contract import ALICE, make_chunk, open_index

DIMENSION = 4
# One term per query, found in under half the chunks: BM25 then differs between backends by its idf
# factor only (FTS5 floors the idf of a term in most rows, Lucene does not), which normalising removes;
# the texts are of equal length (length normalisation treats them alike) and no two scores tie, so no
# order is left to a backend's tie-breaking.
TEXTS = {
    "quartz": "quartz quartz quartz slate",
    "basalt": "basalt slate slate chalk",
    "granite": "quartz slate slate slate",
    "shale": "shale chalk chalk flint",
    "marble": "slate slate slate slate",
}
VECTORS: dict[str, Vector] = {
    "quartz": [1.0, 0.0, 0.0, 0.0],
    "basalt": [0.6, 0.8, 0.0, 0.0],
    "granite": [0.0, 1.0, 0.0, 0.0],
    "shale": [0.0, 0.6, 0.8, 0.0],
    "marble": [0.0, 0.0, 0.0, 1.0],
}
QUERIES: dict[str, Vector] = {"quartz": [0.8, 0.6, 0.0, 0.0], "chalk": [0.0, 0.8, 0.0, 0.6]}


class FixedEmbedder:
    """Returns the vector fixed for each query text."""

    name = "fixed-4"
    dimension = DIMENSION

    def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        raise AssertionError("the test stores its vectors itself")

    def embed_query(self, text: str) -> Vector:
        return QUERIES[text]


def _fused(kind: str, directory: Path, method: FusionMethod, query: str) -> list[SearchHit]:
    with open_index(kind, directory) as index:
        index.ensure(FixedEmbedder.name, DIMENSION)
        for name, text in TEXTS.items():
            index.replace_document("acme", name, [make_chunk("acme", name, 0, text)], [VECTORS[name]])
        retriever = Retriever(index, FixedEmbedder(), fusion=method, vector_weight=1.5, candidates=10)
        return retriever.search(ALICE, SearchRequest(query=query, top_k=10, route=False))


@pytest.mark.parametrize("method", ["relevance", "rrf", "minmax", "zscore"])
@pytest.mark.parametrize("query", sorted(QUERIES))
@pytest.mark.parametrize(
    "kind",
    [
        pytest.param("opensearch-real", marks=pytest.mark.opensearch),
        "opensearch-domain",
        "opensearch-serverless",
        "s3vectors",
    ],
)
def test_every_remote_backend_fuses_as_the_local_index_does(
    tmp_path: Path, kind: str, method: FusionMethod, query: str
) -> None:
    # Given the same chunks and vectors in the local index and in OpenSearch
    # When searched with the same fusion settings
    local = _fused("local", tmp_path / "local", method, query)
    remote = _fused(kind, tmp_path / "remote", method, query)

    # Then the same chunks come back in the same order with the same fused and relevance scores
    assert [h.chunk.document.doc_id for h in remote] == [h.chunk.document.doc_id for h in local]
    assert [h.score for h in remote] == pytest.approx([h.score for h in local], abs=1e-4)
    assert [h.relevance_score for h in remote] == pytest.approx([h.relevance_score for h in local], abs=1e-3)
    assert [h.vector_score for h in remote] == pytest.approx([h.vector_score for h in local], abs=1e-5)
    assert len(local) == len(TEXTS)
    if method == "relevance":  # the fused score is the relevance estimate itself
        assert [h.score for h in local] == pytest.approx([h.relevance_score for h in local], abs=5e-5)
