import './styles.css';
import { render } from 'preact';
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { Operator, Settings } from './admin';
import { Api } from './api';
import { Ask } from './ask';
import {
  ADMIN_GROUP,
  type ConsoleConfig,
  OPERATOR_GROUP,
  type Session,
  beginCognitoSignIn,
  cognitoLogoutUrl,
  completeCognitoSignIn,
  completeLocalSignIn,
  identityOf,
  loadSession,
  localSignInCode,
  parseConfig,
  refreshCognitoSession,
  saveSession,
} from './auth';
import type { Citation } from './conversation';
import { Documents } from './documents';
import { ErrorBox } from './ui';
import { Viewer } from './viewer';

type Screen = 'documents' | 'ask' | 'settings' | 'operator';
const LABELS: Record<Screen, string> = {
  documents: 'Documents',
  ask: 'Ask',
  settings: 'Tenant settings',
  operator: 'Tenants and usage',
};

/** Signing in: the hosted UI on AWS; locally, the link `citewise console` prints. */
function SignIn({ config, expired, error }: { config: ConsoleConfig; expired: boolean; error: unknown }) {
  const auth = config.auth;
  return (
    <main class="sign-in" id="main">
      <div class="panel">
        <h1>
          <span class="brand-mark" aria-hidden="true">
            [1]
          </span>{' '}
          citewise
        </h1>
        {expired && (
          <p class="notice" role="alert">
            Your session has expired. Sign in again to continue.
          </p>
        )}
        <ErrorBox error={error} />
        {auth.kind === 'cognito' ? (
          <button
            type="button"
            class="primary"
            onClick={async () => window.location.assign(await beginCognitoSignIn(auth, sessionStorage))}
          >
            Sign in
          </button>
        ) : (
          <>
            <p>Open the one-time sign-in link that the server prints for you:</p>
            <pre class="command">citewise console --tenant TENANT --user USER</pre>
            <p class="muted small">
              Add <code>--group admin</code> for a tenant admin, or use <code>--operator</code> for the platform
              operator. The link works once, for five minutes.
            </p>
          </>
        )}
      </div>
    </main>
  );
}

function App({ config }: { config: ConsoleConfig }) {
  const [session, setSession] = useState<Session | null>(() => loadSession(sessionStorage));
  const [expired, setExpired] = useState(false);
  const [signInError, setSignInError] = useState<unknown>(null);
  const [screen, setScreen] = useState<Screen>('documents');
  const [viewing, setViewing] = useState<Citation | null>(null);
  const sessionRef = useRef(session);
  sessionRef.current = session;

  function signedIn(next: Session | null) {
    saveSession(sessionStorage, next);
    setSession(next);
    if (next) setExpired(false);
  }

  // The way back from a sign-in: a local link's code (fragment) or the hosted UI's redirect (query).
  useEffect(() => {
    const code = localSignInCode(window.location.hash);
    const search = window.location.search;
    const cognito = config.auth.kind === 'cognito' && /[?&](code|error)=/.test(search) ? config.auth : null;
    if (!code && !cognito) return;
    history.replaceState(null, '', window.location.pathname); // the code never stays in the address bar
    (cognito ? completeCognitoSignIn(cognito, search, sessionStorage) : completeLocalSignIn(code!)).then(
      signedIn,
      (error) => {
        signedIn(null);
        setSignInError(error);
      },
    );
  }, []);

  const api = useMemo(
    () =>
      new Api(
        config.api_url,
        async () => {
          const current = sessionRef.current;
          if (!current) throw new Error('not signed in');
          if (current.expiresAt - 30 < Date.now() / 1000 && config.auth.kind === 'cognito' && current.refreshToken) {
            try {
              const fresh = await refreshCognitoSession(config.auth, current);
              signedIn(fresh);
              return fresh.idToken;
            } catch {
              // the refresh token is no good either: the API's 401 sends the user to sign-in
            }
          }
          return current.idToken;
        },
        () => {
          signedIn(null);
          setExpired(true);
        },
      ),
    [config],
  );

  if (!session) return <SignIn config={config} expired={expired} error={signInError} />;
  const identity = identityOf(session.idToken);
  const operator = identity.groups.includes(OPERATOR_GROUP) && identity.tenant === null;
  const screens: Screen[] = operator
    ? ['operator']
    : ['documents', 'ask', ...(identity.groups.includes(ADMIN_GROUP) ? (['settings'] as Screen[]) : [])];
  const current = screens.includes(screen) ? screen : screens[0];

  function signOut() {
    signedIn(null);
    if (config.auth.kind === 'cognito') window.location.assign(cognitoLogoutUrl(config.auth));
  }

  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <span class="brand">
          <span class="brand-mark" aria-hidden="true">
            [1]
          </span>{' '}
          citewise
        </span>
        <nav aria-label="Screens">
          {screens.map((name) => (
            <button
              key={name}
              type="button"
              class="tab"
              aria-current={current === name && !viewing ? 'page' : undefined}
              onClick={() => {
                setViewing(null);
                setScreen(name);
              }}
            >
              {LABELS[name]}
            </button>
          ))}
        </nav>
        <span class="who" aria-label="Signed in as">
          {identity.user}
          {identity.tenant ? ` · ${identity.tenant}` : ' · operator'}
          {identity.groups.includes(ADMIN_GROUP) && ' · admin'}
        </span>
        <button type="button" onClick={signOut}>
          Sign out
        </button>
      </header>
      <main id="main" tabIndex={-1}>
        {viewing && <Viewer key={`${viewing.source}:${viewing.chunk_id}`} api={api} citation={viewing} close={() => setViewing(null)} />}
        {/* The ask screen stays mounted under the viewer: back from a citation, the answer is still there. */}
        <div hidden={viewing !== null}>
          {current === 'documents' && <Documents api={api} identity={identity} />}
          {current === 'ask' && <Ask api={api} open={setViewing} />}
          {current === 'settings' && <Settings api={api} />}
          {current === 'operator' && <Operator api={api} />}
        </div>
      </main>
    </>
  );
}

async function start(root: HTMLElement) {
  try {
    const response = await fetch('./config.json', { cache: 'no-cache' });
    if (!response.ok) throw new Error(`./config.json answered HTTP ${response.status}`);
    render(<App config={parseConfig(await response.json())} />, root);
  } catch (error) {
    render(
      <main class="sign-in">
        <ErrorBox error={error} title="The console could not start" />
      </main>,
      root,
    );
  }
}

start(document.getElementById('app')!);
