"""Expected marks (judges/scoring.py) on hand-computed log-probability fixtures: split-digit tokenizers
(SmolLM2, Mistral: one token per digit) and single-token numbers (Llama-3)."""
from __future__ import annotations

import math

import pytest

from judges.ccrs import CCRS_METRICS, judgment
from judges.client import LLMClient, TokenLogprob
from judges.client import ClientConfig, _completion_result
from judges.config import ExpectedScoringOptions, JudgeConfig
from judges.scoring import (ExpectedMark, MarkDistribution, Scale, locate_mark, mark_distribution,
                            walk_in_rounds)
from judges.suite import Sample, Usage
from tests.conftest import sample_field

SCALE = Scale(0, 100)
EOS = "<|im_end|>"


def alts(**probabilities: float) -> list[tuple[str, float]]:
    """Alternatives from probabilities; keyword names d8 -> "8", eos -> EOS, other -> "The"."""
    names = {"eos": EOS, "other": "The", "space": " "}
    return [(names.get(k, k.removeprefix("d")), math.log(p)) for k, p in probabilities.items()]


def no_request(prefix: str):
    raise AssertionError(f"unexpected continuation request for {prefix!r}")


def test_split_digits_reuses_the_reply_and_expands_other_first_digits():
    # reply "85": P(8)=.6, P(9)=.3, off-scale .1; after "8" (in the reply): 5 .5, 0 .4, end .1;
    # after "9" (one request): 0 .5, 5 .5.  Marks: 85 .30, 80 .24, 8 .06, 90 .15, 95 .15 (mass .9).
    asked = []

    def expand(prefix):
        asked.append(prefix)
        return alts(d0=0.5, d5=0.5)

    walk = mark_distribution(alts(d8=0.6, d9=0.3, other=0.1), SCALE, expand,
                             known={"8": alts(d5=0.5, d0=0.4, eos=0.1)})
    assert asked == ["9"]
    assert walk.probabilities == pytest.approx({85: 0.30, 80: 0.24, 8: 0.06, 90: 0.15, 95: 0.15})
    assert walk.off_scale == pytest.approx(0.1)
    assert walk.mass == pytest.approx(0.9)
    assert walk.expected() == pytest.approx((85 * .30 + 80 * .24 + 8 * .06 + 90 * .15 + 95 * .15) / .9)
    assert walk.expected() == pytest.approx(81.0333, abs=1e-4)


def test_one_and_ten_stay_open_until_the_number_ends():
    # "1" -> 10..19 and 100 extend it, "10" -> 100: both need their next token; "9" ends or takes a digit.
    replies = {"1": alts(d0=0.6, eos=0.4), "10": alts(d0=0.5, eos=0.5), "9": alts(eos=1.0)}
    walk = mark_distribution(alts(d1=0.5, d9=0.5), SCALE, replies.get)
    assert walk.probabilities == pytest.approx({100: 0.15, 10: 0.15, 1: 0.2, 9: 0.5})
    assert walk.expansions == 3
    assert walk.expected() == pytest.approx(15 + 1.5 + 0.2 + 4.5)


def test_single_token_numbers_need_no_request():
    # Llama-3: "85", "90", "80" are single tokens; no allowed mark extends them (850 > 100).
    walk = mark_distribution(alts(d85=0.7, d90=0.2, d80=0.1), SCALE, no_request)
    assert walk.expected() == pytest.approx(85 * .7 + 90 * .2 + 80 * .1)
    assert walk.expansions == 0


def test_digits_beyond_the_scale_and_outside_top_k_are_not_marks():
    # "10" then "5" = 105 is off the scale; the top-k list covers .8 of the first token (unseen .2).
    nexts = {"10": alts(d5=0.5, eos=0.5), "7": alts(eos=1.0)}
    walk = mark_distribution(alts(d10=0.4, d7=0.4), SCALE, nexts.get)
    assert walk.probabilities == pytest.approx({10: 0.2, 7: 0.4})
    assert walk.off_scale == pytest.approx(0.2)
    assert walk.unseen == pytest.approx(0.2)


def test_unlikely_prefixes_and_the_request_cap_leave_probability_unresolved():
    walk = mark_distribution(alts(d7=0.99, d9=0.01), SCALE, {"7": alts(d0=1.0)}.get, min_branch=0.02)
    assert walk.probabilities == pytest.approx({70: 0.99})
    assert walk.unresolved == pytest.approx(0.01)
    capped = mark_distribution(alts(d7=0.6, d9=0.4), SCALE, {"7": alts(d0=1.0)}.get, max_expansions=1)
    assert capped.probabilities == pytest.approx({70: 0.6}) and capped.unresolved == pytest.approx(0.4)


