import { useEffect, useRef, useState } from 'preact/hooks';
import { Api, ApiError } from './api';
import type { Citation } from './conversation';
import { markQuote, pageAt, quoteSpan, scrollWithin, type Span, type TextWindow } from './highlight';
import { ErrorBox } from './ui';

interface DocumentText extends TextWindow {
  next_offset: number | null;
  content_type: string | null;
  path: string;
  title: string | null;
}

type Shown =
  | { kind: 'loading' }
  | { kind: 'gone'; message: string }
  | { kind: 'failed'; error: unknown }
  | { kind: 'pdf'; url: string; page: number; near: number }
  | { kind: 'text'; window: DocumentText; span: Span | null };

const MAX_WINDOWS = 50;

/** The window of the parsed text holding the citation's chunk (followed through `next_offset`). */
async function windowOf(api: Api, citation: Citation): Promise<{ window: DocumentText; span: Span | null }> {
  const id = encodeURIComponent(citation.doc_id);
  let offset: number | null = 0;
  let first: DocumentText | null = null;
  for (let n = 0; offset !== null && n < MAX_WINDOWS; n++) {
    const window: DocumentText = await api.request<DocumentText>('GET', `/v1/documents/${id}/text?offset=${offset}`);
    first ??= window;
    if (window.chunks.some((c) => c.chunk_id === citation.chunk_id)) {
      return { window, span: quoteSpan(window, citation.chunk_id, citation.quote) };
    }
    offset = window.next_offset;
  }
  return { window: first!, span: null };
}

function isPdf(window: DocumentText): boolean {
  return window.content_type === 'application/pdf' || window.path.toLowerCase().endsWith('.pdf');
}

