from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from retrievers.config import DatasetConfig
from retrievers.loaders import detect_format, load_dataset, pmid_from_url, snippet_doc_id
from retrievers.schema import PASSAGES_SCHEMA, QUERIES_SCHEMA, DatasetError


def _write_questions(path: Path, questions: list) -> Path:
    path.write_text(json.dumps({"questions": questions}))
    return path


# ---------------------------------------------------------------- BioASQ JSON


def test_sample_corpus_is_the_unique_snippets(sample_dataset, sample_questions):
    unique = {(s["document"], s["text"].strip()) for q in sample_questions for s in q["snippets"]}
    assert sample_dataset.passages.schema == PASSAGES_SCHEMA
    assert sample_dataset.passages.num_rows == len(unique)
    assert sample_dataset.counts["n_passages"] == len(unique)
    assert sample_dataset.counts["n_empty_skipped"] == 0
    texts = set(zip(sample_dataset.passages.column("doc_id").to_pylist(),
                    sample_dataset.passages.column("text").to_pylist()))
    assert {(snippet_doc_id(pmid_from_url(d), t), t) for d, t in unique} == texts


def test_sample_doc_ids_keep_the_pubmed_id(sample_dataset):
    for row in sample_dataset.passages.to_pylist()[:50]:
        pmid, suffix = row["doc_id"].split("-")
        assert pmid.isdigit() and len(suffix) == 8
        metadata = json.loads(row["metadata"])
        assert metadata["pmid"] == pmid
        assert metadata["document"].endswith("/" + pmid)


def test_sample_queries(sample_dataset, sample_questions):
    queries = sample_dataset.queries
    assert queries.schema == QUERIES_SCHEMA
    assert queries.column("query_id").to_pylist() == [q["id"] for q in sample_questions]
    corpus_ids = set(sample_dataset.passages.column("doc_id").to_pylist())
    for row, question in zip(queries.to_pylist(), sample_questions):
        assert row["text"] == question["body"].strip()
        assert row["answer"] == question["ideal_answer"][0]
        assert row["qtype"] == question["type"]
        expected_exact = json.loads(row["exact_answer"]) if row["exact_answer"] is not None else None
        assert expected_exact == question.get("exact_answer")
        assert set(row["relevant_doc_ids"]) <= corpus_ids
        expected = {
            snippet_doc_id(pmid_from_url(s["document"]), s["text"].strip()) for s in question["snippets"]
        }
        assert set(row["relevant_doc_ids"]) == expected
        assert {pmid_from_url(d) for d in question["documents"]} <= set(row["relevant_pmids"])


def test_summary_questions_have_no_exact_answer(sample_dataset):
    rows = [r for r in sample_dataset.queries.to_pylist() if r["qtype"] == "summary"]
    assert rows and all(r["exact_answer"] is None for r in rows)


def test_folder_of_json_files(tmp_path, sample_questions):
    _write_questions(tmp_path / "a.json", sample_questions[:10])
    _write_questions(tmp_path / "b.json", sample_questions[10:])
    loaded = load_dataset(DatasetConfig(path=str(tmp_path)))
    assert loaded.queries.num_rows == len(sample_questions)
    assert detect_format(tmp_path) == "bioasq-json"


def test_malformed_json_names_the_file(tmp_path):
    bad = tmp_path / "broken.json"
    bad.write_text('{"questions": [')
    with pytest.raises(DatasetError, match="broken.json"):
        load_dataset(DatasetConfig(path=str(bad)))


def test_question_without_body_names_file_and_question(tmp_path, sample_questions):
    broken = dict(sample_questions[1])
    del broken["body"]
    path = _write_questions(tmp_path / "q.json", [sample_questions[0], broken])
    with pytest.raises(DatasetError, match=r"q\.json, question 1: missing field 'body'"):
        load_dataset(DatasetConfig(path=str(path)))


def test_snippet_without_document_names_the_snippet(tmp_path, sample_questions):
    question = json.loads(json.dumps(sample_questions[0]))
    del question["snippets"][1]["document"]
    path = _write_questions(tmp_path / "q.json", [question])
    with pytest.raises(DatasetError, match="question 0, snippet 1: missing field 'document'"):
        load_dataset(DatasetConfig(path=str(path)))


