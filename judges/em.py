"""Exact match for CCRS's AC: SQuAD-style normalized string equality.

normalize(s): lowercase; drop punctuation (string.punctuation); drop the articles a/an/the as whole
words; collapse runs of whitespace to one space and trim. EM(answer, references) = 1.0 when the
normalized extracted answer equals the normalized form of any reference, else 0.0. An empty answer never
matches. References: the ground-truth (ideal) answer, plus BioASQ exact-answer synonyms only when
JudgeConfig.em_use_exact_answer_synonyms is on (off by default: the paper compares with g only).
"""
from __future__ import annotations

import re
import string
from collections.abc import Iterable
from typing import Any

_PUNCT = re.compile(f"[{re.escape(string.punctuation)}]")
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    text = text.lower()
    text = _PUNCT.sub("", text)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(answer: str, references: Iterable[str]) -> float:
    normalized = normalize_answer(answer or "")
    if not normalized:
        return 0.0
    return float(any(normalized == normalize_answer(ref) for ref in references if ref))


def flatten_answers(value: Any) -> list[str]:
    """BioASQ exact answers come as a string, a list of synonyms, or a list of lists (list questions)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return [text for item in value for text in flatten_answers(item)]
    return [str(value)]
