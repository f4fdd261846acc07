"""Chunking: coverage, exact spans, the token budget, and structure (headings, pages, overlap)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from citewise.domain.models import Block, DocumentMetadata, ParsedDocument
from citewise.domain.textutil import TOKEN_RE, TokenCounter, count_tokens, embedding_text
from citewise.ingest.chunking import DEFAULT_MAX_CHARS, Chunker, content_hash
from citewise.ingest.parsing import parse

NOW = datetime(2026, 1, 1, tzinfo=UTC)
META = DocumentMetadata(
    tenant_id="t1",
    doc_id="d1",
    owner="u",
    source="test",
    path="a/b.md",
    title="Doc",
    created_at=NOW,
    updated_at=NOW,
)

words = st.text(alphabet="abcdefghij", min_size=1, max_size=12)
sentences = st.lists(words, min_size=1, max_size=60).map(lambda ws: " ".join(ws) + ".")
paragraphs = st.lists(sentences, min_size=1, max_size=8).map(" ".join)
sections = st.tuples(st.sampled_from(["#", "##", "###"]), words, st.lists(paragraphs, min_size=0, max_size=4))
markdown = st.lists(sections, min_size=1, max_size=6).map(
    lambda secs: "\n\n".join(f"{level} {title}\n\n" + "\n\n".join(paras) for level, title, paras in secs)
)


def _assert_contract(parsed: ParsedDocument, chunker: Chunker) -> None:
    chunks = chunker.split(parsed, META)
    covered = [False] * len(parsed.text)
    for chunk in chunks:
        # spans map back exactly
        assert parsed.text[chunk.start : chunk.end] == chunk.text
        # no chunk over budget, in tokens or in characters
        assert count_tokens(chunk.text) <= chunker.max_tokens
        assert len(chunk.text) <= chunker.max_chars
        for i in range(chunk.start, chunk.end):
            covered[i] = True
    # every (non-whitespace) character of the parsed text lies in some chunk
    missing = [i for i, c in enumerate(parsed.text) if not c.isspace() and not covered[i]]
    assert missing == []
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    assert len({c.chunk_id for c in chunks}) == len(chunks)


@settings(max_examples=150, deadline=None)
@given(markdown, st.integers(min_value=8, max_value=120), st.integers(min_value=0, max_value=7))
def test_markdown_chunks_cover_the_text_exactly_within_budget(source: str, budget: int, overlap: int) -> None:
    # Given parsed markdown and any budget/overlap
    parsed = parse(source.encode(), "doc.md")
    # When chunked / Then coverage, exact spans and the budget hold
    _assert_contract(parsed, Chunker(budget, min(overlap, budget - 1)))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), paragraphs), min_size=1, max_size=12), st.integers(8, 60))
def test_pages_are_never_mixed_in_one_chunk(page_paragraphs: list[tuple[int, str]], budget: int) -> None:
    # Given blocks on ascending pages
    page_paragraphs.sort(key=lambda item: item[0])
    text, blocks = "", []
    for page, paragraph in page_paragraphs:
        if text:
            text += "\n\n"
        blocks.append(Block(start=len(text), end=len(text) + len(paragraph), page=page))
        text += paragraph
    parsed = ParsedDocument(text=text, blocks=tuple(blocks), page_count=4)
    chunker = Chunker(budget, budget // 4)
    # When chunked
    chunks = chunker.split(parsed, META)
    # Then each chunk lies on the single page it names
    for chunk in chunks:
        pages = {b.page for b in blocks if b.start < chunk.end and b.end > chunk.start}
        assert pages == {chunk.page}
    _assert_contract(parsed, chunker)


def test_a_sentence_without_breaks_is_cut_into_token_windows() -> None:
    # Given one 1,000-word run with no punctuation
    text = " ".join(f"w{i}" for i in range(1000))
    parsed = ParsedDocument(text=text, blocks=(Block(start=0, end=len(text)),))
    # When chunked with a budget of 100 and no overlap
    chunks = Chunker(100, 0).split(parsed, META)
    # Then ten exact windows of 100 tokens
    assert [count_tokens(c.text) for c in chunks] == [100] * 10
    assert chunks[0].text.startswith("w0 ") and chunks[-1].text.endswith("w999")


# Words of up to 300 letters and whitespace runs of up to 300 characters: pieces over a small character
# bound whatever their tokens.
long_words = st.text(alphabet="ab", min_size=1, max_size=300)
gaps = st.sampled_from([" ", "  ", " " * 150, " " * 300, "\t" * 90])
long_paragraphs = st.lists(st.tuples(long_words, gaps), min_size=1, max_size=12).map(
    lambda parts: "".join(word + gap for word, gap in parts).strip()
)
long_markdown = st.lists(st.tuples(words, st.lists(long_paragraphs, max_size=4)), min_size=1, max_size=4).map(
    lambda secs: "\n\n".join(f"## {title}\n\n" + "\n\n".join(paras) for title, paras in secs)
)


@settings(max_examples=150, deadline=None)
@given(long_markdown, st.integers(8, 120), st.integers(0, 7), st.integers(1, 90))
def test_chunks_are_bounded_in_characters_whatever_their_tokens(
    source: str, budget: int, overlap: int, max_chars: int
) -> None:
    # Given markdown of long words and long whitespace runs, and any token budget and character bound
    parsed = parse(source.encode(), "doc.md")
    # When chunked / Then coverage, exact spans and both bounds hold
    _assert_contract(parsed, Chunker(budget, min(overlap, budget - 1), max_chars))


def test_a_20_mb_file_without_whitespace_becomes_bounded_chunks() -> None:
    # Given a 20 MB upload that is one word: one token, no sentence or token break to cut at
    size = 20 * 1024 * 1024
    parsed = parse(b"x" * size, "blob.txt")
    # When chunked with the default budget
    chunks = Chunker().split(parsed, META)
    # Then it is cut every DEFAULT_MAX_CHARS characters, each chunk an exact span, together the whole text
    assert len(chunks) == -(-size // DEFAULT_MAX_CHARS)
    assert max(len(c.text) for c in chunks) == DEFAULT_MAX_CHARS
    assert [(c.start, c.end) for c in chunks] == [
        (start, min(start + DEFAULT_MAX_CHARS, size)) for start in range(0, size, DEFAULT_MAX_CHARS)
    ]
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))


def test_headings_start_chunks_and_give_their_path() -> None:
    # Given a document with nested sections
    source = "# Guide\n\nIntro text.\n\n## Install\n\nRun make.\n\n## Use\n\n### Query\n\nAsk it."
    parsed = parse(source.encode(), "guide.md")
    # When chunked with a generous budget
    chunks = Chunker(400, 50).split(parsed, META)
    # Then each section is its own chunk with its heading path, headings kept with their content
    assert [(c.heading_path, c.text) for c in chunks] == [
        (("Guide",), "Guide\n\nIntro text."),
        (("Guide", "Install"), "Install\n\nRun make."),
        (("Guide", "Use", "Query"), "Use\n\nQuery\n\nAsk it."),
    ]


def test_consecutive_chunks_of_a_section_overlap_by_whole_sentences() -> None:
    # Given one paragraph of 30 sentences of 5 tokens each
    sentence_list = [f"Sentence number {i} here." for i in range(30)]
    text = " ".join(sentence_list)
    parsed = ParsedDocument(text=text, blocks=(Block(start=0, end=len(text)),))
    # When chunked with budget 50 and overlap 10 (two sentences)
    chunks = Chunker(50, 10).split(parsed, META)
    # Then each next chunk starts with the last two sentences of the previous one
    for previous, following in zip(chunks, chunks[1:], strict=False):
        tail = " ".join(previous.text.split(" ")[-8:])
        assert following.text.startswith(tail)
        assert following.start < previous.end


def test_content_hash_covers_the_context_header() -> None:
    # Given the same text under two different headings
    a = content_hash(embedding_text("Doc", ("Doc", "Install"), "Run make."))
    b = content_hash(embedding_text("Doc", ("Doc", "Upgrade"), "Run make."))
    # Then the hashes differ (a vector is reused only when its whole input is unchanged)
    assert a != b
    assert embedding_text("Doc", ("Doc", "Install"), "Run make.") == "Doc > Install\n\nRun make."


def test_a_document_without_blocks_has_no_chunks() -> None:
    # Given a parsed document with no text (an empty upload that parsed)
    parsed = ParsedDocument(text="", blocks=())
    # When chunked / Then there is no chunk, rather than an empty one
    assert Chunker(50, 10).split(parsed, META) == []


def test_overlap_must_be_smaller_than_the_budget() -> None:
    with pytest.raises(ValueError, match="overlap"):
        Chunker(50, 50)


# Every ASCII character (controls and the separators Python counts as spaces included) and a few that
# are not (letters, spaces and marks beyond ASCII, a lone surrogate), which are counted through stand-ins.
_CHARS = st.sampled_from(
    [chr(code) for code in range(128)] + ["é", "—", "字", "\u00a0", "\u2028", "_", "’", "ß", "\U0001f600", "\ud800"]
)


@given(st.text(_CHARS, max_size=60))
@settings(max_examples=400, deadline=None)
def test_count_tokens_is_the_token_pattern_count(text: str) -> None:
    """The fast ASCII path counts exactly what the token pattern finds (chunk bounds depend on it)."""
    assert count_tokens(text) == len(TOKEN_RE.findall(text))


@given(st.text(_CHARS, max_size=60), st.integers(0, 60), st.integers(0, 60))
@settings(max_examples=400, deadline=None)
def test_token_counter_counts_a_span_as_its_slice(text: str, a: int, b: int) -> None:
    """A span counted in place has the tokens of the same text cut out, whatever its bounds."""
    start, end = sorted((min(a, len(text)), min(b, len(text))))
    assert TokenCounter(text).count(start, end) == len(TOKEN_RE.findall(text[start:end]))


@given(st.text(_CHARS, max_size=80), st.lists(st.tuples(st.integers(0, 80), st.integers(0, 80)), max_size=12))
@settings(max_examples=300, deadline=None)
def test_token_counter_counts_many_spans_as_one_at_a_time(text: str, bounds: list[tuple[int, int]]) -> None:
    """The batch count (one pass over a document's blocks) gives each span's own count, in order."""
    spans = [sorted((min(a, len(text)), min(b, len(text)))) for a, b in bounds]
    counts = TokenCounter(text).counts([start for start, _ in spans], [end for _, end in spans])
    assert counts == [len(TOKEN_RE.findall(text[start:end])) for start, end in spans]
