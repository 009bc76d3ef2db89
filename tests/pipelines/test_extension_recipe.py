"""The recipe of docs/architecture.md, "Add a run extension": one module declares it (a config block, a stage
after the judge stages that writes a file, the judge calls it plans, a verdict section, an MLflow param,
metric and artifact), importing the module registers it, and the cost plan, the pipeline, the verdict and
MLflow pick it up with no other file edited. So do a toy judge-loop policy and a toy statistics contributor
(each with a config block and a command option of its own): in the judge stage and its key, stats.json,
the verdict, MLflow and the gate. Each module is written into a temporary folder here. And the core names
no extension, by the names each declares."""
from __future__ import annotations

import argparse
import importlib
import json
import re
import sys
from pathlib import Path

import pandas as pd
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
    """The shipped demo config with the toys' blocks (`toy:`, `toy_loop:`, `toy_share:`); integer QR marks, no
    hypotheses, no GQM (CI time)."""
    config = yaml.safe_load((REPO / "configs" / "cpu-demo.yaml").read_text())
    config["judge"].update(scoring="integer")
    config["judge"]["ccrs"]["metrics"] = ["QR"]
    config.update(gqm_goals=None, toy={"calls": CALLS, "greeting": "hi"}, toy_loop={"first": 2},
                  toy_share={"bar": 0.5})
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
    assert list(extensions()) == ["preflight", "repeats", "probes", "gqm", "labels", "sequential", "unpaired",
                                 "traces"]
    writers = run_stage_calls()
    for extension in extensions().values():
        if extension.stage is not None:
            module = extension.stage.code[0]
            assert writers[extension.stage.folder] == module.replace(".", "/") + ".py", extension.name


# The core: what runs every run and every command, where no feature may be named (each extension's `names`,
# outside its `own` files; the gate and the cost plan are packages, every module of them core). What is left
# to move, each (extension, file) once: nothing.
CORE = ("pipelines/pipeline.py", "pipelines/reporting/track.py", "pipelines/reporting/verdict.py",
        "pipelines/reporting/tracking.py", "tasks/judge.py", "tasks/reduce.py", "pipelines/options.py",
        *sorted(str(path.relative_to(REPO)) for pattern in ("tools/gate/*.py", "tools/planning/cost*.py")
                for path in (REPO / "pipelines").glob(pattern)),
        *sorted(str(path.relative_to(REPO)) for path in (REPO / "pipelines").glob("*_cmd.py")))
NOT_YET_MOVED: set[tuple[str, str]] = set()


def named_in_the_core() -> dict[tuple[str, str], list[str]]:
    """{(extension, file): the lines of the core that use one of the extension's names}."""
    found: dict[tuple[str, str], list[str]] = {}
    for extension in extensions().values():
        for path in (path for path in CORE if path not in extension.own):
            for number, line in enumerate((REPO / path).read_text().splitlines(), 1):
                if any(re.search(pattern, line) for pattern in extension.names):
                    found.setdefault((extension.name, path), []).append(f"{path}:{number}: {line.strip()}")
    return found


def test_the_core_names_no_extension_by_the_names_each_declares():
    assert all(extension.names for extension in extensions().values())
    found = named_in_the_core()
    named = [line for cell, lines in found.items() if cell not in NOT_YET_MOVED for line in lines]
    assert not named, "\n".join(named)
    moved = NOT_YET_MOVED - set(found)
    assert not moved, f"moved since, take out of NOT_YET_MOVED: {moved}"


