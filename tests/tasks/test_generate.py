import pandas as pd
import pytest

from judges.config import ClientConfig, ReaderConfig
from judges.readers import extract_answer, extractive_answer, fit_chunks, generation_prompt
from tasks.generate import build_items, run_generation, system_label, system_table


def test_system_labels_follow_the_paper():
    labels = {(r, ret): system_label(r, ret) for r in range(3) for ret in ("bm25", "knn")}
    assert labels == {(0, "bm25"): "A", (0, "knn"): "B", (1, "bm25"): "C", (1, "knn"): "D",
                      (2, "bm25"): "E", (2, "knn"): "F"}
    readers = [ReaderConfig(name=n, model=n) for n in ("r1", "r2", "r3")]
    assert system_table(readers)["D"] == {"reader": "r2", "retriever": "knn", "model": "r2",
                                          "prompt": "fig1-v2"}


def test_generation_prompt_follows_figure_1_inputs_and_order():
    prompt = generation_prompt("Q?", ["c1", "c2"])
    instruction, rest = prompt.split("<context>", 1)
    assert "answer the question" in instruction.lower()
    assert rest.startswith(" <content>c1</content> <content>c2</content> </context>\nQuestion: Q?\n")
    assert prompt.endswith("<answer></answer>.")


def test_generation_prompt_does_not_repeat_figure_1_sentences():
    assert "Please answer the given question based on the context" not in generation_prompt("Q?", ["c"])


@pytest.mark.parametrize("reply,answer,tagged", [
    ("Thinking... <answer>BRCA1</answer> done", "BRCA1", True),
    ("<ANSWER>\n yes \n</ANSWER>", "yes", True),
    ("<answer>unclosed tail", "unclosed tail", True),
    ("no tags here ", "no tags here", False),
    ("<answer></answer> but text", "<answer></answer> but text", False),
    ("", "", False),
])
def test_answer_extraction(reply, answer, tagged):
    assert extract_answer(reply) == (answer, tagged)


def test_truncation_drops_lowest_ranked_chunks_first():
    chunks = ["a" * 100, "b" * 100, "c" * 100]
    fitted = fit_chunks(lambda c: "".join(c), chunks, 250, len)
    assert fitted.chunks == chunks[:2] and fitted.n_truncated == 1
    nothing_fits = fit_chunks(lambda c: "x" * 10 + "".join(c), chunks, 5, len)
    assert nothing_fits.chunks == [] and nothing_fits.n_truncated == 3


def test_extractive_baseline_picks_overlapping_sentences():
    chunks = ["Cats are nice. BRCA1 mutations cause breast cancer.", "Unrelated text here."]
    answer = extractive_answer("Which mutations cause breast cancer?", chunks, 1)
    assert answer == "BRCA1 mutations cause breast cancer."


def test_the_citing_prompt_numbers_the_passages_and_asks_for_citations_and_the_refusal():
    from judges.readers import REFUSAL_SENTENCE

    paper = generation_prompt("Which gene?", ["first passage", "second passage"])
    citing = generation_prompt("Which gene?", ["first passage", "second passage"], "citing")
    assert "[1] first passage" in citing and "[2] second passage" in citing and "[1]" not in paper
    assert REFUSAL_SENTENCE in citing and REFUSAL_SENTENCE not in paper
    assert citing.endswith("Write your answer between the tags <answer></answer>.")
    chunks = ["Aspirin is an analgesic. It thins blood.", "BRCA1 is a gene linked to breast cancer."]
    assert extractive_answer("Which gene is linked to breast cancer?", chunks, 1, cite=True) == \
        "BRCA1 is a gene linked to breast cancer. [2]"


def test_reader_prompt_auto_follows_the_judges():
    from pipelines.config import load_config

    readers = [{"name": "r", "model": "m"}, {"name": "fixed", "model": "m", "prompt": "paper"}]
    with_grouse = load_config(None, {"readers": readers, "judges": ["ccrs", "grouse"]})
    assert [r.prompt for r in with_grouse.readers] == ["citing", "paper"]
    assert [r.prompt for r in load_config(None, {"readers": readers}).readers] == ["paper", "paper"]
    assert load_config(None).readers[0].prompt == "paper"  # the demo (ccrs only): Figure 1 as in the paper


