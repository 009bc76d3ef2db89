"""Unit-test format (public GroUSE JSON lines), conditions and the fixtures under data/grouse-bioasq/."""
import json
from pathlib import Path

import pytest

from judges.grouse_unit_tests import (
    UnitTestFormatError,
    check_condition,
    derived_conditions,
    load_unit_tests,
    parse_condition,
    infer_test_type,
)

DATA = Path(__file__).resolve().parents[2] / "data" / "grouse-bioasq"


@pytest.mark.parametrize("value,condition,expected", [
    (5, "==5", True), (4, "==5", False), (None, "==5", False), (None, "==None", True), (1, "==None", False),
    (4, "<5", True), (5, "<5", False), (None, "<5", False), (5, "<=5", True),
    (2, ">1", True), (1, ">=1", True),
    (0, "==0", True), (1, "==1", True), (0, "==1", False), (1.0, "== 1", True),
])
def test_conditions(value, condition, expected):
    assert check_condition(value, condition) is expected


@pytest.mark.parametrize("bad", ["=5", "<None", "5", "==five", "!=1", ""])
def test_invalid_conditions(bad):
    with pytest.raises(ValueError):
        parse_condition(bad)


def test_derived_conditions_follow_table_6():
    assert derived_conditions("==None", "==None") == {"positive_acceptance": "==1",
                                                      "negative_rejection": "==1"}
    assert derived_conditions("==None", "==1") == {"positive_acceptance": "==0",
                                                   "negative_rejection": "==None"}
    assert derived_conditions("==1", "==None") == {"positive_acceptance": "==None",
                                                   "negative_rejection": "==0"}
    assert derived_conditions("<5", "==5") == {"positive_acceptance": "==None",
                                               "negative_rejection": "==None"}


PUBLIC_LINE = {"input": "Q?", "actual_output": "A [1].", "expected_output": "R [1].", "references": ["doc"],
               "conditions": {"answer_relevancy_condition": "==5", "completeness_condition": "<5",
                              "faithfulness_condition": "==1", "usefulness_condition": "==None"}}


def _write(tmp_path, lines):
    path = tmp_path / "tests.jsonl"
    path.write_text("\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n")
    return path


PUBLIC_SAMPLE = DATA / "public-format-sample.jsonl"
NAMES = ["Highest marks 1", "Highest marks 2", "Highest marks 3", "Highest marks 4", "Highest marks 5",
         "Highest marks 6", "Highest marks 7", "Low answer relevancy 1", "Low answer relevancy 2",
         "Low completeness 1", "Low completeness 2", "Low completeness 3", "Low usefulness 1",
         "Low faithfulness 1", "Low faithfulness 2", "Low faithfulness 3"]  # Table 6, as printed


def public_shape(lines: list[dict]) -> list[dict]:
    """Our fixture lines in the public GroUSE shape: no id or set, the test type as Table 6's name."""
    keys = ("input", "actual_output", "expected_output", "references", "conditions")
    return [{**{key: line[key] for key in keys},
             "metadata": {"test_type": NAMES[line["metadata"]["test_type"] - 1]}} for line in lines]


def _fixture_lines(sets: int = 2) -> list[dict]:
    lines = [json.loads(line) for line in (DATA / "test.jsonl").read_text().splitlines() if line.strip()]
    return lines[: 16 * sets]


def test_public_sample_is_our_fixture_in_the_public_shape():
    written = [json.loads(line) for line in PUBLIC_SAMPLE.read_text().splitlines()]
    assert written == public_shape(_fixture_lines())


def test_public_format_types_from_free_text_and_sets_by_question():
    ours = load_unit_tests(DATA / "test.jsonl")[:32]
    public = load_unit_tests(PUBLIC_SAMPLE)
    assert [(t.set_id, t.test_type) for t in public] == [(f"set{1 + i // 16}", 1 + i % 16) for i in range(32)]
    assert [t.test_id for t in public[:2]] == ["set1-t01", "set1-t02"]
    assert [(t.test_type, t.question, t.answer, t.conditions) for t in public] == [
        (t.test_type, t.question, t.answer, t.conditions) for t in ours]


def test_public_format_types_from_position_when_the_text_names_no_test(tmp_path):
    lines = public_shape(_fixture_lines())
    for index, line in enumerate(lines):
        line["metadata"] = {"test_type": "adversarial check"} if index % 2 else {}
    tests = load_unit_tests(_write(tmp_path, lines))
    assert [t.test_type for t in tests] == [1 + i % 16 for i in range(32)]


