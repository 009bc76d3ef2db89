"""Property-based check of the BioASQ loader: a mutated real question either loads or fails with a
DatasetError naming the file; never another exception, never a silently dropped question."""
import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrievers.loaders import load_bioasq_json
from retrievers.schema import DatasetError

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "bioasq-sample" / "12B1_golden_sample.json"
QUESTIONS = json.loads(SAMPLE.read_text())["questions"][:3]
FIELDS = ["id", "body", "type", "ideal_answer", "exact_answer", "documents", "snippets"]
JUNK = st.one_of(st.none(), st.integers(), st.text(max_size=20), st.lists(st.text(max_size=5), max_size=3),
                 st.dictionaries(st.text(max_size=5), st.integers(), max_size=2))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, len(QUESTIONS) - 1), st.sampled_from(FIELDS), st.one_of(st.just("<drop>"), JUNK))
def test_mutated_question_loads_or_fails_clearly(tmp_path, index, field, value):
    questions = json.loads(json.dumps(QUESTIONS))
    if value == "<drop>":
        questions[index].pop(field, None)
    else:
        questions[index][field] = value
    path = tmp_path / "mutated.json"
    path.write_text(json.dumps({"questions": questions}))
    try:
        loaded = load_bioasq_json(path)
    except DatasetError as error:
        assert "mutated.json" in str(error)
        return
    assert len(loaded.queries) == len(questions)


RAW = SAMPLE.read_bytes()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(1, len(RAW) - 1), st.sampled_from(["truncate", "non_utf8", "nul"]))
def test_truncated_or_corrupted_bytes_fail_clearly(tmp_path, cut, how):
    """The real file cut short, or with a non-UTF-8 / NUL byte written into it: a DatasetError naming the
    file (or a clean load when the damage happens to leave valid JSON), never another exception."""
    if how == "truncate":
        data = RAW[:cut]
    else:
        data = RAW[:cut] + (b"\xff\xfe" if how == "non_utf8" else b"\x00") + RAW[cut:]
    path = tmp_path / "damaged.json"
    path.write_bytes(data)
    try:
        loaded = load_bioasq_json(path)
    except DatasetError as error:
        assert "damaged.json" in str(error)
        return
    assert len(loaded.queries) > 0
