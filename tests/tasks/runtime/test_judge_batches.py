"""The judge stage's bounded batches: splitting real BioASQ inputs, writing parts, merging summaries."""
import pandas as pd
import pyarrow.parquet as pq

from tasks.runtime.judge_batches import (
    BatchStore,
    concatenate,
    merge_summaries,
    question_batches,
    scored_rows,
)


def _generations(queries: pd.DataFrame, systems=("bm25+a", "knn+a", "bm25+b")) -> pd.DataFrame:
    rows = [{"query_id": q, "system": s, "retriever": s.split("+")[0], "answer": f"{s} on {q}",
             "n_chunks_used": 3, "status": "ok", "error": None}
            for s in systems for q in queries["query_id"]]  # by system: a question's rows are apart
    return pd.DataFrame(rows)


def test_batches_hold_whole_questions_in_order_of_first_appearance(tmp_path, bioasq_inputs):
    queries = pd.read_parquet(bioasq_inputs[0])
    path = tmp_path / "generations.parquet"
    _generations(queries).to_parquet(path, index=False)
    ids = list(queries["query_id"])
    assert question_batches(path, 6) == [ids[:2], ids[2:4]]  # 3 systems a question: two questions a batch
    assert question_batches(path, 7) == [ids[:2], ids[2:4]]
    assert question_batches(path, 1) == [[q] for q in ids]  # a question is never split
    assert question_batches(path, 100) == [ids]


def test_inputs_are_split_by_batch_whatever_their_order(tmp_path, bioasq_inputs):
    queries_path, retrieved_path = bioasq_inputs
    queries = pd.read_parquet(queries_path)
    generations_path = tmp_path / "generations.parquet"
    _generations(queries).to_parquet(generations_path, index=False)
    batches = question_batches(generations_path, 6)
    store = BatchStore(tmp_path / "store")
    paths = {"queries": queries_path, "retrieved": retrieved_path, "generations": generations_path}
    store.split_inputs(paths, batches, top_k=3)
    retrieved = pd.read_parquet(retrieved_path)
    for b, ids in enumerate(batches):
        inputs = store.read_inputs(b)
        assert list(inputs["queries"]["query_id"]) == ids
        assert set(inputs["generations"]["query_id"]) == set(ids) and len(inputs["generations"]) == 6
        expected = retrieved[retrieved["query_id"].isin(ids) & (retrieved["rank"] <= 3)]
        assert len(inputs["retrieved"]) == len(expected)  # chunks ranked below top-k are left out
    assert (store.inputs / "_DONE").exists()


def test_parts_concatenate_into_one_file_with_one_schema(tmp_path):
    store = BatchStore(tmp_path)
    first = pd.DataFrame({"query_id": ["q1", "q1"], "metric": ["CC", "QR"], "score": [0.5, None],
                          "reason": [None, None]})  # all-null column: typed null in this part
    second = pd.DataFrame({"query_id": ["q2"], "metric": ["CC"], "score": [1.0], "reason": ["too long"]})
    store.write_part(0, first, {"judgments": 2})
    store.write_part(1, second, {"judgments": 1})
    assert store.finished(0) and store.finished(1) and not store.finished(2)
    every, scored = tmp_path / "all.parquet", tmp_path / "scored.parquet"
    assert concatenate(store.parts(2), {every: None, scored: scored_rows(["query_id", "score"])}) == {
        every: 3, scored: 2}
    pd.concat([first, second], ignore_index=True).to_parquet(tmp_path / "at_once.parquet", index=False)
    pd.testing.assert_frame_equal(pd.read_parquet(every), pd.read_parquet(tmp_path / "at_once.parquet"))
    assert pq.read_schema(scored).names == ["query_id", "score"]


def test_batch_summaries_add_up():
    parts = [
        {"suite": "ccrs", "judgments": 10, "status_counts": {"ok": 9, "failed": 1}, "endpoint_not_back": None,
         "failure_reasons": {"timeout": 1}, "requests": {"requeued": [1], "client": {"calls": 9}}},
        {"suite": "ccrs", "judgments": 5, "status_counts": {"ok": 5}, "endpoint_not_back": "down 600 s",
         "failure_reasons": {}, "requests": {"requeued": [], "client": {"calls": 5, "retries": 2}}},
    ]
    assert merge_summaries(parts) == {
        "suite": "ccrs", "judgments": 15, "status_counts": {"ok": 14, "failed": 1},
        "endpoint_not_back": "down 600 s", "failure_reasons": {"timeout": 1},
        "requests": {"requeued": [1], "client": {"calls": 14, "retries": 2}},
    }
