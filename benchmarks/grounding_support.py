"""Precision and recall of the grounding check (`citewise.ports.grounding.ground`) on labelled pairs.

Usage: python -m benchmarks.grounding_support [--scifact DIR] [--build]

A pair is a sentence a model might write and the source it cites; it is labelled supported when the
source states what the sentence says. Each pair is graded as a one-sentence answer, `"<sentence> [1]"`
grounded against the one cited source: `grounded: true` is the check's "supported". Precision is the
share of pairs it calls supported that are; recall the share of supported pairs it calls supported.

- The labelled set, `tests/fixtures/grounding_pairs.json` (`--build` rewrites it), from the sample corpus
  (samples/corpus: architecture.md and deployment.md, one source per paragraph of at least 20 words
  outside code blocks, headings and lists): "verbatim", the first sentence of every paragraph cited to its
  paragraph (supported); "wrong source", the same sentence cited to the other paragraph sharing the most
  content words with it (unsupported: the planted claim cited to an unrelated official source);
  "paraphrase", hand-written rewordings of a paragraph's statements (supported); "planted", "planted
  number", "planted entity", hand-written claims sharing words with the paragraph they cite but saying
  what it does not, or with a changed number or name (unsupported).
- SciFact-train, when its folder is given and exists: each claim cited to an abstract judged for it
  (it addresses the claim, supporting or contradicting it: "supported" here means the source carries
  the claim's content) and to the unjudged abstract sharing the most content words with it (a hard
  negative). Not stored in the project (its licence asks for attribution, and the set is large).
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from benchmarks.common import REPO
from citewise.domain.textutil import content_terms, sentence_spans
from citewise.ports.grounding import ground
from tests.factories import hit

FIXTURE = REPO / "tests" / "fixtures" / "grounding_pairs.json"
Pair = tuple[str, str, bool]
"""(sentence, cited source text, supported)."""


def grounded(sentence: str, source: str) -> bool:
    """What the grounding check says of `sentence` cited to `source`."""
    return ground(f"{sentence} [1]", [hit(1, source)]).grounded


def precision_recall(pairs: Iterable[Pair]) -> tuple[float, float]:
    """The check's precision and recall for "supported" on `pairs`."""
    called = [(grounded(sentence, source), supported) for sentence, source, supported in pairs]
    true_positives = sum(said and truth for said, truth in called)
    said_supported = sum(said for said, _ in called)
    supported = sum(truth for _, truth in called)
    return true_positives / max(said_supported, 1), true_positives / max(supported, 1)


def fixture_pairs(kinds: Sequence[str] = ()) -> list[Pair]:
    """The labelled pairs of the fixture (of `kinds` only, if given)."""
    data = json.loads(FIXTURE.read_text(encoding="utf-8"))
    return [
        (pair["sentence"], data["sources"][pair["source"]], pair["supported"])
        for pair in data["pairs"]
        if not kinds or pair["kind"] in kinds
    ]


def scifact_pairs(folder: Path) -> list[Pair]:
    """Each SciFact claim cited to a judged abstract (supported) and to its hardest unjudged one (not)."""
    from citewise_local import evaluation

    dataset = evaluation.load_beir(folder)
    texts = {doc: f"{title}. {text}" for doc, (title, text) in dataset.corpus.items()}
    terms = {doc: set(content_terms(text)) for doc, text in texts.items()}
    pairs: list[Pair] = []
    for query_id, grades in sorted(dataset.qrels.items()):
        claim, judged = dataset.queries[query_id], {doc for doc, grade in grades.items() if grade > 0}
        wanted = set(content_terms(claim))
        pairs += [(claim, texts[doc], True) for doc in sorted(judged)]
        nearest = max((len(wanted & terms[doc]), doc) for doc in texts if doc not in judged)
        pairs.append((claim, texts[nearest[1]], False))
    return pairs


