// Sign-in. The page reads ./config.json from its own origin: where the API is and how to sign in.
// - local (`citewise serve`): `citewise console` prints a link with a one-time code in the fragment; the
//   page posts it to ./session and gets an ID token. The fragment never reaches a server or a log.
// - cognito (AWS): the hosted UI with the authorization-code flow and PKCE (RFC 7636, S256). The code
//   verifier and the state live in sessionStorage until the redirect comes back; the ID token goes to the
//   API as `Authorization: Bearer`, the refresh token buys a new one when it expires.

export type AuthConfig =
  | { kind: 'local' }
  | {
      kind: 'cognito';
      domain: string;
      client_id: string;
      redirect_uri: string;
      logout_uri: string;
      scopes: string[];
    };

export interface ConsoleConfig {
  api_url: string;
  auth: AuthConfig;
}

export interface Session {
  idToken: string;
  refreshToken?: string;
  /** Seconds since the epoch. */
  expiresAt: number;
}

export interface Identity {
  /** The `sub` claim: what the API records as a document's owner. */
  sub: string;
  user: string;
  tenant: string | null;
  groups: string[];
}

export const SESSION_KEY = 'citewise.session';
export const PKCE_KEY = 'citewise.pkce';
export const ADMIN_GROUP = 'admin';
export const OPERATOR_GROUP = 'operators';

type Fetch = typeof fetch;

export function parseConfig(value: unknown): ConsoleConfig {
  const config = value as ConsoleConfig;
  if (!config || typeof config.api_url !== 'string' || !config.auth) {
    throw new Error('config.json must hold {"api_url": ..., "auth": {"kind": "local" | "cognito", ...}}');
  }
  const auth = config.auth;
  if (auth.kind === 'cognito') {
    for (const field of ['domain', 'client_id', 'redirect_uri', 'logout_uri'] as const) {
      if (typeof auth[field] !== 'string' || !auth[field]) throw new Error(`config.json: auth.${field} is missing`);
    }
  } else if (auth.kind !== 'local') {
    throw new Error(`config.json: unknown auth kind ${JSON.stringify((auth as { kind: unknown }).kind)}`);
  }
  return { ...config, api_url: config.api_url.replace(/\/+$/, '') };
}

export function base64url(bytes: Uint8Array): string {
  let binary = '';
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/** A code verifier of 43 characters: 32 random bytes, base64url (RFC 7636 4.1). */
export function newVerifier(random: (bytes: Uint8Array) => Uint8Array = (b) => crypto.getRandomValues(b)): string {
  return base64url(random(new Uint8Array(32)));
}

/** The S256 code challenge of a verifier: base64url(SHA-256(verifier)) (RFC 7636 4.2). */
export async function challengeOf(verifier: string): Promise<string> {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier));
  return base64url(new Uint8Array(digest));
}

/** The hosted UI's authorize URL; the verifier and state are kept in `storage` for the way back. */
export async function beginCognitoSignIn(
  auth: Extract<AuthConfig, { kind: 'cognito' }>,
  storage: Storage,
  random?: (bytes: Uint8Array) => Uint8Array,
): Promise<string> {
  const verifier = newVerifier(random);
  const state = newVerifier(random);
  storage.setItem(PKCE_KEY, JSON.stringify({ verifier, state }));
  const query = new URLSearchParams({
    response_type: 'code',
    client_id: auth.client_id,
    redirect_uri: auth.redirect_uri,
    scope: auth.scopes.join(' '),
    state,
    code_challenge: await challengeOf(verifier),
    code_challenge_method: 'S256',
  });
  return `${auth.domain.replace(/\/+$/, '')}/oauth2/authorize?${query}`;
}

/** Redeem the code of the hosted UI's redirect (`search`: its query) for tokens, once, if the state is ours. */
export async function completeCognitoSignIn(
  auth: Extract<AuthConfig, { kind: 'cognito' }>,
  search: string,
  storage: Storage,
  fetcher: Fetch = fetch,
  now: () => number = () => Date.now() / 1000,
): Promise<Session> {
  const params = new URLSearchParams(search);
  const pending = storage.getItem(PKCE_KEY);
  storage.removeItem(PKCE_KEY); // one attempt per sign-in: a replayed redirect finds nothing
  if (params.get('error')) throw new Error(`sign-in failed: ${params.get('error_description') ?? params.get('error')}`);
  const code = params.get('code');
  if (!code || !pending) throw new Error('sign-in failed: no sign-in was started from this tab');
  const { verifier, state } = JSON.parse(pending) as { verifier: string; state: string };
  if (params.get('state') !== state) throw new Error('sign-in failed: the state does not match this tab’s sign-in');
  return tokenRequest(
    auth,
    {
      grant_type: 'authorization_code',
      client_id: auth.client_id,
      code,
      redirect_uri: auth.redirect_uri,
      code_verifier: verifier,
    },
    fetcher,
    now,
  );
}

