"""The demo's hypotheses live with the built-in pipeline, not in configs/cpu-demo.yaml (issue 33 item 6): a
config copied from the demo carries none, and `ccrs run` applies them where it builds the demo's systems
A-F and judges their metrics, unless its config sets `stats.hypotheses` (a file of its own, or null)."""
from __future__ import annotations

import yaml

from pipelines.config import DEFAULT_CONFIG, RESOURCE_ROOT, load_config
from pipelines.pipeline import DEMO_HYPOTHESES, _run_hypotheses

DEMO = str(RESOURCE_ROOT / DEMO_HYPOTHESES)


def test_the_demo_config_names_no_hypotheses_and_its_copies_carry_none():
    assert "hypotheses" not in yaml.safe_load(DEFAULT_CONFIG.read_text())["stats"]
    assert load_config().stats.hypotheses is None


def test_ccrs_run_applies_them_to_the_demos_systems_only(capsys):
    assert _run_hypotheses(load_config(None, {"dataset.limit": 2})).stats.hypotheses == DEMO
    assert capsys.readouterr().out.strip() == (
        f"stats: the demo's hypotheses about its systems A, B, C, D, E, F ({DEMO_HYPOTHESES})")
    other_reader = {"readers": [{"name": "mine", "kind": "extractive", "max_sentences": 1}]}
    for overrides in (other_reader,                              # A-F mean other systems, or are absent
                      {"retrieval.retrievers": ["bm25"]},          # B, D, F are not built
                      {"judge.ccrs.metrics": ["QR"]},              # H1 names CC, ID, AC, IR
                      {"stats.hypotheses": None}):                 # said so: none
        assert _run_hypotheses(load_config(None, overrides)).stats.hypotheses is None, overrides
    own = load_config(None, {"stats.hypotheses": "configs/hypotheses/paper-h1-h3.yaml"})
    assert _run_hypotheses(own).stats.hypotheses == "configs/hypotheses/paper-h1-h3.yaml"
    assert capsys.readouterr().out == ""


def test_hypotheses_of_its_own_about_systems_a_run_does_not_build_stop_it_before_any_work(tmp_path):
    """A one-system `ccrs run` (one reader, one retriever: system A) with the demo's hypotheses named: one
    line naming what is missing, before Ray, the judge or MLflow is touched."""
    import pytest

    from stats.errors import StatsInputError

    one = load_config(None, {"readers": [{"name": "top1", "kind": "extractive", "max_sentences": 1}],
                             "retrieval.retrievers": ["bm25"], "stats.hypotheses": DEMO_HYPOTHESES})
    with pytest.raises(StatsInputError, match=r"hypotheses compare systems, and the scores hold one \(A\): "
                                              r"H1, H2 cannot be tested.*\(stats.hypotheses: configs/"):
        _run_hypotheses(one)