HAND = [
    # (a phrase that finds the cited paragraph, the sentence, supported, kind)
    (
        "Ingestion is idempotent",
        "Repeated notifications for the same object version change nothing.",
        True,
        "paraphrase",
    ),
    (
        "Ingestion is idempotent",
        "A record that keeps failing goes to a dead-letter queue after a bounded number of receives.",
        True,
        "paraphrase",
    ),
    ("Ingestion is idempotent", "Failed records are retried forever until an operator deletes them.", False, "planted"),
    ("Ingestion is idempotent", "Removing an object deletes its chunks and its registry entry.", True, "paraphrase"),
    (
        "Tenant isolation is enforced",
        "Every search is restricted to the caller's tenant and to shared documents or the caller's own.",
        True,
        "paraphrase",
    ),
    ("Tenant isolation is enforced", "User filters can widen the access filter for administrators.", False, "planted"),
    (
        "Tenant isolation is enforced",
        "A document outside the access filter returns NOT_FOUND, not FORBIDDEN.",
        True,
        "paraphrase",
    ),
    (
        "Tenant isolation is enforced",
        "A document outside the access filter returns FORBIDDEN with the owner's name.",
        False,
        "planted entity",
    ),
    (
        "The two lists score on different scales",
        "Reciprocal rank fusion gives each chunk 1 / (k + rank) from each list it appears in.",
        True,
        "paraphrase",
    ),
    ("The two lists score on different scales", "The smoothing constant k is 60 by default.", True, "paraphrase"),
    ("The two lists score on different scales", "The smoothing constant k is 20 by default.", False, "planted number"),
    (
        "The two lists score on different scales",
        "Chunks are fused by their raw scores, which are averaged.",
        False,
        "planted",
    ),
    (
        "The two lists score on different scales",
        "A chunk ranked first by both searches scores 1.0.",
        True,
        "paraphrase",
    ),
    (
        "Retrieval drops hits below",
        "Retrieval keeps at most max_sources chunks per answer and removes near-duplicates.",
        True,
        "paraphrase",
    ),
    ("Retrieval drops hits below", "Each citation quotes a verbatim span of its chunk.", True, "paraphrase"),
    ("Retrieval drops hits below", "Every employee gets free lunch on Fridays.", False, "planted"),
    (
        "Retrieval drops hits below",
        "The answer may cite any document of the tenant, even one it was not given.",
        False,
        "planted",
    ),
    ("The tenant id comes only from", "The tenant id comes only from the authenticated identity.", True, "paraphrase"),
    ("The tenant id comes only from", "A request header can set the tenant id.", False, "planted"),
    (
        "The tenant id comes only from",
        "Presigned upload URLs are scoped to the caller's own prefix.",
        True,
        "paraphrase",
    ),
    (
        "The tenant id comes only from",
        "Presigned upload URLs are valid for 7 days for every tenant.",
        False,
        "planted number",
    ),
    (
        "Per-document metadata comes from",
        "Document metadata can come from a sidecar file named <file>.metadata.json.",
        True,
        "paraphrase",
    ),
    (
        "Per-document metadata comes from",
        "Sidecar metadata files are ignored when the document is a PDF.",
        False,
        "planted",
    ),
    (
        "BM25 keyword search finds exact terms",
        "BM25 finds exact terms such as error codes and identifiers, which embeddings blur.",
        True,
        "paraphrase",
    ),
    (
        "BM25 keyword search finds exact terms",
        "Vector search finds passages that say the same thing in other words.",
        True,
        "paraphrase",
    ),
    (
        "BM25 keyword search finds exact terms",
        "Vector search is disabled for tenants on the free plan.",
        False,
        "planted",
    ),
    ("An `Embedder` names its vector space", "Changing the embedding model forces a re-index.", True, "paraphrase"),
    (
        "An `Embedder` names its vector space",
        "Vectors from different models are mixed silently in one index.",
        False,
        "planted",
    ),
    (
        "The embedding model fixes the vector dimension",
        "Changing the embedding model later means re-embedding every chunk.",
        True,
        "paraphrase",
    ),
    (
        "The embedding model fixes the vector dimension",
        "The embedding model can be changed at any time without re-embedding.",
        False,
        "planted",
    ),
    (
        "`make deploy` installs",
        "Synthesis fails on any cdk-nag finding without a written suppression.",
        True,
        "paraphrase",
    ),
    ("`make deploy` installs", "Use make synth ENV=dev to see the templates without deploying.", True, "paraphrase"),
    ("`make deploy` installs", "make deploy skips the cdk-nag checks in production.", False, "planted"),
    (
        "The first deploy of an environment",
        "The first deploy takes 20 minutes or more, mostly creating the OpenSearch domain.",
        True,
        "paraphrase",
    ),
    ("The first deploy of an environment", "The first deploy takes about 5 minutes.", False, "planted number"),
    (
        "The first deploy of an environment",
        "The stack outputs include the API URL and the bucket name.",
        True,
        "paraphrase",
    ),
    (
        "A tenant id starts with",
        "A tenant id contains up to 64 letters, digits, dots, dashes and underscores.",
        True,
        "paraphrase",
    ),
    ("A tenant id starts with", "A tenant id contains up to 128 characters.", False, "planted number"),
    (
        "The app client can read",
        "Users cannot move themselves to another tenant; only an administrator can change the attribute.",
        True,
        "paraphrase",
    ),
    ("The app client can read", "Users can change their own tenant in the app client settings.", False, "planted"),
    ("The app client can read", "Each user's private documents stay visible to that user alone.", True, "paraphrase"),
    ("The app client can read", "Private documents are visible to every user of the tenant.", False, "planted"),
    (
        "citewise calls two Bedrock models",
        "The default embedding model is Titan Text Embeddings v2.",
        True,
        "paraphrase",
    ),
    ("citewise calls two Bedrock models", "The default embedding model is Cohere Embed v3.", False, "planted entity"),
    ("citewise calls two Bedrock models", "Anthropic models need a one-time use case form.", True, "paraphrase"),
    (
        "citewise calls two Bedrock models",
        "Answers are written by GPT-4 through the OpenAI API.",
        False,
        "planted entity",
    ),
    (
        "On OpenSearch the fusion runs",
        "On OpenSearch the fusion runs in a search pipeline created at deploy time.",
        True,
        "paraphrase",
    ),
    (
        "On OpenSearch the fusion runs",
        "The local index skips fusion and ranks by vector score alone.",
        False,
        "planted",
    ),
    (
        "Lambda scales out per SQS batch",
        "By default all tenants share one index, separated by the access filter.",
        True,
        "paraphrase",
    ),
    ("Lambda scales out per SQS batch", "Each tenant always gets its own OpenSearch domain.", False, "planted"),
    (
        "Locally the blob store is a folder",
        "Locally the blob store is a folder and the synthesizer is extractive unless an LLM endpoint is configured.",
        True,
        "paraphrase",
    ),
    (
        "Locally the blob store is a folder",
        "The local server needs Docker and a running PostgreSQL database.",
        False,
        "planted entity",
    ),
    (
        "Every external system sits behind a port",
        "Adapters implement a port for one backend; logic receives ports by injection.",
        True,
        "paraphrase",
    ),
    (
        "Every external system sits behind a port",
        "Logic builds its own boto3 clients wherever it needs them.",
        False,
        "planted",
    ),
    (
        "The OpenSearch adapter and the embedded local index",
        "A failed Bedrock call becomes EMBEDDING_SERVICE_ERROR.",
        True,
        "paraphrase",
    ),
    (
        "The OpenSearch adapter and the embedded local index",
        "A failed Bedrock call becomes INTERNAL_ERROR with the botocore message.",
        False,
        "planted entity",
    ),
]


