"""Parsers and list formats shared by the suites: numbered items, one yes/no verdict per statement (bare,
or closing a short explanation) and the numbered context and statement lists their prompts show (VERA, the
RAGChecker-style baseline); one integer mark on a scale (CCRS, GQM)."""
from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from judges.suite import Parsed

_ITEM = re.compile(r"^\s*(?:\d+\s*[.):-]|[-*\u2022])\s*(.+?)\s*$")


def parse_numbered(text: str | None) -> list[str]:
    """Items of a numbered / bulleted list; plain non-empty lines when there are no markers."""
    lines = [line for line in (text or "").splitlines() if line.strip()]
    items = [m.group(1) for line in lines if (m := _ITEM.match(line))]
    if not items:
        items = [line.strip() for line in lines]
    return [item for item in items if item.strip().upper() != "NONE"]


def parse_verdicts(text: str | None, expected: int) -> list[bool] | None:
    """One yes/no per line ("1. yes"); None unless exactly `expected` verdicts are found."""
    verdicts = []
    for line in (text or "").splitlines():
        found = re.findall(r"\b(yes|no)\b", line.lower())
        if len(found) == 1:
            verdicts.append(found[0] == "yes")
    return verdicts if len(verdicts) == expected else None


ENTAILMENT_LABELS = ("entailment", "neutral", "contradiction")
_LABEL = re.compile(r"\b(" + "|".join(ENTAILMENT_LABELS) + r")\b")


def parse_entailment_labels(text: str | None, expected: int) -> list[str] | None:
    """One three-way label per line ("1. neutral"); None unless exactly `expected` labels are found."""
    labels = []
    for line in (text or "").splitlines():
        found = _LABEL.findall(line.lower())
        if len(found) == 1:
            labels.append(found[0])
    return labels if len(labels) == expected else None


_VERDICT = re.compile(r"\bverdict\b[\s*:_-]*(yes|no)\b", re.IGNORECASE)
_FINAL_LINE = re.compile(r"^[\s*#]*final\b", re.IGNORECASE)


def parse_explained_verdicts(text: str | None, expected: int) -> list[bool] | None:
    """The "Verdict: Yes|No" that closes each statement's explanation ("1. Explanation: ... Verdict: No"),
    in order; a closing "Final verdict ..." summary line is ignored. None unless exactly `expected`."""
    body = "\n".join(line for line in (text or "").splitlines() if not _FINAL_LINE.match(line))
    verdicts = [match.group(1).lower() == "yes" for match in _VERDICT.finditer(body)]
    return verdicts if len(verdicts) == expected else None


@dataclass(frozen=True)
class VerdictReply:
    """How a verdicts.txt version asks the judge to reply: its parser, the rule it states and the re-ask."""

    parse: Callable[[str | None, int], list | None]
    rule: str
    reask: str  # `{n}` is the number of statements


# A verdicts.txt declares its reply in a `[reply]` section (absent: "yes-no").
VERDICT_REPLIES: dict[str, VerdictReply] = {
    "yes-no": VerdictReply(parse_verdicts, "yes/no verdict lines",
                           "Reply with exactly {n} lines, each like '1. yes' or '1. no'."),
    "explained": VerdictReply(
        parse_explained_verdicts, "statements, each an explanation closed by 'Verdict: Yes' or 'Verdict: No'",
        "Reply with exactly {n} lines, each like '1. Explanation: <one short sentence> Verdict: Yes' "
        "(or 'Verdict: No')."),
}


def verdicts_parser(expected: int, reply: VerdictReply = VERDICT_REPLIES["yes-no"]
                    ) -> Callable[[str | None], Parsed]:
    def parse(text: str | None) -> Parsed:
        verdicts = reply.parse(text, expected)
        if verdicts is None:
            return Parsed(False, reason=f"expected {expected} {reply.rule}")
        return Parsed(True, verdicts)

    return parse


def split_sentences(text: str) -> list[str]:
    parts = re.split(r"(?<=[.!?])\s+(?=[A-Z0-9(\"'])|\n+", text.strip())
    return [p.strip() for p in parts if len(p.strip()) > 2]


def context_text(chunks: Sequence[str]) -> str:
    """The context as the prompts show it: numbered chunks, best first."""
    return "\n".join(f"[{i}] {chunk}" for i, chunk in enumerate(chunks, 1))


def numbered(items: Sequence[str]) -> str:
    return "\n".join(f"{i}. {item}" for i, item in enumerate(items, 1))


# --- an integer mark (CCRS 0-100, GQM 0-10) -------------------------------------------------------------

@dataclass(frozen=True)
class ParsedScore:
    score: int | None
    reason: str | None
    justification: str | None = None


_BARE_NUMBER = re.compile(r"[+-]?\d+(?:\.\d+)?")


def parse_integer_mark(text: str | None, scale: tuple[int, int], expect_json: bool = False,
                       lenient: bool = False) -> ParsedScore:
    """Strict: the reply must be an integer within the scale (surrounding whitespace and one trailing
    period tolerated); with expect_json, a JSON object whose "score" is such an integer. Anything else
    is invalid and carries the reason. `lenient` (off by default) also accepts prose that contains
    exactly one number, an integer within the scale."""
    stripped = (text or "").strip()
    if not stripped:
        return ParsedScore(None, "empty reply")
    justification = None
    if expect_json:
        try:
            obj = json.loads(stripped)
        except json.JSONDecodeError:
            return ParsedScore(None, "not valid JSON")
        if not isinstance(obj, dict) or "score" not in obj:
            return ParsedScore(None, "JSON without a score field")
        justification = obj.get("justification")
        value = obj["score"]
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            return ParsedScore(None, f"score is not an integer: {value!r}")
        stripped = str(value).strip()
    candidate = stripped.removesuffix(".")
    if not _BARE_NUMBER.fullmatch(candidate):
        numbers = _BARE_NUMBER.findall(candidate)
        if lenient and len(numbers) == 1 and re.fullmatch(r"\d+", numbers[0]):
            return parse_integer_mark(numbers[0], scale)
        if numbers:
            return ParsedScore(None, "prose around the number")
        return ParsedScore(None, "no number in reply")
    if not re.fullmatch(r"[+-]?\d+", candidate):
        return ParsedScore(None, "not an integer")
    score = int(candidate)
    low, high = scale
    if not low <= score <= high:
        return ParsedScore(None, f"out of range {low}-{high}: {score}")
    return ParsedScore(score, None, justification)
