"""`ccrs gqm testset` on the real CPU LLM: a three-document corpus, one question of each of the six types,
every reply either a question in the written dataset or a counted failure with its reason."""
import json

import pytest

from pipelines.cli import main
from pipelines.reporting.gqm_types import QUESTION_TYPES
from pipelines.tools.gqm.testset import MANIFEST
from retrievers.config import DatasetConfig
from retrievers.loaders import load_dataset

DOCUMENTS = {
    "insulin": "Insulin is a hormone made by the beta cells of the pancreas. It lowers blood glucose by "
               "helping muscle and fat cells take up glucose.",
    "aspirin": "Aspirin blocks the enzyme cyclooxygenase. Taken at low doses every day, it lowers the risk "
               "of heart attacks in some patients.",
    "tp53": "The TP53 gene encodes the protein p53, which stops cells with damaged DNA from dividing. "
            "Mutations in TP53 are found in about half of human cancers.",
}


@pytest.mark.llm
def test_testset_on_the_real_llm_writes_a_run_dataset_or_counted_failures(tmp_path, llm_endpoint, capsys):
    corpus, out = tmp_path / "corpus", tmp_path / "testset"
    corpus.mkdir()
    for name, text in DOCUMENTS.items():
        (corpus / f"{name}.txt").write_text(text)
    argv = ["gqm", "testset", "--corpus", str(corpus), "--per-type", "1", "--max-tokens", "128",
            "--llm-base-url", llm_endpoint.base_url, "--judge-model", llm_endpoint.judge_model,
            "--out", str(out)]
    code = main(argv)
    manifest = json.loads((out / MANIFEST).read_text())
    assert code == (0 if manifest["n_generated"] else 1)
    assert manifest["model"] == llm_endpoint.judge_model and manifest["n_passages"] == 3
    assert list(manifest["by_type"]) == list(QUESTION_TYPES)
    assert all(c["requested"] == c["generated"] + c["failed"] == 1 for c in manifest["by_type"].values())
    assert manifest["n_failed"] == len(manifest["failures"])
    assert all(f["reason"].startswith("unparseable reply") and f["reply"] is not None
               for f in manifest["failures"])  # the server answered every request
    printed = capsys.readouterr().out
    assert f"{manifest['n_generated']} questions generated, {manifest['n_failed']} failed" in printed
    loaded = load_dataset(DatasetConfig(path=str(out)))
    assert loaded.counts["n_passages"] == 3 and loaded.counts["n_queries"] == manifest["n_generated"]
    assert set(loaded.queries.column("qtype").to_pylist()) <= set(QUESTION_TYPES)
