"""tasks/generate.py reader samples (`readers[].samples`): the greedy answer plus k - 1 sampled ones, each
with its own seed, in generations.parquet's `sampled_answers`; samples 1 writes and keys what it did before.
The stage asks FakeLLMClient in this process instead of from Ray tasks (no server needed)."""
import pandas as pd
import pytest

from judges.client import LLMRequestError
from judges.config import ClientConfig, ReaderConfig
from tasks import generate as generate_stage
from tasks.generate import GENERATION_COLUMNS, SAMPLE_COLUMNS, readers_in_key, run_generation, sample_seed
from tasks.runtime.fanout import FanOutReport
from tests.fakes import FakeLLMClient

# ReaderConfig's fields before readers could sample: what a samples-1 reader's stage key still hashes
READER_FIELDS_BEFORE_SAMPLES = {"name", "kind", "model", "temperature", "max_tokens", "max_sentences",
                                "context_window", "tokenizer", "prompt"}


def in_process(monkeypatch, llm) -> None:
    def here(fn, items, *args, on_shard=None, **kwargs):
        results = [fn(llm, item) for item in items]
        if on_shard is not None:
            on_shard(list(range(len(items))), results)
        return results, FanOutReport(items=len(items))

    monkeypatch.setattr(generate_stage, "fan_out_report", here)


def greedy_or_sampled(request):
    """The greedy request (no seed of its own) answers `greedy`; a sampled one names its seed."""
    return "<answer>greedy</answer>" if request.seed is None else f"<answer>sampled {request.seed}</answer>"


def _generate(run_dir, inputs, reader: ReaderConfig, seed: int = 0):
    return run_generation(run_dir, *inputs, [reader], ClientConfig(seed=seed), "http://unused/v1", top_k=3,
                          progress=False)


def test_three_samples_keep_the_greedy_answer_and_add_two_sampled_with_seeds_of_their_own(
        tmp_path, bioasq_inputs, monkeypatch):
    llm = FakeLLMClient(greedy_or_sampled)
    in_process(monkeypatch, llm)
    reader = ReaderConfig(name="r", model="reader-m", max_tokens=32, samples=3, sample_temperature=0.9)
    out = _generate(tmp_path / "run", bioasq_inputs, reader, seed=7)
    frame = pd.read_parquet(out.path)
    assert list(frame.columns) == GENERATION_COLUMNS + SAMPLE_COLUMNS
    assert (frame.status == "ok").all() and (frame.answer == "greedy").all()
    assert all(len(answers) == 2 for answers in frame.sampled_answers)
    greedy = [r for r in llm.requests if r.seed is None]
    sampled = [r for r in llm.requests if r.seed is not None]
    assert len(greedy) == len(frame) and len(sampled) == 2 * len(frame)
    assert {r.temperature for r in greedy} == {0.0} and {r.temperature for r in sampled} == {0.9}
    assert len({r.seed for r in sampled}) == len(sampled)  # another seed per sample and per prompt
    for row in frame.itertuples():
        assert list(row.sampled_answers) == [f"sampled {sample_seed(7, i, row.prompt)}" for i in (1, 2)]
    assert (frame.sampled_completion_tokens == 2 * llm.completion_tokens).all()
    assert out.summary["sampled_answers"] == {"A": 8, "B": 8}
    assert _generate(tmp_path / "run", bioasq_inputs, reader, seed=7).reused


def test_samples_1_keeps_the_stage_key_and_the_output_of_a_reader_that_does_not_sample(
        tmp_path, bioasq_inputs, monkeypatch):
    llm = FakeLLMClient(greedy_or_sampled)
    in_process(monkeypatch, llm)
    once = ReaderConfig(name="r", model="reader-m", max_tokens=32)
    assert once == ReaderConfig(name="r", model="reader-m", max_tokens=32, samples=1)
    assert set(readers_in_key([once])[0]) == READER_FIELDS_BEFORE_SAMPLES
    assert set(readers_in_key([once.model_copy(update={"samples": 2})])[0]) > READER_FIELDS_BEFORE_SAMPLES
    out = _generate(tmp_path / "once", bioasq_inputs, once)
    frame = pd.read_parquet(out.path)
    assert list(frame.columns) == GENERATION_COLUMNS and "sampled_answers" not in out.summary
    assert all(r.seed is None and r.temperature == 0.0 for r in llm.requests) and len(llm.requests) == 8
    sampling = _generate(tmp_path / "sampling", bioasq_inputs, once.model_copy(update={"samples": 2}))
    assert sampling.summary["sampled_answers"] == {"A": 4, "B": 4}
    keys = [pd.read_json(d / "generate" / "_STAGE.json", typ="series")["key"]
            for d in (tmp_path / "once", tmp_path / "sampling")]
    assert keys[0] != keys[1]


def test_a_failed_sample_fails_its_row_naming_the_sample(tmp_path, bioasq_inputs, monkeypatch):
    def reply(request):
        return LLMRequestError("HTTP 500") if request.seed is not None else "<answer>greedy</answer>"

    in_process(monkeypatch, FakeLLMClient(reply))
    out = _generate(tmp_path / "run", bioasq_inputs, ReaderConfig(name="r", model="reader-m", samples=2))
    frame = pd.read_parquet(out.path)
    assert (frame.status == "failed").all()
    assert frame.error.str.startswith("sampled answer 1: HTTP 500").all()


def test_an_extractive_reader_does_not_sample():
    with pytest.raises(ValueError, match="samples > 1 needs kind llm"):
        ReaderConfig(name="x", kind="extractive", samples=2)


def test_the_judge_reads_the_sampled_answers_where_the_column_exists(bioasq_inputs):
    from tasks.runtime.judge_session import load_samples

    queries, retrieved = (pd.read_parquet(path) for path in bioasq_inputs)
    row = {"query_id": str(queries.query_id[0]), "system": "A", "retriever": "bm25", "answer": "greedy",
           "status": "ok", "error": None, "contexts": None, "n_chunks_used": 2}
    plain = pd.DataFrame([row])
    (sample,), _ = load_samples(queries, retrieved, plain, 3)
    assert sample.sampled_responses == ()
    (sample,), _ = load_samples(queries, retrieved, plain.assign(sampled_answers=[["one", "two"]]), 3)
    assert sample.sampled_responses == ("one", "two")