def test_build_items_uses_top_k_in_rank_order(bioasq_inputs):
    queries, retrieved = (pd.read_parquet(p) for p in bioasq_inputs)
    readers = [ReaderConfig(name="r1", model="m1"), ReaderConfig(name="x", kind="extractive")]
    items = build_items(queries, retrieved, readers, top_k=2)
    assert len(items) == 2 * 2 * len(queries)
    assert {i.system for i in items} == {"A", "B", "C", "D"}
    first = next(i for i in items if i.system == "A")
    top = retrieved[
        (retrieved.query_id == first.query_id) & (retrieved.retriever == "bm25")
    ].sort_values("rank")
    assert first.chunks == top["text"].head(2).tolist()


def test_a_reader_window_is_capped_by_what_the_server_holds():
    from tasks.generate import served_windows

    readers = [ReaderConfig(name="long", model="m1", context_window=32768),
               ReaderConfig(name="fits", model="m2", context_window=4096),
               ReaderConfig(name="x", kind="extractive")]
    identity = {"m1": {"id": "m1", "max_model_len": 8192}, "m2": {"id": "m2", "max_model_len": 8192}}
    served, capped = served_windows(readers, identity)
    assert [r.context_window for r in served] == [8192, 4096, readers[2].context_window]
    assert capped == {"long": [32768, 8192]}
    assert served_windows(readers, None) == (readers, {})  # nothing reported: the config's windows


def test_extractive_only_run_needs_no_server(tmp_path, bioasq_inputs):
    readers = [ReaderConfig(name="x", kind="extractive")]
    out = run_generation(tmp_path / "run", *bioasq_inputs, readers, ClientConfig(), "http://unused/v1",
                         top_k=3, progress=False)
    frame = pd.read_parquet(out.path)
    assert set(frame.system) == {"A", "B"} and (frame.status == "ok").all()
    assert out.summary["windows_capped_by_server"] == {}
    again = run_generation(tmp_path / "run", *bioasq_inputs, readers, ClientConfig(), "http://unused/v1",
                           top_k=3, progress=False)
    assert again.reused


@pytest.mark.llm
def test_reader_answers_real_bioasq_questions(tmp_path, bioasq_inputs, llm_endpoint):
    readers = [ReaderConfig(name="smollm2", model=llm_endpoint.reader_models[0], max_tokens=64),
               ReaderConfig(name="extractive", kind="extractive")]
    out = run_generation(tmp_path / "run", *bioasq_inputs, readers, ClientConfig(max_concurrency=8),
                         llm_endpoint.base_url, top_k=5, progress=False)
    frame = pd.read_parquet(out.path)
    llm_rows = frame[frame.reader == "smollm2"]
    assert len(llm_rows) == 2 * 4 and (llm_rows.status == "ok").all()
    assert (llm_rows.answer.str.len() > 0).all()
    assert (llm_rows.prompt_tokens > 0).all() and (llm_rows.completion_tokens > 0).all()
    assert out.summary["prompt_tokens"] == int(frame.prompt_tokens.sum())
    assert set(out.summary["untagged"]) == {"A", "B", "C", "D"}


@pytest.mark.llm
def test_small_window_truncates_and_counts(tmp_path, bioasq_inputs, llm_endpoint):
    readers = [ReaderConfig(name="smollm2", model=llm_endpoint.reader_models[0], max_tokens=16,
                            context_window=300)]
    out = run_generation(tmp_path / "run", *bioasq_inputs, readers, ClientConfig(), llm_endpoint.base_url,
                         top_k=5, progress=False)
    frame = pd.read_parquet(out.path)
    assert (frame.n_chunks_truncated > 0).any()
    assert (frame.n_chunks_used + frame.n_chunks_truncated <= 5).all()
    assert (frame[frame.status == "ok"].prompt_tokens <= 300 - 16).all()
    assert sum(out.summary["chunks_truncated"].values()) == int(frame.n_chunks_truncated.sum())
