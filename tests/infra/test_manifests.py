"""The KubeRay/Kubernetes manifests and the cron recipe parse, reference real configs and CLI
subcommands, and run the same command the README documents."""
import re
import shlex
from pathlib import Path

import pytest
import yaml

from pipelines.cli import SUBCOMMANDS
from pipelines.config import load_config

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "infra" / "k8s"


def _documents(path: Path) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def _ccrs_commands(command_line: str) -> list[list[str]]:
    commands = []
    for part in re.split(r"&&|;", command_line):
        words = shlex.split(part)
        if words and words[0] == "ccrs":
            commands.append(words)
    return commands


@pytest.mark.parametrize("path", sorted(K8S.glob("*.yaml")), ids=lambda p: p.name)
def test_manifest_parses_with_kind_and_api_version(path):
    for doc in _documents(path):
        assert doc.get("apiVersion") and doc.get("kind"), f"{path.name}: document without apiVersion/kind"


def test_rayjob_entrypoint_uses_existing_subcommands_and_configs():
    (rayjob,) = _documents(K8S / "rayjob-nightly.yaml")
    commands = _ccrs_commands(rayjob["spec"]["entrypoint"])
    assert commands, "RayJob entrypoint runs no ccrs command"
    for words in commands:
        assert words[1] in SUBCOMMANDS, f"unknown subcommand {words[1]}"
        if "--config" in words:
            config_path = ROOT / words[words.index("--config") + 1]
            assert config_path.exists(), config_path
            load_config(config_path)


def test_readme_documents_the_nightly_commands():
    readme = ROOT / "README.md"
    (rayjob,) = _documents(K8S / "rayjob-nightly.yaml")
    for words in _ccrs_commands(rayjob["spec"]["entrypoint"]):
        assert " ".join(words) in readme.read_text(), f"README does not show `{' '.join(words)}`"


def test_cronjob_submits_the_rayjob_manifest():
    docs = {doc["kind"]: doc for doc in _documents(K8S / "cronjob-nightly.yaml")}
    container = docs["CronJob"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert container["command"][-1].endswith("rayjob-nightly.yaml")
    assert "rayjobs" in docs["Role"]["rules"][0]["resources"]


def test_cron_recipe_submits_with_ray_job_submit():
    script = (ROOT / "infra" / "cron" / "nightly.sh").read_text()
    assert "ray job submit --working-dir ." in script
    assert "ccrs compare --baseline previous --fail-on-regression" in script


def test_rayservice_mirrors_the_cluster_serving_profile():
    from infra.serving import ServingConfig, llm_config_kwargs

    (service,) = _documents(K8S / "rayservice-llm.yaml")
    (app,) = yaml.safe_load(service["spec"]["serveConfigV2"])["applications"]
    assert app["import_path"] == "ray.serve.llm:build_openai_app"
    manifest = {c["model_loading_config"]["model_id"]: c for c in app["args"]["llm_configs"]}
    cluster = ServingConfig.for_profile("cluster")
    assert sorted(manifest) == sorted(cluster.model_ids())
    for model in cluster.models:
        expected = llm_config_kwargs(model, "cluster")
        deployed = manifest[model.model_id]
        assert deployed["engine_kwargs"] == expected["engine_kwargs"], model.model_id
        assert deployed["deployment_config"] == expected["deployment_config"], model.model_id  # router too
        assert deployed["accelerator_type"] == expected["accelerator_type"], model.model_id
