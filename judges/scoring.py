"""Probability-weighted judge marks (`judge.scoring: expected`, the G-Eval approach: Liu et al. 2023).

The judge's reply is asked for with token log-probabilities. Its integer (the greedy reply, what
`scoring: integer` records) stays the argmax mark; beside it this module computes the expected mark
sum(s * P(s)) / sum(P(s)) over the allowed marks s of the metric's integer scale.

P(s) is the probability of the digit string of s followed by the end of the number, from the position where
the reply's mark starts. Tokenizers differ: Llama-3 has one token per number up to 999, Mistral and SmolLM2
one token per digit. Both are handled by one walk over digit prefixes (docs/judges.md, "Expected scores"):

- the root distribution is the top-k alternatives at the mark's first token (from the reply itself);
- a prefix that an allowed mark extends (e.g. "1" -> 10..19, 100; "10" -> 100; "8" -> 80..89) is *open*:
  its next-token distribution is needed; a digit token extends it, any other token (end of message, `}`,
  a space, a period) ends the number there. Distributions along the greedy reply are already in the reply;
  the others cost one continuation request each (vLLM's `continue_final_message`: the dialogue with the
  reply's text up to and including the prefix as an unfinished assistant message, one new token);
- a prefix that no allowed mark extends (e.g. "85", "0", "100") is *closed*: the number is taken as ended
  there. A further digit would leave the scale; its (small) probability is not measured.
- open prefixes below `min_branch` probability, or beyond `max_expansions` requests, are not expanded: their
  probability is *unresolved*, like the probability outside the server's top-k (*unseen*) and on tokens that
  are no mark of the scale (*off_scale*). The expectation is normalised over the resolved allowed marks;
  `mass` (their total probability) is recorded, and below `min_mass` no expected mark is given (the caller
  falls back to the integer and counts it).

`expected.continuation: batched` asks the same continuations a round at a time (`walk_in_rounds`): the walk
runs on what is fetched so far, and every prefix it would have asked is sent, with the others of its round,
in one /v1/completions request (a list of prompts: the reply's prompt as the server rendered it, then the
reply's text up to the prefix); then the walk runs again. The last walk is the one-request-a-prefix walk
itself, so the marks are the same; a 0-100 judgment needs one such request instead of up to
`max_expansions`.
"""
from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from judges.client import ChatRequest, LLMClient, LLMRequestError, TokenLogprob

SCORINGS = ("integer", "expected")
_DIGITS = re.compile(r"\d+")

Alternatives = Sequence[tuple[str, float]]  # (token text, log-probability), as the server lists them
Fetch = Callable[[list[str]], Sequence[Alternatives | None]]  # prefixes -> their alternatives, one request


@dataclass
class MarkDistribution:
    """What the walk found: probability per allowed mark, and where the rest of the probability went."""

    probabilities: dict[int, float] = field(default_factory=dict)
    off_scale: float = 0.0
    unseen: float = 0.0
    unresolved: float = 0.0
    expansions: int = 0  # continuations the walk used (one request each, asked one at a time)
    rounds: int | None = None  # continuation: batched: the requests that asked them (None: one each)
    prompts: int | None = None  # continuation: batched: the prefixes those requests asked (speculative too)

    @property
    def mass(self) -> float:
        return sum(self.probabilities.values())

    def expected(self) -> float | None:
        mass = self.mass
        if mass <= 0.0:
            return None
        return sum(mark * p for mark, p in self.probabilities.items()) / mass


@dataclass(frozen=True)
class ExpectedMark:
    """The expected mark (None with the reason when there is none) and the walk behind it."""

    value: float | None
    mass: float | None
    reason: str | None
    distribution: MarkDistribution | None = None


@dataclass(frozen=True)
class Scale:
    low: int
    high: int

    def allowed(self, digits: str) -> bool:
        return digits == str(int(digits)) and self.low <= int(digits) <= self.high

    def is_open(self, digits: str) -> bool:
        """Some allowed mark is a longer digit string that starts with `digits`."""
        if digits != str(int(digits)) or digits == "0":
            return False
        value, width = int(digits), len(digits)
        for extra in range(1, len(str(self.high)) - width + 1):
            first, last = value * 10**extra, value * 10**extra + 10**extra - 1
            if first <= self.high and last >= self.low:
                return True
        return False


