"""StageContext.run_with_judge (pipelines/extensions/registry.py): an extension's stage of tasks/ gets the
run's judge the one way every such stage takes it."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from judges.config import ClientConfig, JudgeConfig
from pipelines.extensions.registry import StageContext


def test_a_stage_gets_its_own_arguments_then_the_runs_judge_force_and_plot(tmp_path):
    judge, client = JudgeConfig(), ClientConfig()
    context = StageContext(config=SimpleNamespace(judge=judge), run_dir=tmp_path, inputs=(Path("q"),) * 3,
                           top_k=5, judge_client=client, judge_url="http://judge/v1", identity={"m": "x"},
                           force=True)
    seen = []

    def stage(*arguments, force, draw):
        seen.append((arguments, force, draw))
        return "done"

    assert context.run_with_judge(stage, "options", 7, draw=print) == "done"
    assert seen == [((tmp_path, "options", 7, judge, client, "http://judge/v1", {"m": "x"}), True, print)]
