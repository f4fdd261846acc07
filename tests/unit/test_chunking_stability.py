"""Chunk ids, spans and content hashes never change for unchanged input (issue 17, the chunker's speed-up).

A content hash decides whether a chunk is embedded again, and a chunk id where it is indexed: a chunker
that cut one span differently, or hashed one header differently, would re-embed every tenant's corpus at
their next upload. So each case below is chunked and its whole output (every field of every chunk, the
document metadata included) is reduced to one SHA-256, which must equal the digest recorded from the
chunker as it was before the speed-up (`main` at 2db35c2). The cases cover the sample corpus at several
budgets (small budgets force sentence and token-window cuts), the benchmark's own inputs, and generated
text: non-ASCII words, sentence ends inside quotes and brackets, runs with no break, pages, whitespace-only
blocks and blocks that start inside a word. A digest to update means a change that re-embeds documents.
Most cases go through the parsers, so a parser change that alters the parsed text changes their digests
too (and re-embeds those documents as well); the `paged` cases build their blocks directly. The PDF
digests were recorded again when a PDF paragraph's lines were joined (issue 26): that re-embeds every
PDF once; the Markdown and HTML digests did not change with the markup rules of that issue.
"""

from __future__ import annotations

import hashlib
import random
from datetime import UTC, datetime
from pathlib import Path

import pytest

from benchmarks import inputs
from citewise.domain.models import Block, DocumentMetadata, ParsedDocument
from citewise.ingest.chunking import Chunker
from citewise.ingest.parsing import parse

CORPUS = Path(__file__).resolve().parents[2] / "samples" / "corpus"
NOW = datetime(2026, 1, 1, tzinfo=UTC)
BUDGETS = ((400, 50), (100, 15), (30, 5), (8, 2))
WORDS = (
    "tenant index chunk query answer citation ingest vector embed section page heading budget overlap span "
    "naïve café Zürich résumé — “quoted” ‘single’ 字 数据 ø æ ß x_y a1 3.14 e.g. don't C++ #tag"
).split()


def _metadata(title: str, doc_id: str) -> DocumentMetadata:
    return DocumentMetadata(
        tenant_id="t1",
        doc_id=doc_id,
        owner="u",
        source="test",
        path="a/doc",
        title=title,
        created_at=NOW,
        updated_at=NOW,
    )


def _digest(parsed: ParsedDocument, title: str, budget: tuple[int, int], doc_id: str = "doc") -> str:
    """SHA-256 of every field of every chunk, in order, and the number of chunks."""
    chunks = Chunker(*budget).split(parsed, _metadata(title, doc_id))
    body = "\n".join(chunk.model_dump_json() for chunk in chunks)
    return f"{len(chunks)}:{hashlib.sha256(body.encode('utf-8')).hexdigest()[:32]}"


def _sentence(rng: random.Random) -> str:
    """Words, then one of the sentence ends the splitter knows (or none, to make long runs)."""
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 40)))
    return words + rng.choice([".", "!", "?", '."', "?)", ".]", ".'", ";", "", ","])


def _markdown(seed: int) -> bytes:
    """Nested sections of paragraphs, with a list, a long run with no break and blank-line breaks."""
    rng = random.Random(seed)
    parts: list[str] = []
    for section in range(rng.randint(3, 8)):
        parts.append(f"{'#' * rng.randint(1, 3)} {rng.choice(WORDS)} {section}")
        for _ in range(rng.randint(0, 5)):
            kind = rng.random()
            if kind < 0.15:
                parts.append("\n".join(f"- {_sentence(rng)}" for _ in range(rng.randint(1, 4))))
            elif kind < 0.25:
                parts.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(50, 400))))
            else:
                parts.append(" ".join(_sentence(rng) for _ in range(rng.randint(1, 30))))
    return "\n\n".join(parts).encode("utf-8")


def _paged(seed: int) -> ParsedDocument:
    """Blocks straight from a layout: pages, headings, whitespace-only blocks, blocks cut inside words."""
    rng = random.Random(seed)
    text = ""
    blocks: list[Block] = []
    page, path = 1, ("Doc",)
    for _ in range(rng.randint(20, 60)):
        page += rng.random() < 0.2
        kind = rng.random()
        if kind < 0.1:
            body, heading = f"{rng.choice(WORDS)} heading", True
            path = ("Doc", body)
        elif kind < 0.15:
            body, heading = rng.choice([" ", "\n\t ", "   "]), False
        else:
            body, heading = " ".join(_sentence(rng) for _ in range(rng.randint(1, 12))), False
        # No separator at all starts a block inside the previous one's last word (a layout's line break).
        text += rng.choice(["\n\n", "\n", " ", ""]) if text else ""
        blocks.append(
            Block(start=len(text), end=len(text) + len(body), heading_path=path, page=page, is_heading=heading)
        )
        text += body
    return ParsedDocument(text=text, blocks=tuple(blocks), title="Doc", page_count=page)


