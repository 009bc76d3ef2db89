"""GroUSE unit tests (paper, Table 6): the public JSON-lines format, expected conditions and checking.

One test per line: {"input", "actual_output", "expected_output", "references", "conditions": {
"answer_relevancy_condition", "completeness_condition", "faithfulness_condition", "usefulness_condition"}}.
An optional "metadata" object: in the public GroUSE files `test_type` is free text and there is no set id;
our own fixtures add {"id", "set", "test_type": 1-16, ...}. The type is read from the text (a number, or a
Table 6 test name such as "Low completeness 2"), else taken from the line's position among its question's
16 tests (Table 6 order, checked against the line's conditions); sets are grouped by `metadata.set`, else
by question. Where neither tells the type, loading fails naming the line.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from judges.grouse import JUDGED_METRICS
from judges.suite import Sample

TESTS_PER_SET = 16
TEST_TYPE_NAMES = {
    1: "highest marks 1", 2: "highest marks 2", 3: "highest marks 3", 4: "highest marks 4",
    5: "highest marks 5", 6: "highest marks 6", 7: "highest marks 7", 8: "low answer relevancy 1",
    9: "low answer relevancy 2", 10: "low completeness 1", 11: "low completeness 2", 12: "low completeness 3",
    13: "low usefulness 1", 14: "low faithfulness 1", 15: "low faithfulness 2", 16: "low faithfulness 3",
}
# Table 6's failure-mode column: the failure modes (paper section 4.1) each test type probes; types 1-7
# probe none (a correct answer must get the top marks). The table puts type 15 (a citation left out) under
# FM7 although section 4.1 files a missing citation under FM6: we follow the table, where the figures are.
FAILURE_MODES: dict[int, tuple[str, ...]] = {
    8: ("FM1",), 9: ("FM1", "FM2"), 10: ("FM3",), 11: ("FM3", "FM4"), 12: ("FM3", "FM4"), 13: ("FM5",),
    14: ("FM6",), 15: ("FM7",), 16: ("FM7",),
}
FAILURE_MODE_NAMES = {
    "FM1": "answerable, but the answer carries irrelevant content",
    "FM2": "unanswerable, yet the model answers anyway",
    "FM3": "the answer leaves out relevant content of the references",
    "FM4": "the model wrongly says the references hold no answer",
    "FM5": "a correct refusal padded with unrelated content",
    "FM6": "a fact reported right, its citation absent or wrong",
    "FM7": "a fact distorted, or a claim the references do not support",
}
_CONDITION = re.compile(r"^(==|<=|>=|<|>)\s*(None|[+-]?\d+(?:\.\d+)?)$")


class UnitTestFormatError(ValueError):
    """A unit-test file line that does not follow the public GroUSE format (the message names the line)."""


@dataclass
class UnitTest:
    test_id: str
    set_id: str
    test_type: int
    question: str
    answer: str
    expected_answer: str
    references: list[str]
    conditions: dict[str, str]  # all six metrics
    metadata: dict = field(default_factory=dict)

    def sample(self, system: str = "unit-test") -> Sample:
        """The judge suites' sample: the graded answer is the response, the expected answer the ground
        truth, the references the ranked context."""
        return Sample(self.test_id, system, self.question, self.answer, self.expected_answer,
                      list(self.references))


def parse_condition(condition: str) -> tuple[str, float | None]:
    match = _CONDITION.match(str(condition).strip())
    if not match:
        raise ValueError(f"invalid condition {condition!r} "
                         "(expected ==, <, <=, > or >= then an integer or None)")
    op, value = match.groups()
    if value == "None" and op != "==":
        raise ValueError(f"invalid condition {condition!r}: None only with ==")
    return op, None if value == "None" else float(value)


def check_condition(value: float | None, condition: str) -> bool:
    """`==None` passes only for None; every other condition fails for None."""
    op, target = parse_condition(condition)
    if target is None:
        return value is None
    if value is None:
        return False
    return {"==": value == target, "<": value < target, "<=": value <= target,
            ">": value > target, ">=": value >= target}[op]


def derived_conditions(relevancy_condition: str, completeness_condition: str) -> dict[str, str]:
    """Expected positive acceptance / negative rejection, from whether relevancy and completeness are
    expected to be null (Table 6)."""
    no_response = parse_condition(relevancy_condition) == ("==", None)
    no_answer_in_refs = parse_condition(completeness_condition) == ("==", None)
    if no_response:
        pa, nr = ("==1", "==1") if no_answer_in_refs else ("==0", "==None")
    else:
        pa, nr = ("==None", "==0") if no_answer_in_refs else ("==None", "==None")
    return {"positive_acceptance": pa, "negative_rejection": nr}


# Table 6's expected (answer relevancy, completeness, usefulness, faithfulness) per test type: checks a
# type taken from a line's position against the line's own conditions.
TABLE6_CONDITIONS = {
    1: ("==5", "==5", "==None", "==1"), 2: ("==None", "==None", "==None", "==None"),
    3: ("==None", "==None", "==1", "==1"), 4: ("==5", "==5", "==None", "==1"),
    5: ("==None", "==None", "==None", "==None"), 6: ("==5", "==5", "==None", "==1"),
    7: ("==None", "==None", "==1", "==1"), 8: ("<5", "==5", "==None", "==1"),
    9: ("==1", "==None", "==None", "==1"), 10: ("==5", "<5", "==None", "==1"),
    11: ("==None", "==1", "==None", "==None"), 12: ("==None", "==1", "==1", "==1"),
    13: ("==None", "==None", "==0", "==1"), 14: ("==5", "==5", "==None", "==0"),
    15: ("==5", "==5", "==None", "==0"), 16: ("==5", "==5", "==None", "==0"),
}
_TABLE6_KEYS = ("answer_relevancy", "completeness", "usefulness", "faithfulness")
_NUMBERED = re.compile(r"^(?:test\s*)?(?:type\s*)?#?\s*0*(\d{1,2})$")


def _name_pattern(name: str) -> re.Pattern:
    """A Table 6 test name as free text: any case, `_`/`-`/spaces between words, mark or marks,
    leading zeros in the number ("Highest marks 1", "highest_mark_01", "LOW-FAITHFULNESS-3 (FM7)")."""
    *words, number = name.split()
    body = r"[\s_\-]+".join("marks?" if word == "marks" else re.escape(word) for word in words)
    return re.compile(rf"(?<![a-z]){body}[\s_\-]*0*{number}(?!\d)")


_NAME_PATTERNS = {number: _name_pattern(name) for number, name in TEST_TYPE_NAMES.items()}


def infer_test_type(text: object) -> int | None:
    """The Table 6 test type a free-text `metadata.test_type` names (a number 1-16, "type 3", or a test
    name such as "Low completeness 2"), or None when it names none or more than one."""
    if isinstance(text, bool) or text is None:
        return None
    if isinstance(text, int):
        return text if text in TEST_TYPE_NAMES else None
    cleaned = str(text).strip().lower()
    if cleaned.startswith("same as"):  # Table 6 goals name another test: "Same as Highest marks 2 but ..."
        return None
    numbered = _NUMBERED.match(cleaned)
    if numbered:
        number = int(numbered.group(1))
        return number if number in TEST_TYPE_NAMES else None
    found = [number for number, pattern in _NAME_PATTERNS.items() if pattern.search(cleaned)]
    return found[0] if len(found) == 1 else None


@dataclass
class _Line:
    number: int
    question: str
    answer: str
    expected_answer: str
    references: list[str]
    conditions: dict[str, str]
    meta: dict


def _parse_line(obj: object, number: int) -> _Line:
    if not isinstance(obj, dict):
        raise TypeError("not a JSON object")
    for key in ("input", "actual_output", "expected_output", "references", "conditions"):
        if key not in obj:
            raise ValueError(f"missing key {key!r}")
    references = obj["references"]
    if not isinstance(references, list) or not all(isinstance(r, str) for r in references):
        raise TypeError("references must be a list of strings")
    raw_conditions = obj["conditions"]
    if not isinstance(raw_conditions, dict):
        raise TypeError("conditions must be an object")
    conditions = {}
    for metric in JUDGED_METRICS:
        key = f"{metric}_condition"
        if key not in raw_conditions:
            raise ValueError(f"conditions without {key!r}")
        parse_condition(raw_conditions[key])
        conditions[metric] = str(raw_conditions[key]).replace(" ", "")
    conditions.update(derived_conditions(conditions["answer_relevancy"], conditions["completeness"]))
    meta = obj.get("metadata") or {}
    if not isinstance(meta, dict):
        raise TypeError("metadata must be an object")
    return _Line(number, str(obj["input"]), str(obj["actual_output"]), str(obj["expected_output"]),
                 references, conditions, meta)


def _group_sets(lines: list[_Line]) -> dict[str, list[_Line]]:
    """Lines by test set, in file order: metadata.set where given, else one set per question (the public
    format has no set id; each GroUSE question carries its 16 tests)."""
    set_ids: dict[str, str] = {}
    groups: dict[str, list[_Line]] = {}
    for line in lines:
        given = line.meta.get("set")
        if given not in (None, ""):
            set_id = str(given)
        else:
            set_id = set_ids.setdefault(line.question, f"set{len(set_ids) + 1}")
        groups.setdefault(set_id, []).append(line)
    return groups


def _test_type(line: _Line, position: int, set_size: int, path: Path) -> int:
    """From metadata.test_type's text; else from the position in its set (Table 6 order, 16 per set),
    checked against the line's conditions; else a UnitTestFormatError saying why neither works."""
    text = line.meta.get("test_type")
    from_text = infer_test_type(text)
    if from_text is not None:
        return from_text
    said = ("no metadata.test_type" if text in (None, "")
            else f"test type {text!r} names no GroUSE Table 6 test")
    where = f"{path}:{line.number}"
    if set_size != TESTS_PER_SET:
        raise UnitTestFormatError(
            f"{where}: {said}, and its question has {set_size} tests, not {TESTS_PER_SET}, so the position "
            f"cannot tell the type either (name it, e.g. \"{TEST_TYPE_NAMES[1].capitalize()}\", or give "
            "all 16 tests of the question in Table 6 order)")
    test_type = position + 1
    expected = TABLE6_CONDITIONS[test_type]
    found = tuple(line.conditions[key] for key in _TABLE6_KEYS)
    if found != expected:
        raise UnitTestFormatError(
            f"{where}: {said}; by its position ({position + 1} of 16) it would be type {test_type} "
            f"({TEST_TYPE_NAMES[test_type]}), but its conditions {dict(zip(_TABLE6_KEYS, found))} are not "
            f"that type's {dict(zip(_TABLE6_KEYS, expected))}: the file is not in Table 6 order")
    return test_type