def mark_distribution(root: Alternatives, scale: Scale, expand: Callable[[str], Alternatives | None],
                      known: dict[str, Alternatives] | None = None, min_branch: float = 0.02,
                      max_expansions: int = 8, strip_prefix: str = "") -> MarkDistribution:
    """The walk over digit prefixes described in the module docstring. `root`: the alternatives at the
    mark's first token; `known`: next-token alternatives already in hand (the greedy reply's) by digit
    prefix; `expand(prefix)`: the alternatives after `prefix` (one request; None when it failed).
    `strip_prefix`: what precedes the first digit inside the reply's own first token (e.g. " " of " 85")."""
    known = known or {}
    result = MarkDistribution()
    frontier: list[tuple[str, float]] = []

    def settle(digits: str, p: float, ended: bool) -> None:
        if not ended and scale.is_open(digits):
            frontier.append((digits, p))
        elif scale.allowed(digits):
            result.probabilities[int(digits)] = result.probabilities.get(int(digits), 0.0) + p
        else:
            result.off_scale += p

    def spread(alternatives: Alternatives, prefix: str, p: float) -> None:
        merged: dict[str, float] = defaultdict(float)
        for text, logprob in alternatives:
            merged[text] += math.exp(logprob)
        result.unseen += p * max(0.0, 1.0 - sum(merged.values()))
        for text, q in merged.items():
            if not prefix:
                text = text.removeprefix(strip_prefix) if strip_prefix.strip() else text.lstrip()
            run = _DIGITS.match(text)
            if run:
                settle(prefix + run.group(), p * q, ended=run.end() < len(text))
            elif prefix:
                settle(prefix, p * q, ended=True)
            else:
                result.off_scale += p * q

    spread(root, "", 1.0)
    while frontier:
        frontier.sort(key=lambda item: item[1])
        prefix, p = frontier.pop()
        if prefix in known:
            spread(known[prefix], prefix, p)
            continue
        if p < min_branch or result.expansions >= max_expansions:
            result.unresolved += p
            continue
        result.expansions += 1
        alternatives = expand(prefix)
        if alternatives is None:
            result.unresolved += p
        else:
            spread(alternatives, prefix, p)
    return result


def walk_in_rounds(root: Alternatives, scale: Scale, fetch: Fetch,
                   known: dict[str, Alternatives] | None = None, min_branch: float = 0.02,
                   max_expansions: int = 8, strip_prefix: str = "") -> MarkDistribution:
    """`mark_distribution` with its continuations fetched a round at a time: `fetch(prefixes)` asks them
    all in one request. Each round runs the walk on what is fetched so far; the prefixes it asked and did
    not get (taken as failed in that walk) are fetched together, with the open one-digit extensions of each
    (speculatively: the next round would likely ask them; at most `max_expansions` of them), and the walk
    runs again. It ends with a walk that asks nothing new: exactly the walk of one request a prefix, its
    `expansions` those requests, and `rounds` / `prompts` what was sent instead."""
    fetched: dict[str, Alternatives | None] = {}
    rounds = 0
    while True:
        pending: list[str] = []

        def expand(prefix: str) -> Alternatives | None:
            if prefix in fetched:
                return fetched[prefix]
            pending.append(prefix)
            return None

        walk = mark_distribution(root, scale, expand, known, min_branch, max_expansions, strip_prefix)
        if not pending:
            walk.rounds, walk.prompts = rounds, len(fetched)
            return walk
        batch = pending + speculative(pending, scale, set(fetched) | set(known or {}))[:max_expansions]
        answers = list(fetch(batch))  # a prefix left without an answer counts as failed, never asked again
        fetched.update((prefix, answers[i] if i < len(answers) else None) for i, prefix in enumerate(batch))
        rounds += 1


def speculative(prefixes: Sequence[str], scale: Scale, have: set[str]) -> list[str]:
    """The open one-digit extensions of `prefixes` not in hand (0-100: "1" -> "10")."""
    return [longer for prefix in prefixes for digit in "0123456789"
            if scale.is_open(longer := prefix + digit) and longer not in have and longer not in prefixes]


