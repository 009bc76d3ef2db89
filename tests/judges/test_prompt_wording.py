"""Judge templates are written in our own words: no run of 8 consecutive words (lowercased, punctuation
stripped) is shared with any paper in the shared seeds folder (<repo>/../shared/seeds), and no run of 6 with
the paper the suite implements, apart from the literal strings a protocol requires the judge or the reader
to write."""
import re
from pathlib import Path

import pytest

from judges.templates import PROMPTS_ROOT

REPO = Path(__file__).resolve().parents[2]
SEEDS = REPO.parent / "shared" / "seeds"
N = 8
N_OWN_PAPER = 6
# The paper each suite's templates follow (RAGChecker's constructs are those of the CCRS paper's sec. 2.2).
SUITE_PAPERS = {"ccrs": "ccrs-paper.txt", "ragchecker": "ccrs-paper.txt", "grouse": "grouse-paper.txt",
                "vera": "vera-paper.txt", "gqm": "gqm-thesis.txt", "gqm_testset": "gqm-thesis.txt"}
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


def ngrams(text: str, n: int = N) -> set[str]:
    return {" ".join(seg[i:i + n]) for seg in segments(text) for i in range(len(seg) - n + 1)}


def shared_runs(template: Path, papers: dict[str, set[str]], n: int = N) -> list[str]:
    grams = ngrams(template.read_text(), n)
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


def test_no_template_shares_a_6_word_run_with_its_own_paper():
    if not SEEDS.is_dir():
        pytest.skip(f"no paper texts at {SEEDS} (the shared seeds folder is not part of a CI checkout)")
    suites = sorted(d.name for d in PROMPTS_ROOT.iterdir() if d.is_dir())
    assert set(suites) <= set(SUITE_PAPERS), f"name the paper of {sorted(set(suites) - set(SUITE_PAPERS))}"
    found = []
    for suite in suites:
        paper = SUITE_PAPERS[suite]
        grams = {paper: ngrams((SEEDS / paper).read_text(), N_OWN_PAPER)}
        found += [run for template in sorted((PROMPTS_ROOT / suite).rglob("*.txt"))
                  for run in shared_runs(template, grams, N_OWN_PAPER)]
    assert not found, (f"{len(found)} runs of {N_OWN_PAPER} words copied from a suite's paper:\n"
                       + "\n".join(found))


def test_the_reader_prompt_copies_no_paper_sentence():
    if not SEEDS.is_dir():
        pytest.skip(f"no paper texts at {SEEDS} (the shared seeds folder is not part of a CI checkout)")
    from judges.readers import PROMPT_VERSIONS, generation_prompt

    papers = {p.name: ngrams(p.read_text()) for p in sorted(SEEDS.glob("*.txt"))}
    grams = {gram for style in PROMPT_VERSIONS
             for gram in ngrams(generation_prompt("{question}", ["chunk_1", "chunk_2"], style))}
    assert not [(name, g) for name, paper in papers.items() for g in sorted(grams & paper)]
