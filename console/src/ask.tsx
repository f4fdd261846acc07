import { useEffect, useRef, useState } from 'preact/hooks';
import { Api } from './api';
import { ErrorBox, Panel } from './ui';

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

interface Routing {
  router: string;
  applied_filters: Record<string, unknown> | null;
  consumed_phrases: string[];
  pinned_documents: string[];
  fallback: string | null;
  filter_fallback: { message: string } | null;
}

interface Answer {
  answer: string;
  citations: Citation[];
  grounded: boolean;
  notice: { code: string; message: string } | null;
  routing: Routing | null;
  request_id: string;
  sources: unknown[];
}

/** The answer's text with each [n] marker a button to its citation's passage. */
function AnswerText({ text, citations, open }: { text: string; citations: Citation[]; open: (c: Citation) => void }) {
  const parts = text.split(/(\[\d+\])/);
  return (
    <p class="answer-text" aria-live="polite">
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

export function Ask({ api, open }: { api: Api; open: (citation: Citation) => void }) {
  const [question, setQuestion] = useState('');
  const [filtersText, setFiltersText] = useState('');
  const [route, setRoute] = useState(true);
  const [text, setText] = useState('');
  const [citations, setCitations] = useState<Citation[]>([]);
  const [answer, setAnswer] = useState<Answer | null>(null);
  const [sent, setSent] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const running = useRef<AbortController | null>(null);
  // Leaving the screen stops an answer still streaming: the server then stops generating it.
  useEffect(() => () => running.current?.abort(), []);

  async function ask(event: Event) {
    event.preventDefault();
    if (!question.trim()) return;
    let filters: unknown = null;
    if (filtersText.trim()) {
      try {
        filters = JSON.parse(filtersText);
      } catch {
        return setError(new Error('Filters must be JSON, e.g. {"equals": {"key": "team", "value": "ops"}}'));
      }
    }
    running.current?.abort();
    const controller = new AbortController();
    running.current = controller;
    setBusy(true);
    setError(null);
    setText('');
    setCitations([]);
    setAnswer(null);
    setSent(filters);
    const body: Record<string, unknown> = { query: question, route };
    if (filters) body.filters = filters;
    try {
      await api.stream(
        '/v1/query',
        body,
        (name, data) => {
          if (name === 'text') setText((current) => (data.reset ? data.text : current + data.text));
          else if (name === 'citation') setCitations((current) => [...current, data.citation]);
          else if (name === 'answer') {
            setAnswer(data);
            setText(data.answer);
            setCitations(data.citations);
          } else if (name === 'error') setError(new Error(`${data.error.message} (request id ${data.error.request_id})`));
        },
        controller.signal,
      );
    } catch (caught) {
      if (!controller.signal.aborted) setError(caught);
    } finally {
      if (running.current === controller) setBusy(false);
    }
  }

  return (
    <div class="stack">
      <Panel title="Ask">
        <form class="ask" onSubmit={ask}>
          <label for="question">Question</label>
          <textarea
            id="question"
            rows={3}
            value={question}
            onInput={(e) => setQuestion(e.currentTarget.value)}
            onKeyDown={(e) => {
              if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) ask(e);
            }}
            placeholder="How often are the signing keys rotated?"
          />
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
      {(text || answer || busy) && (
        <Panel title="Answer">
          {answer?.notice && <p class="notice">{answer.notice.message}</p>}
          {text ? <AnswerText text={text} citations={citations} open={open} /> : busy && <p class="muted">Searching…</p>}
          {citations.length > 0 && (
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
          )}
          {answer && <RoutingReport routing={answer.routing} filters={sent} />}
          {answer && <p class="request-id">request id {answer.request_id}</p>}
        </Panel>
      )}
    </div>
  );
}
