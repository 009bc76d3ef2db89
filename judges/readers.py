"""Reader backends: the CCRS generation prompt (the construct of paper Figure 1), answer extraction, the
context-window truncation policy, and the extractive (non-LLM) baseline reader."""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from judges.client import ChatRequest
from judges.config import ReaderConfig

# fig1-v2: Figure 1's construct (instruction, the top-k chunks each in <content> inside one <context>, the
# question, the answer in <answer> tags) in our own words; fig1-v1 repeated the figure's sentences.
PROMPT_VERSION = "fig1-v2"
# Reader prompt styles (ReaderConfig.prompt) and the version each records: `citing` is Figure 1's prompt
# asking for GroUSE's grounded-answer conventions, which its faithfulness, positive acceptance and negative
# rejection check (a [i] after each statement; its refusal sentence when no passage answers).
# `vera-summary` is not Figure 1: VERA's summarisation prompt (vera-paper section 5.1 and appendix Figure 2:
# the retrieved passages, then the query to be answered with a summarised response; no answer tags), in
# our own words; with the sampling settings of section 5.1 (READER_SAMPLING).
PROMPT_VERSIONS = {"paper": PROMPT_VERSION, "citing": f"{PROMPT_VERSION}-citing",
                   "vera-summary": "vera-summary-v1"}
# Sampling settings a prompt style brings with it, sent beside the reader's temperature: VERA section 5.1
# answers with temperature 0 and top_p 0.01 (OpenAI-compatible servers, vLLM too, take top_p).
READER_SAMPLING: dict[str, dict[str, float]] = {"vera-summary": {"top_p": 0.01}}
# Styles whose prompt asks for the answer between <answer> tags.
TAGGED_STYLES = frozenset({"paper", "citing"})
REFUSAL_SENTENCE = "No document seems to precisely answer your question"  # GroUSE's, written verbatim
_ANSWER = re.compile(r"<answer>(.*?)(?:</answer>|$)", re.IGNORECASE | re.DOTALL)
_STOPWORDS = frozenset(
    ["a", "an", "the", "of", "in", "on", "at", "to", "for", "from", "by", "with", "and", "or", "is", "are",
     "was", "were", "be", "been", "being", "what", "which", "who", "whom", "whose", "how", "why", "when",
     "where", "does", "do", "did", "can", "could", "should", "would", "will", "shall", "may", "might",
     "this", "that", "these", "those", "it", "its", "as", "not", "no", "yes", "than", "then", "there",
     "their", "they", "them", "into", "about", "over", "under", "between"]
)


def generation_prompt(question: str, chunks: list[str], style: str = "paper") -> str:
    """Paper Figure 1's layout and inputs in the same order (instruction, context, question, output rule).
    style `citing`: the passages numbered from 1 in rank order (the numbering GroUSE's judge shows), and
    the citation and refusal conventions asked for before the output rule. style `vera-summary`: VERA's
    construct instead (vera_summary_prompt)."""
    if style == "vera-summary":
        return vera_summary_prompt(question, chunks)
    if style != "citing":
        contents = " ".join(f"<content>{chunk}</content>" for chunk in chunks)
        return (
            f"Using the context below, answer the question. <context> {contents} </context>\n"
            f"Question: {question}\n"
            "Write your answer between the tags <answer></answer>."
        )
    numbered = " ".join(f"<content>[{i}] {chunk}</content>" for i, chunk in enumerate(chunks, 1))
    return (
        f"Using the numbered context below, answer the question. <context> {numbered} </context>\n"
        f"Question: {question}\n"
        "Put the number of the passage each statement comes from right after that statement, as [i]. "
        f'If none of the passages answers the question, open with the sentence "{REFUSAL_SENTENCE}"; '
        "related information from the passages may follow, cited in the same way.\n"
        "Write your answer between the tags <answer></answer>."
    )


def vera_summary_prompt(question: str, chunks: list[str]) -> str:
    """VERA's summarisation prompt (section 5.1, appendix Figure 2): the retrieved passages first, in rank
    order, then the query with the request for a summarised response. Our wording; the reply is the
    answer as it stands (no tags)."""
    passages = "\n".join(f"- {chunk}" for chunk in chunks)
    return (
        f"Passages:\n{passages}\n\n"
        "Drawing on the passages above, reply to the query below with a summary that answers it.\n"
        f"Query: {question}"
    )


def extract_answer(response: str, style: str = "paper") -> tuple[str, bool]:
    """(answer, tagged). The text of the first <answer> tag (an unclosed tag runs to the end); an untagged
    reply is kept whole and reported as untagged. A style whose prompt asks for no tags (vera-summary):
    the whole reply, reported as tagged (it is in the form asked for)."""
    if style not in TAGGED_STYLES:
        return (response or "").strip(), True
    match = _ANSWER.search(response or "")
    if match and match.group(1).strip():
        return match.group(1).strip(), True
    return (response or "").strip(), False


@dataclass
class FittedPrompt:
    chunks: list[str]
    prompt: str
    prompt_tokens_estimate: int
    n_truncated: int


def fit_chunks(
    render: Callable[[list[str]], str],
    chunks: list[str],
    budget_tokens: int,
    count_tokens: Callable[[str], int],
) -> FittedPrompt:
    """Truncation policy: drop the lowest-ranked chunks (from the end) until the rendered prompt fits the
    budget; whole chunks only, never a chunk's middle. Zero chunks is allowed as a last resort."""
    kept = list(chunks)
    while True:
        prompt = render(kept)
        tokens = count_tokens(prompt)
        if tokens <= budget_tokens or not kept:
            return FittedPrompt(kept, prompt, tokens, len(chunks) - len(kept))
        kept = kept[:-1]


def reader_request(reader: ReaderConfig, prompt: str) -> ChatRequest:
    if not reader.model:
        raise ValueError(f"reader {reader.name!r} of kind 'llm' needs a model")
    return ChatRequest(model=reader.model, messages=[{"role": "user", "content": prompt}],
                       temperature=reader.temperature, max_tokens=reader.max_tokens,
                       extra_body=dict(READER_SAMPLING.get(reader.prompt_style, {})))


def _terms(text: str) -> set[str]:
    return {t for t in re.findall(r"[a-z0-9]+", text.lower()) if t not in _STOPWORDS and len(t) > 1}


def split_sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]


def extractive_answer(question: str, chunks: list[str], max_sentences: int, cite: bool = False) -> str:
    """Extractive baseline (not an LLM): the sentences with the most question-term overlap, ties broken by
    chunk rank then position, returned in that ranked order; `cite`: each followed by its passage's number
    as [i] (the citing prompt's convention)."""
    query_terms = _terms(question)
    candidates = []
    for rank, chunk in enumerate(chunks):
        for position, sentence in enumerate(split_sentences(chunk)):
            overlap = len(query_terms & _terms(sentence))
            candidates.append((-overlap, rank, position, sentence))
    candidates.sort()
    chosen = [f"{c[3]} [{c[1] + 1}]" if cite else c[3] for c in candidates[:max_sentences] if c[0] < 0]
    return " ".join(chosen)
