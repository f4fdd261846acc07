import type { ComponentChildren, Ref } from 'preact';
import { ApiError } from './api';

/** An error as a person can act on it: the API's message, and the request id to quote to an operator. */
export function ErrorBox({ error, title }: { error: unknown; title?: string }) {
  if (!error) return null;
  const message = error instanceof Error ? error.message : String(error);
  const requestId = error instanceof ApiError ? error.requestId : null;
  return (
    <div class="error" role="alert">
      {title && <strong>{title}: </strong>}
      {message}
      {requestId && <span class="request-id"> (request id {requestId})</span>}
    </div>
  );
}

/** A titled section; with `heading`, its title can take the focus (where a screen leads it after an action). */
export function Panel({
  title,
  children,
  actions,
  heading,
}: {
  title: string;
  children: ComponentChildren;
  actions?: ComponentChildren;
  heading?: Ref<HTMLHeadingElement>;
}) {
  return (
    <section class="panel" aria-label={title}>
      <header class="panel-head">
        <h2 ref={heading} tabIndex={heading ? -1 : undefined}>
          {title}
        </h2>
        {actions && <div class="panel-actions">{actions}</div>}
      </header>
      {children}
    </section>
  );
}

export function when(iso: string | null | undefined): string {
  if (!iso) return '';
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
}
