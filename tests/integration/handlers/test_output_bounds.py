"""Output bounds: a search reaching the longest chunks answers well inside Lambda's 6 MB, on both stacks.

The corpus is the worst case for the response's size: text without whitespace (each chunk as long as the
character bound allows) made of characters beyond the BMP, each of which JSON writes as a 12-byte
surrogate-pair escape and the Lambda response escapes again. The size checked is the whole proxy response
as the Lambda runtime serialises it.
"""

from __future__ import annotations

import json
import random

import mcp_types as types

from citewise.ingest.chunking import DEFAULT_MAX_CHARS
from citewise.mcp.schemas import MAX_SEARCH_TEXT_CHARS
from tests.integration.handlers.harness import LambdaContext, Stack, api_event, claims
from tests.integration.handlers.test_mcp import HEADERS

ALICE = claims("acme", "alice")
# Lambda's limit for a synchronous response is 6 MB; a response should stay at half of it.
BOUND = 3 * 1024 * 1024
TOP_K = 50


def _ingest_the_worst_corpus(stack: Stack) -> None:
    """A 1 MB upload of CJK Extension B ideographs, one word of 66 maximal chunks, each different (the
    ideographs are random) so that every one is its own hit."""
    ideographs = random.Random(32)
    text = "".join(chr(0x20000 + ideographs.randrange(0xA000)) for _ in range(66 * DEFAULT_MAX_CHARS))
    stack.upload_and_ingest(ALICE, "blob.txt", text.encode())


def _lambda_response_bytes(response: dict[str, object]) -> int:
    return len(json.dumps(response).encode())


def test_a_rest_search_of_the_longest_chunks_stays_under_half_the_lambda_limit(stack: Stack) -> None:
    # Given a corpus of maximal chunks of 12-byte characters
    _ingest_the_worst_corpus(stack)
    # When a search asks for the most hits it may
    event = api_event("POST", "/v1/search", body={"query": "blob", "top_k": TOP_K}, identity=ALICE)
    response = stack.handler("query")(event, LambdaContext())
    # Then the response is under half of Lambda's 6 MB, with every hit whole
    assert response["statusCode"] == 200
    assert _lambda_response_bytes(response) < BOUND
    hits = json.loads(response["body"])["hits"]
    assert len(hits) == TOP_K and {len(hit["chunk"]["text"]) for hit in hits} == {DEFAULT_MAX_CHARS}


def test_an_mcp_search_of_the_longest_chunks_stays_under_half_the_lambda_limit(stack: Stack) -> None:
    # Given the same corpus
    _ingest_the_worst_corpus(stack)
    # When the MCP search tool asks for the most hits it may
    arguments = {"query": "blob", "top_k": TOP_K}
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "search", "arguments": arguments}}
    event = api_event("POST", "/mcp", body=message, identity=ALICE)
    for name, value in HEADERS.items():
        event["headers"][name] = value
        event["multiValueHeaders"][name] = [value]
    response = stack.handler("mcp")(event, LambdaContext())
    # Then the response is under the bound, the texts share the result's budget and each cut one says so
    assert response["statusCode"] == 200
    assert _lambda_response_bytes(response) < BOUND
    result = types.CallToolResult.model_validate(json.loads(response["body"])["result"])
    assert result.structured_content is not None and not result.is_error
    hits = result.structured_content["hits"]
    assert len(hits) == TOP_K and all(hit["truncated"] for hit in hits)
    assert sum(len(hit["text"]) for hit in hits) == MAX_SEARCH_TEXT_CHARS