TOY_STATISTICS_MODULE = '''
"""A toy statistics contributor: the share of scores above a bar per metric, stats.json["toy_share"]."""
import json

import pandas as pd
from pydantic import BaseModel, ConfigDict

from pipelines.extensions import CommandOptions, ExtensionOption, GateCells, RunExtension, register_extension
from pipelines.option_schema import Option
from pipelines.reporting.tracking import MetricsContribution
from pipelines.reporting.verdict import VerdictSection
from tasks.runtime.contributions import StatisticsContributor
from tasks.runtime.layout import RunLayout


class ToyShareOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    bar: float = 0.5


def block(context):
    config = RunLayout(context.run_dir).config_json if context.run_dir else None
    options = TOY_SHARE.block(json.loads(config.read_text())) if config and config.exists() else None
    if options is None:
        return None
    scores = pd.concat([pd.read_parquet(path) for path in context.scores_paths])
    return {"bar": options.bar, "share": {str(metric): float((rows["score"] > options.bar).mean())
                                          for metric, rows in scores.groupby("metric")}}


def section(inputs):
    toy = inputs.stats.get("toy_share")
    return f"## Toy share\\n\\nAbove {toy['bar']}: {toy['share']}." if toy else ""


def metrics(stats):
    shares = stats.get("toy_share", {}).get("share", {})
    return {f"toy_share_{metric}": share for metric, share in shares.items()}


def gate(table, inputs):
    if not (inputs.run_stats or {}).get("toy_share"):
        return table
    toy = table["metric"] == "QR"
    basis = table["basis"] if "basis" in table else pd.Series("judge", index=table.index)
    return table.assign(basis=basis.where(~toy, "toy"), verdict=table["verdict"].where(~toy, "same"))


def overrides(values, command):
    return {} if values.get("toy_bar") is None else {"toy_share.bar": values["toy_bar"]}


TOY_SHARE = register_extension(RunExtension(
    name="toy_share", description="the share of scores above a bar", key="toy_share", model=ToyShareOptions,
    statistics=StatisticsContributor("toy_share", key="toy_share", block=block, code=(__name__,)),
    verdict=(VerdictSection("means", section),), metrics=MetricsContribution(run_metrics=metrics),
    gate=GateCells(gate, "toy", "toy cells (basis `toy`): QR is never a regression here."),
    options=CommandOptions((ExtensionOption(Option("--toy-bar", "the toy's bar",
                                                   {"type": float, "metavar": "B"}),
                                            ("run", "evaluate")),), overrides),
    names=(r"toy_share",)))
'''

TOY_LOOP_MODULE = '''
"""A toy judge-loop policy: one question a look, the stage stops after the first `first` questions."""
import json

from pydantic import BaseModel, ConfigDict

from pipelines.extensions import CommandOptions, ExtensionOption, JudgeLoop, RunExtension, register_extension
from pipelines.option_schema import Option
from tasks.runtime.judge_loop import JudgeLoopPolicy


class ToyLoopOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    first: int = 1


class FirstQuestions(JudgeLoopPolicy):
    def __init__(self, first):
        self.first = first

    def looks(self, generations, batch_samples):
        return [[question] for look in super().looks(generations, batch_samples) for question in look]

    def stop_after(self, parts, judged):
        return len(judged) >= self.first

    def record(self, out_dir, judged):
        (out_dir / "toy_loop.json").write_text(json.dumps({"judged": judged}))
        return {"toy_loop_judged": judged}

    def key_settings(self):
        return {"toy_loop": {"first": self.first}}


def policy(context):
    return FirstQuestions(TOY_LOOP.block(context.config).first)


def overrides(values, command):
    return {} if values.get("toy_first") is None else {"toy_loop.first": values["toy_first"]}


TOY_LOOP = register_extension(RunExtension(
    name="toy_loop", description="judges the first questions only", key="toy_loop", model=ToyLoopOptions,
    judge_loop=JudgeLoop(policy, lambda summary: f"; toy: {summary.get('toy_loop_judged')} judged"),
    options=CommandOptions((ExtensionOption(Option("--toy-first", "questions judged",
                                                   {"type": int, "metavar": "N"}),
                                            ("run", "evaluate")),), overrides),
    names=(r"toy_loop",)))
'''


def _imported(tmp_path, monkeypatch, name: str, text: str):
    folder = tmp_path / "extension"
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.py").write_text(text)
    monkeypatch.syspath_prepend(str(folder))
    return importlib.import_module(name)


@pytest.fixture
def toy_share(tmp_path, monkeypatch):
    yield _imported(tmp_path, monkeypatch, "toy_share_extension", TOY_STATISTICS_MODULE)
    unregister_extension("toy_share")
    sys.modules.pop("toy_share_extension", None)


@pytest.fixture
def toy_loop(tmp_path, monkeypatch):
    yield _imported(tmp_path, monkeypatch, "toy_loop_extension", TOY_LOOP_MODULE)
    unregister_extension("toy_loop")
    sys.modules.pop("toy_loop_extension", None)