@dataclass(frozen=True)
class MarkPosition:
    """Where the reply's mark is: its first token, the reply text before its first digit, the text that
    precedes the digit inside that token, and the next-token alternatives along the greedy digits."""

    token_index: int
    head: str
    strip_prefix: str
    known: dict[str, Alternatives]


def locate_mark(raw: str, logprobs: Sequence[TokenLogprob], mark: int) -> MarkPosition | None:
    """The first digit run of the reply's tokens that spells `mark` (None when the tokens do not show it)."""
    texts = [token.token for token in logprobs]
    for start, text in enumerate(texts):
        first = re.search(r"\d", text)
        if first is None or (start and re.search(r"\d$", texts[start - 1])):
            continue
        digits, known, index, rest = "", {}, start, text[first.start():]
        while True:
            run = _DIGITS.match(rest)
            digits += run.group() if run else ""
            if not run or run.end() < len(rest) or index + 1 >= len(texts):
                break
            index += 1
            known[digits] = logprobs[index].top
            rest = texts[index]
        if digits != str(mark):
            continue
        found = re.search(rf"(?<!\d){mark}(?!\d)", raw)
        if found is None:
            return None
        return MarkPosition(start, raw[: found.start()], text[: first.start()], known)
    return None


def continuation(request: ChatRequest, messages: Sequence[dict[str, str]], partial: str,
                 top_logprobs: int) -> ChatRequest:
    """One new token after `partial`, continued as the assistant's unfinished message. Without
    `response_format`: vLLM applies a grammar from the start of the generation, not to a continued one."""
    extra = {k: v for k, v in request.extra_body.items() if k != "response_format"}
    return replace(request, messages=[*messages, {"role": "assistant", "content": partial}], max_tokens=1,
                   extra_body=extra, top_logprobs=top_logprobs, continue_final=True)


def expected_mark(client: LLMClient, request: ChatRequest, messages: Sequence[dict[str, str]], raw: str,
                  logprobs: Sequence[TokenLogprob] | None, mark: int, scale: tuple[float, float],
                  options, on_result: Callable[[object], None] | None = None,
                  prompt_text: str | None = None) -> ExpectedMark:
    """The expected mark of a reply whose integer `mark` was accepted. `options`: JudgeConfig.expected
    (top_logprobs, min_branch, max_expansions, min_mass, continuation); `on_result` sees every continuation
    result (usage accounting); `prompt_text`: the reply's prompt as the server rendered it (continuation:
    batched)."""
    if not logprobs:
        return ExpectedMark(None, None, "the server returned no logprobs")
    position = locate_mark(raw, logprobs, mark)
    if position is None:
        return ExpectedMark(None, None, f"the mark {mark} is not found in the reply's tokens")
    walk_args = (logprobs[position.token_index].top, Scale(int(scale[0]), int(scale[1])))
    walk_options = (position.known, options.min_branch, options.max_expansions, position.strip_prefix)
    if options.continuation == "batched":
        if prompt_text is None:
            return ExpectedMark(None, None, "the server returned no prompt_text (expected.continuation: "
                                "batched needs vLLM's return_prompt_text)")
        fetch = batched_fetch(client, request.model, prompt_text + position.head, options.top_logprobs,
                              on_result)
        distribution = walk_in_rounds(*walk_args, fetch, *walk_options)
    else:
        expand = chat_expand(client, request, messages, position.head, options.top_logprobs, on_result)
        distribution = mark_distribution(*walk_args, expand, *walk_options)
    mass = distribution.mass
    if mass < options.min_mass:
        return ExpectedMark(None, mass, f"probability on allowed marks {mass:.3f} < min_mass "
                            f"{options.min_mass}", distribution)
    return ExpectedMark(distribution.expected(), mass, None, distribution)


