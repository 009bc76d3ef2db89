"""The load test's files: load_test.json, load_test.csv, load_test_requests.csv and load_test.png."""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipelines.tools.load.measure import LEVEL_COLUMNS, LevelReport
from pipelines.tools.load.run import LoadTestResult


def result_dict(result: LoadTestResult) -> dict[str, Any]:
    data = {k: v for k, v in asdict(result).items() if k != "records"}
    data["client"] = {k: v for k, v in result.client.items() if k != "api_key_env"}
    return data


def write_outputs(result: LoadTestResult, out_dir: Path) -> dict[str, Path]:
    """load_test.json (config, environment, per-level reports), load_test.csv (one row per mode x level),
    load_test_requests.csv (one row per request) and load_test.png."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / "load_test.json", "csv": out_dir / "load_test.csv",
             "requests": out_dir / "load_test_requests.csv", "plot": out_dir / "load_test.png"}
    paths["json"].write_text(json.dumps(result_dict(result), indent=2, default=str))
    pd.DataFrame([r.row() for r in result.levels], columns=LEVEL_COLUMNS).to_csv(paths["csv"], index=False)
    pd.DataFrame([asdict(r) for r in result.records]).to_csv(paths["requests"], index=False)
    plot_levels(result.levels, paths["plot"],
                f"{result.model}, client limit {result.client['max_concurrency']}")
    return paths


def plot_levels(levels: list[LevelReport], path: Path, title: str) -> Path:
    """Throughput and p90 latency against the offered concurrency, one line per mode."""
    from pipelines.reporting.plots import figure_file

    with figure_file(path, nrows=1, ncols=2, figsize=(10.0, 4.0)) as (figure, (left, right)):
        for mode in dict.fromkeys(r.mode for r in levels):
            rows = [r for r in levels if r.mode == mode]
            x = [r.level for r in rows]
            left.plot(x, [r.throughput_rps for r in rows], marker="o", label=mode)
            right.plot(x, [np.nan if r.latency.p90_s is None else r.latency.p90_s for r in rows], marker="o",
                       label=mode)
        for axis, label in ((left, "throughput (successful requests/s)"), (right, "p90 latency (s)")):
            axis.set_xscale("log", base=2)
            axis.set_xticks(sorted({r.level for r in levels}),
                            [str(v) for v in sorted({r.level for r in levels})])
            axis.set_xlabel("offered concurrency (caller threads)")
            axis.set_ylabel(label)
            axis.set_ylim(bottom=0)
            axis.grid(True, alpha=0.3)
            axis.legend(fontsize="small")
        figure.suptitle(title)
    return path
