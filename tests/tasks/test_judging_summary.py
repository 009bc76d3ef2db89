"""The judge stage's summary counts the chunks the judge-window fit left out (issue 35 item 5): CCRS's
CC/ID/AC/IR prompts are fitted to the judge's window one by one, QR reads no context. Pure: the judge is
tests/fakes.py's FakeLLMClient through a `JudgeSession`."""
from __future__ import annotations

from judges.config import CcrsOptions, JudgeConfig
from judges.suite import Sample
from tasks.judge import judging_summary, judgments_frame
from tasks.runtime.judge_session import JudgeSession
from tests.fakes import FakeLLMClient

CHUNK = "Vemurafenib inhibits the BRAF V600E kinase in melanoma cells. " * 20  # ~400 estimated tokens
JUDGE_MODEL = "test-judge"  # no local tokenizer: prompts counted by the 3-characters-a-token estimate


def summary_for(context_window: int) -> dict:
    judge = JudgeConfig(model=JUDGE_MODEL, max_reasks=0, context_window=context_window,
                        ccrs=CcrsOptions(metrics=["CC", "QR", "ID", "AC", "IR"]))
    sample = Sample("q0", "prod", "What does vemurafenib inhibit?", "BRAF V600E.", "BRAF", [CHUNK] * 3)
    judgments, counts = JudgeSession.of("ccrs", judge, llm=FakeLLMClient("50")).judge_samples([sample])
    return judging_summary(judgments_frame(judgments), counts, 1.0, "ccrs", "v1", JUDGE_MODEL)


def test_a_roomy_window_drops_no_chunk():
    summary = summary_for(8192)
    assert (summary["context_truncated_judgments"], summary["context_chunks_dropped"]) == (0, 0)
    assert summary["context_chunks_dropped_by_metric"] == {}


def test_a_tight_window_counts_every_chunk_each_metric_left_out():
    summary = summary_for(1024)  # room for one chunk beside the prompt and the reply
    assert summary["context_chunks_dropped_by_metric"] == {"CC": 2, "ID": 2, "AC": 2, "IR": 2}
    assert (summary["context_truncated_judgments"], summary["context_chunks_dropped"]) == (4, 8)
