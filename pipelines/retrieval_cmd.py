"""`ccrs index` (ingest, chunk, embed, index) and `ccrs retrieve` (the same, then top-k retrieval and
retrieval metrics). Both reuse finished stages of the run directory unless --force; the log records of Ray
and the embedders go to <run dir>/logs/console.log."""
from __future__ import annotations

import argparse
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from infra.console import say
from pipelines import options
from retrievers.config import (
    ChunkingConfig, DatasetConfig, EmbedderConfig, IndexConfig, RetrievalConfig, RetrievalSpec,
)

class RetrievalCommandConfig(BaseModel):
    """The retrieval part of a run config (same keys as the full run config's)."""

    model_config = ConfigDict(extra="forbid")

    dataset: DatasetConfig = DatasetConfig()
    chunking: ChunkingConfig = ChunkingConfig()
    embedder: EmbedderConfig = EmbedderConfig()
    index: IndexConfig = IndexConfig()
    retrieval: RetrievalConfig = RetrievalConfig()


def add_arguments(parser: argparse.ArgumentParser, name: str) -> None:
    options.add_config(parser, name)
    options.add_dataset(parser, name)
    options.add_out(parser, name, aliases=("--run-dir",))
    options.add(parser, name, "--force", "--no-progress")
    if name == "retrieve":
        options.add(parser, name, "--top-k")


def console_log(args: argparse.Namespace) -> Path:
    from tasks.runtime.layout import RunLayout

    return RunLayout(args.out).console_log


def load_command_config(path: Path | None) -> RetrievalCommandConfig:
    """The retrieval blocks of `path`: a YAML of only those blocks, or a whole run config (validated as
    one: `ccrs index --config run.yaml` builds the index `ccrs run --config run.yaml` would)."""
    if path is None:
        return RetrievalCommandConfig()
    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as err:
        raise ValueError(f"{path}: {err}") from None
    if not isinstance(data, dict):
        raise TypeError(f"{path}: expected a mapping with keys dataset/chunking/embedder/index/retrieval")
    if set(data) - set(RetrievalCommandConfig.model_fields):
        return _retrieval_blocks_of_run_config(path)
    try:
        return RetrievalCommandConfig.model_validate(data)
    except ValidationError as err:
        raise ValueError(f"{path}: {err}") from None


def _retrieval_blocks_of_run_config(path: Path) -> RetrievalCommandConfig:
    from pipelines.config import load_config

    config = load_config(path)  # ConfigError (a ValueError) names the file and the key
    blocks = RetrievalCommandConfig.model_fields
    return RetrievalCommandConfig(**{name: getattr(config, name) for name in blocks})


def apply_overrides(config: RetrievalCommandConfig, args: argparse.Namespace) -> RetrievalCommandConfig:
    dataset = config.dataset.model_dump()
    if args.dataset:
        dataset["path"] = args.dataset
    if args.limit is not None:
        dataset["limit"] = args.limit
    retrieval = config.retrieval.model_dump()
    if getattr(args, "top_k", None) is not None:
        retrieval["top_k"] = args.top_k
    data = config.model_dump()
    data.update(dataset=dataset, retrieval=retrieval)
    return RetrievalCommandConfig.model_validate(data)


def format_metrics(summary: dict[str, dict[str, float]]) -> str:
    measures = sorted({m for values in summary.values() for m in values})
    lines = ["retriever  " + "  ".join(f"{m:>9}" for m in measures)]
    for retriever, values in sorted(summary.items()):
        lines.append(f"{retriever:<9}  " + "  ".join(f"{values.get(m, float('nan')):9.4f}" for m in measures))
    return "\n".join(lines)


def _print_stages(stages) -> None:
    for stage in stages:
        state = "reused" if stage.reused else f"{stage.seconds:.1f}s"
        say(f"  {stage.name:<18} {state:>8}  {stage.out_dir}")


def main(args: argparse.Namespace) -> int:
    from retrievers.schema import DatasetError
    from retrievers.types import IndexBackendError

    try:
        config = apply_overrides(load_command_config(args.config), args)
    except (TypeError, ValueError) as err:  # pydantic's ValidationError is a ValueError
        say(f"error: {err}", err=True)
        return 2
    try:
        return _run(args, config)
    except (DatasetError, IndexBackendError) as err:
        # Raised inside a Ray task, the error arrives wrapped; its `cause` is the original, without traceback.
        say(f"error: {getattr(err, 'cause', None) or err}", err=True)
        return 1


def _run(args: argparse.Namespace, config: RetrievalCommandConfig) -> int:
    from tasks.retrieval_stages import build_retrieval_index, run_retrieval

    spec = RetrievalSpec.of(config)
    progress = not args.no_progress
    if args.command == "index":
        built = build_retrieval_index(args.out, spec, force=args.force, progress=progress)
        _print_stages(built.stages)
        say(f"indexed: {built.counts}")
        return 0
    outputs = run_retrieval(args.out, spec, force=args.force, progress=progress)
    _print_stages(outputs.stages)
    say(f"counts: {outputs.counts}")
    say(f"retrieved: {outputs.retrieved_path}")
    say(format_metrics(outputs.metrics_summary))
    return 0