export function Viewer({ api, citation, close }: { api: Api; citation: Citation; close: () => void }) {
  const [shown, setShown] = useState<Shown>({ kind: 'loading' });
  const [found, setFound] = useState<boolean | null>(null);
  const [pages, setPages] = useState<number | null>(null);
  const [pageShown, setPageShown] = useState(1);
  const pdf = useRef<import('./pdf').PdfDocument | null>(null);
  const pageRef = useRef<HTMLDivElement>(null);
  const markRef = useRef<HTMLElement>(null);
  const heading = useRef<HTMLHeadingElement>(null);

  useEffect(() => {
    heading.current?.focus();
    let current = true;
    (async () => {
      try {
        const { window, span } = await windowOf(api, citation);
        if (!current) return;
        if (isPdf(window)) {
          const download = await api.request<{ url: string }>('GET', `/v1/documents/${encodeURIComponent(citation.doc_id)}/content`);
          const page = citation.page ?? (span && pageAt(window, span.start)) ?? 1;
          const bounds = window.pages.find((p) => p.page === page);
          const near = span && bounds ? (span.start - bounds.start) / Math.max(bounds.end - bounds.start, 1) : 0;
          if (!current) return;
          setPageShown(page);
          setShown({ kind: 'pdf', url: download.url, page, near });
        } else {
          setShown({ kind: 'text', window, span });
          setFound(span !== null);
        }
      } catch (error) {
        if (!current) return;
        if (error instanceof ApiError && error.status === 404) {
          // The record may still be there with no stored original (a folder ingested with `citewise ingest`).
          const listed = await api
            .request('GET', `/v1/documents/${encodeURIComponent(citation.doc_id)}`)
            .then(() => true, () => false);
          if (!current) return;
          setShown({
            kind: 'gone',
            message: listed
              ? 'The original of this document is not stored with the API (it was ingested from a folder), so it cannot be shown here.'
              : 'This document is no longer available: it was deleted, or you may no longer read it.',
          });
        } else if (error instanceof ApiError && error.status === 409) {
          setShown({
            kind: 'gone',
            message: `This document changed since the answer was given (${error.message}). Ask again to cite its new version.`,
          });
        } else setShown({ kind: 'failed', error });
      }
    })();
    return () => {
      current = false;
    };
  }, [citation]);

  useEffect(() => {
    if (shown.kind !== 'pdf' || !pageRef.current) return;
    let current = true;
    const container = pageRef.current;
    (async () => {
      try {
        const { openPdf, renderPage } = await import('./pdf');
        pdf.current ??= await openPdf(shown.url);
        const width = Math.min(container.parentElement?.clientWidth ?? 800, 900);
        const textDivs = await renderPage(pdf.current, pageShown, container, width);
        if (!current) return;
        setPages(pdf.current.numPages);
        if (pageShown !== shown.page) return; // the quote is on the cited page only
        const marks = markQuote(textDivs, citation.quote, shown.near);
        setFound(marks.length > 0);
        if (marks[0] && container.parentElement) scrollWithin(container.parentElement, marks[0]);
      } catch (error) {
        if (current) setShown({ kind: 'failed', error });
      }
    })();
    return () => {
      current = false;
    };
  }, [shown, pageShown]);
  useEffect(() => () => void pdf.current?.destroy(), []);

  useEffect(() => {
    const mark = markRef.current;
    if (shown.kind === 'text' && mark?.parentElement) scrollWithin(mark.parentElement, mark);
  }, [shown]);

  const where = [citation.path, citation.page != null ? `page ${citation.page}` : null, citation.section]
    .filter((part) => part && part !== citation.title)
    .join(' · ');
  return (
    <section class="viewer panel" aria-label="Source viewer" onKeyDown={(e) => e.key === 'Escape' && close()}>
      <header class="panel-head">
        <div>
          <h2 tabIndex={-1} ref={heading}>
            [{citation.source}] {citation.title || citation.path}
          </h2>
          {where && <p class="muted small where">{where}</p>}
        </div>
        <div class="panel-actions">
          <button type="button" onClick={close}>
            Back to the answer
          </button>
        </div>
      </header>
      <blockquote class="cited-quote">
        <span class="muted small">Quoted: </span>
        {citation.quote}
      </blockquote>
      {shown.kind === 'loading' && <p class="muted">Opening the document…</p>}
      {shown.kind === 'gone' && (
        <p class="gone" role="alert">
          {shown.message}
        </p>
      )}
      {shown.kind === 'failed' && <ErrorBox error={shown.error} title="The document could not be opened" />}
      {found === false && (
        <p class="notice" role="status">
          The quoted passage could not be located on this page; the quote is shown above.
        </p>
      )}
      {shown.kind === 'pdf' && (
        <>
          <div class="pager">
            <button type="button" disabled={pageShown <= 1} onClick={() => setPageShown(pageShown - 1)}>
              Previous page
            </button>
            <span class="muted small" data-page={pageShown} id="viewer-page" aria-live="polite">
              Page {pageShown}
              {pages != null && ` of ${pages}`}
              {pageShown !== shown.page && ` (the passage is on page ${shown.page})`}
            </span>
            <button type="button" disabled={pages === null || pageShown >= pages} onClick={() => setPageShown(pageShown + 1)}>
              Next page
            </button>
            {pageShown !== shown.page && (
              <button type="button" onClick={() => setPageShown(shown.page)}>
                Back to the passage
              </button>
            )}
          </div>
          <div class="pdf-frame" tabIndex={0} role="region" aria-label={`Page ${pageShown} of ${citation.path}`}>
            <div class="pdf-page" ref={pageRef} />
          </div>
        </>
      )}
      {shown.kind === 'text' && (
        <div class="text-frame" tabIndex={0} role="region" aria-label={`Text of ${citation.path}`}>
          {shown.span ? (
            <>
              {shown.window.text.slice(0, shown.span.start - shown.window.offset)}
              <mark class="quote" ref={markRef}>
                {shown.window.text.slice(shown.span.start - shown.window.offset, shown.span.end - shown.window.offset)}
              </mark>
              {shown.window.text.slice(shown.span.end - shown.window.offset)}
            </>
          ) : (
            shown.window.text
          )}
        </div>
      )}
    </section>
  );
}
