import { describe, expect, it } from 'vitest';
import { type Citation, type Conversation, type HistoryTurn, appendPage, searchedAs, turnsOf } from './conversation';

const citation: Citation = {
  source: 1,
  doc_id: 'd1',
  chunk_id: 'c1',
  path: 'otters.md',
  title: 'Otters',
  page: null,
  section: null,
  quote: 'Otters hold hands.',
};

function summary(id: string) {
  return { conversation_id: id, title: id, created_at: '2026-11-27T10:00:00Z', updated_at: '2026-11-27T10:00:00Z', turns: 1 };
}

function turn(index: number, question: string, standalone: string, status: HistoryTurn['status']): HistoryTurn {
  const complete = status === 'complete';
  return {
    index,
    question,
    standalone_question: standalone,
    answer: complete ? 'Yes [1].' : '',
    citations: complete ? [citation] : [],
    at: '2026-11-27T10:00:00Z',
    status,
  };
}

describe('searched as', () => {
  it('is the standalone question only when a follow-up was rewritten', () => {
    expect(searchedAs('And what do they eat?', 'And what do they eat? (otters)')).toBe('And what do they eat? (otters)');
    expect(searchedAs('Do otters sleep?', 'Do otters sleep?')).toBeNull();
    expect(searchedAs(' Do otters\nsleep? ', 'Do otters sleep?')).toBeNull(); // spacing is no rewrite
    expect(searchedAs('Do otters sleep?', '')).toBeNull();
    expect(searchedAs('Do otters sleep?', undefined)).toBeNull();
  });
});

describe('a reopened conversation', () => {
  it('shows every turn in order; an interrupted one has no answer and no citations', () => {
    const conversation: Conversation = {
      ...summary('c1'),
      turns: 3,
      history: [
        turn(1, 'Do otters sleep?', 'Do otters sleep?', 'complete'),
        turn(2, 'And hold hands?', 'And hold hands? (otters sleep)', 'complete'),
        turn(3, 'Why?', 'Why? (otters)', 'interrupted'),
      ],
    };
    const turns = turnsOf(conversation);
    expect(turns.map((t) => [t.key, t.question, t.standalone, t.text, t.citations.length, t.state])).toEqual([
      ['c1-1', 'Do otters sleep?', null, 'Yes [1].', 1, 'answered'],
      ['c1-2', 'And hold hands?', 'And hold hands? (otters sleep)', 'Yes [1].', 1, 'answered'],
      ['c1-3', 'Why?', 'Why? (otters)', '', 0, 'interrupted'],
    ]);
    expect(turns.every((t) => t.answer === null)).toBe(true);
  });
});

describe('the listing', () => {
  it('adds the next page, keeping a conversation that moved while paging once', () => {
    const listed = [summary('c3'), summary('c2')];
    expect(appendPage(listed, [summary('c2'), summary('c1')]).map((c) => c.conversation_id)).toEqual(['c3', 'c2', 'c1']);
    expect(appendPage([], [summary('c1')]).map((c) => c.conversation_id)).toEqual(['c1']);
  });
});