def test_a_failed_continuation_is_unresolved_not_a_crash():
    walk = mark_distribution(alts(d5=1.0), SCALE, lambda prefix: None)
    assert walk.probabilities == {} and walk.unresolved == pytest.approx(1.0)
    assert walk.expected() is None


def test_a_one_to_five_scale_closes_every_digit():
    walk = mark_distribution(alts(d4=0.5, d5=0.25, d7=0.25), Scale(1, 5), no_request)
    assert walk.probabilities == pytest.approx({4: 0.5, 5: 0.25}) and walk.off_scale == pytest.approx(0.25)


# --- expected.continuation: batched (the same walk, its continuations asked a round at a time) -----------

def batched(replies: dict, **walk_options):
    """walk_in_rounds over `replies` (prefix -> alternatives), with the prefixes of every request."""
    asked: list[list[str]] = []

    def fetch(prefixes):
        asked.append(list(prefixes))
        return [replies.get(prefix) for prefix in prefixes]

    return asked, fetch


@pytest.mark.parametrize("root, replies, options", [
    (alts(d1=0.5, d9=0.5), {"1": alts(d0=0.6, eos=0.4), "10": alts(d0=0.5, eos=0.5), "9": alts(eos=1.0)}, {}),
    (alts(d8=0.6, d9=0.3, other=0.1), {"9": alts(d0=0.5, d5=0.5)}, {}),
    # the cap binds: one at a time, "10" (.27) comes before "2" (.25); the rounds end where that walk does
    (alts(d1=0.3, d2=0.25, d3=0.2, d0=0.25), {"1": alts(d0=0.9, eos=0.1), "10": alts(d0=1.0),
                                              "2": alts(eos=1.0), "3": alts(eos=1.0)}, {"max_expansions": 2}),
    (alts(d7=0.99, d9=0.01), {"7": alts(d0=1.0)}, {"min_branch": 0.02}),
])
def test_the_batched_walk_is_the_one_request_a_prefix_walk(root, replies, options):
    one_by_one = mark_distribution(root, SCALE, replies.get, **options)
    asked, fetch = batched(replies)
    rounds = walk_in_rounds(root, SCALE, fetch, **options)
    assert rounds.probabilities == pytest.approx(one_by_one.probabilities)
    assert (rounds.expansions, rounds.unresolved, rounds.off_scale) == pytest.approx(
        (one_by_one.expansions, one_by_one.unresolved, one_by_one.off_scale))
    assert rounds.rounds == len(asked) <= 1  # 0-100: the first digits and "10" in one request
    assert rounds.prompts == sum(map(len, asked))


def test_a_round_asks_the_first_digits_with_ten_and_a_failed_round_is_unresolved():
    asked, fetch = batched({"1": alts(d0=0.6, eos=0.4), "10": alts(d0=0.5, eos=0.5), "9": alts(eos=1.0)})
    walk_in_rounds(alts(d1=0.6, d9=0.4), SCALE, fetch)
    assert asked == [["1", "9", "10"]]  # most likely first, then "10" (speculatively: "1" is being asked)
    failed = walk_in_rounds(alts(d5=0.6, d7=0.4), SCALE, lambda prefixes: [None] * len(prefixes))
    assert failed.probabilities == {} and failed.unresolved == pytest.approx(1.0) and failed.rounds == 1
    short = walk_in_rounds(alts(d5=0.6, d7=0.4), SCALE, lambda prefixes: [alts(eos=1.0)])  # one answer of 2
    assert short.probabilities == pytest.approx({5: 0.6}) and short.rounds == 1
    known = walk_in_rounds(alts(d85=0.7, d90=0.3), SCALE, no_request)  # single-token numbers: no request
    assert (known.rounds, known.prompts, known.expected()) == (0, 0, pytest.approx(85 * .7 + 90 * .3))


class CompletingClient:
    """Answers completions requests from `after` (text after the prompt's start -> alternatives)."""

    def __init__(self, start: str, after: dict):
        self.start, self.after, self.prompts = start, after, []

    def complete(self, model, prompts, top_logprobs):
        from judges.client import CompletionResult

        self.prompts.append(prompts)
        return CompletionResult([tuple(self.after.get(p.removeprefix(self.start))) for p in prompts],
                                100 * len(prompts), len(prompts), 1)


