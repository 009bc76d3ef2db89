"""The run configuration: one pydantic model (extra="forbid") composed of the components' typed
parameters, loaded from YAML and validated before any work starts."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializationInfo,
    ValidationError,
    model_serializer,
    model_validator,
)

from infra.serving import ServingConfig
from judges.bias_probes import ProbesConfig
from judges.config import (
    OPENAI_COMPATIBLE_JUDGE,
    ClientConfig,
    EndpointSystemConfig,
    JudgeConfig,
    ReaderConfig,
)
from judges.suite import get_suite, suites
from pipelines.extensions.registry import config_blocks
from pipelines.resources import (  # noqa: F401 - the paths, imported from here by the commands
    BUILTIN_UNIT_TESTS,
    REPO_ROOT,
    RESOURCE_ROOT,
    unit_tests_path,
)
from retrievers.config import ChunkingConfig, DatasetConfig, EmbedderConfig, IndexConfig, RetrievalConfig
from tasks.runtime.layout import PIPELINE_STAGES as STAGES  # noqa: F401 - the --from-stage choices

DEFAULT_CONFIG = RESOURCE_ROOT / "configs" / "cpu-demo.yaml"


class ConfigError(ValueError):
    """A run configuration that cannot be used; the message names the file and the offending key."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StatsConfig(_Strict):
    b: int = Field(default=10_000, ge=100)
    seed: int = 0
    alpha: float = Field(default=0.05, gt=0, lt=1)
    hypotheses: str | None = Field(default=None, description="YAML hypotheses file (see configs/hypotheses)")


class MlflowConfig(_Strict):
    tracking_uri: str | None = Field(default=None, description="None: $MLFLOW_TRACKING_URI or ./mlflow.db")
    experiment: str = "ccrs-bioasq"
    run_name: str | None = None
    series: str | None = Field(default=None, min_length=1, description="the nightly series of the run "
                               "(tag ccrs.series): `previous` finds a baseline among its runs; None: the "
                               "experiment")

    def resolved_uri(self, base: Path) -> str:
        uri = self.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
        return uri or f"sqlite:///{(base / 'mlflow.db').resolve()}"

    def resolved_series(self) -> str:
        """The run's series: `series`, else the experiment (one experiment, one series)."""
        return self.series or self.experiment


class RayConfig(_Strict):
    address: str | None = Field(default=None, description="None: $RAY_ADDRESS or a local Ray")
    num_cpus: int | None = Field(default=None, ge=1)