def test_duplicate_question_ids_are_an_error(tmp_path, sample_questions):
    _write_questions(tmp_path / "a.json", sample_questions[:2])
    _write_questions(tmp_path / "b.json", sample_questions[1:3])
    with pytest.raises(DatasetError, match="duplicate question id " + sample_questions[1]["id"]):
        load_dataset(DatasetConfig(path=str(tmp_path)))


def test_empty_snippets_are_skipped_and_counted(tmp_path, sample_questions):
    question = json.loads(json.dumps(sample_questions[0]))
    question["snippets"][0]["text"] = "   "
    loaded = load_dataset(DatasetConfig(path=str(_write_questions(tmp_path / "q.json", [question]))))
    assert loaded.counts["n_empty_skipped"] == 1
    assert loaded.passages.num_rows == len(question["snippets"]) - 1
    assert len(loaded.queries.column("relevant_doc_ids")[0]) == len(question["snippets"]) - 1


def test_optional_fields_may_be_absent(tmp_path, sample_questions):
    question = {k: v for k, v in sample_questions[0].items() if k in ("id", "body")}
    loaded = load_dataset(DatasetConfig(path=str(_write_questions(tmp_path / "q.json", [question]))))
    row = loaded.queries.to_pylist()[0]
    assert row["answer"] is None and row["exact_answer"] is None and row["qtype"] is None
    assert row["relevant_doc_ids"] == [] and loaded.counts["n_queries_without_relevant"] == 1


def test_unknown_question_types_are_kept(tmp_path, sample_questions):
    question = dict(sample_questions[0], type="definition")
    loaded = load_dataset(DatasetConfig(path=str(_write_questions(tmp_path / "q.json", [question]))))
    assert loaded.queries.column("qtype").to_pylist() == ["definition"]


def test_missing_path_is_an_error(tmp_path):
    with pytest.raises(DatasetError, match="does not exist"):
        load_dataset(DatasetConfig(path=str(tmp_path / "nowhere")))


# ---------------------------------------------------------------- rag-mini-bioasq


def _rag_mini_tables(sample_dataset):
    """The sample in the rag-mini-bioasq layout: integer passage ids, list of relevant ids."""
    passages = sample_dataset.passages.to_pylist()
    numeric = {p["doc_id"]: 1000 + i for i, p in enumerate(passages)}
    corpus = pa.table({"passage": [p["text"] for p in passages], "id": list(numeric.values())})
    queries = sample_dataset.queries.to_pylist()
    qa = pa.table(
        {
            "question": [q["text"] for q in queries],
            "answer": [q["answer"] for q in queries],
            "relevant_passage_ids": [[numeric[d] for d in q["relevant_doc_ids"]] for q in queries],
            "id": list(range(len(queries))),
        }
    )
    return corpus, qa


def test_rag_mini_parquet_files(tmp_path, sample_dataset):
    corpus, qa = _rag_mini_tables(sample_dataset)
    pq.write_table(corpus, tmp_path / "text-corpus.parquet")
    pq.write_table(qa, tmp_path / "question-answer-passages.parquet")
    assert detect_format(tmp_path) == "rag-mini-bioasq"
    loaded = load_dataset(DatasetConfig(path=str(tmp_path)))
    assert loaded.passages.num_rows == corpus.num_rows
    assert loaded.queries.num_rows == qa.num_rows
    first = loaded.queries.to_pylist()[0]
    assert first["relevant_doc_ids"] == [str(i) for i in qa.column("relevant_passage_ids")[0].as_py()]
    assert first["relevant_pmids"] == first["relevant_doc_ids"]
    assert first["qtype"] is None and first["exact_answer"] is None


