import { useEffect, useRef, useState } from 'preact/hooks';
import { Api } from './api';
import {
  type Answer,
  type Citation,
  type Conversation,
  type ConversationPage,
  type ConversationSummary,
  type Routing,
  type ShownTurn,
  appendPage,
  searchedAs,
  turnsOf,
} from './conversation';
import { ErrorBox, Panel, when } from './ui';

/** The answer's text with each [n] marker a button to its citation's passage. */
function AnswerText({ text, citations, open }: { text: string; citations: Citation[]; open: (c: Citation) => void }) {
  const parts = text.split(/(\[\d+\])/);
  return (
    <p class="answer-text">
      {parts.map((part, index) => {
        const n = /^\[(\d+)\]$/.exec(part);
        const citation = n && citations.find((c) => c.source === Number(n[1]));
        if (!citation) return part;
        return (
          <button
            key={index}
            type="button"
            class="marker"
            onClick={() => open(citation)}
            aria-label={`Open source ${citation.source}: ${citation.title || citation.path}`}
          >
            {part}
          </button>
        );
      })}
    </p>
  );
}

function RoutingReport({ routing, filters }: { routing: Routing | null; filters: unknown }) {
  const rows: [string, string][] = [];
  if (filters) rows.push(['Your filters', JSON.stringify(filters)]);
  if (routing) {
    const narrowed = routing.consumed_phrases.length || (routing.applied_filters && Object.keys(routing.applied_filters).length);
    rows.push(['Router', narrowed ? routing.router : `${routing.router}: no phrase of the question became a filter`]);
    if (routing.consumed_phrases.length) rows.push(['Phrases turned into filters', routing.consumed_phrases.join(', ')]);
    if (routing.applied_filters && Object.keys(routing.applied_filters).length)
      rows.push(['Filters the router added', JSON.stringify(routing.applied_filters)]);
    if (routing.pinned_documents.length) rows.push(['Documents pinned by an id in the question', routing.pinned_documents.join(', ')]);
    if (routing.filter_fallback) rows.push(['Routed filter dropped', routing.filter_fallback.message]);
    if (routing.fallback) rows.push(['Routing fell back', routing.fallback]);
  }
  if (!rows.length) return null;
  return (
    <dl class="routing" aria-label="What the filters and the router did">
      {rows.map(([term, value]) => (
        <div key={term}>
          <dt>{term}</dt>
          <dd>{value}</dd>
        </div>
      ))}
    </dl>
  );
}


function Citations({ citations, open }: { citations: Citation[]; open: (citation: Citation) => void }) {
  return (
    <>
      <h3>Citations</h3>
      <ol class="citations">
        {citations.map((citation) => (
          <li key={`${citation.source}-${citation.chunk_id}`} value={citation.source}>
            <button type="button" class="citation" onClick={() => open(citation)}>
              <span class="citation-where">
                [{citation.source}] {citation.title || citation.path}
                <span class="muted small">
                  {' '}
                  {[citation.title ? citation.path : null, citation.page != null ? `page ${citation.page}` : null, citation.section]
                    .filter(Boolean)
                    .join(' · ')}
                </span>
              </span>
              <q class="citation-quote">{citation.quote}</q>
            </button>
          </li>
        ))}
      </ol>
    </>
  );
}

/** One question and its answer. `live`: the newest turn, whose answer a screen reader reads as it arrives. */
function TurnView({ turn, number, live, open }: { turn: ShownTurn; number: number; live: boolean; open: (citation: Citation) => void }) {
  const { answer } = turn;
  return (
    <article class="turn" aria-label={`Turn ${number}`} data-state={turn.state}>
      <p class="turn-question">
        <span class="visually-hidden">You asked: </span>
        {turn.question}
      </p>
      {turn.standalone && <p class="searched-as">searched as: {turn.standalone}</p>}
      <div class="turn-answer" aria-live={live ? 'polite' : undefined}>
        {answer?.conversation.rewrite_notice && <p class="notice">{answer.conversation.rewrite_notice}</p>}
        {answer?.notice && <p class="notice">{answer.notice.message}</p>}
        {turn.state === 'interrupted' ? (
          <p class="interrupted">No answer: this question was interrupted before its answer was complete.</p>
        ) : turn.text ? (
          <AnswerText text={turn.text} citations={turn.citations} open={open} />
        ) : (
          turn.state === 'asking' && <p class="muted">Searching…</p>
        )}
      </div>
      {turn.state !== 'interrupted' && turn.citations.length > 0 && <Citations citations={turn.citations} open={open} />}
      {answer && <RoutingReport routing={answer.routing} filters={turn.filters} />}
      {answer && <p class="request-id">request id {answer.request_id}</p>}
    </article>
  );
}

