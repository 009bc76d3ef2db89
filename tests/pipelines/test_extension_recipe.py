"""The recipe of docs/architecture.md, "Add a run extension": one module declares it (a config block, a stage
after the judge stages that writes a file, the judge calls it plans, a verdict section, an MLflow param,
metric and artifact), importing the module registers it, and the cost plan, the pipeline, the verdict and
MLflow pick it up with no other file edited. The module is written into a temporary folder here."""
from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path

import pytest
import yaml

from pipelines.config import ConfigError, load_config
from pipelines.extensions import extensions, unregister_extension
from tests.conftest import REPO
from tests.tasks.test_outputs import EXAMPLE
from tests.test_docs import run_stage_calls

CALLS = 4  # the judge calls the toy plans

TOY_MODULE = '''
"""A toy run extension: after the judge stages it counts the judged answers into toy/toy.json."""
import json

import pandas as pd
from mlflow.tracking import MlflowClient
from pydantic import BaseModel, ConfigDict

from judges.client import ChatRequest
from pipelines.extensions import (ExtensionStage, MlflowPayload, PlannedCalls, RunExtension,
                                  register_extension)
from tasks.runtime.stage import code_version, run_stage, stage_key
from pipelines.reporting.verdict import VerdictSection

FOLDER = "toy"


class ToyOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    calls: int = 1
    greeting: str = "hello"


def run(context):
    options = TOY.block(context.config)

    def count(out_dir):
        answers = len(pd.read_parquet(context.inputs[2]))
        (out_dir / "toy.json").write_text(json.dumps({"greeting": options.greeting, "answers": answers}))
        return {"answers": answers}

    key = stage_key(FOLDER, options.model_dump(), [], code_version(__name__))
    run_stage(context.run_dir, FOLDER, key, count, force=context.force)


def planned(config):
    options = TOY.block(config)
    ask = [ChatRequest(config.judge.model, [{"role": "user", "content": f"toy question {i}"}], max_tokens=4)
           for i in range(options.calls)]
    return PlannedCalls(requests=tuple(ask), note=f"toy: {options.calls} calls")


def section(inputs):
    found = inputs.layout.stage_dir(FOLDER) / "toy.json" if inputs.layout else None
    if found is None or not found.exists():
        return ""
    return f"## Toy\\n\\n{json.loads(found.read_text())['answers']} answers counted."


def log(context, options):
    client = MlflowClient(context.tracking_uri)
    counted = json.loads((context.run_dir / FOLDER / "toy.json").read_text())
    client.log_param(context.run_id, "toy_greeting_logged", options.greeting)
    client.log_metric(context.run_id, "toy_answers", counted["answers"])
    client.log_artifact(context.run_id, str(context.run_dir / FOLDER / "toy.json"), FOLDER)


TOY = register_extension(RunExtension(
    name="toy", description="counts the judged answers", key="toy", model=ToyOptions,
    stage=ExtensionStage("after_judge", run, FOLDER, (__name__,)), plan=planned,
    verdict=(VerdictSection("end", section),), mlflow=MlflowPayload(log)))
'''


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy module, imported (and so registered) for one test, then taken out of the registry."""
    folder = tmp_path / "extension"
    folder.mkdir()
    (folder / "toy_extension.py").write_text(TOY_MODULE)
    monkeypatch.syspath_prepend(str(folder))
    module = importlib.import_module("toy_extension")
    yield module
    unregister_extension("toy")
    sys.modules.pop("toy_extension", None)


def toy_config(path: Path, tracking_uri: str) -> Path:
    """The shipped demo config with a `toy:` block; integer QR marks, no hypotheses, no GQM (CI time)."""
    config = yaml.safe_load((REPO / "configs" / "cpu-demo.yaml").read_text())
    config["judge"].update(scoring="integer")
    config["judge"]["ccrs"]["metrics"] = ["QR"]
    config.update(gqm_goals=None, toy={"calls": CALLS, "greeting": "hi"})
    config["stats"] = {**config["stats"], "b": 200, "hypotheses": None}
    config["mlflow"] = {**config["mlflow"], "experiment": "ccrs-toy-extension", "tracking_uri": tracking_uri}
    path.write_text(yaml.safe_dump(config))
    return path


def test_a_registered_extension_adds_a_top_level_block_and_unknown_keys_stay_refused(toy):
    config = load_config(None, {"toy": {"calls": 2}})
    assert toy.TOY.block(config) == toy.ToyOptions(calls=2) and toy.TOY.enabled(config)
    assert json.loads(config.model_dump_json())["toy"] == {"calls": 2, "greeting": "hello"}
    assert load_config(None).extension_block("toy") is None and not toy.TOY.enabled(load_config(None))
    with pytest.raises(ConfigError, match="toy"):
        load_config(None, {"toy": {"calls": 2, "volume": 11}})
    with pytest.raises(ConfigError, match="Extra inputs are not permitted"):
        load_config(None, {"toys": {"calls": 2}})
    unregister_extension("toy")
    with pytest.raises(ConfigError, match="Extra inputs are not permitted"):
        load_config(None, {"toy": {"calls": 2}})


def test_the_built_in_extensions_are_found_on_disk_and_their_stages_written_by_the_module_they_name():
    assert list(extensions()) == ["preflight", "repeats", "probes", "gqm"]
    writers = run_stage_calls()
    for extension in extensions().values():
        if extension.stage is not None:
            module = extension.stage.code[0]
            assert writers[extension.stage.folder] == module.replace(".", "/") + ".py", extension.name


EXTENSION_NAMES = {  # what the four readers of the registry may not name: config keys, stage folders, names
    "preflight": (r"judge\.preflight", r"\bpreflight\b", r"\bcalibration_gate\b", r"tasks\.calibration"),
    "repeats": (r"judge\.repeats", r"\brepeats_note\b", r"\bJudge noise\b", r"\brepeats_label\b"),
    "probes": (r"\bprobes\b", r"\bbias_probes\b", r"\bprobe_report\b"),
    "gqm": (r"\bgqm_goals\b", r"\bgqm_report\b", r"\bGQM\b"),
}
READERS = ("pipelines/pipeline.py", "pipelines/reporting/track.py", "pipelines/reporting/verdict.py",
           "pipelines/tools/cost_plan.py")


def test_the_pipeline_track_stage_verdict_and_cost_plan_name_no_extension():
    assert set(EXTENSION_NAMES) == set(extensions())
    found = [f"{path}:{number}: {name} ({line.strip()})" for path in READERS
             for number, line in enumerate((REPO / path).read_text().splitlines(), 1)
             for name, patterns in EXTENSION_NAMES.items() if any(re.search(p, line) for p in patterns)]
    assert not found, "\n".join(found)


@pytest.mark.llm
def test_a_toy_extension_is_planned_run_in_the_verdict_and_in_mlflow(toy, tmp_path, llm_endpoint):
    from mlflow.tracking import MlflowClient

    from ccrs_eval import evaluate
    from pipelines.tools.cost_plan import cost_plan

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    config = toy_config(tmp_path / "config.yaml", uri)
    plan = cost_plan(load_config(config), 4, sample_size=2)
    assert [stage["stage"] for stage in plan["stages"]][-2:] == ["judge_ccrs", "toy"]
    planned = plan["stages"][-1]
    assert planned["calls"] == CALLS and planned["notes"][0] == f"toy: {CALLS} calls"

    result = evaluate(EXAMPLE, config=config, limit=2, llm_base_url=llm_endpoint.base_url,
                      run_dir=tmp_path / "run")
    counted = json.loads((result.run_dir / "toy" / "toy.json").read_text())
    assert counted == {"greeting": "hi", "answers": 4}  # 2 questions x 2 systems
    assert result.verdict.endswith("## Toy\n\n4 answers counted.\n")
    assert (result.run_dir / "summary.md").read_text() == result.verdict

    client = MlflowClient(uri)
    run = client.get_run(result.mlflow_run_id)
    assert run.data.params["toy_greeting_logged"] == "hi" and run.data.params["toy.calls"] == str(CALLS)
    assert run.data.metrics["toy_answers"] == 4.0
    assert [a.path for a in client.list_artifacts(run.info.run_id, "toy")] == ["toy/toy.json"]