/** A new ID token from the refresh token (Cognito returns no new refresh token: the old one is kept). */
export async function refreshCognitoSession(
  auth: Extract<AuthConfig, { kind: 'cognito' }>,
  session: Session,
  fetcher: Fetch = fetch,
  now: () => number = () => Date.now() / 1000,
): Promise<Session> {
  if (!session.refreshToken) throw new Error('no refresh token');
  const fresh = await tokenRequest(
    auth,
    { grant_type: 'refresh_token', client_id: auth.client_id, refresh_token: session.refreshToken },
    fetcher,
    now,
  );
  return { ...fresh, refreshToken: fresh.refreshToken ?? session.refreshToken };
}

async function tokenRequest(
  auth: Extract<AuthConfig, { kind: 'cognito' }>,
  form: Record<string, string>,
  fetcher: Fetch,
  now: () => number,
): Promise<Session> {
  const response = await fetcher(`${auth.domain.replace(/\/+$/, '')}/oauth2/token`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(form).toString(),
  });
  const body = (await response.json().catch(() => ({}))) as Record<string, unknown>;
  if (!response.ok || typeof body.id_token !== 'string') {
    throw new Error(`sign-in failed: ${String(body.error_description ?? body.error ?? response.status)}`);
  }
  return {
    idToken: body.id_token,
    refreshToken: typeof body.refresh_token === 'string' ? body.refresh_token : undefined,
    expiresAt: now() + Number(body.expires_in ?? 3600),
  };
}

export function cognitoLogoutUrl(auth: Extract<AuthConfig, { kind: 'cognito' }>): string {
  const query = new URLSearchParams({ client_id: auth.client_id, logout_uri: auth.logout_uri });
  return `${auth.domain.replace(/\/+$/, '')}/logout?${query}`;
}

/** The one-time code of a local sign-in link (`#signin=<code>`), or null. */
export function localSignInCode(hash: string): string | null {
  const code = new URLSearchParams(hash.replace(/^#/, '')).get('signin');
  return code || null;
}

/** Redeem a local sign-in code at the server that printed it (./session, beside the page). */
export async function completeLocalSignIn(code: string, fetcher: Fetch = fetch): Promise<Session> {
  const response = await fetcher('./session', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ code }),
  });
  const body = (await response.json().catch(() => ({}))) as Record<string, any>;
  if (!response.ok) throw new Error(body.error?.message ?? `sign-in failed (HTTP ${response.status})`);
  return { idToken: body.id_token, expiresAt: Number(body.expires_at) };
}

/** Who the token says the user is. Read for display only: the API verifies the token on every call. */
export function identityOf(idToken: string): Identity {
  const payload = idToken.split('.')[1] ?? '';
  const json = new TextDecoder().decode(
    Uint8Array.from(atob(payload.replace(/-/g, '+').replace(/_/g, '/')), (c) => c.charCodeAt(0)),
  );
  const claims = JSON.parse(json) as Record<string, unknown>;
  const groups = claims['cognito:groups'];
  return {
    sub: String(claims.sub ?? ''),
    user: String(claims['cognito:username'] ?? claims.email ?? claims.sub ?? ''),
    tenant: typeof claims['custom:tenant_id'] === 'string' ? (claims['custom:tenant_id'] as string) : null,
    groups: Array.isArray(groups) ? groups.map(String) : [],
  };
}

export function loadSession(storage: Storage): Session | null {
  const raw = storage.getItem(SESSION_KEY);
  if (!raw) return null;
  try {
    const session = JSON.parse(raw) as Session;
    return typeof session.idToken === 'string' ? session : null;
  } catch {
    return null;
  }
}

export function saveSession(storage: Storage, session: Session | null): void {
  if (session) storage.setItem(SESSION_KEY, JSON.stringify(session));
  else storage.removeItem(SESSION_KEY);
}