@pytest.mark.parametrize("text,expected", [
    ("Highest marks 1", 1), ("highest_mark_07", 7), ("LOW-FAITHFULNESS-3 (FM7)", 16),
    ("Low answer relevancy 2", 9), ("7", 7), ("type 12", 12), (3, 3), ("17", None), ("Positive test", None),
    ("Low completeness 1 and Low completeness 2", None),
    ("Same as Highest mark 2 but off-topic references", None), (None, None),
])
def test_test_type_inferred_from_text(text, expected):
    assert infer_test_type(text) == expected


def test_neither_text_nor_position_is_a_clear_error(tmp_path):
    lines = public_shape(_fixture_lines(1))
    for line in lines:
        line["metadata"] = {"test_type": "unit test"}
    with pytest.raises(UnitTestFormatError, match=r"tests.jsonl:1: test type 'unit test' names no GroUSE "
                       r"Table 6 test, and its question has 15 tests, not 16"):
        load_unit_tests(_write(tmp_path, lines[:15]))
    swapped = [lines[1], lines[0], *lines[2:]]  # position 1 holds a type 2 test
    with pytest.raises(UnitTestFormatError, match="tests.jsonl:1: .* type 1 .* not in Table 6 order"):
        load_unit_tests(_write(tmp_path, swapped))
    twice = public_shape(_fixture_lines(1))
    twice[1]["metadata"]["test_type"] = "Highest marks 1"
    with pytest.raises(UnitTestFormatError, match=r"duplicate test ids \['set1-t01'\]"):
        load_unit_tests(_write(tmp_path, twice))


@pytest.mark.parametrize("line,message", [
    ("not json", "Expecting value"),
    ({k: v for k, v in PUBLIC_LINE.items() if k != "references"}, "missing key 'references'"),
    ({**PUBLIC_LINE, "references": "doc"}, "references must be a list of strings"),
    ({**PUBLIC_LINE, "conditions": {"answer_relevancy_condition": "==5"}}, "conditions without"),
    ({**PUBLIC_LINE, "conditions": {**PUBLIC_LINE["conditions"], "faithfulness_condition": "~1"}},
     "invalid condition"),
    ([1, 2], "not a JSON object"),
])
def test_bad_lines_are_errors_naming_the_line(tmp_path, line, message):
    path = _write(tmp_path, [PUBLIC_LINE, "", line])
    with pytest.raises(UnitTestFormatError) as info:
        load_unit_tests(path)
    assert f"{path}:3:" in str(info.value) and message in str(info.value)


def test_fixtures_cover_16_types_per_set_and_keep_train_apart():
    test, train = load_unit_tests(DATA / "test.jsonl"), load_unit_tests(DATA / "train.jsonl")
    assert len(test) >= 96 and len(train) == 16
    sets = {t.set_id for t in test}
    assert len(sets) >= 6 and not sets & {t.set_id for t in train}
    for set_id in sets:
        assert sorted(t.test_type for t in test if t.set_id == set_id) == list(range(1, 17))
    assert not {t.question for t in test} & {t.question for t in train}


def test_fixture_conditions_match_table_6():
    expected = {1: "==5 ==5 ==None ==1", 9: "==1 ==None ==None ==1", 11: "==None ==1 ==None ==None",
                13: "==None ==None ==0 ==1", 16: "==5 ==5 ==None ==0"}
    for test in load_unit_tests(DATA / "test.jsonl"):
        c = test.conditions
        if test.test_type in expected:
            got = " ".join(c[m] for m in ("answer_relevancy", "completeness", "usefulness", "faithfulness"))
            assert got == expected[test.test_type], test.test_id


def test_fixture_citations_point_to_existing_references():
    import re

    for path in (DATA / "test.jsonl", DATA / "train.jsonl"):
        for test in load_unit_tests(path):
            cited = {int(i) for i in re.findall(r"\[(\d+)\]", test.answer)}
            assert all(1 <= i <= len(test.references) for i in cited), test.test_id
            if test.test_type in (2, 5, 11):
                assert test.answer == "No document seems to precisely answer your question."


def test_unit_test_sample_is_the_shared_sample():
    from judges.suite import Sample

    test = load_unit_tests(DATA / "train.jsonl")[0]
    sample = test.sample()
    assert isinstance(sample, Sample) and (sample.query_id, sample.system) == (test.test_id, "unit-test")
    assert (sample.question, sample.response, sample.ground_truth) == (test.question, test.answer,
                                                                       test.expected_answer)
    assert sample.context == test.references and sample.context is not test.references