def load_unit_tests(path: Path | str) -> list[UnitTest]:
    """Read a GroUSE-format JSON-lines file; a bad line raises UnitTestFormatError naming its line.

    The test type comes from metadata.test_type (a number or free text naming a Table 6 test), else from
    the line's position among its question's 16 tests; tests are grouped into sets by metadata.set, else
    by question."""
    path = Path(path)
    lines: list[_Line] = []
    with open(path, encoding="utf-8") as fh:
        for number, text in enumerate(fh, 1):
            if not text.strip():
                continue
            try:
                lines.append(_parse_line(json.loads(text), number))
            except (ValueError, TypeError) as exc:
                raise UnitTestFormatError(f"{path}:{number}: {exc}") from exc
    by_line: dict[int, UnitTest] = {}
    for set_id, members in _group_sets(lines).items():
        for position, line in enumerate(members):
            test_type = _test_type(line, position, len(members), path)
            test_id = str(line.meta.get("id") or f"{set_id}-t{test_type:02d}")
            by_line[line.number] = UnitTest(test_id, set_id, test_type, line.question, line.answer,
                                            line.expected_answer, line.references, line.conditions, line.meta)
    tests = [by_line[line.number] for line in lines]  # file order
    ids = [t.test_id for t in tests]
    repeated = sorted({test_id for test_id in ids if ids.count(test_id) > 1})
    if repeated:
        raise UnitTestFormatError(f"{path}: duplicate test ids {repeated} (a test type given twice for one "
                                  "question?)")
    return tests