class RunConfig(_Strict):
    name: str = "ccrs-cpu-demo"
    run_dir: str = "runs/{name}"
    dataset: DatasetConfig = DatasetConfig()
    chunking: ChunkingConfig = ChunkingConfig()
    embedder: EmbedderConfig = EmbedderConfig()
    index: IndexConfig = IndexConfig()
    retrieval: RetrievalConfig = RetrievalConfig()
    serving: ServingConfig = ServingConfig()
    client: ClientConfig = ClientConfig()
    readers: list[ReaderConfig] = Field(default_factory=list, description="readers x retrievers = the "
                                        "built-in systems A, B, ...; [] when `systems` are given")
    systems: list[EndpointSystemConfig] = Field(default_factory=list, description="the user's own RAG "
                                                "services, each a system of the run (docs/evaluate.md)")
    judge: JudgeConfig = JudgeConfig()
    stats: StatsConfig = StatsConfig()
    mlflow: MlflowConfig = MlflowConfig()
    ray: RayConfig = RayConfig()
    judges: list[str] = Field(default=["ccrs"], min_length=1, description="judge suites (`ccrs metrics`)")
    gqm_goals: str | None = Field(default="configs/gqm/ccrs-hybrid-goals.yaml",
                                  description="GQM goal tree reported into the MLflow run; null turns it off")
    probes: ProbesConfig | None = Field(default=None, description="judge bias probes after the judge stage "
                                        "(docs/probes.md); null (the default): none")
    # the top-level blocks of run extensions that declare one (pipelines/extensions/): {key: block}
    _extension_blocks: dict[str, Any] = PrivateAttr(default_factory=dict)

    @model_validator(mode="wrap")
    @classmethod
    def _registered_extension_blocks(cls, data: Any, handler) -> "RunConfig":
        """A registered run extension's top-level block (one RunConfig has no field for), validated by the
        model it declares; any other unknown key is refused as ever (extra="forbid")."""
        blocks = {}
        if isinstance(data, dict):
            declared = {key: model for key, model in config_blocks().items() if key not in cls.model_fields}
            data = dict(data)
            for key in declared.keys() & data.keys():
                value = data.pop(key)
                try:
                    blocks[key] = None if value is None else declared[key].model_validate(value)
                except ValidationError as exc:
                    raise ValueError(f"{key}: {exc}") from exc
        config = handler(data)
        if blocks:
            config._extension_blocks = blocks
        return config

    @model_serializer(mode="wrap")
    def _with_extension_blocks(self, handler, info: SerializationInfo) -> dict[str, Any]:
        data = handler(self)
        for key, block in self._extension_blocks.items():
            data[key] = None if block is None else block.model_dump(mode=info.mode)
        return data

    def extension_block(self, key: str) -> Any:
        """The top-level block `key` of a registered run extension (None where the config has none)."""
        return self._extension_blocks.get(key)

    @model_validator(mode="after")
    def _registered_suites_and_metrics(self) -> "RunConfig":
        registered = suites()
        unknown = [name for name in self.judges if name not in registered]
        if unknown:
            raise ValueError(f"judges: unknown suite(s) {unknown}; registered: {list(registered)}")
        if len(set(self.judges)) != len(self.judges):
            raise ValueError(f"judges: each suite once, got {self.judges}")
        checks = {"ccrs": self.judge.ccrs.metrics, "vera": [f"vera_{m}" for m in self.judge.vera.metrics]}
        for suite, chosen in checks.items():
            known = get_suite(suite).metrics
            wrong = [m for m in chosen if m not in known]
            if wrong:
                raise ValueError(f"judge metrics {wrong} are not {suite} metrics; choose from {list(known)}")
        return self

    @model_validator(mode="after")
    def _sequential_metrics_judged(self) -> "RunConfig":
        sequential = self.judge.sequential
        if sequential is None or sequential.metrics is None:
            return self
        judged = [metric for name in self.judges for metric in get_suite(name).selected_metrics(self.judge)]
        wrong = [metric for metric in sequential.metrics if metric not in judged]
        if wrong or not sequential.metrics:
            raise ValueError(f"judge.sequential.metrics {wrong or '[]'}: name metrics this run judges, "
                             f"from {judged}")
        return self

    @model_validator(mode="after")
    def _runnable_judge_settings(self) -> "RunConfig":
        """Each selected suite checks the judge settings it reads (prompt version, layout, templates)."""
        for name in self.judges:
            get_suite(name).check_config(self.judge)
        return self

    @model_validator(mode="after")
    def _preflight_tests_load(self) -> "RunConfig":
        """The calibration gate's unit tests load before any work (a bad line is named here, not after
        hours of retrieval and generation)."""
        if self.judge.preflight is not None:
            from tasks.calibration import load_preflight_tests

            load_preflight_tests(unit_tests_path(self.judge.preflight.tests))
        return self

    @model_validator(mode="after")
    def _reader_prompts(self) -> "RunConfig":
        """A reader's `prompt: auto` becomes citing where GroUSE judges the answers (its faithfulness,
        positive acceptance and negative rejection read [i] citations and its refusal sentence), else
        paper (CCRS Figure 1)."""
        style = "citing" if "grouse" in self.judges else "paper"
        self.readers = [reader.model_copy(update={"prompt": style}) if reader.prompt == "auto" else reader
                        for reader in self.readers]
        return self

    @model_validator(mode="after")
    def _unique_readers(self) -> "RunConfig":
        names = [reader.name for reader in self.readers]
        if len(set(names)) != len(names):
            raise ValueError(f"reader names must be unique, got {names}")
        return self

    @model_validator(mode="after")
    def _systems_to_evaluate(self) -> "RunConfig":
        if not self.readers and not self.systems:
            raise ValueError("readers: give at least one reader, or `systems:` of kind endpoint")
        names = [system.name for system in self.systems]
        if len(set(names)) != len(names):
            raise ValueError(f"systems: names must be unique, got {names}")
        built_in = [name for name in names if len(name) == 1 and name.isupper()]
        if built_in:
            raise ValueError(f"systems: names {built_in} are the labels of built-in systems (A, B, ...); "
                             "choose longer names")
        return self

    def needs_llm_endpoint(self, generates: bool = True) -> bool:
        """Whether the run needs the shared endpoint (the Serve app, or serving.base_url): an LLM reader
        when it generates (`ccrs evaluate` does not), or a judge without an endpoint of its own."""
        llm_readers = generates and any(reader.kind == "llm" for reader in self.readers)
        return llm_readers or self.judge.base_url is None

    def resolved_run_dir(self, base: Path | None = None) -> Path:
        path = Path(self.run_dir.format(name=self.name))
        return path if path.is_absolute() else (base or Path.cwd()) / path


