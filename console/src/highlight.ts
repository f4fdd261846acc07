// Where a citation's quote is: in the parsed text (exact offsets, from the chunk's span of /text) and on
// a PDF page's text layer (pdf.js's text, which spaces and breaks lines its own way: matched ignoring
// whitespace, and when the quote occurs more than once on the page, the occurrence nearest to where the
// parsed text has it).

export interface Span {
  start: number;
  end: number;
}

export interface TextWindow {
  offset: number;
  text: string;
  chunks: { chunk_id: string; start: number; end: number; page: number | null }[];
  pages: { page: number; start: number; end: number }[];
}

/** The quote's [start, end) in the whole parsed text: inside its chunk's span, else anywhere in the window. */
export function quoteSpan(window: TextWindow, chunkId: string, quote: string): Span | null {
  const chunk = window.chunks.find((c) => c.chunk_id === chunkId);
  const from = chunk ? Math.max(chunk.start, window.offset) : window.offset;
  const upto = chunk ? Math.min(chunk.end, window.offset + window.text.length) : window.offset + window.text.length;
  const within = window.text.slice(from - window.offset, upto - window.offset);
  let at = within.indexOf(quote);
  if (at >= 0) return { start: from + at, end: from + at + quote.length };
  at = window.text.indexOf(quote);
  return at >= 0 ? { start: window.offset + at, end: window.offset + at + quote.length } : null;
}

/** The page whose span holds `offset` (pages are runs of the parsed text). */
export function pageAt(window: TextWindow, offset: number): number | null {
  return window.pages.find((p) => p.start <= offset && offset < p.end)?.page ?? null;
}

/** [start, end) of `needle` in `haystack` comparing without whitespace; with several matches, the one whose
 * position (as a fraction of the non-space text) is nearest to `near`. Null when it is not there. */
export function findIgnoringSpace(haystack: string, needle: string, near = 0): Span | null {
  const positions: number[] = [];
  let compact = '';
  for (let i = 0; i < haystack.length; i++) {
    if (!/\s/.test(haystack[i])) {
      compact += haystack[i];
      positions.push(i);
    }
  }
  const target = needle.replace(/\s+/g, '');
  if (!target) return null;
  let best = -1;
  for (let at = compact.indexOf(target); at >= 0; at = compact.indexOf(target, at + 1)) {
    const distance = (index: number) => Math.abs(index / Math.max(compact.length, 1) - near);
    if (best < 0 || distance(at) < distance(best)) best = at;
  }
  if (best < 0) return null;
  return { start: positions[best], end: positions[best + target.length - 1] + 1 };
}

/** The parts of [start, end) of a text made of pieces of `lengths`: [piece, from, to) within each piece. */
export function pieces(lengths: number[], span: Span): [number, number, number][] {
  const out: [number, number, number][] = [];
  let at = 0;
  lengths.forEach((length, index) => {
    const from = Math.max(span.start, at);
    const to = Math.min(span.end, at + length);
    if (from < to) out.push([index, from - at, to - at]);
    at += length;
  });
  return out;
}

/** Wrap the quote's text in the given elements (a page's text layer, in reading order) in <mark>s;
 * returns the marks, or [] when the quote is not on them. */
export function markQuote(elements: HTMLElement[], quote: string, near: number): HTMLElement[] {
  const texts = elements.map((element) => element.textContent ?? '');
  const span = findIgnoringSpace(texts.join(''), quote, near);
  if (!span) return [];
  return pieces(
    texts.map((text) => text.length),
    span,
  ).map(([index, from, to]) => {
    const element = elements[index];
    const text = texts[index];
    const mark = element.ownerDocument.createElement('mark');
    mark.className = 'quote';
    mark.textContent = text.slice(from, to);
    element.replaceChildren(text.slice(0, from), mark, text.slice(to));
    return mark;
  });
}

/** Scroll `frame` (a scrollable box) so `target` sits a third of the way down it, leaving the page itself
 * where it is: the viewer's heading and the quote stay in sight. */
export function scrollWithin(frame: HTMLElement, target: HTMLElement): void {
  const offset = target.getBoundingClientRect().top - frame.getBoundingClientRect().top + frame.scrollTop;
  frame.scrollTop = Math.max(0, offset - frame.clientHeight / 3);
}
