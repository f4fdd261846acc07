import { useEffect, useRef, useState } from 'preact/hooks';
import { Api, putFile } from './api';
import { ADMIN_GROUP, type Identity } from './auth';
import { ErrorBox, Panel, when } from './ui';

export interface Document {
  doc_id: string;
  path: string;
  title: string | null;
  status: 'PENDING' | 'INDEXED' | 'FAILED' | string;
  chunk_count: number;
  page_count: number | null;
  error: string | null;
  owner: string;
  visibility: string;
  updated_at: string;
}

interface Upload {
  name: string;
  progress: number;
  error?: unknown;
  done?: boolean;
}

const TYPES: Record<string, string> = {
  pdf: 'application/pdf',
  md: 'text/markdown',
  markdown: 'text/markdown',
  txt: 'text/plain',
  htm: 'text/html',
  html: 'text/html',
  docx: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
};
const SIDECAR_SUFFIX = '.metadata.json';

/** The media type to declare for a file: the browser's, else by extension; the API decides what it takes. */
function contentType(file: File): string {
  const extension = file.name.split('.').pop()?.toLowerCase() ?? '';
  return file.type || TYPES[extension] || 'application/octet-stream';
}

/** Attributes typed in the form: a JSON object, uploaded as the sidecar `<file>.metadata.json`. */
function parseAttributes(text: string): Record<string, unknown> | null {
  if (!text.trim()) return null;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new Error('Attributes must be a JSON object, e.g. {"team": "ops", "year": 2026}');
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) {
    throw new Error('Attributes must be a JSON object, e.g. {"team": "ops", "year": 2026}');
  }
  return value as Record<string, unknown>;
}

async function uploadOne(
  api: Api,
  file: Blob,
  filename: string,
  type: string,
  visibility: string,
  onProgress: (fraction: number) => void,
): Promise<void> {
  const grant = await api.request<{ url: string; headers: Record<string, string> }>('POST', '/v1/uploads', {
    filename,
    content_type: type,
    size: file.size,
    visibility,
  });
  await putFile(grant.url, grant.headers, file, onProgress);
}

