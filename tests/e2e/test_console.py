"""The web console (docs/console.md) in a real browser, against `citewise serve`: sign in with a one-time link,
upload a PDF and a Markdown file, ask, open a citation and find its quote highlighted on the cited page;
another tenant sees none of it; an expired session goes back to sign-in; the API's errors and a deleted
document are said plainly. Every screen passes axe-core with no serious or critical violation and is
usable from the keyboard.

The browser is Debian's Chromium driven by Playwright (as in test_swagger_ui.py). axe-core comes from the
console's own npm project (console/node_modules, installed by `make test` or `make console`). Screenshots of every
screen go to $CONSOLE_SCREENSHOTS when it is set (docs/console.png is one of them).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from tests.builders import make_pdf
from tests.doubles.chat_server import ChatServer
from tests.e2e.helpers import Api, citewise_script, new_tenant, upload, wait_for_status

REPO = Path(__file__).resolve().parents[2]
AXE = REPO / "console" / "node_modules" / "axe-core" / "axe.min.js"
INDEXING_TIMEOUT_MS = 60_000
PAGES = [
    "The herons nest in the reeds by the northern lake.\n\nThey leave for the south in October.",
    "Otters float on their backs and hold hands while they sleep, so the current does not part them.",
]
OTTERS = (
    b"# Otters\n\nSea otters hold hands while they sleep, so that the current does not carry them apart.\n\n"
    b"They sleep floating on their backs in kelp forests, wrapped in kelp as an anchor.\n"
)
NOTES = b"# Badgers\n\nBadgers dig their setts in dry banks at the edge of the woods.\n"


def sign_in_link(api: Api, *identity: str, ttl: int = 3600) -> str:
    """`citewise console ...`: the one-time sign-in link, the one line it prints."""
    done = subprocess.run(  # noqa: S603 - our own console script
        [citewise_script(), "console", "--server", api.url, "--ttl", str(ttl), *identity],
        env=api.env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    link = done.stdout.strip()
    assert link.startswith(f"{api.url}/console/#signin="), done.stdout
    return link


def open_console(browser: BrowserContext, link: str) -> Page:
    page = browser.new_page()
    page.set_viewport_size({"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(link)
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    assert "#signin" not in page.url  # the code leaves the address bar at once
    assert not errors
    return page


def screenshot(page: Page, name: str) -> None:
    folder = os.environ.get("CONSOLE_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def assert_accessible(page: Page, screen: str) -> None:
    """axe-core on the page as it is: no serious or critical violation (WCAG 2.1 A and AA rules)."""
    if not AXE.exists():
        pytest.fail(f"no {AXE}: `make test` installs the console's npm project (axe-core is in it)")
    if not page.evaluate("typeof axe !== 'undefined'"):
        page.evaluate(AXE.read_text())  # evaluated by the driver: the page's CSP admits no inline script
    results = page.evaluate(
        "axe.run(document, {runOnly: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice']})"
    )
    severe = [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:3]}"
        for v in results["violations"]
        if v["impact"] in ("serious", "critical")
    ]
    assert severe == [], f"{screen}: {severe}"


def upload_files(page: Page, *files: tuple[str, str, bytes]) -> None:
    page.get_by_label("Files", exact=True).set_input_files(
        [{"name": name, "mimeType": mime, "buffer": data} for name, mime, data in files]
    )
    page.get_by_role("button", name="Upload", exact=True).click()


def row(page: Page, path: str) -> Any:
    return page.locator("table.documents tbody tr", has=page.get_by_text(path, exact=True))


def nav(page: Page, screen: str) -> Any:
    return page.get_by_role("navigation", name="Screens").get_by_role("button", name=screen, exact=True)


def ask(page: Page, question: str) -> None:
    """Ask in the conversation on the screen (a new one if there is none) and wait for the whole answer."""
    nav(page, "Ask").click()
    turns = page.locator("article.turn")
    before = turns.count()
    page.get_by_label("Question").fill(question)
    page.locator("form.ask").get_by_role("button", name="Ask").click()
    expect(turns).to_have_count(before + 1)
    expect(turns.last.locator(".request-id")).to_be_visible(timeout=INDEXING_TIMEOUT_MS)


def ask_and_watch(page: Page, question: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """`ask`, returning the body the console sent to POST /v1/query and the answer event it received."""
    with page.expect_response(lambda response: response.url.endswith("/v1/query")) as reply:
        ask(page, question)
    answer = next(
        json.loads(frame.split("\ndata: ", 1)[1])
        for frame in reply.value.text().split("\n\n")
        if frame.startswith("event: answer\n")
    )
    return reply.value.request.post_data_json, answer


@pytest.fixture
def tenant() -> str:
    return new_tenant()


def test_sign_in_upload_ask_and_open_a_citation_at_its_highlighted_passage(
    api: Api, browser: BrowserContext, tenant: str
) -> None:
    # Given a tenant admin signed in with a one-time link
    link = sign_in_link(api, "--tenant", tenant, "--user", "alice", "--group", "admin")
    page = open_console(browser, link)
    expect(page.locator(".who")).to_contain_text(f"alice · {tenant} · admin")
    expect(page.get_by_text("No documents yet")).to_be_visible()
    assert_accessible(page, "documents (empty)")
    # When they upload a PDF and a Markdown file, with attributes
    page.get_by_label("Attributes (optional)").fill('{"team": "nature"}')
    upload_files(page, ("wildlife.pdf", "application/pdf", make_pdf(PAGES)), ("badgers.md", "text/markdown", NOTES))
    # Then both are listed and become indexed, with their chunk counts
    for path in ("wildlife.pdf", "badgers.md"):
        expect(row(page, path).locator(".status")).to_have_text("indexed", timeout=INDEXING_TIMEOUT_MS)
    expect(row(page, "wildlife.pdf").locator("td.number").nth(1)).to_have_text("2")  # pages
    screenshot(page, "documents")
    assert_accessible(page, "documents")

    # When they ask about the PDF
    ask(page, "Do otters hold hands while they sleep?")
    citation = page.locator("ol.citations button.citation").first
    expect(citation).to_contain_text("page 2")
    quote = citation.locator(".citation-quote").inner_text()
    assert "hold hands" in quote
    expect(page.locator(".answer-text button.marker").first).to_be_visible()
    screenshot(page, "ask")
    assert_accessible(page, "ask")

    # And open the citation
    citation.click()
    marks = page.locator(".textLayer mark.quote")
    expect(marks.first).to_be_visible()
    # Then the PDF is rendered at the cited page, and the highlighted text is the citation's quote
    expect(page.locator("#viewer-page")).to_have_attribute("data-page", "2")
    highlighted = "".join(marks.all_inner_texts())
    assert re.sub(r"\s+", "", highlighted) == re.sub(r"\s+", "", quote)
    assert page.locator(".textLayer").inner_text().find("Otters float") >= 0  # the text layer is page 2's
    screenshot(page, "viewer-pdf")
    assert_accessible(page, "viewer (PDF)")
    # And paging away shows the other page without a highlight, and back to the passage highlights it again
    page.get_by_role("button", name="Previous page").click()
    expect(page.locator("#viewer-page")).to_have_attribute("data-page", "1")
    expect(page.locator(".textLayer")).to_contain_text("herons nest")
    assert page.locator(".textLayer mark.quote").count() == 0
    page.get_by_role("button", name="Back to the passage").click()
    expect(page.locator(".textLayer mark.quote").first).to_be_visible()
    assert re.sub(r"\s+", "", "".join(marks.all_inner_texts())) == re.sub(r"\s+", "", quote)

    # And, back to the answer, a Markdown citation opens as parsed text with the quote highlighted
    page.get_by_role("button", name="Back to the answer").click()
    page.get_by_role("button", name="New conversation").click()  # not a follow-up about otters
    expect(page.locator("article.turn")).to_have_count(0)
    expect(page.get_by_label("Question")).to_be_focused()
    ask(page, "Where do badgers dig their setts?")
    page.locator("ol.citations button.citation", has_text="badgers.md").first.click()
    mark = page.locator(".text-frame mark.quote")
    expect(mark).to_be_visible()
    assert "setts" in mark.inner_text()
    screenshot(page, "viewer-text")
    assert_accessible(page, "viewer (text)")

    # And the tenant settings screen, for the admin
    nav(page, "Tenant settings").click()
    page.get_by_label("Freshness weight").fill("0.2")
    page.get_by_role("button", name="Save settings").click()
    expect(page.get_by_role("status")).to_have_text("Saved.")
    screenshot(page, "settings")
    assert_accessible(page, "settings")


def test_a_user_of_another_tenant_sees_none_of_it(api: Api, browser: BrowserContext, tenant: str) -> None:
    # Given a document of one tenant, uploaded through the console
    page = open_console(browser, sign_in_link(api, "--tenant", tenant, "--user", "alice"))
    upload_files(page, ("secret.md", "text/markdown", b"# Secret\n\nThe vault code is kept by the night porter.\n"))
    expect(row(page, "secret.md").locator(".status")).to_have_text("indexed", timeout=INDEXING_TIMEOUT_MS)
    # When a user of another tenant signs in
    other = open_console(browser, sign_in_link(api, "--tenant", new_tenant(), "--user", "alice"))
    # Then they list nothing, and asking finds nothing
    expect(other.get_by_text("No documents yet")).to_be_visible()
    ask(other, "Who keeps the vault code?")
    expect(other.locator(".notice")).to_contain_text("No documents")
    assert other.locator("ol.citations").count() == 0
    assert "night porter" not in other.locator("main").inner_text()


def test_a_conversation_is_followed_up_reopened_after_a_reload_and_deleted(
    api: Api, browser: BrowserContext, tenant: str
) -> None:
    # Given a document, and a user who asks about it
    token = api.token(tenant, "alice")
    assert wait_for_status(api, token, upload(api, token, "otters.md", OTTERS, "text/markdown"))["status"] == "INDEXED"
    page = open_console(browser, sign_in_link(api, "--tenant", tenant, "--user", "alice"))
    sent, first = ask_and_watch(page, "Do otters hold hands while they sleep?")
    assert "conversation_id" not in sent  # a first question starts a conversation
    conversation_id = first["conversation"]["conversation_id"]
    assert first["conversation"]["turn"] == 1
    # When they ask a follow-up
    sent, second = ask_and_watch(page, "And why do they do it?")
    # Then it is sent in the same conversation, and the API's answer is its turn 2
    assert sent["conversation_id"] == conversation_id
    assert (second["conversation"]["conversation_id"], second["conversation"]["turn"]) == (conversation_id, 2)
    # And the thread shows both turns; the follow-up says what it was searched as
    turns = page.locator("article.turn")
    expect(turns).to_have_count(2)
    expect(turns.nth(0).locator(".turn-question")).to_have_text("You asked: Do otters hold hands while they sleep?")
    assert turns.nth(0).locator(".searched-as").count() == 0
    standalone = second["conversation"]["standalone_question"]
    assert standalone != "And why do they do it?"
    expect(turns.nth(1).locator(".searched-as")).to_have_text(f"searched as: {standalone}")
    expect(turns.nth(1).locator("ol.citations button.citation").first).to_contain_text("otters.md")
    # And the list shows the conversation once, with its two turns
    listed = page.locator("ul.conversations li")
    expect(listed).to_have_count(1)
    expect(listed).to_contain_text("2 turns")
    screenshot(page, "conversation")
    assert_accessible(page, "ask (conversation)")

    # When the page is reloaded and the conversation reopened from the list
    page.reload()
    nav(page, "Ask").click()
    expect(turns).to_have_count(0)
    listed.first.locator("button.conversation-open").click()
    # Then both turns are back, and the focus is on the thread
    expect(turns).to_have_count(2)
    expect(page.get_by_role("heading", name="Conversation", exact=True)).to_be_focused()
    expect(turns.nth(0).locator(".turn-question")).to_contain_text("Do otters hold hands while they sleep?")
    expect(turns.nth(1).locator(".turn-question")).to_contain_text("And why do they do it?")
    expect(turns.nth(1).locator(".searched-as")).to_have_text(f"searched as: {standalone}")
    expect(turns.nth(1).locator(".answer-text")).to_have_text(second["answer"])
    # And asking continues it
    sent, third = ask_and_watch(page, "And where do they do it?")
    assert sent["conversation_id"] == conversation_id and third["conversation"]["turn"] == 3
    expect(listed).to_contain_text("3 turns")

    # And another user of the same tenant does not see it
    other = open_console(browser, sign_in_link(api, "--tenant", tenant, "--user", "bob"))
    nav(other, "Ask").click()
    expect(other.get_by_text("No conversations yet")).to_be_visible()
    other.close()
    assert api.request("GET", f"/v1/conversations/{conversation_id}", token=api.token(tenant, "bob")).status == 404

    # When it is deleted, after confirming
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name=re.compile(r"^Delete the conversation: ")).click()
    # Then it leaves the list and the screen, the screen says so, and the API no longer has it
    expect(listed).to_have_count(0)
    expect(page.get_by_role("status")).to_contain_text("Deleted the conversation")
    expect(page.get_by_role("heading", name="Your conversations")).to_be_focused()
    expect(turns).to_have_count(0)
    assert api.request("GET", f"/v1/conversations/{conversation_id}", token=token).status == 404
    page.reload()
    nav(page, "Ask").click()
    expect(page.get_by_text("No conversations yet")).to_be_visible()
    assert_accessible(page, "ask (no conversations)")


def test_a_question_left_before_its_answer_reopens_as_a_turn_without_an_answer(
    paced_model: tuple[Api, ChatServer], browser: BrowserContext
) -> None:
    # Given a model that writes its answers slowly, and a user who asks
    api, chat = paced_model
    tenant = new_tenant()
    token = api.token(tenant, "alice")
    keys = b"# Keys\n\nRotate the signing key every ninety days.\n"
    assert wait_for_status(api, token, upload(api, token, "keys.md", keys, "text/markdown"))["status"] == "INDEXED"
    page = open_console(browser, sign_in_link(api, "--tenant", tenant, "--user", "alice"))
    nav(page, "Ask").click()
    page.get_by_label("Question").fill("How often is the signing key rotated?")
    page.locator("form.ask").get_by_role("button", name="Ask").click()
    expect(page.locator("article.turn .answer-text")).to_contain_text("Rotate the signing key")
    # When they start a new conversation while the answer is still being written
    page.get_by_role("button", name="New conversation").click()
    # Then the page has left the stream (the model call stops), and the conversation keeps the turn
    assert chat.abandoned.wait(10.0)
    for _ in range(100):
        listed = api.request("GET", "/v1/conversations", token=token).json()["conversations"]
        if listed:
            break
        time.sleep(0.1)
    assert [c["turns"] for c in listed] == [1]
    # And, reopened from the list, the turn shows its question and says it has no answer
    page.get_by_role("region", name="Your conversations").get_by_role("button", name="Refresh").click()
    page.locator("ul.conversations li button.conversation-open").click()
    turn = page.locator("article.turn")
    expect(turn).to_have_count(1)
    expect(turn.locator(".turn-question")).to_contain_text("How often is the signing key rotated?")
    expect(turn.locator(".interrupted")).to_have_text(
        "No answer: this question was interrupted before its answer was complete."
    )
    assert turn.locator(".answer-text, ol.citations").count() == 0
    assert_accessible(page, "ask (interrupted turn)")


def test_a_link_is_used_once_and_an_expired_session_returns_to_sign_in(
    api: Api, browser: BrowserContext, tenant: str
) -> None:
    # Given a session that lasts two seconds
    link = sign_in_link(api, "--tenant", tenant, "--user", "alice", ttl=2)
    page = open_console(browser, link)
    # When it has expired and the user acts
    page.wait_for_timeout(3000)
    page.get_by_role("button", name="Refresh").click()
    # Then they are back at sign-in, told why, with how to sign in again
    expect(page.get_by_role("alert")).to_contain_text("Your session has expired")
    expect(page.get_by_text("citewise console --tenant TENANT --user USER")).to_be_visible()
    screenshot(page, "sign-in-expired")
    assert_accessible(page, "sign-in")
    # And the same link does not sign in a second time
    again = browser.new_page()
    again.goto(link)
    expect(again.get_by_role("alert")).to_contain_text("invalid, expired or already used")


def test_an_unsupported_file_shows_the_apis_error(api: Api, browser: BrowserContext, tenant: str) -> None:
    page = open_console(browser, sign_in_link(api, "--tenant", tenant, "--user", "alice"))
    upload_files(page, ("tool.exe", "application/x-msdownload", b"MZ\x90\x00"))
    error = page.locator(".uploads .error")
    expect(error).to_contain_text("Not uploaded")
    expect(error).to_contain_text("request id")
    # The message is the API's own: the same request answers it directly
    token = api.token(tenant, "alice")
    body = {"filename": "tool.exe", "content_type": "application/x-msdownload", "size": 4}
    message = api.request("POST", "/v1/uploads", token=token, json_body=body).json()["error"]["message"]
    expect(error).to_contain_text(message)
    screenshot(page, "upload-error")
    assert_accessible(page, "upload error")


def test_a_document_deleted_meanwhile_shows_a_clear_message_in_the_viewer(
    api: Api, browser: BrowserContext, tenant: str
) -> None:
    # Given an answer citing a document
    page = open_console(browser, sign_in_link(api, "--tenant", tenant, "--user", "alice"))
    upload_files(page, ("ferries.md", "text/markdown", b"# Ferries\n\nThe last ferry leaves the harbour at ten.\n"))
    expect(row(page, "ferries.md").locator(".status")).to_have_text("indexed", timeout=INDEXING_TIMEOUT_MS)
    ask(page, "When does the last ferry leave?")
    citation = page.locator("ol.citations button.citation").first
    expect(citation).to_be_visible()
    # When the document is deleted meanwhile (by its owner, elsewhere)
    token = api.token(tenant, "alice")
    [document] = api.request("GET", "/v1/documents", token=token).json()["items"]
    assert api.request("DELETE", f"/v1/documents/{document['doc_id']}", token=token).status == 204
    # Then opening the citation says so, and still shows what was quoted
    citation.click()
    expect(page.locator(".gone")).to_have_text(
        "This document is no longer available: it was deleted, or you may no longer read it."
    )
    expect(page.locator(".cited-quote")).to_contain_text("last ferry")
    screenshot(page, "viewer-deleted")
    assert_accessible(page, "viewer (deleted)")


def test_the_operator_sees_tenants_and_usage(api: Api, browser: BrowserContext, tenant: str) -> None:
    # Given a tenant with a document (the registry knows a tenant by its documents) and a question asked
    token = api.token(tenant, "alice")
    assert wait_for_status(api, token, upload(api, token, "a.md", b"# A\n\nAnything.\n", "text/markdown"))
    api.request("POST", "/v1/query", token=token, json_body={"query": "anything at all"})
    page = open_console(browser, sign_in_link(api, "--operator", "--user", "ops"))
    expect(page.locator(".who")).to_contain_text("ops · operator")
    # Then the operator's screen lists it with what it stores and what it asked
    tenant_row = page.locator("table.usage tbody tr", has=page.get_by_role("rowheader", name=tenant))
    expect(tenant_row.locator("td").nth(0)).to_have_text("1")  # documents stored
    expect(tenant_row.locator("td").nth(3)).to_have_text("1")  # queries
    screenshot(page, "operator")
    assert_accessible(page, "operator")


def test_every_screen_is_reachable_and_usable_from_the_keyboard(api: Api, browser: BrowserContext, tenant: str) -> None:
    page = open_console(browser, sign_in_link(api, "--tenant", tenant, "--user", "alice", "--group", "admin"))
    # The first Tab reaches the skip link, which moves the focus to the content
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    # Tabbing on reaches each screen's button, and Enter opens it
    for name, heading in (("Ask", "Ask"), ("Tenant settings", "Tenant settings"), ("Documents", "Upload")):
        for _ in range(20):
            page.keyboard.press("Tab")
            if page.evaluate("document.activeElement.textContent") == name:
                break
        else:
            pytest.fail(f"Tab never reached {name!r}")
        page.keyboard.press("Enter")
        expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible()
        page.keyboard.press("Shift+Tab")  # back before the nav, so the next search starts there
        page.focus("a.skip")
    # And a question is asked from the keyboard alone (Ctrl+Enter in the question)
    nav(page, "Ask").focus()
    page.keyboard.press("Enter")
    page.get_by_label("Question").focus()
    page.keyboard.type("Is anything indexed?")
    page.keyboard.press("Control+Enter")
    expect(page.locator(".notice")).to_contain_text("No documents")


def test_console_responses_carry_the_security_headers_and_no_token_in_a_url(api: Api) -> None:
    for path in ("/console/", "/console/config.json"):
        reply = api.request("GET", path)
        assert reply.status == 200
        policy = reply.headers["content-security-policy"]
        assert "'unsafe-inline'" not in policy and "'unsafe-eval'" not in policy
        assert "frame-ancestors 'none'" in policy
        assert reply.headers["x-content-type-options"] == "nosniff"
        assert reply.headers["referrer-policy"] == "no-referrer"
    assert api.request("GET", "/console/config.json").json() == {"api_url": api.url, "auth": {"kind": "local"}}
    # Only the built files are served: no path reaches anything else
    assert api.request("GET", "/console/../pyproject.toml").status == 404
    assert api.request("GET", "/console/%2e%2e/secret.key").status == 404
    # A session is bought only with a valid code
    refused = api.request("POST", "/console/session", json_body={"code": "forged"})
    assert refused.status == 401 and "invalid, expired or already used" in refused.json()["error"]["message"]
    assert api.request("POST", "/console/session", json_body={"nothing": 1}).status == 400
    link = sign_in_link(api, "--tenant", new_tenant(), "--user", "alice")
    code = link.split("#signin=", 1)[1]
    session = api.request("POST", "/console/session", json_body={"code": code})
    assert session.status == 200 and session.headers["cache-control"] == "no-store"
    token = session.json()["id_token"]
    assert api.request("GET", "/v1/documents", token=token).status == 200
    assert api.request("POST", "/console/session", json_body={"code": code}).status == 401
    assert code not in api.log.read_text() and token not in api.log.read_text()
    assert session.json()["token_type"] == "Bearer"
