"""The GQM thesis' test-set generator (pipelines/tools/gqm/testset.py) with FakeLLMClient: reply parsing,
the prompts of the six types, counted failures, and the written dataset read back by the loader `ccrs run`
uses."""
import json

import pytest

from judges.client import LLMRequestError
from pipelines.cli import main
from pipelines.reporting.gqm_types import QUESTION_TYPES
from pipelines.tools.gqm.sources import draw_sources
from pipelines.tools.gqm.testset import (
    MANIFEST,
    Failure,
    Generated,
    ReplyError,
    Sampling,
    generate,
    parse_reply,
    render_prompt,
    write_testset,
)
from retrievers.config import DatasetConfig
from retrievers.loaders import load_dataset
from tests.fakes import FakeLLMClient
from tests.pipelines.tools.gqm.test_sources import PASSAGES

GOOD = "QUESTION: What does gene G1 regulate?\nANSWER: Process P1."


@pytest.mark.parametrize("reply,expected", [
    (GOOD, ("What does gene G1 regulate?", "Process P1.")),
    ("**Question:** Which gene?\n**Answer:** G2", ("Which gene?", "G2")),
    ("Sure!\nquestion: I asked about G3 earlier.\nWhat does it do?\nanswer: it regulates P3\n",
     ("I asked about G3 earlier. What does it do?", "it regulates P3")),
    ("Question 1: Which process?\nAnswer 1: P0", ("Which process?", "P0")),
])
def test_replies_with_question_and_answer_lines_parse(reply, expected):
    assert parse_reply(reply) == expected


@pytest.mark.parametrize("reply,reason", [
    ("What does gene G1 regulate? Process P1.", "no QUESTION line"),
    ("QUESTION: What does gene G1 regulate?", "no ANSWER line"),
    ("QUESTION:\nANSWER: P1", "empty QUESTION"),
])
def test_unreadable_replies_raise_with_the_reason(reply, reason):
    with pytest.raises(ReplyError, match=reason):
        parse_reply(reply)


def test_every_type_has_its_own_prompt_showing_its_passages():
    draws = draw_sources(PASSAGES, per_type=1, seed=0)
    prompts = [render_prompt(d) for d in draws]
    assert len(set(prompts)) == len(QUESTION_TYPES)
    for draw, prompt in zip(draws, prompts):
        assert all(p.text in prompt for p in draw.passages)
        assert "QUESTION:" in prompt and "ANSWER:" in prompt


def test_bad_replies_and_failed_requests_are_counted_failures():
    draws = draw_sources(PASSAGES, per_type=2, seed=0)
    bad = {draws[0].query_id: "I cannot help with that.",
           draws[5].query_id: LLMRequestError("HTTP 500 after 3 attempts", 500, 3)}
    asked = {render_prompt(d): d.query_id for d in draws}
    assert len(asked) == len(draws)

    def reply(request):
        return bad.get(asked[request.messages[-1]["content"]], GOOD)

    client = FakeLLMClient(reply)
    seen = []
    outcomes = generate(client, draws, Sampling("m", temperature=0.5, max_tokens=64, seed=7), seen.append)
    assert len(outcomes) == len(seen) == len(draws) == len(client.requests)
    assert [r.seed for r in client.requests] == [7 + i for i in range(len(draws))]
    assert {r.temperature for r in client.requests} == {0.5}
    failures = [o for o in outcomes if isinstance(o, Failure)]
    assert {f.query_id: f.reason.split(":")[0] for f in failures} == {
        draws[0].query_id: "unparseable reply", draws[5].query_id: "request failed"}
    assert failures[0].reply == "I cannot help with that." and failures[1].reply is None
    assert sum(isinstance(o, Generated) for o in outcomes) == len(draws) - 2


def test_the_written_testset_loads_as_a_run_dataset_with_its_types(tmp_path):
    draws = draw_sources(PASSAGES, per_type=1, seed=0)
    outcomes = generate(FakeLLMClient([GOOD, "no labels here"] + [GOOD] * 4), draws, Sampling("m"))
    manifest = write_testset(tmp_path, PASSAGES, draws, outcomes, {"model": "m"})
    loaded = load_dataset(DatasetConfig(path=str(tmp_path)))
    rows = loaded.queries.to_pylist()
    assert loaded.counts["n_passages"] == len(PASSAGES)  # the whole corpus, not only the sources
    assert [r["query_id"] for r in rows] == [d.query_id for d in draws if d.question_type != "complex"]
    assert [r["qtype"] for r in rows] == [t for t in QUESTION_TYPES if t != "complex"]
    by_id = {r["query_id"]: r for r in rows}
    for draw in draws:
        if draw.query_id in by_id:
            assert by_id[draw.query_id]["relevant_doc_ids"] == draw.relevant
            assert by_id[draw.query_id]["text"] == "What does gene G1 regulate?"
    assert manifest == json.loads((tmp_path / MANIFEST).read_text())
    assert manifest["n_generated"] == 5 and manifest["n_failed"] == 1
    assert manifest["by_type"]["complex"] == {"requested": 1, "generated": 0, "failed": 1}
    assert manifest["failures"][0]["reply"] == "no labels here"
    assert manifest["question_types"]["conversational"] == ["rewriter"]


@pytest.mark.parametrize("extra,message", [
    ([], "need two"),
    (["--per-type", "0"], "--per-type and --max-tokens must be at least 1"),
    (["--corpus", "no/such/folder"], "does not exist"),
])
def test_the_command_says_what_cannot_run_in_one_line(tmp_path, capsys, extra, message):
    (tmp_path / "only.txt").write_text("One passage only.")
    argv = ["gqm", "testset", "--corpus", str(tmp_path), "--out", str(tmp_path / "out"), *extra]
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1].startswith("ccrs gqm testset: ") and message in lines[-1]
    assert "log records" in lines[0] and len(lines) == 2  # the quiet console's note, then the error
