"""How a search result shares its text budget among hits (`citewise.mcp.schemas.text_shares`)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from citewise.mcp.schemas import text_shares


@settings(max_examples=500, deadline=None)
@given(st.lists(st.integers(0, 5000), max_size=50), st.integers(0, 120_000))
def test_texts_share_the_budget_shortest_whole_and_the_rest_equally(lengths: list[int], budget: int) -> None:
    shares = text_shares(lengths, budget)
    # Never more than a text has, never more than the budget in all
    assert all(0 <= share <= length for share, length in zip(shares, lengths, strict=True))
    assert sum(shares) <= budget
    # Texts that fit together are all whole
    if sum(lengths) <= budget:
        assert shares == lengths
    # A cut text gets no less than any other text (the long ones share what the short ones leave)
    cut = [share for share, length in zip(shares, lengths, strict=True) if share < length]
    if cut:
        assert min(cut) >= max(shares) - 1
        assert budget - sum(shares) < len(lengths)
