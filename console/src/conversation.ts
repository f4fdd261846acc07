// The ask screen's conversation as the page keeps it: the turns asked here (streamed) and the turns of a
// reopened conversation (its history from GET /v1/conversations/{id}) share one shape, so one view shows both.

export interface Citation {
  source: number;
  doc_id: string;
  chunk_id: string;
  path: string;
  title: string;
  page: number | null;
  section: string | null;
  quote: string;
}

export interface Routing {
  router: string;
  applied_filters: Record<string, unknown> | null;
  consumed_phrases: string[];
  pinned_documents: string[];
  fallback: string | null;
  filter_fallback: { message: string } | null;
}

/** Where an answer sits in its conversation (the API's `conversation`). */
export interface TurnContext {
  conversation_id: string;
  turn: number;
  response_id: string;
  standalone_question: string;
  rewriter: string;
  rewrite_notice: string | null;
  dropped_turns: number;
}

/** The body of POST /v1/query (and of its stream's `answer` event). */
export interface Answer {
  answer: string;
  citations: Citation[];
  grounded: boolean;
  notice: { code: string; message: string } | null;
  routing: Routing | null;
  request_id: string;
  sources: unknown[];
  conversation: TurnContext;
}

/** A turn of GET /v1/conversations/{id}'s `history`. */
export interface HistoryTurn {
  index: number;
  question: string;
  standalone_question: string;
  answer: string;
  citations: Citation[];
  at: string;
  status: 'complete' | 'interrupted';
}

export interface ConversationSummary {
  conversation_id: string;
  title: string;
  created_at: string;
  updated_at: string;
  turns: number;
}

export interface ConversationPage {
  conversations: ConversationSummary[];
  next_cursor: string | null;
}

export interface Conversation extends ConversationSummary {
  history: HistoryTurn[];
}

/**
 * One turn on the screen. `state`: `asking` while its answer streams, `answered` once whole, `interrupted`
 * when it has no answer (the stream stopped before the end: the API keeps no partial answer either).
 * `answer` (the whole body) is there only for a turn asked on this page: the history keeps no routing report.
 */
export interface ShownTurn {
  key: string;
  question: string;
  standalone: string | null;
  text: string;
  citations: Citation[];
  state: 'asking' | 'answered' | 'interrupted';
  answer: Answer | null;
  filters: unknown;
}

/** The question retrieval used, when it is not what was typed (a follow-up rewritten); else null. */
export function searchedAs(question: string, standalone: string | null | undefined): string | null {
  if (!standalone) return null;
  const plain = (text: string) => text.trim().replace(/\s+/g, ' ');
  return plain(standalone) === plain(question) ? null : standalone;
}

/** The turns of a reopened conversation, oldest first, as the screen shows them. */
export function turnsOf(conversation: Conversation): ShownTurn[] {
  return conversation.history.map((turn) => ({
    key: `${conversation.conversation_id}-${turn.index}`,
    question: turn.question,
    standalone: searchedAs(turn.question, turn.standalone_question),
    text: turn.status === 'interrupted' ? '' : turn.answer,
    citations: turn.status === 'interrupted' ? [] : turn.citations,
    state: turn.status === 'interrupted' ? 'interrupted' : 'answered',
    answer: null,
    filters: null,
  }));
}

/** The listing after `page` is added: a conversation already listed (it moved while paging) is kept once. */
export function appendPage(listed: ConversationSummary[], page: ConversationSummary[]): ConversationSummary[] {
  const seen = new Set(listed.map((c) => c.conversation_id));
  return [...listed, ...page.filter((c) => !seen.has(c.conversation_id))];
}
