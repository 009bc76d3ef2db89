"""What the VERA tool tests share: the shipped sample and qrels, the fake reader and judge replies, the
generate stage and judge session asking a fake LLM in this process."""
import pandas as pd

from judges.config import VeraOptions
from pipelines.tools.vera.topicality import QuerySet
from tests.conftest import REPO


SAMPLE_DIR = REPO / "data" / "bioasq-sample"
QRELS = REPO / "data" / "vera-bioasq" / "qrels.txt"
TWO_METRICS = VeraOptions(metrics=["faithfulness", "retrieval_recall"], max_reasks=0)


def in_process(monkeypatch, llm) -> None:
    """The generate stage and the judge session ask `llm` in this process instead of from Ray tasks."""
    from tasks import generate as generate_stage
    from tasks.runtime import judge_session
    from tasks.runtime.fanout import FanOutReport

    def here(fn, items, *args, **kwargs):
        return [fn(llm, item) for item in items], FanOutReport(items=len(items))

    monkeypatch.setattr(generate_stage, "fan_out_report", here)
    monkeypatch.setattr(judge_session, "fan_out_report", here)


def fake_reply(supported):
    """Reader: one sentence (a failure where the query says so); judge: one statement, and a Yes /
    [Supported by Context] verdict exactly where `supported(prompt)`."""
    from judges.client import LLMRequestError

    def reply(request):
        prompt = request.messages[-1]["content"]
        if prompt.startswith("Passages:"):
            if "fails?" in prompt:
                return LLMRequestError("HTTP 500 from the reader")
            return "A summary of the passages."
        if "<ground_truth>" in prompt:
            label = "[Supported by Context]" if supported(prompt) else "[Not Supported by Context]"
            return f"1. Checked. {label}"
        if "Verdict" in prompt:
            return f"1. Explanation: checked. Verdict: {'Yes' if supported(prompt) else 'No'}"
        return "1. The passages say something."

    return reply


def query_set(name, texts, truth=""):
    return QuerySet(name, f"{name} queries", "test", tuple(texts), (truth,) * len(texts))


def judged(rows):
    return pd.DataFrame(rows, columns=["query_id", "query_set", "metric", "score"])
