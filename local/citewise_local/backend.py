"""The local backend, embedder and synthesizer, as the library's entry points `citewise.backends`,
`citewise.embedders` and `citewise.synthesizers` find them: the index and registry are SQLite files and
the blob store is a folder, all under `settings.home`; answers may come from a local LLM endpoint.

The adapter modules are imported when an adapter is first built, so looking the backend up (which every
`Services` does when it is created) loads neither numpy nor the model runtime.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING

from citewise.ports.embedder import Embedder
from citewise.ports.rewriter import Rewriter
from citewise.ports.synthesizer import Synthesizer
from citewise.runtime.settings import Settings

if TYPE_CHECKING:
    from citewise_local.audit import LocalAudit
    from citewise_local.blobstore import LocalBlobStore
    from citewise_local.conversations import LocalConversations
    from citewise_local.credentials import LocalCredentials
    from citewise_local.erasure import LocalErasureLog
    from citewise_local.feedback import LocalFeedback
    from citewise_local.index import LocalIndex
    from citewise_local.rates import LocalRates
    from citewise_local.registry import LocalRegistry
    from citewise_local.sources import LocalSources
    from citewise_local.usage import LocalUsage


class LocalBackend:
    """The embedded adapters of one home (`citewise.runtime.services.Backend`); `close` closes the databases opened."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._closers: list[Callable[[], None]] = []
        self._credentials: LocalCredentials | None = None
        self._sources: LocalSources | None = None

    def index(self) -> LocalIndex:
        from citewise_local.index import LocalIndex

        index = LocalIndex(self._settings.home_dir / "index.db")
        self._closers.append(index.close)
        return index

    def registry(self) -> LocalRegistry:
        from citewise_local.registry import LocalRegistry

        registry = LocalRegistry(
            self._settings.home_dir / "registry.db",
            tombstone_retention=timedelta(days=self._settings.tombstone_retention_days),
        )
        self._closers.append(registry.close)
        return registry

    def blobs(self) -> LocalBlobStore:
        return local_blob_store(self._settings)

    def usage(self) -> LocalUsage:
        from citewise_local.usage import LocalUsage

        usage = LocalUsage(self._settings.home_dir / "usage.db")
        self._closers.append(usage.close)
        return usage

    def erasures(self) -> LocalErasureLog:
        from citewise_local.erasure import LocalErasureLog

        log = LocalErasureLog(self._settings.home_dir / "erasures.db")
        self._closers.append(log.close)
        return log

    def erasure_queue(self, run: Callable[[str], object]) -> InlineErasureQueue:
        return InlineErasureQueue(run)

    def rates(self) -> LocalRates:
        from citewise_local.rates import LocalRates

        rates = LocalRates(self._settings.home_dir / "rates.db")
        self._closers.append(rates.close)
        return rates

    def audit(self) -> LocalAudit:
        from citewise_local.audit import AUDIT_FILE, LocalAudit

        return LocalAudit(self._settings.home_dir / AUDIT_FILE)

    def audit_key(self) -> bytes:
        """The home's key for hashing questions, derived from its secret: stable across restarts."""
        from citewise_local.auth import local_key

        return local_key(self._settings.home_dir, "audit")

    def credentials(self) -> LocalCredentials:
        """The records and the client secrets: one file, so both ports are one object."""
        if self._credentials is None:
            from citewise_local.credentials import LocalCredentials

            self._credentials = LocalCredentials(
                self._settings.home_dir / "credentials.db", token_url=local_token_url(self._settings)
            )
            self._closers.append(self._credentials.close)
        return self._credentials

    def credential_issuer(self) -> LocalCredentials:
        return self.credentials()

    def conversations(self) -> LocalConversations:
        from citewise_local.conversations import LocalConversations

        conversations = LocalConversations(self._settings.home_dir / "conversations.db")
        self._closers.append(conversations.close)
        return conversations

    def sources(self) -> LocalSources:
        """The sources and the refresh queue: one file, so both ports are one object."""
        if self._sources is None:
            from citewise_local.sources import LocalSources

            self._sources = LocalSources(self._settings.home_dir / "sources.db")
            self._closers.append(self._sources.close)
        return self._sources

    def refresh_queue(self) -> LocalSources:
        return self.sources()

    def feedback(self) -> LocalFeedback:
        from citewise_local.feedback import LocalFeedback

        feedback = LocalFeedback(self._settings.home_dir / "feedback.db")
        self._closers.append(feedback.close)
        return feedback

    def close(self) -> None:
        """Close the index, registry, usage, rate, credentials, conversation, source, feedback and erasure
        databases built so far."""
        for close in self._closers:
            close()


TOKEN_PATH = "/oauth2/token"  # noqa: S105 - a path, not a secret
"""`citewise serve`'s token endpoint (the client-credentials grant), where Cognito's domain has it."""


def local_token_url(settings: Settings) -> str:
    """Where a local credential obtains its access tokens: `citewise serve`'s token endpoint."""
    return f"{settings.public_url}{TOKEN_PATH}"


class InlineErasureQueue:
    """The local `ErasureQueue`: no queue and no erasure function, so the job runs in place, to the end
    (a local tenant takes seconds). A run cut short (the process killed) leaves the record ERASING, and
    `citewise tenant erase T` continues it."""

    def __init__(self, run: Callable[[str], object]) -> None:
        self._run = run

    def send(self, tenant_id: str, *, delay_seconds: int = 0) -> None:
        self._run(tenant_id)


def local_blob_store(settings: Settings) -> LocalBlobStore:
    """The local blob store of `settings.home`, shared by the handlers and `citewise serve`.

    Its upload URLs point at `settings.public_url` and are signed with the home's persistent upload
    key, so a URL the documents handler issues is redeemable by the server, even after a restart.
    """
    from citewise_local.auth import local_key
    from citewise_local.blobstore import LocalBlobStore

    return LocalBlobStore(
        settings.home_dir / "blobs",
        max_bytes=settings.max_document_bytes,
        url_ttl=settings.upload_url_ttl,
        base_url=settings.public_url,
        secret=local_key(settings.home_dir, "uploads"),
    )


def minilm_embedder(settings: Settings) -> Embedder:
    """The all-MiniLM-L6-v2 embedder on numpy (`CITEWISE_EMBEDDER=minilm`); it has no settings."""
    from citewise_local.minilm import MiniLMEmbedder

    return MiniLMEmbedder()


def openai_synthesizer(settings: Settings) -> Synthesizer:
    """An OpenAI-compatible chat-completions endpoint (`CITEWISE_SYNTHESIZER=openai`; docs/generation.md)."""
    from citewise_local.openai_synthesis import OpenAIChatSynthesizer

    return OpenAIChatSynthesizer(
        settings.openai_base_url,
        settings.openai_model,
        api_key=settings.openai_api_key,
        timeout=settings.openai_timeout,
        max_tokens=settings.generation_max_tokens,
        temperature=settings.generation_temperature,
    )


def openai_rewriter(settings: Settings) -> Rewriter:
    """Follow-ups rewritten by the OpenAI-compatible endpoint (`CITEWISE_REWRITER=openai`; docs/generation.md)."""
    from citewise_local.openai_rewriter import MAX_TOKENS, OpenAIRewriter

    return OpenAIRewriter(
        settings.openai_base_url,
        settings.openai_model,
        api_key=settings.openai_api_key,
        timeout=settings.rewrite_timeout,
        max_tokens=MAX_TOKENS,
    )