def build() -> None:
    """Rewrite the fixture from the sample corpus and `HAND` (see the module docstring)."""
    paragraphs = []
    for name in ("architecture.md", "deployment.md"):
        text = re.sub(r"```.*?```", "", (REPO / "samples" / "corpus" / name).read_text(encoding="utf-8"), flags=re.S)
        for block in re.split(r"\n\s*\n", text):
            joined = " ".join(line.strip() for line in block.splitlines())
            if not joined.startswith(("#", "-", "1.")) and len(joined.split()) >= 20:
                paragraphs.append(joined)
    pairs = []
    for number, paragraph in enumerate(paragraphs):
        start, end = sentence_spans(paragraph)[0]
        sentence = paragraph[start:end]
        pairs.append({"kind": "verbatim", "sentence": sentence, "source": number, "supported": True})
        wanted = set(content_terms(sentence))
        shared, _, other = max(
            (len(wanted & set(content_terms(p))), -n, n) for n, p in enumerate(paragraphs) if n != number
        )
        if shared:
            pairs.append({"kind": "wrong source", "sentence": sentence, "source": other, "supported": False})
    for phrase, sentence, supported, kind in HAND:
        (cited,) = [n for n, p in enumerate(paragraphs) if phrase in p][:1]
        pairs.append({"kind": kind, "sentence": sentence, "source": cited, "supported": supported})
    data = {"built_by": "python -m benchmarks.grounding_support --build", "sources": paragraphs, "pairs": pairs}
    FIXTURE.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--scifact", type=Path, default=REPO.parent / "shared" / "datasets" / "scifact-train")
    parser.add_argument("--build", action="store_true", help="rewrite the labelled set from the sample corpus")
    args = parser.parse_args()
    if args.build:
        build()
    sets = {"labelled set (tests/fixtures)": fixture_pairs()}
    if args.scifact.is_dir():
        sets["scifact-train"] = scifact_pairs(args.scifact)
    for name, pairs in sets.items():
        precision, recall = precision_recall(pairs)
        supported = sum(truth for _, _, truth in pairs)
        print(f"{name}: {len(pairs)} pairs ({supported} supported): precision {precision:.3f}, recall {recall:.3f}")


if __name__ == "__main__":
    main()
