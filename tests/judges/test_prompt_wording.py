"""Judge templates are written in our own words: no run of 8 consecutive words (lowercased, punctuation
stripped) is shared with a paper in the shared seeds folder (<repo>/../shared/seeds), apart from the
literal strings a protocol requires the judge or the reader to write."""
import re
from pathlib import Path

import pytest

from judges.templates import PROMPTS_ROOT

REPO = Path(__file__).resolve().parents[2]
SEEDS = REPO.parent / "shared" / "seeds"
N = 8
# Literal strings a paper's protocol prescribes: n-grams do not run through them.
PROTOCOL_STRINGS = (
    "Insufficient Information",  # VERA retrieval precision
    "[Not Supported by Context]",  # VERA retrieval recall labels
    "[Supported by Context]",
    "No document seems to precisely answer your question",  # GroUSE's required refusal
)


def words(text: str) -> list[str]:
    return re.sub(r"[^\w\s]", " ", text.lower()).split()


def segments(text: str) -> list[list[str]]:
    """The words of the text, cut wherever a protocol string stands (longest strings first)."""
    pieces = [" ".join(words(text))]
    for literal in sorted(PROTOCOL_STRINGS, key=len, reverse=True):
        marker = " ".join(words(literal))
        pieces = [part for piece in pieces for part in re.split(rf"\b{re.escape(marker)}\b", piece)]
    return [piece.split() for piece in pieces]


def ngrams(text: str) -> set[str]:
    return {" ".join(seg[i:i + N]) for seg in segments(text) for i in range(len(seg) - N + 1)}


def shared_runs(template: Path, papers: dict[str, set[str]]) -> list[str]:
    grams = ngrams(template.read_text())
    return [f"{template.relative_to(PROMPTS_ROOT)} ~ {name}: {gram!r}"
            for name, paper in papers.items() for gram in sorted(grams & paper)]


def test_segments_cut_at_protocol_strings():
    assert segments('write exactly "Insufficient Information". Then') == [["write", "exactly"], ["then"]]
    assert ngrams("one two three four five six seven eight nine") == {
        "one two three four five six seven eight", "two three four five six seven eight nine"}


def test_no_template_copies_a_paper_sentence():
    if not SEEDS.is_dir():
        pytest.skip(f"no paper texts at {SEEDS} (the shared seeds folder is not part of a CI checkout)")
    papers = {p.name: ngrams(p.read_text()) for p in sorted(SEEDS.glob("*.txt"))}
    found = [run for template in sorted(PROMPTS_ROOT.rglob("*.txt")) for run in shared_runs(template, papers)]
    assert not found, f"{len(found)} runs of {N} words copied from a paper:\n" + "\n".join(found)


def test_the_reader_prompt_copies_no_paper_sentence():
    if not SEEDS.is_dir():
        pytest.skip(f"no paper texts at {SEEDS} (the shared seeds folder is not part of a CI checkout)")
    from judges.readers import PROMPT_VERSIONS, generation_prompt

    papers = {p.name: ngrams(p.read_text()) for p in sorted(SEEDS.glob("*.txt"))}
    grams = {gram for style in PROMPT_VERSIONS
             for gram in ngrams(generation_prompt("{question}", ["chunk_1", "chunk_2"], style))}
    assert not [(name, g) for name, paper in papers.items() for g in sorted(grams & paper)]
