import { useEffect, useState } from 'preact/hooks';
import { Api } from './api';
import { ErrorBox, Panel, when } from './ui';

interface TenantSettings {
  credibility_weight: number | null;
  freshness_weight: number | null;
  freshness_half_life_days: number | null;
  routing_time_zone: string | null;
  routing_aliases: Record<string, string> | null;
  source_credibility: Record<string, number> | null;
  updated_at: string | null;
  updated_by: string | null;
}

const NUMBERS = [
  ['credibility_weight', 'Credibility weight', '0-1: how much a source’s credibility scales the score; 0 turns it off', '0.05'],
  ['freshness_weight', 'Freshness weight', '0-1: how much a document’s age scales the score; 0 turns it off', '0.05'],
  ['freshness_half_life_days', 'Freshness half-life (days)', 'Days after which freshness is halved', '1'],
] as const;

/** The tenant's ranking and routing settings; a tenant admin saves the whole document (PUT /v1/settings). */
export function Settings({ api }: { api: Api }) {
  const [settings, setSettings] = useState<TenantSettings | null>(null);
  const [draft, setDraft] = useState<Record<string, string>>({});
  const [error, setError] = useState<unknown>(null);
  const [saved, setSaved] = useState(false);

  function edit(value: TenantSettings) {
    setSettings(value);
    setDraft({
      credibility_weight: value.credibility_weight?.toString() ?? '',
      freshness_weight: value.freshness_weight?.toString() ?? '',
      freshness_half_life_days: value.freshness_half_life_days?.toString() ?? '',
      routing_time_zone: value.routing_time_zone ?? '',
      routing_aliases: value.routing_aliases ? JSON.stringify(value.routing_aliases, null, 2) : '',
      source_credibility: value.source_credibility && Object.keys(value.source_credibility).length ? JSON.stringify(value.source_credibility, null, 2) : '',
    });
  }

  useEffect(() => {
    api.request<TenantSettings>('GET', '/v1/settings').then(edit, setError);
  }, []);

  async function save(event: Event) {
    event.preventDefault();
    setError(null);
    setSaved(false);
    try {
      const json = (name: string) => (draft[name].trim() ? JSON.parse(draft[name]) : null);
      const number = (name: string) => (draft[name].trim() ? Number(draft[name]) : null);
      let body: Record<string, unknown>;
      try {
        body = {
          credibility_weight: number('credibility_weight'),
          freshness_weight: number('freshness_weight'),
          freshness_half_life_days: number('freshness_half_life_days'),
          routing_time_zone: draft.routing_time_zone.trim() || null,
          routing_aliases: json('routing_aliases'),
          source_credibility: json('source_credibility') ?? {},
        };
      } catch {
        throw new Error('Routing aliases and source credibility must be JSON objects.');
      }
      edit(await api.request<TenantSettings>('PUT', '/v1/settings', body));
      setSaved(true);
    } catch (caught) {
      setError(caught);
    }
  }

  const field = (name: string) => ({
    id: `settings-${name}`,
    value: draft[name] ?? '',
    onInput: (e: Event) => setDraft({ ...draft, [name]: (e.currentTarget as HTMLInputElement).value }),
  });
  return (
    <Panel title="Tenant settings">
      <ErrorBox error={error} />
      {!settings && !error && <p class="muted">Loading…</p>}
      {settings && (
        <form class="settings" onSubmit={save}>
          <p class="muted small">
            Empty fields take the deployment’s default.
            {settings.updated_at && ` Last saved ${when(settings.updated_at)} by ${settings.updated_by}.`}
          </p>
          {NUMBERS.map(([name, label, help, step]) => (
            <div class="field" key={name}>
              <label for={`settings-${name}`}>{label}</label>
              <input type="number" min="0" step={step} {...field(name)} aria-describedby={`settings-${name}-help`} />
              <small id={`settings-${name}-help`}>{help}</small>
            </div>
          ))}
          <div class="field">
            <label for="settings-routing_time_zone">Time zone of dates in questions</label>
            <input type="text" placeholder="Europe/Berlin" {...field('routing_time_zone')} />
          </div>
          <div class="field wide">
            <label for="settings-routing_aliases">Routing aliases (JSON: phrase → source)</label>
            <textarea rows={3} placeholder='{"the wiki": "confluence"}' {...field('routing_aliases')} />
          </div>
          <div class="field wide">
            <label for="settings-source_credibility">Source credibility (JSON: source → 0-1)</label>
            <textarea rows={3} placeholder='{"handbook": 1, "community": 0.3}' {...field('source_credibility')} />
          </div>
          <div>
            <button type="submit" class="primary">
              Save settings
            </button>
            {saved && (
              <span role="status" class="saved">
                {' '}
                Saved.
              </span>
            )}
          </div>
        </form>
      )}
    </Panel>
  );
}

