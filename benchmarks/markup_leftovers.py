"""Markup that reaches titles, section paths and chunk text, on a folder of real documents.

Usage: python -m benchmarks.markup_leftovers PATH [--hashes OUT.json] [--compare BEFORE.json]

Every file of a supported format under PATH is parsed and chunked as ingestion does (the default
`Chunker`, the title the pipeline gives: the parsed title, else the file name). For each class of markup
the table counts the titles, distinct section paths and chunks that contain it, and names the longest
section path. Chunk text is searched outside fenced code blocks and code spans: code shows markup on
purpose.

`--hashes` writes every chunk's content hash (what decides re-embedding), per file; `--compare` reads
such a file written before a parser change and reports the share of files and chunks whose embedded text
changed, i.e. what upgrading costs in re-embedding.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

from benchmarks.inputs import metadata
from citewise.domain.errors import CitewiseError
from citewise.domain.models import Chunk, ParsedDocument
from citewise.ingest.chunking import Chunker
from citewise.ingest.parsing import SUPPORTED_EXTENSIONS, parse

LEFTOVERS: dict[str, re.Pattern[str]] = {
    "attribute list { #id }": re.compile(r"\{:?\s*[#.][\w-]"),
    "include {* file *}": re.compile(r"\{\*"),
    "snippet --8<--": re.compile(r"--8<--"),
    "blocks fence ///": re.compile(r"(?m)^\s*/{3,}"),
    "admonition !!! / ???": re.compile(r"(?m)^\s*(?:!!!|\?\?\?\+?)\s"),
    "directive ::: (mkdocstrings)": re.compile(r"(?m)^\s*:::"),
    "template tag {% %}": re.compile(r"\{%"),
    "HTML tag": re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>"),
    "HTML entity &lt;": re.compile(r"&(?:[A-Za-z][A-Za-z0-9]*|#[0-9]+|#[xX][0-9A-Fa-f]+);"),
}
_CODE_SPAN = re.compile(r"(`+)[^`]+?\1")
_FENCES = ("```", "~~~")


def prose(parsed: ParsedDocument) -> str:
    """The parsed text with every fenced code block and code span blanked, positions kept (a chunk may
    begin or end inside a code block, so code is found on the document's blocks, not the chunk's text)."""
    text = parsed.text
    parts, position = [], 0
    for block in parsed.blocks:
        if text.startswith(_FENCES, block.start):
            parts += (text[position : block.start], " " * (block.end - block.start))
            position = block.end
    masked = "".join(parts) + text[position:]
    return _CODE_SPAN.sub(lambda match: " " * len(match.group(0)), masked)


def chunks_of(path: Path, root: Path) -> tuple[str, list[Chunk]]:
    """The chunks ingestion would make of one file (none for a file it refuses), and its prose."""
    name = str(path.relative_to(root))
    try:
        parsed = parse(path.read_bytes(), name)
    except CitewiseError:
        return "", []
    return prose(parsed), Chunker().split(parsed, metadata(name, parsed.title or path.name))


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("path", type=Path, help="a folder of documents (searched recursively)")
    parser.add_argument("--hashes", type=Path, help="write each file's chunk hashes to this JSON file")
    parser.add_argument("--compare", type=Path, help="a --hashes file from before: report what changed")
    args = parser.parse_args()
    root: Path = args.path
    files = sorted(p for p in root.rglob("*") if p.suffix.lower() in SUPPORTED_EXTENSIONS and p.is_file())
    counts: dict[str, Counter[str]] = {name: Counter() for name in LEFTOVERS}
    hashes: dict[str, list[str]] = {}
    longest: tuple[int, str, str] = (0, "", "")
    totals: Counter[str] = Counter()
    for path in files:
        text, chunks = chunks_of(path, root)
        name = str(path.relative_to(root))
        hashes[name] = [chunk.content_hash for chunk in chunks]
        if not chunks:
            continue
        paths = {chunk.heading_path for chunk in chunks}
        totals.update(titles=1, paths=len(paths), chunks=len(chunks))
        for section in paths:
            joined = " > ".join(section)
            longest = max(longest, (len(joined), name, joined))
        for kind, pattern in LEFTOVERS.items():
            counts[kind]["titles"] += bool(pattern.search(chunks[0].document.title))
            counts[kind]["paths"] += sum(any(pattern.search(h) for h in section) for section in paths)
            counts[kind]["chunks"] += sum(bool(pattern.search(text, chunk.start, chunk.end)) for chunk in chunks)
    print(
        f"{len(files)} files under {root}: {totals['titles']} titles, {totals['paths']} section paths, "
        f"{totals['chunks']} chunks"
    )
    print(f"{'markup':<26}{'titles':>8}{'paths':>8}{'chunks':>8}")
    for kind, counted in counts.items():
        print(f"{kind:<26}{counted['titles']:>8}{counted['paths']:>8}{counted['chunks']:>8}")
    print(f"longest section path: {longest[0]} characters ({longest[1]}): {longest[2][:300]!r}")
    if args.hashes:
        args.hashes.write_text(json.dumps(hashes, indent=0, sort_keys=True))
    if args.compare:
        report_changes(json.loads(args.compare.read_text()), hashes)
    return 0


def report_changes(before: dict[str, list[str]], after: dict[str, list[str]]) -> None:
    """The share of files with any chunk re-embedded, and of chunks whose hash is new to their file."""
    changed_files = sum(before.get(name) != hashes for name, hashes in after.items())
    new_chunks = sum(len(set(hashes) - set(before.get(name, []))) for name, hashes in after.items())
    total = sum(len(hashes) for hashes in after.values())
    print(
        f"changed: {changed_files}/{len(after)} files ({changed_files / max(len(after), 1):.0%}), "
        f"{new_chunks}/{total} chunks to re-embed ({new_chunks / max(total, 1):.0%})"
    )


if __name__ == "__main__":
    sys.exit(main())