def _corpus(name: str) -> ParsedDocument:
    return parse((CORPUS / name).read_bytes(), name)


EXPECTED: dict[tuple[int, int], dict[str, str]] = {
    (400, 50): {
        "architecture.md": "13:131dbf23cb67e6a814d1f1f083c8c538",
        "deployment.md": "7:edac52e8d6290b2e0a44e4b5b0b3e583",
        "api.html": "11:b3bab4434239fc0749ff53e1e2555441",
        "operations-runbook.pdf": "10:44cc131069e7986a2321e54c14ce9093",
        "bench.md": "40:100d6658b4cb289c3182f01bb422ccc2",
        "bench.html": "22:6127d44eb1051689acf0e793aaa8f9b6",
        "bench.pdf": "24:5d61094d60be58bc232f8b2e456ece6f",
        "generated.md.0": "19:a2d35bd85571cb32686978b2900a982c",
        "paged.0": "32:c8cb9d1607a0581cb0db7416f4a03e4f",
        "generated.md.1": "15:1417469fc9b148995fe961a089b0779e",
        "paged.1": "19:6da79d38f2b0b3811150a9b51b95e560",
        "generated.md.2": "12:36fdc5f8fa2060fa2a46162a482b3674",
        "paged.2": "17:cb8312402f054548c37d3250ca77ebde",
        "generated.md.3": "8:8afed38546e6b401c554c5750641174f",
        "paged.3": "22:043905cfd62c5488dca964d2db1b3cad",
        "generated.md.4": "19:db89f63a9f1c1f641c4177d021ce7f23",
        "paged.4": "31:01937523fc0ec2b93459300023da5d88",
        "generated.md.5": "38:7d51ef2aaef7526b095f32282782f1ad",
        "paged.5": "40:3d717a0d5e49de1dbe0b2755b98f3486",
    },
    (100, 15): {
        "architecture.md": "25:830c664f1fc7ce38852c101671085219",
        "deployment.md": "18:473afe3a0aed960f3d907501beccfa8c",
        "api.html": "22:66757d71eb88c966edb1219dcf312548",
        "operations-runbook.pdf": "31:e6430f745d786ab8352da1c9bd2b3645",
        "bench.md": "86:e07721e71d228b3b65cc88c3564b06c7",
        "bench.html": "44:806eaf815dbf5b378e966c5223e566fc",
        "bench.pdf": "84:c96ba40071e8e34c8e4f1bc4db794dd8",
        "generated.md.0": "72:b2320e3a3ee4828b428f3a6deefa3178",
        "paged.0": "117:c9825c03aa856b2120e9561ed03ac1b0",
        "generated.md.1": "58:4eba54fb6b9a88dfe4568aa5cc309dca",
        "paged.1": "62:44dbb8c25ee5a740cfa4e573d7b7c6a3",
        "generated.md.2": "51:c3036955fd6469bcfa2981fd39b4daf6",
        "paged.2": "48:8242727e424deb9b204ef6d8dc99a1cf",
        "generated.md.3": "27:e9dffc86c2d1eb54cc3e064ae6d38c64",
        "paged.3": "85:6ab68c9985f45955e27f10c1a1ac79f2",
        "generated.md.4": "78:a72634c38cc223f74f1371289384a330",
        "paged.4": "97:8772c0a78b6a7716bf17a2ca2c8afed7",
        "generated.md.5": "161:26bc8f7c048ad0475a8538b736e1b307",
        "paged.5": "139:dd2734554cd666b74c3aa7cc8e2f5f43",
    },
    (30, 5): {
        "architecture.md": "89:107cca5656a351d4c2a40c58c35c668b",
        "deployment.md": "52:366088d7f929c4bb85a27733c49a54e2",
        "api.html": "67:ef0b45b7590993e41fa20dcd1ffebc6f",
        "operations-runbook.pdf": "96:a6a3f48ef18cff621a3e0f45d2af0a85",
        "bench.md": "282:b68ce3e1f4a2212abb2e32033b1ca55e",
        "bench.html": "134:8aef10a6b7c3c376422fee85a85a6ab7",
        "bench.pdf": "266:a20451c201753cc193e708f12c619753",
        "generated.md.0": "236:558c88b53d9b5fefcb9c13b80cc74e1d",
        "paged.0": "408:fc71d6f44d7103f0aca3a2d27a9aed5b",
        "generated.md.1": "187:76f3679d00932eddab3f06a627ced897",
        "paged.1": "193:1026c3cf43270b89bb3e3b9c3b5b1773",
        "generated.md.2": "172:7d3268e180b34f0a2c1465aa4aece772",
        "paged.2": "163:885cd9382454aa705f830feb01666b5f",
        "generated.md.3": "84:65c8873c4293851e0f35d00a31a6bacf",
        "paged.3": "273:fad4a6aa1cf7e960a0007718cad728f3",
        "generated.md.4": "263:fcdb8c1bbc2ceca6fbc5ce9803cf3a60",
        "paged.4": "336:5e0a24d4b1b7445d81b241bf2738901b",
        "generated.md.5": "524:8be12d08b3499fb459d59b8597589120",
        "paged.5": "461:d6a2551e0d611c801969883938132594",
    },
    (8, 2): {
        "architecture.md": "274:aebc33e51eaea916e15e356e4f00d57e",
        "deployment.md": "169:e7fc03a88c71b399914a0b2bdeeb9556",
        "api.html": "221:16736937e4dacadbbffbd113f8505aa1",
        "operations-runbook.pdf": "320:5ff86ff598c80d755d6322634a872b1b",
        "bench.md": "886:c73d7ea879a2fbd690ed039e95b0581a",
        "bench.html": "442:782454638f2588cc97e510715246e28f",
        "bench.pdf": "856:60e29a8a825ae1e9b1aae5862a5a3209",
        "generated.md.0": "785:7dc7a8a0ba8044eceb873723c44fe9da",
        "paged.0": "1338:99f401353115f7bb2f213e4dc37b60bf",
        "generated.md.1": "620:4a9a09d19bdd51699f391d640ea3f6a3",
        "paged.1": "636:41a1903d9a47edc477ee72ec2c1436c7",
        "generated.md.2": "552:953529f2994c5c976f485d4eea2b8be7",
        "paged.2": "516:f53b3fb5ddd864161b556e80a5b5ee82",
        "generated.md.3": "273:07248b3b38885792be54ecab26c0cc21",
        "paged.3": "903:32d148a70e79fbc712bd3bae30b3a03f",
        "generated.md.4": "850:2d7fbb88c7729a491063ae2d106f6b83",
        "paged.4": "1077:3a2ed1ce255067118c7db70b0a351fd3",
        "generated.md.5": "1719:5b60c0eee6bdff29d4be1f32ab9f6f21",
        "paged.5": "1516:12ec5d10d44e30feb2022c21e0c546e4",
    },
}


