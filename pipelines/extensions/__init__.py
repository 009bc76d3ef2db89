"""Run extensions: the optional parts of a run (the calibration gate, judge repeats, the bias probes, the
GQM report), one module each, declared in the registry of pipelines/extensions/registry.py."""
from pipelines.extensions.registry import (
    WHEN,
    ExtensionStage,
    MlflowPayload,
    PlannedCalls,
    RunExtension,
    StageContext,
    check_before_work,
    config_blocks,
    config_paths,
    enabled,
    extensions,
    planned_calls,
    register_extension,
    run_stages,
    run_tags,
    track_payloads,
    unregister_extension,
    verdict_sections,
)

__all__ = [
    "WHEN", "ExtensionStage", "MlflowPayload", "PlannedCalls", "RunExtension", "StageContext",
    "check_before_work", "config_blocks", "config_paths", "enabled", "extensions", "planned_calls",
    "register_extension", "run_stages", "run_tags", "track_payloads", "unregister_extension",
    "verdict_sections",
]