def test_a_toy_statistics_contributor_is_in_stats_json_the_verdict_mlflow_and_the_gate(toy_share, tmp_path,
                                                                                        mlflow_db):
    from mlflow.tracking import MlflowClient

    from pipelines import options
    from pipelines.extensions import GateInputs
    from pipelines.pipeline import _conclude
    from pipelines.tools.gate.decide import contributed_cells
    from tests.pipelines.test_recorded_run_contents import recorded_run

    parser = argparse.ArgumentParser()
    options.add_extensions(parser, "evaluate")
    overrides = options.extension_overrides(parser.parse_args(["--toy-bar", "0.6"]), "evaluate")
    assert overrides == {"toy_share.bar": 0.6}

    uri = mlflow_db
    config, answers, judged = recorded_run(tmp_path / "run", uri, overrides)
    result = _conclude(config, tmp_path / "run", answers, judged, None)
    stats = json.loads((result.stats_dir / "stats.json").read_text())
    assert stats["toy_share"]["bar"] == 0.6 and set(stats["toy_share"]["share"]) == {"CC", "QR"}
    assert "## Toy share\n\nAbove 0.6" in result.summary_path.read_text()
    logged = MlflowClient(uri).get_run(result.tracked["run_id"]).data
    assert logged.metrics["toy_share_CC"] == stats["toy_share"]["share"]["CC"]
    assert logged.params["toy_share.bar"] == "0.6"

    table = pd.DataFrame({"system": ["A", "A"], "metric": ["CC", "QR"], "diff": [-0.2, -0.3],
                          "verdict": ["regression", "regression"]})
    gated, notes = contributed_cells(table, GateInputs(stats, lambda: None, "base", 0.05))
    assert gated["verdict"].tolist() == ["regression", "same"] and gated["basis"].tolist() == ["judge", "toy"]
    assert notes == ["toy cells (basis `toy`): QR is never a regression here."]


def test_a_toy_judge_loop_policy_is_handed_to_the_judge_stage_and_keyed_by_what_it_declares(toy_loop):
    from judges.config import ClientConfig
    from pipelines import options
    from pipelines.extensions import judge_loop_line, judge_loop_policy
    from tasks.judge import judging_key
    from tasks.runtime.judge_loop import BOUNDED_BATCHES

    parser = argparse.ArgumentParser()
    options.add_extensions(parser, "run")
    config = load_config(None, options.extension_overrides(parser.parse_args(["--toy-first", "2"]), "run"))
    policy = judge_loop_policy(config, "ccrs", ("CC",))
    assert isinstance(policy, toy_loop.FirstQuestions) and policy.first == 2
    assert judge_loop_policy(load_config(None), "ccrs", ("CC",)) is BOUNDED_BATCHES
    assert judge_loop_line(config, {"toy_loop_judged": 2}) == "; toy: 2 judged"
    inputs = tuple(Path(__file__) for _ in range(3))
    def key(settings=None):
        return judging_key("ccrs", inputs, config.judge, ClientConfig(), 3, None, settings)

    assert key(BOUNDED_BATCHES.key_settings()) == key() != key(policy.key_settings())


@pytest.mark.llm
def test_a_toy_extension_is_planned_run_in_the_verdict_and_in_mlflow(toy, toy_loop, toy_share, tmp_path,
                                                                     llm_endpoint, mlflow_db):
    """The three toys at once, on the real stack: the stage extension, the judge-loop policy (2 of the 3
    questions judged) and the statistics contributor (over the judged ones)."""
    from mlflow.tracking import MlflowClient

    from ccrs_eval import evaluate
    from pipelines.tools.planning.cost import cost_plan

    uri = mlflow_db  # tmp_path/mlflow.db, a copy of the session's empty store
    config = toy_config(tmp_path / "config.yaml", uri)
    plan = cost_plan(load_config(config), 4, sample_size=2)
    assert [stage["stage"] for stage in plan["stages"]][-2:] == ["judge_ccrs", "toy"]
    planned = plan["stages"][-1]
    assert planned["calls"] == CALLS and planned["notes"][0] == f"toy: {CALLS} calls"

    result = evaluate(EXAMPLE, config=config, limit=3, llm_base_url=llm_endpoint.base_url,
                      out=tmp_path / "run")
    counted = json.loads((result.run_dir / "toy" / "toy.json").read_text())
    assert counted == {"greeting": "hi", "answers": 6}  # 3 questions x 2 systems
    assert result.verdict.endswith("## Toy\n\n6 answers counted.\n")
    assert (result.run_dir / "summary.md").read_text() == result.verdict
    stats = json.loads((result.run_dir / "reduce" / "stats.json").read_text())
    assert stats["n_queries"] == 2 and result.verdict.startswith("# Verdict: ")  # the policy stopped
    assert json.loads((result.run_dir / "judge_ccrs" / "toy_loop.json").read_text()) == {"judged": 2}
    assert stats["toy_share"]["bar"] == 0.5 and "## Toy share" in result.verdict

    client = MlflowClient(uri)
    run = client.get_run(result.mlflow_run_id)
    assert run.data.params["toy_greeting_logged"] == "hi" and run.data.params["toy.calls"] == str(CALLS)
    assert run.data.metrics["toy_answers"] == 6.0
    assert run.data.metrics["judge_ccrs_toy_loop_judged"] == 2.0
    assert run.data.metrics["toy_share_QR"] == stats["toy_share"]["share"]["QR"]
    assert [a.path for a in client.list_artifacts(run.info.run_id, "toy")] == ["toy/toy.json"]