CASES: dict[str, tuple[ParsedDocument, str]] = {}


def _cases() -> dict[str, tuple[ParsedDocument, str]]:
    """Every (parsed document, metadata title) chunked at every budget."""
    if not CASES:
        for name in ("architecture.md", "deployment.md", "api.html", "operations-runbook.pdf"):
            parsed = _corpus(name)
            CASES[name] = (parsed, parsed.title or name)
        CASES["bench.md"] = (parse(inputs.markdown(2), "corpus.md"), "citewise")
        CASES["bench.html"] = (parse(inputs.html(2), "corpus.html"), "API")
        CASES["bench.pdf"] = (parse(inputs.handbook_pdf(12), "handbook.pdf"), "citewise operations handbook")
        for seed in range(6):
            CASES[f"generated.md.{seed}"] = (parse(_markdown(seed), "generated.md"), "Generated")
            CASES[f"paged.{seed}"] = (_paged(seed), "Doc")
    return CASES


@pytest.mark.parametrize("budget", BUDGETS, ids=lambda budget: f"{budget[0]}-{budget[1]}")
def test_chunks_are_unchanged_for_unchanged_input(budget: tuple[int, int]) -> None:
    # Given the sample corpus, the benchmark's inputs and generated documents
    cases = _cases()
    # When each is chunked at this budget
    digests = {name: _digest(parsed, title, budget) for name, (parsed, title) in cases.items()}
    # Then every chunk of every case is what the chunker produced before the speed-up
    assert digests == EXPECTED[budget]


BENCHMARK_EXPECTED = {
    "md": "1400:4b2d28b33bef02b12513bbb50ea77163",
    "html": "1408:d49bfe87f685d3dd35da16d484989f49",
    "pdf": "2000:5bb85eee1335d7a89aedac872a55aae1",
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(BENCHMARK_EXPECTED))
def test_the_benchmark_inputs_chunk_as_before(kind: str) -> None:
    # Given one of the full-size inputs `benchmarks.chunker_comparison` times (the pdf has 1,000 pages)
    parsed = inputs.parsed(kind)
    # When chunked as the benchmark and the ingestor do (400 tokens, 50 of overlap, the parsed title)
    # Then every chunk is what the chunker produced before the speed-up
    assert (
        _digest(parsed, parsed.title or f"corpus.{kind}", (400, 50), doc_id=f"bench-corpus.{kind}")
        == (BENCHMARK_EXPECTED[kind])
    )
