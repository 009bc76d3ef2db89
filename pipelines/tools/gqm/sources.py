"""The passages the GQM test-set generator reads (a dataset, or a folder of text files) and which of them
each question's prompt shows (seeded, spread over the corpus): one for simple, complex, situational and
conversational questions; two for double questions (one part from each, both relevant) and for distracting
ones (the second passage is the distractor, not relevant).
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from pipelines.reporting.gqm_types import QUESTION_TYPES
from retrievers.config import DatasetConfig
from retrievers.loaders import detect_format, load_dataset
from retrievers.schema import DatasetError

TWO_PASSAGE_TYPES = ("distracting", "double")
TEXT_SUFFIXES = (".txt", ".md")


@dataclass(frozen=True)
class Passage:
    doc_id: str
    text: str


@dataclass(frozen=True)
class Draw:
    """One question to generate: its id, type and the passages its prompt shows (the first holds the
    answer; `relevant` are those a retriever should find)."""

    query_id: str
    question_type: str
    passages: tuple[Passage, ...]

    @property
    def relevant(self) -> list[str]:
        shown = [p.doc_id for p in self.passages]
        return shown[:1] if self.question_type == "distracting" else shown


def read_corpus(path: Path) -> list[Passage]:
    """The passages of a dataset (any layout `ccrs run` reads) or, for a folder that is no dataset, of its
    text files (one passage per *.txt / *.md file, its id the file name without suffix; an empty one is
    an error)."""
    if path.is_dir() and not _is_dataset(path) and any(p.suffix in TEXT_SUFFIXES for p in path.iterdir()):
        return _text_files(path)
    table = load_dataset(DatasetConfig(path=str(path))).passages
    return [Passage(doc_id, text) for doc_id, text in zip(table.column("doc_id").to_pylist(),
                                                          table.column("text").to_pylist())]


def _is_dataset(folder: Path) -> bool:
    try:
        detect_format(folder)
    except DatasetError:
        return False
    return True


def _text_files(folder: Path) -> list[Passage]:
    passages = []
    for file in sorted(p for p in folder.iterdir() if p.suffix in TEXT_SUFFIXES):
        try:
            text = file.read_text(encoding="utf-8").strip()
        except UnicodeDecodeError as err:
            raise DatasetError(f"{file}: not UTF-8 text: {err}") from None
        if not text:
            raise DatasetError(f"{file}: empty text file (a passage needs text)")
        passages.append(Passage(file.stem, text))
    if len({p.doc_id for p in passages}) != len(passages):
        raise DatasetError(f"{folder}: two text files share a name (the passage id)")
    return passages


def draw_sources(passages: list[Passage], per_type: int, seed: int,
                 types: tuple[str, ...] = tuple(QUESTION_TYPES)) -> list[Draw]:
    """`per_type` questions of each type. Their first passages go through the corpus in a seeded order
    (each passage once before any twice); a second passage is another one, drawn at random."""
    if not passages:
        raise DatasetError("the corpus has no passage")
    if len(passages) < 2 and any(t in TWO_PASSAGE_TYPES for t in types):
        raise DatasetError(f"the corpus has {len(passages)} passage(s); double and distracting questions "
                           "need two")
    rng = random.Random(seed)
    order = list(range(len(passages)))
    rng.shuffle(order)
    draws, position = [], 0
    for question_type in types:
        for number in range(per_type):
            first = order[position % len(order)]
            position += 1
            chosen = [first]
            if question_type in TWO_PASSAGE_TYPES:
                chosen.append(rng.choice([i for i in range(len(passages)) if i != first]))
            draws.append(Draw(f"gqm-{question_type}-{number + 1:03d}", question_type,
                              tuple(passages[i] for i in chosen)))
    return draws
