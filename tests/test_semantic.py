"""The packaged MiniLM embedder gives real, sensible similarities offline."""

from audits.asr.semantic import similarities


def test_semantic_similarity_orders_meaning():
    s = similarities(
        ["the meeting is on tuesday", "the meeting is on tuesday", "the meeting is on tuesday"],
        ["the meeting is on tuesday", "the meeting takes place tuesday", "bananas are yellow fruit"],
    )
    assert s[0] > 0.99
    assert s[1] > s[2] + 0.3
