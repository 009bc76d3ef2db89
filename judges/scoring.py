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


@dataclass
class MarkDistribution:
    """What the walk found: probability per allowed mark, and where the rest of the probability went."""

    probabilities: dict[int, float] = field(default_factory=dict)
    off_scale: float = 0.0
    unseen: float = 0.0
    unresolved: float = 0.0
    expansions: int = 0

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
                  options, on_result: Callable[[object], None] | None = None) -> ExpectedMark:
    """The expected mark of a reply whose integer `mark` was accepted. `options`: JudgeConfig.expected
    (top_logprobs, min_branch, max_expansions, min_mass); `on_result` sees every continuation result
    (usage accounting)."""
    if not logprobs:
        return ExpectedMark(None, None, "the server returned no logprobs")
    position = locate_mark(raw, logprobs, mark)
    if position is None:
        return ExpectedMark(None, None, f"the mark {mark} is not found in the reply's tokens")

    def expand(prefix: str) -> Alternatives | None:
        try:
            result = client.chat(continuation(request, messages, position.head + prefix,
                                              options.top_logprobs))
        except LLMRequestError:
            return None
        if on_result is not None:
            on_result(result)
        return result.logprobs[0].top if result.logprobs else None

    distribution = mark_distribution(logprobs[position.token_index].top, Scale(int(scale[0]), int(scale[1])),
                                     expand, position.known, options.min_branch, options.max_expansions,
                                     position.strip_prefix)
    mass = distribution.mass
    if mass < options.min_mass:
        return ExpectedMark(None, mass, f"probability on allowed marks {mass:.3f} < min_mass "
                            f"{options.min_mass}", distribution)
    return ExpectedMark(distribution.expected(), mass, None, distribution)


class ScoringUnsupportedError(RuntimeError):
    """The judge endpoint cannot give what `scoring: expected` needs."""


def probe_expected_support(client: LLMClient, model: str, top_logprobs: int) -> None:
    """Two tiny requests before any judging: token log-probabilities with `top_logprobs` alternatives, and
    vLLM's `continue_final_message` (continuation requests). An endpoint lacking either (a hosted API, TGI)
    fails here with one line instead of falling back to integers on every judgment."""
    question = [{"role": "user", "content": "Reply with one digit: how many legs has a cat?"}]
    hint = "set judge.scoring: integer (--scoring integer), or judge with a vLLM server"
    try:
        result = client.chat(ChatRequest(model, question, max_tokens=2, top_logprobs=top_logprobs))
    except LLMRequestError as exc:
        raise ScoringUnsupportedError(f"judge endpoint {client.base_url} refused a request for token "
                                      f"log-probabilities (scoring: expected needs them): {exc}; "
                                      f"{hint}") from exc
    if not result.logprobs or not result.logprobs[0].top:
        raise ScoringUnsupportedError(f"judge endpoint {client.base_url} returned no token log-probabilities "
                                      f"for model {model} (scoring: expected needs them); {hint}")
    unfinished = question + [{"role": "assistant", "content": "A cat has"}]
    try:
        client.chat(ChatRequest(model, unfinished, max_tokens=1, top_logprobs=top_logprobs,
                                continue_final=True))
    except LLMRequestError as exc:
        raise ScoringUnsupportedError(f"judge endpoint {client.base_url} refused continue_final_message "
                                      f"(vLLM's continuation of an unfinished reply, which scoring: expected "
                                      f"uses): {exc}; {hint}") from exc