interface TenantUsage {
  tenant_id: string;
  total: Record<string, number>;
  stored: { documents?: number; chunks?: number; bytes?: number } & Record<string, number>;
  cost: { total?: number; currency?: string } | null;
}

function isoDay(date: Date): string {
  return date.toISOString().slice(0, 10);
}

/** The platform operator's view: every tenant with its usage over a range of days. */
export function Operator({ api }: { api: Api }) {
  const today = new Date();
  const [from, setFrom] = useState(isoDay(new Date(today.getTime() - 29 * 86400_000)));
  const [to, setTo] = useState(isoDay(today));
  const [items, setItems] = useState<TenantUsage[] | null>(null);
  const [error, setError] = useState<unknown>(null);

  async function load(event?: Event) {
    event?.preventDefault();
    setError(null);
    try {
      const all: TenantUsage[] = [];
      let cursor: string | null = null;
      do {
        const query: string = new URLSearchParams({ from, to, limit: '100', ...(cursor ? { cursor } : {}) }).toString();
        const page: { items: TenantUsage[]; next_cursor: string | null } = await api.request('GET', `/v1/admin/usage?${query}`);
        all.push(...page.items);
        cursor = page.next_cursor;
      } while (cursor);
      setItems(all);
    } catch (caught) {
      setError(caught);
    }
  }

  useEffect(() => {
    load();
  }, []);

  const count = (usage: TenantUsage, name: string) => (usage.total[name] ?? 0).toLocaleString();
  return (
    <Panel title="Tenants and usage">
      <form class="range" onSubmit={load}>
        <div class="field">
          <label for="usage-from">From</label>
          <input id="usage-from" type="date" value={from} onInput={(e) => setFrom(e.currentTarget.value)} />
        </div>
        <div class="field">
          <label for="usage-to">To</label>
          <input id="usage-to" type="date" value={to} onInput={(e) => setTo(e.currentTarget.value)} />
        </div>
        <div class="field">
          <button type="submit">Show</button>
        </div>
      </form>
      <ErrorBox error={error} />
      {items?.length === 0 && <p class="muted">No tenants yet.</p>}
      {items && items.length > 0 && (
        <table class="usage">
          <thead>
            <tr>
              <th scope="col">Tenant</th>
              <th scope="col" class="number">Documents stored</th>
              <th scope="col" class="number">Ingested</th>
              <th scope="col" class="number">Failed</th>
              <th scope="col" class="number">Queries</th>
              <th scope="col" class="number">Searches</th>
              <th scope="col" class="number">Embedding tokens</th>
              <th scope="col" class="number">Answer tokens (in / out)</th>
              <th scope="col" class="number">Estimated cost</th>
            </tr>
          </thead>
          <tbody>
            {items.map((usage) => (
              <tr key={usage.tenant_id}>
                <th scope="row" class="nowrap">{usage.tenant_id}</th>
                <td class="number">{(usage.stored?.documents ?? 0).toLocaleString()}</td>
                <td class="number">{count(usage, 'documents_ingested')}</td>
                <td class="number">{count(usage, 'documents_failed')}</td>
                <td class="number">{count(usage, 'rest_queries')}</td>
                <td class="number">{count(usage, 'rest_searches')}</td>
                <td class="number">{(usage.total.embedding_tokens + usage.total.embedding_tokens_estimated || 0).toLocaleString()}</td>
                <td class="number">
                  {count(usage, 'generation_input_tokens')} / {count(usage, 'generation_output_tokens')}
                </td>
                <td class="number">{usage.cost?.total != null ? `${usage.cost.total.toFixed(2)} ${usage.cost.currency ?? ''}` : '—'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </Panel>
  );
}