def test_expected_mark_batched_sends_the_rendered_prompt_and_the_reply_up_to_each_prefix():
    from judges.ccrs import prompt_request
    from judges.scoring import expected_mark

    cfg = JudgeConfig(scoring="expected", structured_output=True,
                      expected=ExpectedScoringOptions(continuation="batched"))
    request = prompt_request("Score it.", cfg)
    assert request.extra_body["return_prompt_text"] is True and request.top_logprobs == 20
    assert "return_prompt_text" not in prompt_request("Score it.", JudgeConfig(scoring="expected")).extra_body
    tokens = [token('{"', 1.0), token("score", 1.0), token('":', 1.0), token(" ", 1.0),
              token("0", 0.5, alts(d0=0.5, d9=0.3, d1=0.2)), token("}", 1.0)]
    client = CompletingClient("<prompt>", {'{"score": 9': alts(eos=1.0), '{"score": 1': alts(d0=1.0),
                                           '{"score": 10': alts(eos=1.0)})
    seen = []
    mark = expected_mark(client, request, request.messages, '{"score": 0}', tokens, 0, (0, 100),
                         cfg.expected, seen.append, prompt_text="<prompt>")
    assert client.prompts == [["<prompt>" + '{"score": ' + p for p in ("9", "1", "10")]]
    assert mark.value == pytest.approx(0.3 * 9 + 0.2 * 10) and len(seen) == 1
    missing = expected_mark(client, request, request.messages, '{"score": 0}', tokens, 0, (0, 100),
                            cfg.expected)
    assert missing.value is None and "prompt_text" in missing.reason


def test_the_completions_body_gives_each_prompt_its_alternatives_in_order():
    body = {"choices": [{"index": 1, "logprobs": {"top_logprobs": [{"}": -0.1, "0": -2.5}]}},
                        {"index": 0, "logprobs": {"top_logprobs": [{"5": -0.7, "0": -0.9}]}},
                        {"index": 2, "logprobs": None}],
            "usage": {"prompt_tokens": 30, "completion_tokens": 3,
                      "prompt_tokens_details": {"cached_tokens": 24}}}
    result = _completion_result(body, 1)
    assert result.tops == [(("5", -0.7), ("0", -0.9)), (("}", -0.1), ("0", -2.5)), None]
    # vLLM counts the cached tokens of the last prompt only: each of the 3 counted at its 24, at most all 30
    assert (result.prompt_tokens, result.completion_tokens, result.cached_tokens) == (30, 3, 30)
    body["usage"] = {"prompt_tokens": 300, "completion_tokens": 3,
                     "prompt_tokens_details": {"cached_tokens": 96}}
    assert _completion_result(body, 1).cached_tokens == 288


def test_a_completions_request_is_one_call_with_every_prompt(monkeypatch):
    client = LLMClient(ClientConfig(seed=3), "http://127.0.0.1:9")
    sent = []
    monkeypatch.setattr(client, "_send", lambda path, body, read: sent.append((path, body)) or read(
        {"choices": [{"index": 0, "logprobs": {"top_logprobs": [{"1": -0.1}]}}]}, 1))
    result = client.complete("m", ["P1", "P2"], 20)
    assert sent == [("/completions", {"model": "m", "prompt": ["P1", "P2"], "max_tokens": 1,
                                      "temperature": 0.0, "logprobs": 20, "add_special_tokens": False,
                                      "seed": 3})]
    assert result.tops == [(("1", -0.1),)] and client.stats["calls"] == 1
    client.close()


def token(text: str, p: float, top: list[tuple[str, float]] | None = None) -> TokenLogprob:
    return TokenLogprob(text, math.log(p), tuple(top or [(text, math.log(p))]))


def test_locate_mark_in_a_structured_json_reply_split_digits():
    # SmolLM2 tokenizes '{"score": 85}' as '{"', 'score', '":', ' ', '8', '5', '}'
    after_8 = alts(d5=0.9, d0=0.1)
    tokens = [token('{"', 1.0), token("score", 1.0), token('":', 1.0), token(" ", 1.0),
              token("8", 0.7, alts(d8=0.7, d9=0.3)), token("5", 0.9, after_8),
              token("}", 1.0, alts(**{"}": 1.0}))]
    position = locate_mark('{"score": 85}', tokens, 85)
    assert position.token_index == 4
    assert position.head == '{"score": '
    assert position.strip_prefix == ""
    assert position.known["8"] == tuple(after_8)
    assert set(position.known) == {"8", "85"}


