"""judges/readers.py: VERA's summarisation prompt (vera-summary), its sampling settings and its answers."""
from judges.config import ReaderConfig
from judges.readers import (
    PROMPT_VERSIONS,
    READER_SAMPLING,
    extract_answer,
    generation_prompt,
    reader_request,
)


def test_the_vera_summary_prompt_shows_the_passages_then_the_query():
    """VERA section 5.1 / appendix Figure 2: the retrieved passages in rank order, then the query to be
    answered with a summarised response; no answer tags are asked for."""
    prompt = generation_prompt("schizandra berry benefits", ["first passage", "second passage"],
                               "vera-summary")
    assert prompt.index("first passage") < prompt.index("second passage") < prompt.index("schizandra")
    assert "summary" in prompt and prompt.rstrip().endswith("Query: schizandra berry benefits")
    assert "<answer>" not in prompt and "<content>" not in prompt
    assert PROMPT_VERSIONS["vera-summary"] == "vera-summary-v1" != PROMPT_VERSIONS["paper"]


def test_the_vera_reader_asks_with_top_p_and_keeps_the_reply_whole():
    vera = ReaderConfig(name="r", model="m", prompt="vera-summary", max_tokens=32)
    request = reader_request(vera, "p")
    assert request.temperature == 0.0
    assert request.extra_body == {"top_p": 0.01} == READER_SAMPLING["vera-summary"]
    assert reader_request(ReaderConfig(name="r", model="m"), "p").extra_body == {}  # Figure 1: as before
    reply = "  Schizandra may reduce stress. <answer> is not asked for here.  "
    assert extract_answer(reply, "vera-summary") == (reply.strip(), True)
    assert extract_answer("<answer>x</answer>", "paper") == ("x", True)
    assert extract_answer("no tags", "citing") == ("no tags", False)