def test_rag_mini_sharded_folders_and_string_ids(tmp_path, sample_dataset):
    corpus, qa = _rag_mini_tables(sample_dataset)
    (tmp_path / "text-corpus").mkdir()
    (tmp_path / "question-answer-passages").mkdir()
    pq.write_table(corpus.slice(0, 300), tmp_path / "text-corpus" / "part-0.parquet")
    pq.write_table(corpus.slice(300), tmp_path / "text-corpus" / "part-1.parquet")
    as_strings = qa.set_column(
        2, "relevant_passage_ids",
        pa.array([json.dumps(v) for v in qa.column("relevant_passage_ids").to_pylist()]),
    )
    pq.write_table(as_strings, tmp_path / "question-answer-passages" / "part-0.parquet")
    loaded = load_dataset(DatasetConfig(path=str(tmp_path), format="rag-mini-bioasq"))
    assert loaded.passages.num_rows == corpus.num_rows
    assert loaded.counts["n_relevant_not_in_corpus"] == 0


def test_rag_mini_duplicate_passage_id_names_file_and_row(tmp_path, sample_dataset):
    corpus, qa = _rag_mini_tables(sample_dataset)
    ids = corpus.column("id").to_pylist()
    ids[5] = ids[4]
    pq.write_table(corpus.set_column(1, "id", pa.array(ids)), tmp_path / "text-corpus.parquet")
    pq.write_table(qa, tmp_path / "question-answer-passages.parquet")
    with pytest.raises(DatasetError, match=r"text-corpus\.parquet, row 5: duplicate passage id"):
        load_dataset(DatasetConfig(path=str(tmp_path)))


def test_rag_mini_empty_passages_skipped_and_counted(tmp_path, sample_dataset):
    corpus, qa = _rag_mini_tables(sample_dataset)
    texts = corpus.column("passage").to_pylist()
    texts[0], texts[1] = "", None
    pq.write_table(corpus.set_column(0, "passage", pa.array(texts)), tmp_path / "text-corpus.parquet")
    pq.write_table(qa, tmp_path / "question-answer-passages.parquet")
    loaded = load_dataset(DatasetConfig(path=str(tmp_path)))
    assert loaded.counts["n_empty_skipped"] == 2
    assert loaded.passages.num_rows == corpus.num_rows - 2
    assert loaded.counts["n_relevant_not_in_corpus"] >= 1  # judgments kept, counted


def test_rag_mini_missing_column_names_the_file(tmp_path, sample_dataset):
    corpus, qa = _rag_mini_tables(sample_dataset)
    pq.write_table(corpus, tmp_path / "text-corpus.parquet")
    pq.write_table(qa.drop(["answer"]), tmp_path / "question-answer-passages.parquet")
    with pytest.raises(DatasetError,
                       match=r"question-answer-passages\.parquet: missing columns \['answer'\]"):
        load_dataset(DatasetConfig(path=str(tmp_path)))


def test_rag_mini_bad_relevant_ids_names_the_row(tmp_path, sample_dataset):
    corpus, qa = _rag_mini_tables(sample_dataset)
    bad = qa.set_column(2, "relevant_passage_ids", pa.array(["not a list"] * qa.num_rows))
    pq.write_table(corpus, tmp_path / "text-corpus.parquet")
    pq.write_table(bad, tmp_path / "question-answer-passages.parquet")
    with pytest.raises(DatasetError, match="row 0: relevant_passage_ids is not a list"):
        load_dataset(DatasetConfig(path=str(tmp_path)))


def test_undetectable_folder(tmp_path):
    (tmp_path / "readme.txt").write_text("nothing here")
    with pytest.raises(DatasetError, match="cannot tell the dataset format"):
        load_dataset(DatasetConfig(path=str(tmp_path)))


def test_rag_mini_hugging_face_repository_layout(tmp_path, sample_dataset):
    """The dataset repository's main branch: data/passages.parquet/part.0.parquet, data/test.parquet/..."""
    corpus, qa = _rag_mini_tables(sample_dataset)
    (tmp_path / "data" / "passages.parquet").mkdir(parents=True)
    (tmp_path / "data" / "test.parquet").mkdir()
    pq.write_table(corpus, tmp_path / "data" / "passages.parquet" / "part.0.parquet")
    pq.write_table(qa, tmp_path / "data" / "test.parquet" / "part.0.parquet")
    assert detect_format(tmp_path) == "rag-mini-bioasq"
    loaded = load_dataset(DatasetConfig(path=str(tmp_path)))
    assert (loaded.passages.num_rows, loaded.queries.num_rows) == (corpus.num_rows, qa.num_rows)
