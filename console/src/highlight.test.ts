import { describe, expect, it } from 'vitest';
import { findIgnoringSpace, pageAt, pieces, quoteSpan } from './highlight';

describe('the quote in the parsed text', () => {
  const window = {
    offset: 100,
    text: 'Herons nest. Otters sleep. Otters sleep.',
    chunks: [
      { chunk_id: 'a', start: 100, end: 113, page: 1 },
      { chunk_id: 'b', start: 127, end: 140, page: 2 },
    ],
    pages: [
      { page: 1, start: 100, end: 113 },
      { page: 2, start: 113, end: 140 },
    ],
  };

  it('is found inside its chunk’s span, even when the same words come earlier', () => {
    expect(quoteSpan(window, 'b', 'Otters sleep.')).toEqual({ start: 127, end: 140 });
    expect(pageAt(window, 127)).toBe(2);
  });

  it('falls back to the window when the chunk is unknown, and is null when absent', () => {
    expect(quoteSpan(window, 'zzz', 'Otters sleep.')).toEqual({ start: 113, end: 126 });
    expect(quoteSpan(window, 'a', 'Badgers')).toBeNull();
  });
});

describe('the quote on a PDF text layer', () => {
  it('matches across other spacing and line breaks', () => {
    expect(findIgnoringSpace('Otters float on\ntheir  backs', 'float on their backs')).toEqual({ start: 7, end: 28 });
  });

  it('takes the occurrence nearest to where the parsed text has it', () => {
    const text = 'the end. middle. the end.';
    expect(findIgnoringSpace(text, 'the end.', 0)).toEqual({ start: 0, end: 8 });
    expect(findIgnoringSpace(text, 'the end.', 1)).toEqual({ start: 17, end: 25 });
    expect(findIgnoringSpace(text, 'absent', 0)).toBeNull();
    expect(findIgnoringSpace(text, '   ', 0)).toBeNull();
  });

  it('splits a span over the text layer’s pieces', () => {
    expect(pieces([5, 3, 4], { start: 3, end: 9 })).toEqual([
      [0, 3, 5],
      [1, 0, 3],
      [2, 0, 1],
    ]);
  });
});