def judge_overrides(config: str | Path | None, judge_base_url: str | None,
                    scoring: str | None = None) -> dict[str, Any]:
    """The judge settings a command's options decide (`ccrs run`, `evaluate`, `nightly`, the Python API):
    a judge at an endpoint the user names with no config of theirs gets the defaults that fit an unknown
    judge (judges.config.OPENAI_COMPATIBLE_JUDGE) in place of the CPU demo's; `scoring` then wins."""
    overrides: dict[str, Any] = {}
    if config is None and judge_base_url:
        overrides.update({f"judge.{key}": value for key, value in OPENAI_COMPATIBLE_JUDGE.settings.items()})
    if scoring:
        overrides["judge.scoring"] = scoring
    return overrides


def load_config(path: str | Path | None = None, overrides: dict | None = None) -> RunConfig:
    """Load and validate a YAML run config; `overrides` are dotted keys, e.g. {"dataset.limit": 5}."""
    path = Path(path) if path else DEFAULT_CONFIG
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError as exc:
        raise ConfigError(f"config file not found: {path}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: top level must be a mapping, got {type(raw).__name__}")
    for dotted, value in (overrides or {}).items():
        _set_dotted(raw, dotted, value)
    try:
        return RunConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"{path}: invalid config:\n{exc}") from exc


class _BlockOn:
    """An override value that turns a block on: the config's own block where it has one, else its defaults
    (`--sequential`: judge.sequential as configured, or with its defaults)."""

    def __repr__(self) -> str:
        return "BLOCK_ON"


BLOCK_ON = _BlockOn()


def judge_sequential_overrides(sequential) -> dict:
    """judge.sequential as dotted overrides: True turns it on (the config's block, else its defaults), a dict
    also sets its fields (`{"margin": 0.05}`), False turns a config's block off, None leaves the config as it
    is. Behind `--sequential [--margin M] [--look-every N]` and `ccrs_eval.evaluate(sequential=...)`."""
    if sequential is None:
        return {}
    if sequential is False:
        return {"judge.sequential": None}
    if sequential is True:
        return {"judge.sequential": BLOCK_ON}
    if not isinstance(sequential, dict):
        raise ConfigError(f"sequential: expected True, False, None or a dict of judge.sequential fields, "
                          f"got {sequential!r}")
    fields = {f"judge.sequential.{key}": value for key, value in sequential.items()}
    return {"judge.sequential": BLOCK_ON} | fields


def _set_dotted(tree: dict, dotted: str, value) -> None:
    *parents, leaf = dotted.split(".")
    for key in parents:
        if tree.get(key) is None:  # absent, or a block switched off (`sequential: null`)
            tree[key] = {}
        tree = tree[key]
    if value is BLOCK_ON:
        if not isinstance(tree.get(leaf), dict):
            tree[leaf] = {}
        return
    tree[leaf] = value
