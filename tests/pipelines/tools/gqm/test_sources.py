"""The passages of the GQM test-set generator (pipelines/tools/gqm/sources.py): a corpus from text files or
a dataset, and the passages each of the six types' questions reads."""
import pytest

from pipelines.config import RESOURCE_ROOT
from pipelines.reporting.gqm_types import QUESTION_TYPES
from pipelines.tools.gqm.sources import Passage, draw_sources, read_corpus
from retrievers.schema import DatasetError

PASSAGES = [Passage(f"p{i}", f"Passage {i} says that gene G{i} regulates process P{i}.") for i in range(4)]


def test_draws_cover_the_six_types_with_their_passages():
    draws = draw_sources(PASSAGES, per_type=2, seed=3)
    assert [d.question_type for d in draws] == [t for t in QUESTION_TYPES for _ in range(2)]
    assert len({d.query_id for d in draws}) == len(draws)
    for draw in draws:
        two = draw.question_type in ("double", "distracting")
        assert len(draw.passages) == (2 if two else 1)
        assert len({p.doc_id for p in draw.passages}) == len(draw.passages)
        expected = [draw.passages[0].doc_id] if draw.question_type == "distracting" else \
            [p.doc_id for p in draw.passages]
        assert draw.relevant == expected
    firsts = [d.passages[0].doc_id for d in draws[:len(PASSAGES)]]
    assert sorted(firsts) == sorted(p.doc_id for p in PASSAGES)  # each passage once before any twice
    assert draws == draw_sources(PASSAGES, per_type=2, seed=3)


def test_a_one_passage_corpus_cannot_give_two_passage_types():
    with pytest.raises(DatasetError, match="need two"):
        draw_sources(PASSAGES[:1], per_type=1, seed=0)
    assert len(draw_sources(PASSAGES[:1], per_type=1, seed=0, types=("simple",))) == 1
    with pytest.raises(DatasetError, match="no passage"):
        draw_sources([], per_type=1, seed=0, types=("simple",))


def test_corpus_from_text_files_and_from_a_dataset(tmp_path):
    (tmp_path / "a.txt").write_text("Alpha text.")
    (tmp_path / "b.md").write_text("Beta text.\n")
    assert read_corpus(tmp_path) == [Passage("a", "Alpha text."), Passage("b", "Beta text.")]
    (tmp_path / "empty.txt").write_text("  ")
    with pytest.raises(DatasetError, match="empty.txt: empty text file"):
        read_corpus(tmp_path)
    sample = read_corpus(RESOURCE_ROOT / "data" / "bioasq-sample")
    assert len(sample) > 10 and all(p.text for p in sample)
