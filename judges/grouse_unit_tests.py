"""GroUSE unit tests (paper, Table 6): the public JSON-lines format, expected conditions and checking.

One test per line: {"input", "actual_output", "expected_output", "references", "conditions": {
"answer_relevancy_condition", "completeness_condition", "faithfulness_condition", "usefulness_condition"}}.
Our own fixtures add an optional "metadata" object ({"set", "test_type", ...}); without it the test type
is taken from the line's position (the public sets list the 16 types in Table 6 order).
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


def _parse_line(obj: object, position: int) -> UnitTest:
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
    test_type = int(meta.get("test_type") or position % TESTS_PER_SET + 1)
    set_id = str(meta.get("set") or f"set{position // TESTS_PER_SET + 1}")
    test_id = str(meta.get("id") or f"{set_id}-t{test_type:02d}")
    return UnitTest(test_id, set_id, test_type, str(obj["input"]), str(obj["actual_output"]),
                    str(obj["expected_output"]), references, conditions, meta)


def load_unit_tests(path: Path | str) -> list[UnitTest]:
    """Read a GroUSE-format JSON-lines file; a bad line raises UnitTestFormatError naming its line."""
    path = Path(path)
    tests: list[UnitTest] = []
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                tests.append(_parse_line(json.loads(line), len(tests)))
            except (ValueError, TypeError) as exc:
                raise UnitTestFormatError(f"{path}:{number}: {exc}") from exc
    ids = [t.test_id for t in tests]
    if len(set(ids)) != len(ids):
        raise UnitTestFormatError(f"{path}: duplicate test ids")
    return tests
