"""Hypotheses files: the YAML schema, read into stats' typed records; every problem one clear error."""
from pathlib import Path

import pytest

from stats.errors import StatsInputError
from stats.hypotheses import Hypothesis, HypothesisSet
from tasks.reduce import load_hypotheses

PAPER_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "hypotheses" / "paper-h1-h3.yaml"


def test_paper_config_loads_as_stated():
    hypotheses = {h.name: h for h in load_hypotheses(PAPER_CONFIG).hypotheses}
    assert set(hypotheses) == {"H1", "H2", "H3"}
    assert hypotheses["H1"].pairs == (("A", "C"), ("A", "E"), ("B", "D"), ("B", "F"))
    assert hypotheses["H1"].metrics == ("CC", "QR", "ID", "AC", "IR")
    assert (hypotheses["H1"].direction, hypotheses["H1"].combine) == ("greater", "all")
    assert hypotheses["H2"].pairs == (("D", "C"), ("F", "E")) and hypotheses["H2"].metrics == ("QR", "IR")
    assert (hypotheses["H3"].direction, hypotheses["H3"].combine) == ("two-sided", "any")
    assert hypotheses["H3"].pairs == (("C", "E"), ("D", "F"))


def write(tmp_path, text) -> Path:
    path = tmp_path / "h.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "text",
    [
        "hypotheses:\n  - {name: H1, pairs: [[A, B]], metrics: [CC], colour: red}\n",  # unknown key
        "hypotheses:\n  - {name: H1, pairs: [[A, A]], metrics: [CC]}\n",
        "hypotheses:\n  - {name: H1, pairs: [[A, B]], metrics: [CC], direction: up}\n",
        "hypotheses:\n  - {name: H1, pairs: [[A, B]], metrics: [CC]}\n"
        "  - {name: H1, pairs: [[A, B]], metrics: [QR]}\n",
        "hypotheses: [\n",
        "[]\n",
    ],
)
def test_bad_hypotheses_file_is_a_clear_error(tmp_path, text):
    with pytest.raises(StatsInputError, match="hypotheses file"):
        load_hypotheses(write(tmp_path, text))


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(StatsInputError, match="cannot read"):
        load_hypotheses(tmp_path / "absent.yaml")


def test_a_file_reads_into_the_typed_records_with_defaults(tmp_path):
    loaded = load_hypotheses(write(tmp_path, "hypotheses:\n  - {name: H1, pairs: [[A, B]], metrics: [CC]}\n"))
    assert loaded == HypothesisSet((Hypothesis("H1", (("A", "B"),), ("CC",)),))
    assert loaded.hypotheses[0].direction == "two-sided" and loaded.hypotheses[0].combine == "all"


def test_an_invalid_entry_names_its_place(tmp_path):
    with pytest.raises(StatsInputError, match=r"is invalid: hypotheses\.0\.pairs: .*itself"):
        load_hypotheses(write(tmp_path, "hypotheses:\n  - {name: H1, pairs: [[A, A]], metrics: [CC]}\n"))
