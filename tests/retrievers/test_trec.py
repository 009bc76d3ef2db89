"""TREC qrels and MS MARCO-style TSV readers (retrievers/trec.py): the shipped BioASQ-built qrels file, a bad
line named by file and number, and the same texts read from the sample and from TSV files."""
import pytest

from retrievers.trec import QrelsError, load_qrels_texts, read_qrels
from tests.conftest import REPO

SAMPLE_DIR = REPO / "data" / "bioasq-sample"
QRELS = REPO / "data" / "vera-bioasq" / "qrels.txt"


def test_read_qrels_of_the_shipped_file_and_a_bad_line(tmp_path):
    qrels = read_qrels(QRELS)
    assert len(qrels) == 319 and set(qrels.grade) == {0, 1} and qrels.query_id.nunique() == 32
    bad = tmp_path / "bad.txt"
    bad.write_text("q1 0 d1 1\n\nq2 0 d2\n")
    with pytest.raises(QrelsError, match=r"bad.txt:3: expected 'query_id iteration doc_id grade'"):
        read_qrels(bad)
    bad.write_text("q1 0 d1 high\n")
    with pytest.raises(QrelsError, match="integer"):
        read_qrels(bad)


def test_qrels_texts_from_the_sample_and_from_msmarco_style_tsv_agree(tmp_path):
    qrels = read_qrels(QRELS)
    queries, corpus = load_qrels_texts(SAMPLE_DIR, SAMPLE_DIR, qrels)
    assert set(queries) == set(qrels.query_id) and set(corpus) == set(qrels.doc_id)  # all in the repository
    assert all(text and truth for text, truth in queries.values())

    def flat(text):
        return " ".join(text.split())

    kept = sorted(queries)[:3]
    (tmp_path / "queries.tsv").write_text("".join(f"{q}\t{flat(queries[q][0])}\t{flat(queries[q][1])}\n"
                                                  for q in kept) + "other\tnot judged\n")
    (tmp_path / "collection.tsv").write_text("".join(f"{d}\t{flat(t)}\n" for d, t in corpus.items()))
    tsv_queries, tsv_corpus = load_qrels_texts(tmp_path / "queries.tsv", tmp_path / "collection.tsv", qrels)
    assert tsv_queries == {q: tuple(map(flat, queries[q])) for q in kept}
    assert tsv_corpus == {d: flat(t) for d, t in corpus.items()}
    (tmp_path / "broken.tsv").write_text("only-an-id\n")
    with pytest.raises(QrelsError, match="broken.tsv:1"):
        load_qrels_texts(tmp_path / "queries.tsv", tmp_path / "broken.tsv", qrels)