def chat_expand(client: LLMClient, request: ChatRequest, messages: Sequence[dict[str, str]], head: str,
                top_logprobs: int, on_result: Callable[[object], None] | None
                ) -> Callable[[str], Alternatives | None]:
    """One chat continuation request a prefix (None when it failed)."""
    def expand(prefix: str) -> Alternatives | None:
        try:
            result = client.chat(continuation(request, messages, head + prefix, top_logprobs))
        except LLMRequestError:
            return None
        if on_result is not None:
            on_result(result)
        return result.logprobs[0].top if result.logprobs else None
    return expand


def batched_fetch(client: LLMClient, model: str, start: str, top_logprobs: int,
                  on_result: Callable[[object], None] | None) -> Fetch:
    """One completions request for a round of prefixes, each prompt `start` (the rendered prompt and the
    reply up to its mark) plus the prefix; every prefix None when the request failed."""
    def fetch(prefixes: list[str]) -> Sequence[Alternatives | None]:
        try:
            result = client.complete(model, [start + prefix for prefix in prefixes], top_logprobs)
        except LLMRequestError:
            return [None] * len(prefixes)
        if on_result is not None:
            on_result(result)
        return result.tops
    return fetch


class ScoringUnsupportedError(RuntimeError):
    """The judge endpoint cannot give what `scoring: expected` needs."""


def probe_expected_support(client: LLMClient, model: str, top_logprobs: int,
                           continuation: str = "chat") -> None:
    """Two tiny requests before any judging: token log-probabilities with `top_logprobs` alternatives, and
    the continuation requests: vLLM's `continue_final_message` (continuation chat), or its
    `return_prompt_text` and a completions request with a list of prompts (batched). An endpoint lacking
    either (a hosted API, TGI) fails here with one line instead of falling back to integers on every
    judgment."""
    question = [{"role": "user", "content": "Reply with one digit: how many legs has a cat?"}]
    hint = "set judge.scoring: integer (--scoring integer), or judge with a vLLM server"
    if continuation == "batched":
        hint = f"set judge.expected.continuation: chat, or {hint}"
    extra = {"return_prompt_text": True} if continuation == "batched" else {}
    try:
        result = client.chat(ChatRequest(model, question, max_tokens=2, top_logprobs=top_logprobs,
                                         extra_body=extra))
    except LLMRequestError as exc:
        raise ScoringUnsupportedError(f"judge endpoint {client.base_url} refused a request for token "
                                      f"log-probabilities (scoring: expected needs them): {exc}; "
                                      f"{hint}") from exc
    if not result.logprobs or not result.logprobs[0].top:
        raise ScoringUnsupportedError(f"judge endpoint {client.base_url} returned no token log-probabilities "
                                      f"for model {model} (scoring: expected needs them); {hint}")
    if continuation == "batched":
        probe_batched(client, model, top_logprobs, result.prompt_text, hint)
        return
    unfinished = question + [{"role": "assistant", "content": "A cat has"}]
    try:
        client.chat(ChatRequest(model, unfinished, max_tokens=1, top_logprobs=top_logprobs,
                                continue_final=True))
    except LLMRequestError as exc:
        raise ScoringUnsupportedError(f"judge endpoint {client.base_url} refused continue_final_message "
                                      f"(vLLM's continuation of an unfinished reply, which scoring: expected "
                                      f"uses): {exc}; {hint}") from exc


def probe_batched(client: LLMClient, model: str, top_logprobs: int, prompt_text: str | None,
                  hint: str) -> None:
    """expected.continuation: batched needs the rendered prompt back, and completions with a list of
    prompts."""
    where = f"judge endpoint {client.base_url}"
    if prompt_text is None:
        raise ScoringUnsupportedError(f"{where} returned no prompt_text (vLLM's return_prompt_text, which "
                                      f"expected.continuation: batched uses); {hint}")
    prompts = [prompt_text + "A cat has", prompt_text + "A cat has 4"]
    try:
        result = client.complete(model, prompts, top_logprobs)
    except LLMRequestError as exc:
        raise ScoringUnsupportedError(f"{where} refused a completions request with a list of prompts "
                                      f"(expected.continuation: batched uses it): {exc}; {hint}") from exc
    if len(result.tops) != 2 or not all(result.tops):
        raise ScoringUnsupportedError(f"{where} answered a completions request with 2 prompts without their "
                                      f"token log-probabilities; {hint}")
