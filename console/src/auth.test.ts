import { describe, expect, it } from 'vitest';
import {
  beginCognitoSignIn,
  challengeOf,
  cognitoLogoutUrl,
  completeCognitoSignIn,
  identityOf,
  localSignInCode,
  parseConfig,
  PKCE_KEY,
  refreshCognitoSession,
} from './auth';

const COGNITO = {
  kind: 'cognito' as const,
  domain: 'https://citewise-dev.auth.eu-west-1.amazoncognito.com',
  client_id: 'client123',
  redirect_uri: 'https://console.example.com/',
  logout_uri: 'https://console.example.com/',
  scopes: ['openid', 'email', 'profile'],
};

class MemoryStorage implements Storage {
  private items = new Map<string, string>();
  get length() {
    return this.items.size;
  }
  clear() {
    this.items.clear();
  }
  getItem(key: string) {
    return this.items.get(key) ?? null;
  }
  key(index: number) {
    return [...this.items.keys()][index] ?? null;
  }
  removeItem(key: string) {
    this.items.delete(key);
  }
  setItem(key: string, value: string) {
    this.items.set(key, value);
  }
}

function tokenEndpoint(body: Record<string, unknown>, status = 200) {
  const calls: { url: string; form: URLSearchParams }[] = [];
  const fetcher = (async (url: string, init: RequestInit) => {
    calls.push({ url, form: new URLSearchParams(String(init.body)) });
    return new Response(JSON.stringify(body), { status });
  }) as unknown as typeof fetch;
  return { calls, fetcher };
}

