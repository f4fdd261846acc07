"""What one answered query or search adds to its tenant's usage: the same counts for the REST routes and
the MCP tools, which differ only in the channel they are counted under."""

from __future__ import annotations

from typing import Literal

from citewise.domain.models import Answer, Reranking
from citewise.ports.usage import UsageCounts

Channel = Literal["rest", "mcp"]


def query_usage(answer: Answer, channel: Channel) -> UsageCounts:
    """One query on `channel`, the answer model's tokens when it reported them, a rerank call if one ran."""
    usage = answer.usage or {}
    return UsageCounts.model_validate(
        {
            f"{channel}_queries": 1,
            "generation_input_tokens": usage.get("input_tokens", 0),
            "generation_output_tokens": usage.get("output_tokens", 0),
            "rerank_calls": _rerank_calls(answer.reranking),
        }
    )


def search_usage(reranking: Reranking | None, channel: Channel) -> UsageCounts:
    """One search on `channel`, and a rerank call if one ran."""
    return UsageCounts.model_validate({f"{channel}_searches": 1, "rerank_calls": _rerank_calls(reranking)})


def _rerank_calls(reranking: Reranking | None) -> int:
    # A fallback is counted too: the reranker was called (and may have billed) before it failed.
    return 0 if reranking is None else 1