type Focus = 'question' | 'thread' | 'list' | null;

export function Ask({ api, open }: { api: Api; open: (citation: Citation) => void }) {
  const [question, setQuestion] = useState('');
  const [filtersText, setFiltersText] = useState('');
  const [route, setRoute] = useState(true);
  const [conversationId, setConversationId] = useState<string | null>(null);
  const [turns, setTurns] = useState<ShownTurn[]>([]);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [listed, setListed] = useState<ConversationSummary[] | null>(null);
  const [cursor, setCursor] = useState<string | null>(null);
  const [listError, setListError] = useState<unknown>(null);
  const [said, setSaid] = useState('');
  const [focus, setFocus] = useState<Focus>(null);
  const running = useRef<AbortController | null>(null);
  const asked = useRef(0);
  const questionBox = useRef<HTMLTextAreaElement>(null);
  const threadHeading = useRef<HTMLHeadingElement>(null);
  const listHeading = useRef<HTMLHeadingElement>(null);
  // Leaving the screen stops an answer still streaming: the server then stops generating it.
  useEffect(() => () => running.current?.abort(), []);
  useEffect(() => {
    loadList();
  }, []);
  // After an action the focus goes where its result is, once that is on the page.
  useEffect(() => {
    if (!focus) return;
    ({ question: questionBox, thread: threadHeading, list: listHeading })[focus].current?.focus();
    setFocus(null);
  }, [focus]);

  async function loadList() {
    try {
      const page = await api.request<ConversationPage>('GET', '/v1/conversations?limit=20');
      setListed(page.conversations);
      setCursor(page.next_cursor);
      setListError(null);
    } catch (caught) {
      setListError(caught);
    }
  }

  async function more() {
    if (!cursor) return;
    try {
      const page = await api.request<ConversationPage>('GET', `/v1/conversations?limit=20&cursor=${encodeURIComponent(cursor)}`);
      setListed(appendPage(listed ?? [], page.conversations));
      setCursor(page.next_cursor);
    } catch (caught) {
      setListError(caught);
    }
  }

  /** Stops a streaming answer and empties the thread: what starting afresh and reopening both do first. */
  function leaveThread() {
    running.current?.abort();
    running.current = null;
    setBusy(false);
    setError(null);
    setSaid('');
    setConversationId(null);
    setTurns([]);
  }

  function startAfresh() {
    leaveThread();
    setFocus('question');
  }

  async function reopen(summary: ConversationSummary) {
    leaveThread();
    try {
      const conversation = await api.request<Conversation>('GET', `/v1/conversations/${encodeURIComponent(summary.conversation_id)}`);
      setConversationId(conversation.conversation_id);
      setTurns(turnsOf(conversation));
      setFocus('thread');
    } catch (caught) {
      setListError(caught);
    }
  }

  async function remove(summary: ConversationSummary) {
    if (!confirm(`Delete the conversation “${summary.title}”? Its questions and answers are deleted for good.`)) return;
    try {
      await api.request('DELETE', `/v1/conversations/${encodeURIComponent(summary.conversation_id)}`);
      if (summary.conversation_id === conversationId) leaveThread();
      setListed((current) => (current ?? []).filter((c) => c.conversation_id !== summary.conversation_id));
      setSaid(`Deleted the conversation “${summary.title}”.`);
      setListError(null);
      setFocus('list');
    } catch (caught) {
      setListError(caught);
    }
  }

  async function ask(event: Event) {
    event.preventDefault();
    if (!question.trim() || busy) return;
    let filters: unknown = null;
    if (filtersText.trim()) {
      try {
        filters = JSON.parse(filtersText);
      } catch {
        return setError(new Error('Filters must be JSON, e.g. {"equals": {"key": "team", "value": "ops"}}'));
      }
    }
    const controller = new AbortController();
    running.current = controller;
    const key = `asked-${++asked.current}`;
    const update = (change: Partial<ShownTurn> | ((turn: ShownTurn) => Partial<ShownTurn>)) =>
      setTurns((current) => current.map((t) => (t.key === key ? { ...t, ...(typeof change === 'function' ? change(t) : change) } : t)));
    setTurns((current) => [
      ...current,
      { key, question, standalone: null, text: '', citations: [], state: 'asking', answer: null, filters },
    ]);
    setBusy(true);
    setError(null);
    setSaid('');
    setQuestion('');
    const body: Record<string, unknown> = { query: question, route };
    if (filters) body.filters = filters;
    if (conversationId) body.conversation_id = conversationId;
    let answered = false;
    try {
      await api.stream(
        '/v1/query',
        body,
        (name, data) => {
          if (name === 'text') update((t) => ({ text: data.reset ? data.text : t.text + data.text }));
          else if (name === 'citation') update((t) => ({ citations: [...t.citations, data.citation] }));
          else if (name === 'answer') {
            const answer = data as Answer;
            answered = true;
            update({
              answer,
              text: answer.answer,
              citations: answer.citations,
              standalone: searchedAs(question, answer.conversation.standalone_question),
              state: 'answered',
            });
            setConversationId(answer.conversation.conversation_id);
          } else if (name === 'error') setError(new Error(`${data.error.message} (request id ${data.error.request_id})`));
        },
        controller.signal,
      );
    } catch (caught) {
      if (!controller.signal.aborted) setError(caught);
    } finally {
      // A turn left for another (a new conversation, one reopened, another screen) is no longer this page's.
      if (running.current === controller && !controller.signal.aborted) {
        running.current = null;
        setBusy(false);
        if (!answered) update({ state: 'interrupted', text: '', citations: [] });
        // The list shows the conversation first now (a new one, or the one just continued).
        loadList();
      }
    }
  }

  const shown = listed ?? [];
  return (
    <div class="stack">
      {turns.length > 0 && (
        <Panel
          title="Conversation"
          heading={threadHeading}
          actions={
            <button type="button" onClick={startAfresh}>
              New conversation
            </button>
          }
        >
          <div class="thread">
            {turns.map((turn, index) => (
              <TurnView key={turn.key} turn={turn} number={index + 1} live={index === turns.length - 1} open={open} />
            ))}
          </div>
        </Panel>
      )}
      <Panel title="Ask">
        <form class="ask" onSubmit={ask}>
          <label for="question">{conversationId ? 'Follow-up question' : 'Question'}</label>
          <textarea
            id="question"
            ref={questionBox}
            rows={3}
            value={question}
            onInput={(e) => setQuestion(e.currentTarget.value)}
            onKeyDown={(e) => {
              if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) ask(e);
            }}
            aria-describedby="question-help"
            placeholder="How often are the signing keys rotated?"
          />
          <small id="question-help" class="muted">
            {conversationId
              ? 'Asked in the conversation above: a question that refers back (“and what about…”) is searched with its topic.'
              : 'A new conversation starts with it.'}
          </small>
          <details>
            <summary>Filters and routing</summary>
            <div class="field wide">
              <label for="filters">Filters (optional JSON)</label>
              <textarea
                id="filters"
                rows={2}
                value={filtersText}
                onInput={(e) => setFiltersText(e.currentTarget.value)}
                placeholder='{"equals": {"key": "team", "value": "ops"}}'
              />
            </div>
            <label class="checkbox">
              <input type="checkbox" checked={route} onChange={(e) => setRoute(e.currentTarget.checked)} />
              Let the router turn phrases such as “last year” or a source's name into filters
            </label>
          </details>
          <div>
            <button type="submit" class="primary" disabled={busy}>
              {busy ? 'Answering…' : 'Ask'}
            </button>
            <small class="muted"> Ctrl+Enter sends it.</small>
          </div>
        </form>
        <ErrorBox error={error} />
      </Panel>
      <Panel
        title="Your conversations"
        heading={listHeading}
        actions={
          <button type="button" onClick={loadList}>
            Refresh
          </button>
        }
      >
        <p role="status" class="saved">
          {said}
        </p>
        <ErrorBox error={listError} />
        {listed === null && !listError && <p class="muted">Loading…</p>}
        {listed?.length === 0 && <p class="muted">No conversations yet: ask a question above.</p>}
        {shown.length > 0 && (
          <ul class="conversations">
            {shown.map((summary) => (
              <li key={summary.conversation_id} data-conversation-id={summary.conversation_id}>
                <button
                  type="button"
                  class="conversation-open"
                  aria-current={summary.conversation_id === conversationId ? 'true' : undefined}
                  onClick={() => reopen(summary)}
                >
                  {summary.title}
                </button>
                <span class="muted small">
                  {when(summary.updated_at)} · {summary.turns === 1 ? '1 turn' : `${summary.turns} turns`}
                </span>
                <button
                  type="button"
                  class="danger"
                  onClick={() => remove(summary)}
                  aria-label={`Delete the conversation: ${summary.title}`}
                >
                  Delete
                </button>
              </li>
            ))}
          </ul>
        )}
        {cursor && (
          <button type="button" onClick={more}>
            More conversations
          </button>
        )}
      </Panel>
    </div>
  );
}
