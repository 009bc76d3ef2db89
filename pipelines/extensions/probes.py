"""The judge bias probes (`probes:`, tasks/bias_probes.py): after the judge stages the run's own judge is
probed on its own answers in the `probes` stage; the verdict's "Judge bias probes" section and the MLflow
run's probes/ hold the paired shifts."""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

from infra.console import say
from judges.bias_probes import ProbesConfig
from pipelines.extensions.registry import (
    ExtensionStage,
    MlflowPayload,
    RunExtension,
    StageContext,
    register_extension,
)
from pipelines.reporting.verdict import VerdictInputs, VerdictSection
from tasks.runtime.layout import PROBES_STAGE

if TYPE_CHECKING:
    from pipelines.reporting.track import TrackContext

# tasks.bias_probes is imported where it is used: loading a run config loads this declaration


def run_probes(context: StageContext) -> None:
    """The probe stage, said in a line before and after."""
    from pipelines.reporting.probes import plot_probe_shifts
    from tasks.bias_probes import run_probe_stage

    probes = context.config.probes
    say(f"probes: {', '.join(probes.kinds)} on up to {probes.questions} questions")
    stage = context.run_with_judge(run_probe_stage, context.inputs, context.top_k, probes,
                                   draw=plot_probe_shifts)
    done = stage.summary
    say(f"probes: {done['questions']} questions of system {done['system']}, {done['judgments']} judgments, "
        f"{len(done['flagged'])} of {done['cells']} cells flagged"
        + (" (finished stage reused)" if stage.reused else ""))


def verdict_section(inputs: VerdictInputs) -> str:
    """The verdict's "Judge bias probes", after the Judge section, where the run asked for them."""
    from pipelines.reporting.probes import probes_markdown

    layout = inputs.layout
    if layout is None or not inputs.config.get("probes") or not layout.probe_report.exists():
        return ""
    return probes_markdown(json.loads(layout.probe_report.read_text()))


def log_to_mlflow(context: TrackContext, probes: ProbesConfig) -> None:
    """The probe report's metrics and files, under probes/ of the run's MLflow run."""
    from pipelines.reporting.probes import log_probes
    from tasks.bias_probes import logged_probe_files

    report, files = logged_probe_files(context.run_dir)
    if report is not None:
        log_probes(report, files, context.tracking_uri, context.run_id)


register_extension(RunExtension(
    name="probes",
    description="judge bias probes: the run's judge on perturbed copies of its own answers",
    key="probes",
    model=ProbesConfig,
    stage=ExtensionStage("after_judge", run_probes, PROBES_STAGE, ("tasks.bias_probes", "judges.ccrs",
                                                                          "pipelines.reporting.probes")),
    verdict=(VerdictSection("end", verdict_section),),
    mlflow=MlflowPayload(log_to_mlflow, ("pipelines.reporting.probes",)),
    names=(r"\bprobes\b", r"\bbias_probes\b", r"\bprobe_report\b"),
    own=("pipelines/probe_cmd.py",),
    rank=30,
))
