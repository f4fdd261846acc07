"""Deterministic benchmark inputs, built in memory from the sample corpus (nothing is written to disk).

- Markdown: the corpus's two Markdown files, repeated (~1 MB).
- HTML: the body of the corpus's API reference, repeated inside one page (~1 MB).
- PDF: the operations runbook's text (`samples/build_runbook_pdf.py`) laid out by fpdf2 for as many
  pages as asked, one topic per page, each paragraph tagged with its page and position. The tags keep
  every chunk distinct, as in a real handbook: identical chunks would let the ingestor reuse vectors
  and flatter its throughput.

fpdf2's own line breaking costs ~35 ms a page; wrapping with textwrap and drawing one line per cell is
ten times faster and extracts to the same kind of text, so a 1,000-page PDF takes seconds to build.
"""

from __future__ import annotations

import functools
import importlib.util
import textwrap
from datetime import UTC, datetime
from types import ModuleType

from benchmarks.common import REPO
from citewise.domain.models import DocumentMetadata, ParsedDocument, Visibility
from citewise.ingest.parsing import parse

CORPUS = REPO / "samples" / "corpus"
MARKDOWN_COPIES = 70  # ~1 MB
HTML_COPIES = 128  # ~1 MB
HANDBOOK_PAGES = 1000
_WRAP = 90  # characters per line of 10.5 pt Helvetica across A4 less 40 mm of margins
_NOW = datetime(2026, 1, 1, tzinfo=UTC)


def markdown(copies: int = MARKDOWN_COPIES) -> bytes:
    """The corpus's Markdown files, `copies` times (one copy is ~14 KB)."""
    one = "\n\n".join((CORPUS / name).read_text(encoding="utf-8") for name in ("architecture.md", "deployment.md"))
    return "\n\n".join([one] * copies).encode("utf-8")


def html(copies: int = HTML_COPIES) -> bytes:
    """The API reference's body `copies` times inside its own head (one copy is ~8 KB)."""
    page = (CORPUS / "api.html").read_text(encoding="utf-8")
    head, _, rest = page.partition("<body>")
    body, _, tail = rest.partition("</body>")
    return (head + "<body>" + body * copies + "</body>" + tail).encode("utf-8")


@functools.cache
def handbook_pdf(pages: int = HANDBOOK_PAGES) -> bytes:
    """A `pages`-page PDF of runbook text (~1.8 KB and ~2,300 extracted characters a page)."""
    runbook = _runbook_module()
    pdf = runbook.RunbookPDF(format="A4")
    pdf.set_margins(left=20, top=20, right=20)
    pdf.set_auto_page_break(auto=True, margin=20)
    pdf.set_title("citewise operations handbook")
    pdf.set_producer("fpdf2")
    pdf.set_creation_date(runbook.CREATED)
    topic = 0
    while pdf.page_no() < pages:
        heading, blocks = runbook.PAGES[topic % len(runbook.PAGES)]
        topic += 1
        pdf.add_page()
        pdf.set_font("Helvetica", style="B", size=16)
        pdf.cell(0, 8, f"Part {topic}. {heading}", new_x="LMARGIN", new_y="NEXT")
        pdf.ln(3)
        for position, (kind, text) in enumerate(blocks):
            if kind == "h":
                pdf.ln(2)
                pdf.set_font("Helvetica", style="B", size=12)
                lines, height = [text], 6.0
            else:
                pdf.set_font("Helvetica", size=9.5 if kind == "c" else 10.5)
                lines, height = textwrap.wrap(f"{text} [{topic}.{position}]", _WRAP), 5.2
            for line in lines:
                if pdf.page_no() == pages and pdf.will_page_break(height):
                    return bytes(pdf.output())  # the last page is full: stop at exactly `pages`
                pdf.cell(0, height, line, new_x="LMARGIN", new_y="NEXT")
            pdf.ln(1 if kind == "h" else 2)
    return bytes(pdf.output())


@functools.cache
def parsed(kind: str) -> ParsedDocument:
    """The parsed form of one input (`md`, `html` or `pdf`), computed once per run."""
    data, filename = sample(kind)
    return parse(data, filename)


def sample(kind: str) -> tuple[bytes, str]:
    """The large input of one kind and the file name that selects its parser."""
    if kind == "md":
        return markdown(), "corpus.md"
    if kind == "html":
        return html(), "corpus.html"
    if kind == "pdf":
        return handbook_pdf(), "handbook.pdf"
    raise ValueError(f"unknown input kind {kind!r}")


def metadata(filename: str, title: str | None) -> DocumentMetadata:
    """Document metadata for chunking outside the ingestor (what it would attach)."""
    return DocumentMetadata(
        tenant_id="bench",
        doc_id=f"bench-{filename}",
        owner="bench",
        visibility=Visibility.SHARED,
        source="bench",
        path=filename,
        title=title or filename,
        created_at=_NOW,
        updated_at=_NOW,
    )


def _runbook_module() -> ModuleType:
    """`samples/build_runbook_pdf.py`, whose text and page style the PDF reuses (samples is no package)."""
    path = REPO / "samples" / "build_runbook_pdf.py"
    spec = importlib.util.spec_from_file_location("build_runbook_pdf", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
