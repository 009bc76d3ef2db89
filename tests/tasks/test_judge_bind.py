"""The judge stage binds a suite's run-level input into its settings (tasks/judge.py run_bound_judge):
gqm_bertscore's idf corpus, the run's chunks, else its retrieved contexts; the stage key covers it."""
import pyarrow as pa
import pyarrow.parquet as pq

from judges.config import ClientConfig, GqmOptions, JudgeConfig
from judges.suite import get_suite
from tasks.judge import judging_key, run_bound_judge
from tasks.runtime.layout import RunLayout

BERTSCORE = JudgeConfig(gqm=GqmOptions(metrics=["attribution", "bertscore"]))


def _texts(path, texts):
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"text": texts}), path)
    return path


def test_the_runs_chunks_are_bound_and_keyed_else_its_retrieved_contexts(tmp_path):
    suite = get_suite("gqm")
    run = RunLayout(tmp_path / "run")
    retrieved = _texts(run.root / "retrieve" / "retrieved.parquet", ["a passage", "another"])
    pooled = run_bound_judge(suite, BERTSCORE, run.root, retrieved)
    assert pooled.gqm.bertscore_idf_digest.startswith("the retrieved contexts pooled over the run: 2 doc")
    _texts(run.chunks, ["a passage", "another", "a third"])
    bound = run_bound_judge(suite, BERTSCORE, run.root, retrieved)
    assert bound.gqm.bertscore_idf_corpus == str(run.chunks)
    assert bound.gqm.bertscore_idf_digest.startswith("the run's chunks: 3 documents")
    inputs = (retrieved, retrieved, retrieved)
    keys = {judging_key("gqm", inputs, judge, ClientConfig(), 5) for judge in (BERTSCORE, pooled, bound)}
    assert len(keys) == 3
    _texts(run.chunks, ["other chunks"])
    rechunked = run_bound_judge(suite, BERTSCORE, run.root, retrieved)
    assert judging_key("gqm", inputs, rechunked, ClientConfig(), 5) not in keys
    assert run_bound_judge(get_suite("ccrs"), JudgeConfig(), run.root, retrieved) == JudgeConfig()