function jwt(claims: Record<string, unknown>): string {
  const part = (value: unknown) => btoa(JSON.stringify(value)).replace(/=+$/, '').replace(/\+/g, '-').replace(/\//g, '_');
  return `${part({ alg: 'none' })}.${part(claims)}.signature`;
}

describe('PKCE', () => {
  it('derives the S256 challenge as base64url(SHA-256(verifier))', async () => {
    // Computed independently with Python: base64.urlsafe_b64encode(hashlib.sha256(v).digest()).rstrip(b'=')
    expect(await challengeOf('dBjftJeZ4CVP-mJ92K9qXxWZo0-LJ46rCfJ1iClFaUk')).toBe('cZyq-6mvofhMRHtoCqMeEDsyhPaN9sk1oKYAWD5T2Xo');
  });

  it('sends the hosted UI the code flow with an S256 challenge of the verifier it keeps, and a state', async () => {
    const storage = new MemoryStorage();
    const url = new URL(await beginCognitoSignIn(COGNITO, storage));
    const kept = JSON.parse(storage.getItem(PKCE_KEY)!);
    expect(url.origin + url.pathname).toBe(`${COGNITO.domain}/oauth2/authorize`);
    expect(Object.fromEntries(url.searchParams)).toEqual({
      response_type: 'code',
      client_id: 'client123',
      redirect_uri: 'https://console.example.com/',
      scope: 'openid email profile',
      state: kept.state,
      code_challenge: await challengeOf(kept.verifier),
      code_challenge_method: 'S256',
    });
    expect(kept.verifier).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(kept.state).not.toBe(kept.verifier);
  });

  it('redeems the code with the verifier at the token endpoint, once', async () => {
    const storage = new MemoryStorage();
    const url = new URL(await beginCognitoSignIn(COGNITO, storage));
    const { verifier } = JSON.parse(storage.getItem(PKCE_KEY)!);
    const { calls, fetcher } = tokenEndpoint({ id_token: 'id', refresh_token: 'refresh', expires_in: 3600 });
    const session = await completeCognitoSignIn(COGNITO, `?code=abc&state=${url.searchParams.get('state')}`, storage, fetcher, () => 1000);
    expect(session).toEqual({ idToken: 'id', refreshToken: 'refresh', expiresAt: 4600 });
    expect(calls[0].url).toBe(`${COGNITO.domain}/oauth2/token`);
    expect(Object.fromEntries(calls[0].form)).toEqual({
      grant_type: 'authorization_code',
      client_id: 'client123',
      code: 'abc',
      redirect_uri: 'https://console.example.com/',
      code_verifier: verifier,
    });
    // The verifier is gone: the same redirect cannot be redeemed again
    await expect(completeCognitoSignIn(COGNITO, `?code=abc&state=${url.searchParams.get('state')}`, storage, fetcher)).rejects.toThrow(
      'no sign-in was started',
    );
  });

  it('refuses a redirect whose state is not this tab’s, without calling the token endpoint', async () => {
    const storage = new MemoryStorage();
    await beginCognitoSignIn(COGNITO, storage);
    const { calls, fetcher } = tokenEndpoint({ id_token: 'id' });
    await expect(completeCognitoSignIn(COGNITO, '?code=abc&state=forged', storage, fetcher)).rejects.toThrow('state does not match');
    expect(calls).toHaveLength(0);
  });

  it('says what the hosted UI reported when sign-in failed', async () => {
    const storage = new MemoryStorage();
    await beginCognitoSignIn(COGNITO, storage);
    await expect(
      completeCognitoSignIn(COGNITO, '?error=access_denied&error_description=User+is+disabled', storage, tokenEndpoint({}).fetcher),
    ).rejects.toThrow('User is disabled');
  });

  it('refreshes with the refresh token and keeps it when Cognito returns none', async () => {
    const { calls, fetcher } = tokenEndpoint({ id_token: 'new', expires_in: 60 });
    const fresh = await refreshCognitoSession(COGNITO, { idToken: 'old', refreshToken: 'r', expiresAt: 0 }, fetcher, () => 10);
    expect(fresh).toEqual({ idToken: 'new', refreshToken: 'r', expiresAt: 70 });
    expect(Object.fromEntries(calls[0].form)).toEqual({ grant_type: 'refresh_token', client_id: 'client123', refresh_token: 'r' });
  });

  it('fails a refresh the token endpoint refuses', async () => {
    const { fetcher } = tokenEndpoint({ error: 'invalid_grant' }, 400);
    await expect(refreshCognitoSession(COGNITO, { idToken: 'old', refreshToken: 'r', expiresAt: 0 }, fetcher)).rejects.toThrow('invalid_grant');
  });

  it('signs out through the hosted UI’s logout endpoint', () => {
    expect(cognitoLogoutUrl(COGNITO)).toBe(
      `${COGNITO.domain}/logout?client_id=client123&logout_uri=https%3A%2F%2Fconsole.example.com%2F`,
    );
  });
});

describe('config and identity', () => {
  it('reads config.json, trimming the API URL, and refuses an incomplete one', () => {
    expect(parseConfig({ api_url: 'http://127.0.0.1:8080/', auth: { kind: 'local' } }).api_url).toBe('http://127.0.0.1:8080');
    expect(() => parseConfig({ api_url: 'x', auth: { ...COGNITO, client_id: '' } })).toThrow('auth.client_id');
    expect(() => parseConfig({ api_url: 'x', auth: { kind: 'saml' } })).toThrow('unknown auth kind');
  });

  it('takes the local sign-in code from the fragment only', () => {
    expect(localSignInCode('#signin=abc.def.ghi')).toBe('abc.def.ghi');
    expect(localSignInCode('')).toBeNull();
  });

  it('reads who the token names: a tenant user, or the operator', () => {
    expect(identityOf(jwt({ sub: 'u-1', 'cognito:username': 'alice', 'custom:tenant_id': 'acme', 'cognito:groups': ['admin'] }))).toEqual({
      sub: 'u-1',
      user: 'alice',
      tenant: 'acme',
      groups: ['admin'],
    });
    expect(identityOf(jwt({ sub: 'ops', 'cognito:groups': ['operators'] })).tenant).toBeNull();
  });
});