export function Documents({ api, identity }: { api: Api; identity: Identity }) {
  const [documents, setDocuments] = useState<Document[] | null>(null);
  const [cursor, setCursor] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [uploads, setUploads] = useState<Upload[]>([]);
  const [formError, setFormError] = useState<unknown>(null);
  const [visibility, setVisibility] = useState('shared');
  const [attributes, setAttributes] = useState('');
  const files = useRef<HTMLInputElement>(null);
  const admin = identity.groups.includes(ADMIN_GROUP);

  async function load() {
    try {
      const page = await api.request<{ items: Document[]; next_cursor: string | null }>('GET', '/v1/documents?limit=100');
      setDocuments(page.items);
      setCursor(page.next_cursor);
      setError(null);
    } catch (caught) {
      setError(caught);
    }
  }

  async function more() {
    if (!cursor) return;
    try {
      const page = await api.request<{ items: Document[]; next_cursor: string | null }>(
        'GET',
        `/v1/documents?limit=100&cursor=${encodeURIComponent(cursor)}`,
      );
      setDocuments([...(documents ?? []), ...page.items]);
      setCursor(page.next_cursor);
    } catch (caught) {
      setError(caught);
    }
  }

  useEffect(() => {
    load();
  }, []);
  // While a document is being ingested (or an upload is not listed yet), the list is read again every two seconds.
  const settled = (name: string) => documents?.some((d) => d.path === name && d.status !== 'PENDING');
  const pending = documents?.some((d) => d.status === 'PENDING') || uploads.some((u) => !u.error && !settled(u.name));
  useEffect(() => {
    if (!pending) return;
    const timer = setInterval(load, 2000);
    return () => clearInterval(timer);
  }, [pending]);

  async function submit(event: Event) {
    event.preventDefault();
    setFormError(null);
    const chosen = Array.from(files.current?.files ?? []);
    if (!chosen.length) return setFormError(new Error('Choose one or more files to upload.'));
    let sidecar: Record<string, unknown> | null;
    try {
      sidecar = parseAttributes(attributes);
    } catch (caught) {
      return setFormError(caught);
    }
    const started: Upload[] = chosen.map((file) => ({ name: file.name, progress: 0 }));
    setUploads(started);
    const update = (index: number, change: Partial<Upload>) =>
      setUploads((current) => current.map((u, i) => (i === index ? { ...u, ...change } : u)));
    await Promise.all(
      chosen.map(async (file, index) => {
        try {
          if (sidecar) {
            // The sidecar goes first, so ingesting the document already applies its attributes.
            const json = new Blob([JSON.stringify({ metadataAttributes: sidecar })], { type: 'application/json' });
            await uploadOne(api, json, `${file.name}${SIDECAR_SUFFIX}`, 'application/json', visibility, () => {});
          }
          await uploadOne(api, file, file.name, contentType(file), visibility, (p) => update(index, { progress: p }));
          update(index, { progress: 1, done: true });
        } catch (caught) {
          update(index, { error: caught });
        }
      }),
    );
    if (files.current) files.current.value = '';
    load();
  }

  async function remove(document: Document) {
    if (!confirm(`Delete ${document.path}? Its chunks leave the index and citations to it stop opening.`)) return;
    try {
      await api.request('DELETE', `/v1/documents/${encodeURIComponent(document.doc_id)}`);
      load();
    } catch (caught) {
      setError(caught);
    }
  }

  return (
    <div class="stack">
      <Panel title="Upload">
        <form class="upload" onSubmit={submit}>
          <div class="field">
            <label for="upload-files">Files</label>
            <input id="upload-files" ref={files} type="file" multiple aria-describedby="upload-files-help" />
            <small id="upload-files-help">PDF, Markdown, text, HTML or Word (.docx); one or many.</small>
          </div>
          <div class="field">
            <label for="upload-visibility">Who can read them</label>
            <select id="upload-visibility" value={visibility} onChange={(e) => setVisibility(e.currentTarget.value)}>
              <option value="shared">Everyone in the tenant</option>
              <option value="private">Only me</option>
            </select>
          </div>
          <div class="field wide">
            <label for="upload-attributes">Attributes (optional)</label>
            <textarea
              id="upload-attributes"
              rows={2}
              placeholder='{"team": "ops", "year": 2026, "tags": ["runbook"]}'
              value={attributes}
              onInput={(e) => setAttributes(e.currentTarget.value)}
              aria-describedby="upload-attributes-help"
            />
            <small id="upload-attributes-help">
              A JSON object, stored beside each file as its <code>.metadata.json</code> sidecar: filters can use it.
            </small>
          </div>
          <div class="field">
            <button type="submit" class="primary">
              Upload
            </button>
          </div>
        </form>
        <ErrorBox error={formError} />
        {uploads.length > 0 && (
          <ul class="uploads" aria-label="Uploads">
            {uploads.map((upload) => (
              <li key={upload.name}>
                <span class="name">{upload.name}</span>
                {upload.error ? (
                  <ErrorBox error={upload.error} title="Not uploaded" />
                ) : (
                  <>
                    <progress max={1} value={upload.progress} aria-label={`Upload of ${upload.name}`} />
                    <span>{!upload.done ? `${Math.round(upload.progress * 100)}%` : settled(upload.name) ? 'done' : 'uploaded, indexing…'}</span>
                  </>
                )}
              </li>
            ))}
          </ul>
        )}
      </Panel>
      <Panel
        title="Documents"
        actions={
          <button type="button" onClick={load}>
            Refresh
          </button>
        }
      >
        <ErrorBox error={error} />
        {documents === null && !error && <p class="muted">Loading…</p>}
        {documents?.length === 0 && <p class="muted">No documents yet: upload some above.</p>}
        {documents && documents.length > 0 && (
          <table class="documents">
            <thead>
              <tr>
                <th scope="col">Document</th>
                <th scope="col">Status</th>
                <th scope="col" class="number">Chunks</th>
                <th scope="col" class="number">Pages</th>
                <th scope="col">Owner</th>
                <th scope="col">Updated</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {documents.map((document) => (
                <tr key={document.doc_id} data-doc-id={document.doc_id}>
                  <td>
                    <div class="doc-title">{document.title || document.path}</div>
                    {document.title && <div class="muted small">{document.path}</div>}
                    {document.error && <div class="doc-error">{document.error}</div>}
                  </td>
                  <td>
                    <span class={`status status-${document.status.toLowerCase()}`}>{document.status.toLowerCase()}</span>
                  </td>
                  <td class="number">{document.chunk_count}</td>
                  <td class="number">{document.page_count ?? ''}</td>
                  <td>
                    {document.owner}
                    {document.visibility === 'private' && <span class="muted small"> (private)</span>}
                  </td>
                  <td class="nowrap">{when(document.updated_at)}</td>
                  <td>
                    {(admin || document.owner === identity.sub) && (
                      <button type="button" class="danger" onClick={() => remove(document)} aria-label={`Delete ${document.path}`}>
                        Delete
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        {cursor && (
          <button type="button" onClick={more}>
            More documents
          </button>
        )}
      </Panel>
    </div>
  );
}
