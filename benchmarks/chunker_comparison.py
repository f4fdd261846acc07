"""Our `Chunker` beside langchain-text-splitters' `RecursiveCharacterTextSplitter`, same text, same budget.

Both chunk the parsed text of the ingest-throughput inputs (~1 MB Markdown, ~1 MB HTML, the 1,000-page
PDF); parsing is done before timing. Our budget is 400 tokens with 50 of overlap; the splitter counts
characters, so its `chunk_size` and `chunk_overlap` are those budgets times the corpus's measured
characters per token (`citewise.domain.textutil.count_tokens`).

A character budget is not a token budget: converted at the corpus's average, it lets a chunk run over
400 tokens wherever the text has more tokens per character than average (`context.theirs.max_tokens`).
So the splitter is also timed the way langchain keeps a token budget (`from_tiktoken_encoder`,
`from_huggingface_tokenizer`: the same splitter with a token-counting `length_function`), here counting
with our own tokenizer, 400 tokens with 50 of overlap: the same budget in the same unit.

The work is not the same: ours keeps headings and pages, cuts at sentences, records exact spans,
hashes every chunk's embedded text and builds validated `Chunk` models; `split_text` returns strings.
Each ratio is our time over a splitter's: how many times longer our chunker takes on the same text.
"""

from __future__ import annotations

import statistics

from benchmarks import inputs
from benchmarks.common import Section, log, ratios, timed
from citewise.domain.textutil import count_tokens
from citewise.ingest.chunking import Chunker

KINDS = ("md", "html", "pdf")


def run(repeats: int = 5) -> Section:
    section = Section("chunker_comparison", "Chunker vs langchain RecursiveCharacterTextSplitter (parsed text)")
    try:
        from langchain_text_splitters import RecursiveCharacterTextSplitter
    except ImportError:
        section.context["error"] = "not measured: langchain-text-splitters is not installed (`make bench` installs it)"
        return section
    documents = [inputs.parsed(kind) for kind in KINDS]
    metadata = [inputs.metadata(f"corpus.{kind}", parsed.title) for kind, parsed in zip(KINDS, documents, strict=True)]
    characters = sum(len(parsed.text) for parsed in documents)
    chars_per_token = characters / sum(count_tokens(parsed.text) for parsed in documents)
    chunker = Chunker()
    size, overlap = round(chunker.max_tokens * chars_per_token), round(chunker.overlap * chars_per_token)
    splitter = RecursiveCharacterTextSplitter(chunk_size=size, chunk_overlap=overlap)
    token_splitter = RecursiveCharacterTextSplitter(
        chunk_size=chunker.max_tokens, chunk_overlap=chunker.overlap, length_function=count_tokens
    )
    ours: list[float] = []
    theirs: list[float] = []
    theirs_by_tokens: list[float] = []
    for repetition in range(repeats):
        log(f"  chunker comparison: run {repetition + 1}")
        our_chunks, our_s = timed(lambda: [chunker.split(p, m) for p, m in zip(documents, metadata, strict=True)])
        their_chunks, their_s = timed(lambda: [splitter.split_text(parsed.text) for parsed in documents])
        token_chunks, token_s = timed(lambda: [token_splitter.split_text(parsed.text) for parsed in documents])
        ours.append(our_s)
        theirs.append(their_s)
        theirs_by_tokens.append(token_s)
    our_texts = [chunk.text for chunks in our_chunks for chunk in chunks]
    their_texts = [text for texts in their_chunks for text in texts]
    token_texts = [text for texts in token_chunks for text in texts]
    megabytes = sum(len(parsed.text.encode("utf-8")) for parsed in documents) / 1e6
    section.add("chars_per_token", "corpus characters per token (count_tokens)", "chars", [chars_per_token])
    section.add(
        "ours_mb_s",
        f"Chunker ({chunker.max_tokens} tokens, {chunker.overlap} overlap)",
        "MB/s",
        [megabytes / s for s in ours],
    )
    section.add(
        "theirs_mb_s",
        f"RecursiveCharacterTextSplitter ({size} chars, {overlap} overlap)",
        "MB/s",
        [megabytes / s for s in theirs],
    )
    section.add(
        "theirs_tokens_mb_s",
        f"RecursiveCharacterTextSplitter ({chunker.max_tokens} tokens, {chunker.overlap} overlap)",
        "MB/s",
        [megabytes / s for s in theirs_by_tokens],
    )
    section.add("time_ratio", "Chunker time / character splitter time", "x", ratios(ours, theirs))
    section.add("token_time_ratio", "Chunker time / token splitter time", "x", ratios(ours, theirs_by_tokens))
    section.context.update(
        {
            "parsed_mb": round(megabytes, 3),
            "repeats": repeats,
            "ours": _shape(our_texts),
            "theirs": _shape(their_texts),
            "theirs_by_tokens": _shape(token_texts),
        }
    )
    return section


def _shape(texts: list[str]) -> dict[str, float]:
    """How many chunks and how big, in our tokens, so the two budgets can be seen to be comparable."""
    tokens = [count_tokens(text) for text in texts]
    return {
        "chunks": len(texts),
        "median_tokens": statistics.median(tokens),
        "max_tokens": max(tokens),
        "mean_chars": round(statistics.fmean(len(t) for t in texts)),
    }
