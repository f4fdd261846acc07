"""An answer that is not grounded says why: nothing indexed for the caller, filters that matched nothing
(with the type the documents hold), nothing that answers, or unsupported sentences."""

from __future__ import annotations

from citewise.domain.models import Answer, Caller, Filter, Notice, SearchRequest, Visibility
from citewise.ports.grounding import BLOCKED_ANSWER, ground
from citewise.ports.synthesizer import NO_ANSWER
from citewise.query.answering import answer_question
from citewise.query.notices import NO_DOCUMENTS, NOT_GROUNDED, answer_notice
from citewise.runtime.services import Services
from tests.factories import hit, source

ALICE = Caller(tenant_id="acme", user_id="alice")
VAULT = b"# Notes\n\nThe vault opens at nine every morning."


def ask(services: Services, caller: Caller, query: str, filters: dict[str, object] | None = None) -> Answer:
    flt = Filter.model_validate(filters) if filters is not None else None
    return answer_question(services.retriever, services.synthesizer, caller, SearchRequest(query=query, filters=flt))


def test_a_tenant_with_nothing_indexed_is_told_so(services: Services) -> None:
    # Given another tenant's document and a colleague's private one
    services.ingestor.ingest(source("globex", "notes.md", VAULT))
    services.ingestor.ingest(source("acme", "private.md", VAULT, owner="bob", visibility=Visibility.PRIVATE))
    # When alice of acme asks
    answer = ask(services, ALICE, "When does the vault open?")
    # Then the answer says nothing is indexed for her, not that the documents do not answer
    assert (answer.answer, answer.grounded, answer.citations) == (NO_DOCUMENTS, False, [])
    assert answer.notice is not None and answer.notice.code == "NO_DOCUMENTS"


def test_a_filter_that_matched_nothing_is_named_with_the_type_the_documents_hold(services: Services) -> None:
    # Given a document whose `year` is a number
    services.ingestor.ingest(source("acme", "notes.md", VAULT, attributes={"year": 2025, "team": "ops"}))
    # When filtered by the string "2025", and by a team it does not have
    typed = ask(services, ALICE, "When does the vault open?", {"equals": {"key": "year", "value": "2025"}})
    other = ask(services, ALICE, "When does the vault open?", {"equals": {"key": "team", "value": "dev"}})
    # Then both say the filter matched nothing; the first names the type mismatch
    assert typed.answer == NO_ANSWER and typed.notice is not None and typed.notice.code == "NO_FILTER_MATCH"
    assert "'year' with a string ('2025')" in typed.notice.message and "number values" in typed.notice.message
    assert other.notice is not None and other.notice.code == "NO_FILTER_MATCH"
    assert other.notice.message == "No document matched your filters."
    # And the right type answers
    assert ask(services, ALICE, "When does the vault open?", {"equals": {"key": "year", "value": 2025}}).grounded


def test_a_routed_filter_that_matched_but_below_min_score_is_not_called_a_filter_mismatch(services: Services) -> None:
    # Given a document dated 2025
    services.ingestor.ingest(source("acme", "notes.md", b"---\nupdated: 2025-03-01\n---\n" + VAULT))
    # When a question routed to 2025 sets a floor no passage reaches
    request = SearchRequest(query="When does the vault open in 2025?", min_score=0.99)
    answer = answer_question(services.retriever, services.synthesizer, ALICE, request)
    # Then the routed filter, which matched the document and was kept, is not blamed: min_score is
    assert answer.routing is not None and answer.routing.applied_filters is not None
    assert answer.notice == Notice(code="NOT_FOUND", message="No passage scored at least min_score (0.99).")


def test_an_off_corpus_question_is_not_found_and_a_grounded_answer_has_no_notice(services: Services) -> None:
    services.ingestor.ingest(source("acme", "notes.md", VAULT))
    off = ask(services, ALICE, "What is the airspeed velocity of an unladen swallow?")
    assert off.answer == NO_ANSWER and off.notice is not None and off.notice.code == "NOT_FOUND"
    found = ask(services, ALICE, "When does the vault open?")
    assert found.grounded and found.notice is None


def test_a_cited_answer_with_an_unsupported_sentence_and_a_refusal_say_so() -> None:
    hits = [hit(1, "Uploads use presigned URLs.")]
    partly = ground("Uploads use presigned URLs [1]. They cost nothing.", hits)
    assert answer_notice(partly) == Notice(code="NOT_GROUNDED", message=NOT_GROUNDED)
    blocked = Answer(answer=BLOCKED_ANSWER, citations=[], sources=[], grounded=False)
    assert answer_notice(blocked) == Notice(code="NOT_FOUND", message=BLOCKED_ANSWER)
