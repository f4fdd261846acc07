"""The local credentials: records and client secrets in one SQLite file (`credentials.db` in the home).

`LocalCredentials` is both ports of `citewise.ports.credentials`: the `CredentialStore` (the records, as
the registry table holds them on AWS) and the `CredentialIssuer` (what a Cognito app client is on AWS:
an id, a secret, the scope it may be granted). `citewise serve` is the token endpoint: `authenticate`
checks a client's id and secret there, and `citewise_local.auth.mint_access_token` signs its token.

A secret is 32 random bytes (URL-safe base64), shown once by `issue` and stored as its SHA-256 only: a
fast hash is enough for a random secret of 256 bits (no dictionary to try), and it is compared in
constant time. A withdrawn client loses its secret's row; the record stays, revoked, for the audit trail.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import sqlite3
from datetime import datetime
from pathlib import Path

from citewise.domain.credentials import Credential, CredentialScope
from citewise.domain.errors import ConflictError, NotFoundError, UnauthorizedError
from citewise_local.sqlite import SQLiteFile

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS credentials (
        credential_id TEXT PRIMARY KEY,
        tenant_id TEXT NOT NULL,
        created_at TEXT NOT NULL,
        body TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS credentials_by_tenant ON credentials (tenant_id, created_at)",
    """CREATE TABLE IF NOT EXISTS clients (
        client_id TEXT PRIMARY KEY,
        secret_sha256 TEXT NOT NULL,
        scope TEXT NOT NULL
    )""",
)
CLIENT_ID_CHARS = 26
"""Lower-case letters and digits, as long as a Cognito app client id."""


class LocalCredentials(SQLiteFile):
    """Credential records and client secrets of one home."""

    def __init__(self, path: Path, *, token_url: str) -> None:
        super().__init__(path, _SCHEMA)
        self.token_url = token_url

    # --- CredentialStore ---------------------------------------------------------------------------

    def put_credential(self, credential: Credential) -> None:
        try:
            with self._lock:
                self._conn.execute(
                    "INSERT INTO credentials (credential_id, tenant_id, created_at, body) VALUES (?, ?, ?, ?)",
                    (
                        credential.credential_id,
                        credential.tenant_id,
                        credential.created_at.isoformat(),
                        credential.model_dump_json(),
                    ),
                )
        except sqlite3.IntegrityError as exc:
            raise ConflictError("a credential with this id exists", details={"id": credential.credential_id}) from exc

    def credential(self, credential_id: str) -> Credential | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT body FROM credentials WHERE credential_id = ?", (credential_id,)
            ).fetchone()
        return Credential.model_validate_json(row[0]) if row else None

    def tenant_credentials(self, tenant_id: str) -> list[Credential]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT body FROM credentials WHERE tenant_id = ? ORDER BY created_at, credential_id", (tenant_id,)
            ).fetchall()
        return [Credential.model_validate_json(body) for (body,) in rows]

    def revoke_credential(self, tenant_id: str, credential_id: str, at: datetime, by: str) -> Credential:
        with self._write() as conn:
            row = conn.execute(
                "SELECT body FROM credentials WHERE credential_id = ? AND tenant_id = ?", (credential_id, tenant_id)
            ).fetchone()
            if row is None:
                raise NotFoundError("no such credential", details={"id": credential_id})
            credential = Credential.model_validate_json(row[0])
            if not credential.revoked:
                credential = credential.model_copy(update={"revoked_at": at, "revoked_by": by})
                conn.execute(
                    "UPDATE credentials SET body = ? WHERE credential_id = ?",
                    (credential.model_dump_json(), credential_id),
                )
        return credential

    def count_tenant(self, tenant_id: str) -> int:
        return self._count_rows(tenant_id, ("credentials",))

    def erase_tenant(self, tenant_id: str) -> int:
        with self._write() as conn:
            conn.execute(
                "DELETE FROM clients WHERE client_id IN (SELECT credential_id FROM credentials WHERE tenant_id = ?)",
                (tenant_id,),
            )
            erased = conn.execute("DELETE FROM credentials WHERE tenant_id = ?", (tenant_id,)).rowcount
        return int(erased)

    # --- CredentialIssuer --------------------------------------------------------------------------

    def issue(self, name: str, scope: CredentialScope) -> tuple[str, str]:
        alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
        client_id = "".join(secrets.choice(alphabet) for _ in range(CLIENT_ID_CHARS))
        secret = secrets.token_urlsafe(32)
        with self._lock:
            self._conn.execute(
                "INSERT INTO clients (client_id, secret_sha256, scope) VALUES (?, ?, ?)",
                (client_id, _digest(secret), scope.value),
            )
        return client_id, secret

    def withdraw(self, credential_id: str) -> None:
        with self._lock:
            self._conn.execute("DELETE FROM clients WHERE client_id = ?", (credential_id,))

    def authenticate(self, client_id: str, secret: str) -> CredentialScope:
        """The scope a client may be granted, if `secret` is its secret; UnauthorizedError otherwise (an
        unknown client, a wrong secret and a withdrawn client alike: OAuth's `invalid_client`)."""
        with self._lock:
            row = self._conn.execute(
                "SELECT secret_sha256, scope FROM clients WHERE client_id = ?", (client_id,)
            ).fetchone()
        # Compared even when there is no client, so the time taken says nothing of which ids exist.
        expected, scope = row if row else ("", CredentialScope.READ.value)
        if not hmac.compare_digest(_digest(secret), expected) or row is None:
            raise UnauthorizedError("invalid client credentials")
        return CredentialScope(scope)


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()