def test_locate_mark_single_token_with_a_leading_space():
    tokens = [token(" 85", 0.8, alts(**{" 85": 0.8, " 90": 0.2})), token(EOS, 1.0)]
    position = locate_mark(" 85", tokens, 85)
    assert (position.token_index, position.head, position.strip_prefix) == (0, " ", " ")
    walk = mark_distribution(tokens[0].top, SCALE, no_request, position.known,
                             strip_prefix=position.strip_prefix)
    assert walk.expected() == pytest.approx(85 * .8 + 90 * .2)


def test_locate_mark_skips_other_numbers_and_reports_a_missing_mark():
    tokens = [token("Step", 1.0), token(" 2", 1.0), token(":", 1.0), token(" ", 1.0), token("4", 1.0),
              token("0", 1.0)]
    assert locate_mark("Step 2: 40", tokens, 40).token_index == 4
    assert locate_mark("Step 2: 40", tokens, 41) is None


def sample() -> Sample:
    return Sample("q1", "A", "What is X?", "X is Y.", "X is Y.", ["X is Y."])


def test_the_judgment_scores_the_expected_mark_and_keeps_the_integer():
    cfg = JudgeConfig(scoring="expected")
    walk = MarkDistribution({80: 0.5, 90: 0.5})
    j = judgment(CCRS_METRICS["CC"], sample(), cfg, 90, "ok", None, "90", Usage(),
                 ExpectedMark(85.0, 1.0, None, walk))
    assert (j.llm_score, j.llm_score_expected, j.score, j.scoring) == (90, 85.0, 0.85, "expected")
    ac = judgment(CCRS_METRICS["AC"], sample(), cfg, 90, "ok", None, "90", Usage(),
                  ExpectedMark(85.0, 1.0, None, walk))
    assert ac.score == pytest.approx(0.7 * 1.0 + 0.3 * 0.85)


def test_too_little_mass_falls_back_to_the_integer_and_says_so():
    cfg = JudgeConfig(scoring="expected")
    low = ExpectedMark(None, 0.3, "probability on allowed marks 0.300 < min_mass 0.5",
                       MarkDistribution({9: .3}))
    j = judgment(CCRS_METRICS["QR"], sample(), cfg, 9, "ok", None, "9", Usage(), low)
    assert (j.score, j.scoring, j.score_mass) == (0.09, "integer_fallback", 0.3)
    assert j.llm_score_expected is None
    assert "min_mass" in j.detail


