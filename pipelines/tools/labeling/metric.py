"""Which metric is labeled on which scale: a registered judge metric (scale and construct from its
declaration) or a human metric of its own, kept in labels/metrics.json so that a reopened run labels the
same one."""
from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import pandas as pd

from pipelines.options import UsageError
from pipelines.tools.labeling.files import write_json
from tasks.runtime.layout import RunLayout

MAX_BUTTONS = 11  # an integer scale with more marks than this gets a slider beside the typed digits


@dataclass(frozen=True)
class LabelMetric:
    """What is labeled: `name` on `scale` (the raw marks), calibrating the judge metric `predicted_by`
    (the metric itself for a registered judge metric); `description` is the construct the page shows."""

    name: str
    scale: tuple[float, float]
    predicted_by: str
    description: str

    @property
    def integer(self) -> bool:
        return all(float(bound).is_integer() for bound in self.scale)

    @property
    def buttons(self) -> bool:
        return self.integer and self.scale[1] - self.scale[0] + 1 <= MAX_BUTTONS

    def record(self) -> dict[str, Any]:
        return {"scale": [plain_number(bound) for bound in self.scale], "predicted_by": self.predicted_by,
                "description": self.description}

    def checked_mark(self, mark: Any) -> float | int:
        """The mark as stored: a number on the scale (an integer on an integer scale), else LabelError."""
        if isinstance(mark, bool) or not isinstance(mark, int | float) or not math.isfinite(mark):
            raise LabelError(f"a mark must be a number, got {mark!r}")
        low, high = self.scale
        if not low <= mark <= high or (self.integer and not float(mark).is_integer()):
            kind = "an integer" if self.integer else "a number"
            raise LabelError(f"a mark of {self.name} must be {kind} in {scale_text(self.scale)}, got {mark}")
        return int(mark) if self.integer else float(mark)

    def page_record(self) -> dict[str, Any]:
        return {"name": self.name, **self.record(), "integer": self.integer, "buttons": self.buttons}


class LabelError(ValueError):
    """A request the store refuses (HTTP 400, or 409 where the page is behind): one line for the page."""

    def __init__(self, message: str, status: HTTPStatus = HTTPStatus.BAD_REQUEST):
        super().__init__(message)
        self.status = status


def scored_metrics(layout: RunLayout) -> list[str]:
    """The metrics of the run's scores files, suite by suite (RunLayout.judged_suites)."""
    found: dict[str, None] = {}
    for suite in layout.judged_suites():
        metrics = pd.read_parquet(layout.scores(suite), columns=["metric"])["metric"].astype(str)
        found.update(dict.fromkeys(metrics.unique()))
    return list(found)


def read_metrics_file(layout: RunLayout) -> dict[str, dict]:
    return json.loads(layout.labels_metrics.read_text()) if layout.labels_metrics.exists() else {}


def resolve_metric(layout: RunLayout, name: str | None, scale: Sequence[float] | None,
                   predicted_by: str | None, describe: str | None) -> LabelMetric:
    """The metric to label: a registered judge metric (scale and construct from its declaration; default
    the first judged metric the run scored) or a human metric of its own (--label-scale, --predicted-by, a
    metric of the run's scores; both may come from labels/metrics.json when it was labeled before)."""
    from judges.suite import all_metrics

    registered = {metric.name: metric for metric in all_metrics()}
    scored = scored_metrics(layout)
    if name is None:
        judged = [metric.name for metric in registered.values() if metric.judged and metric.name in scored]
        if not judged:
            raise UsageError(f"{layout.root} has no judged metric's scores; name one with --metric (a human "
                             "metric of its own also needs --label-scale LOW HIGH and --predicted-by "
                             "HUMAN=JUDGE)")
        name = judged[0]
    stored = read_metrics_file(layout).get(name)
    if name in registered:
        metric = _judge_metric(registered[name], scale, predicted_by, scored)
    else:
        metric = _human_metric(name, scale, predicted_by, describe, stored, scored)
    if stored is not None:
        _check_same(metric, stored)
    return metric


def _judge_metric(declared, scale, predicted_by, scored: list[str]) -> LabelMetric:
    if predicted_by not in (None, declared.name):
        raise UsageError(f"{declared.name} is a judge metric: its labels calibrate its own scores; "
                         "--predicted-by is for a human metric of its own")
    if scale is not None and tuple(map(float, scale)) != tuple(map(float, declared.scale)):
        raise UsageError(f"{declared.name} is marked on its declared scale {scale_text(declared.scale)}, "
                         f"not {scale_text(scale)}; a human metric of its own takes a name of its own")
    if not all(math.isfinite(bound) for bound in declared.scale):
        raise UsageError(f"{declared.name} has no finite scale {scale_text(declared.scale)} to mark on")
    if declared.name not in scored:
        raise UsageError(f"{declared.name} is not in the run's scores; scored: {', '.join(scored) or 'none'}")
    return LabelMetric(declared.name, tuple(declared.scale), declared.name, declared.description)


def _human_metric(name: str, scale, predicted_by, describe, stored: dict | None,
                  scored: list[str]) -> LabelMetric:
    scale = scale if scale is not None else (stored or {}).get("scale")
    predicted_by = predicted_by or (stored or {}).get("predicted_by")
    if scale is None or predicted_by is None:
        raise UsageError(f"{name} is no registered judge metric: a human metric of its own needs "
                         f"--label-scale LOW HIGH and --predicted-by {name}=JUDGE (`ccrs metrics` lists the "
                         "judge "
                         "metrics)")
    low, high = (float(bound) for bound in scale)
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise UsageError(f"--label-scale needs finite LOW < HIGH, got {scale_text(scale)}")
    if predicted_by not in scored:
        raise UsageError(f"--predicted-by {predicted_by} is not in the run's scores; scored: "
                         f"{', '.join(scored) or 'none'}")
    description = describe or (stored or {}).get("description") or f"{name} (no construct given: --describe)"
    return LabelMetric(name, (low, high), predicted_by, description)


def _check_same(metric: LabelMetric, stored: dict) -> None:
    if [float(bound) for bound in stored.get("scale", ())] != [float(b) for b in metric.scale]:
        raise UsageError(f"{metric.name} was labeled on the scale {scale_text(stored.get('scale'))} "
                         f"(labels/metrics.json), not {scale_text(metric.scale)}")
    if stored.get("predicted_by") != metric.predicted_by:
        raise UsageError(f"{metric.name} was labeled as predicted by {stored.get('predicted_by')} "
                         f"(labels/metrics.json), not {metric.predicted_by}")


def record_metric(layout: RunLayout, metric: LabelMetric) -> None:
    """labels/metrics.json with this metric merged in (resolve_metric checked it against what is there)."""
    known = read_metrics_file(layout)
    known[metric.name] = {**known.get(metric.name, {}), **metric.record()}
    write_json(layout.labels_metrics, known)


def plain_number(number: float) -> float | int:
    return int(number) if float(number).is_integer() else float(number)


def scale_text(scale: Sequence[float] | None) -> str:
    return "none" if scale is None else "-".join(f"{float(bound):g}" for bound in scale)

