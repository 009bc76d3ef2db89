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
from pipelines.extensions.registry import config_blocks, validate_blocks
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
    # the blocks of run extensions that declare one the config has no field for (pipelines/extensions/):
    # {dotted key: block}
    _extension_blocks: dict[str, Any] = PrivateAttr(default_factory=dict)

    @model_validator(mode="wrap")
    @classmethod
    def _registered_extension_blocks(cls, data: Any, handler) -> "RunConfig":
        """A registered run extension's block that the config has no field for, at its top level or inside
        one of its blocks (`judge.sequential`), validated by the model it declares, its errors placed at its
        key as a field's are; any other unknown key is refused as ever (extra="forbid")."""
        blocks, errors = {}, []
        if isinstance(data, dict):
            for key, model in _unfielded_blocks().items():
                data, value = _popped(data, key)
                if value is _ABSENT or value is None:  # off: as absent (no block of its own has a default)
                    continue
                try:
                    blocks[key] = model.model_validate(value)
                except ValidationError as exc:
                    errors += _located(exc, key.split("."))
        try:
            config = handler(data)
        except ValidationError as exc:
            if not errors:
                raise
            errors += _located(exc, [])
        if errors:
            raise ValidationError.from_exception_data(cls.__name__, errors)
        if blocks:
            config._extension_blocks = blocks
        return config

    @model_serializer(mode="wrap")
    def _with_extension_blocks(self, handler, info: SerializationInfo) -> dict[str, Any]:
        """The blocks with the config's own; one inside a block is there off too (null), as the block's own
        optional fields are."""
        data = handler(self)
        for key in _unfielded_blocks():
            block = self._extension_blocks.get(key)
            if key in self._extension_blocks or "." in key:
                _put(data, key, None if block is None else block.model_dump(mode=info.mode))
        return data

    def extension_block(self, key: str) -> Any:
        """The block `key` (dotted) of a registered run extension (None where the config has none)."""
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
    def _extension_blocks_fit_the_run(self) -> "RunConfig":
        validate_blocks(self)
        return self

    @model_validator(mode="after")
    def _runnable_judge_settings(self) -> "RunConfig":
        """Each selected suite checks the judge settings it reads (prompt version, layout, templates)."""
        for name in self.judges:
            get_suite(name).check_config(self.judge)
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


_ABSENT = object()  # a block the config does not give


def _unfielded_blocks() -> dict[str, type[BaseModel]]:
    """{dotted key: model} of the extensions' blocks that RunConfig has no field for: at its top level, or
    inside a block of it that has no such field (`judge.sequential`)."""
    return {key: model for key, model in config_blocks().items() if not _is_field(RunConfig, key.split("."))}


def _is_field(model: type[BaseModel], path: list[str]) -> bool:
    field = model.model_fields.get(path[0])
    if field is None:
        return False
    inner = field.annotation
    return len(path) == 1 or (isinstance(inner, type) and issubclass(inner, BaseModel)
                              and _is_field(inner, path[1:]))


def _popped(data: dict, key: str) -> tuple[dict, Any]:
    """`data` without the block at dotted `key` (copied where it changes) and the block (_ABSENT: none)."""
    head, _, rest = key.partition(".")
    if head not in data:
        return data, _ABSENT
    if not rest:
        data = dict(data)
        return data, data.pop(head)
    if not isinstance(data[head], dict):
        return data, _ABSENT
    inner, value = _popped(data[head], rest)
    return {**data, head: inner}, value


def _put(data: dict, key: str, value: Any) -> None:
    *parents, leaf = key.split(".")
    for name in parents:
        data = data.get(name)
        if not isinstance(data, dict):
            return  # the parent left out of the dump (include/exclude)
    data[leaf] = value


def _located(exc: ValidationError, at: list[str]) -> list[dict]:
    """`exc`'s errors as line errors placed under the key `at`."""
    return [{"type": error["type"], "loc": (*at, *error["loc"]), "input": error["input"],
             **({"ctx": error["ctx"]} if "ctx" in error else {})} for error in exc.errors()]


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