def test_expected_mode_asks_for_logprobs_and_the_client_returns_them():
    from judges.ccrs import build_request
    from judges.config import ClientConfig

    cfg = JudgeConfig(scoring="expected", expected=ExpectedScoringOptions(top_logprobs=5))
    request = build_request(CCRS_METRICS["CC"], sample(), ["X is Y."], cfg)
    client = LLMClient(ClientConfig(), base_url="http://127.0.0.1:9")
    body = client.payload(request)
    assert (body["logprobs"], body["top_logprobs"]) == (True, 5)
    assert "continue_final_message" not in body
    reply = {"choices": [{"message": {"content": "85"}, "finish_reason": "stop", "logprobs": {"content": [
        {"token": "8", "logprob": -0.1, "top_logprobs": [{"token": "8", "logprob": -0.1},
                                                          {"token": "9", "logprob": -2.4}]},
        {"token": "5", "logprob": -0.2, "top_logprobs": [{"token": "5", "logprob": -0.2}]}]}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2}}
    result = LLMClient._result(reply, 1)
    assert result.logprobs[0] == TokenLogprob("8", -0.1, (("8", -0.1), ("9", -2.4)))
    assert LLMClient._result({"choices": [{"message": {"content": "85"}}]}, 1).logprobs is None
    client.close()


def test_scoring_is_a_checked_choice():
    with pytest.raises(ValueError):
        JudgeConfig(scoring="probability")
    with pytest.raises(ValueError):
        ExpectedScoringOptions(top_logprobs=50)


# --- on the real CPU model (SmolLM2-135M-Instruct: one token per digit) -------------------------------

@pytest.mark.llm
def test_the_server_returns_logprobs_and_a_confident_mark_is_its_own_expectation(llm_endpoint):
    from judges.ccrs import parse_score, sampling_extra
    from judges.config import ClientConfig
    from judges.scoring import expected_mark
    from judges.suite import user_request

    cfg = JudgeConfig(model=llm_endpoint.judge_model, structured_output=True, scoring="expected")
    request = user_request(cfg.model, 'Copy this JSON exactly: {"score": 42}', 16, sampling_extra(cfg))
    request.top_logprobs = cfg.expected.top_logprobs
    with LLMClient(ClientConfig(max_retries=2), llm_endpoint.base_url) as client:
        result = client.chat(request)
        mark = parse_score(result.text, expect_json=True).score
        expected = expected_mark(client, request, request.messages, result.text, result.logprobs, mark,
                                 (0, 100), cfg.expected)
    assert result.logprobs and all(token.top for token in result.logprobs)
    assert mark == 42, result.text
    assert expected.value is not None and 0 <= expected.value <= 100
    assert expected.mass > 0.9 and round(expected.value) == mark


@pytest.mark.llm
def test_a_real_ccrs_judgment_in_expected_mode_records_both_marks(llm_endpoint):
    from tests.conftest import bioasq_questions

    from judges.ccrs import build_request, run_judgment
    from judges.config import ClientConfig

    question = bioasq_questions(1)[0]
    snippets = [s["text"] for s in sample_field(question["snippets"])[:2]]
    answer = sample_field(question["ideal_answer"])
    answer = answer[0] if isinstance(answer, list) else answer
    item = Sample(question["id"], "A", question["body"], answer, answer, snippets)
    cfg = JudgeConfig(model=llm_endpoint.judge_model, structured_output=True, scoring="expected")
    request = build_request(CCRS_METRICS["QR"], item, snippets, cfg)
    with LLMClient(ClientConfig(max_retries=2), llm_endpoint.base_url) as client:
        j = run_judgment(client, CCRS_METRICS["QR"], item, request, cfg)
    assert j.status == "ok", (j.reason, j.raw)
    assert j.scoring in ("expected", "integer_fallback") and 0 <= j.score_mass <= 1
    if j.scoring == "expected":
        assert 0 <= j.llm_score_expected <= 100 and j.score == pytest.approx(j.llm_score_expected / 100)
    assert isinstance(j.llm_score, int) and j.attempts >= 1




@pytest.mark.llm
def test_batched_continuations_give_the_marks_of_one_chat_request_each(llm_endpoint):
    """The same CCRS reply scored both ways on the real server: the same expected mark, from one completions
    request instead of one chat request per continuation."""
    from tests.conftest import bioasq_questions

    from judges.ccrs import build_request, parse_score
    from judges.config import ClientConfig
    from judges.scoring import expected_mark

    question = bioasq_questions(2)[1]
    snippets = [s["text"] for s in sample_field(question["snippets"])[:2]]
    answer = sample_field(question["ideal_answer"])
    answer = answer[0] if isinstance(answer, list) else answer
    item = Sample(question["id"], "A", question["body"], answer, answer, snippets)
    options = {"continuation": "batched", "min_branch": 0.005}
    cfg = JudgeConfig(model=llm_endpoint.judge_model, structured_output=True, scoring="expected",
                      expected=options)
    request = build_request(CCRS_METRICS["CC"], item, snippets, cfg)
    with LLMClient(ClientConfig(max_retries=2), llm_endpoint.base_url) as client:
        reply = client.chat(request)
        mark = parse_score(reply.text, expect_json=True).score
        walks = {}
        for mode in ("chat", "batched"):
            results = []
            walks[mode] = (expected_mark(client, request, request.messages, reply.text, reply.logprobs, mark,
                                         (0, 100), cfg.expected.model_copy(update={"continuation": mode}),
                                         results.append, reply.prompt_text), len(results))
    (chat, chat_requests), (batched, batched_requests) = walks["chat"], walks["batched"]
    assert reply.prompt_text and chat.value is not None, (reply.text, chat.reason)
    assert batched.value == pytest.approx(chat.value, abs=1e-6)
    assert batched.distribution.probabilities == pytest.approx(chat.distribution.probabilities, abs=1e-9)
    assert batched.distribution.expansions == chat.distribution.expansions == chat_requests > 1
    assert batched_requests == batched.distribution.rounds == 1
