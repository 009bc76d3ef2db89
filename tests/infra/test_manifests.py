"""The nightly deployment as shipped: every KubeRay manifest validates against KubeRay v1.7.0's CRD schemas
(../shared/kuberay-crds), every core Kubernetes manifest against the Kubernetes API schema
(kubernetes-validate), the kustomizations reference what exists (secrets declared with their keys), the
pieces agree with each other (volume, secrets, MLflow service, the RayJob in both schedules) and with the
CLI, the cron recipe and the image."""
from __future__ import annotations

import re
import shlex
from functools import cache
from pathlib import Path

import tomllib

import jsonschema
import kubernetes_validate
import pytest
import yaml

from pipelines.cli import SUBCOMMANDS
from pipelines.config import load_config

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "infra" / "k8s"
CRDS = ROOT.parent / "shared" / "kuberay-crds"
KUBERNETES_VERSION = "1.31"
MANIFESTS = sorted(p for p in K8S.rglob("*.yaml") if p.name != "kustomization.yaml")
KUSTOMIZATIONS = sorted(K8S.rglob("kustomization.yaml"))
RAYJOB = K8S / "nightly-cronjob" / "rayjob-nightly.yaml"


def documents(path: Path) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def by_kind(kind: str) -> list[dict]:
    return [doc for path in MANIFESTS for doc in documents(path) if doc["kind"] == kind]


def ccrs_commands(command_line: str) -> list[list[str]]:
    commands = []
    for part in re.split(r"&&|;", command_line):
        words = shlex.split(part)
        if words and words[0] == "ccrs":
            commands.append(words)
    return commands


# --- schemas ----------------------------------------------------------------------------------------------

def structural_to_json_schema(node):
    """A CRD's OpenAPI v3 structural schema as JSON Schema: `x-kubernetes-int-or-string` admits both
    types, the other x-kubernetes-* keys and int32/int64 formats carry no constraint a validator needs."""
    if isinstance(node, list):
        return [structural_to_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {k: structural_to_json_schema(v) for k, v in node.items()
           if not k.startswith("x-kubernetes-") and not (k == "format" and v in ("int32", "int64"))}
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    return out


def validate_against(doc: dict, schema: dict) -> None:
    """JSON Schema validation without re-checking the (large) schema itself on every call."""
    jsonschema.Draft7Validator(schema).validate(doc)


@cache
def crd_schemas() -> dict[str, dict]:
    """{kind: CRD} (LibYAML's loader: the four CRDs are 2 MB of YAML)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    crds = [yaml.load(path.read_text(), Loader=loader) for path in CRDS.glob("*.yaml")]
    return {crd["spec"]["names"]["kind"]: crd for crd in crds}


def crd_schema(kind: str) -> dict:
    for crd in crd_schemas().values():
        if crd["spec"]["names"]["kind"] == kind:
            (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
            return structural_to_json_schema(version["schema"]["openAPIV3Schema"])
    raise LookupError(kind)


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: str(p.relative_to(K8S)))
def test_every_manifest_validates_against_its_schema(path):
    for doc in documents(path):
        assert doc.get("apiVersion") and doc.get("kind"), f"{path.name}: a document without apiVersion/kind"
        if doc["apiVersion"].startswith("ray.io/"):
            schema = crd_schema(doc["kind"])
            # the API server checks the whole object; metadata is Kubernetes' own (checked by kubectl)
            validate_against({k: v for k, v in doc.items() if k != "metadata"}, schema)
        else:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_the_crd_check_refuses_an_unknown_field_and_a_wrong_type():
    (rayjob,) = documents(RAYJOB)
    schema = crd_schema("RayJob")
    schema["properties"]["spec"]["additionalProperties"] = False  # structural schemas prune unknown fields
    with pytest.raises(jsonschema.ValidationError):
        validate_against({**rayjob, "spec": {**rayjob["spec"], "entrypointt": "x"}}, schema)
    with pytest.raises(jsonschema.ValidationError):
        validate_against({**rayjob, "spec": {**rayjob["spec"], "ttlSecondsAfterFinished": "a week"}},
                         crd_schema("RayJob"))


# --- kustomize: what `kubectl apply -k` reads ---------------------------------------------------------------

@pytest.mark.parametrize("path", KUSTOMIZATIONS, ids=lambda p: str(p.parent.relative_to(K8S)))
def test_every_file_a_kustomization_names_exists(path):
    kustomization = yaml.safe_load(path.read_text())
    folder = path.parent
    for resource in kustomization.get("resources", []):
        assert (folder / resource).exists(), f"{path}: resource {resource} missing"
    for generator in kustomization.get("configMapGenerator", []) + kustomization.get("secretGenerator", []):
        for entry in generator.get("files", []) + generator.get("envs", []):
            name = entry.split("=", 1)[-1]
            # secrets are created by the user from the committed example (the real file is git-ignored)
            assert (folder / name).exists() or (folder / f"{name}.example").exists(), f"{path}: {name}"


def secret_keys() -> dict[str, set[str]]:
    """{secret name: its keys}, from the base kustomization's generators and the example files."""
    base = K8S / "base"
    keys = {}
    for generator in yaml.safe_load((base / "kustomization.yaml").read_text())["secretGenerator"]:
        names = set()
        for env in generator.get("envs", []):
            lines = (base / f"{env}.example").read_text().splitlines()
            names |= {line.split("=", 1)[0] for line in lines if line and not line.startswith("#")}
        names |= {entry.split("=", 1)[0] for entry in generator.get("files", [])}
        keys[generator["name"]] = names
    return keys


def test_every_secret_the_manifests_use_is_declared_with_its_keys():
    keys = secret_keys()
    text = "\n".join(path.read_text() for path in MANIFESTS)
    used = set(re.findall(r"secretRef: \{name: ([\w-]+)\}", text)) | set(re.findall(r"secretName: ([\w-]+)",
                                                                                     text))
    assert used <= set(keys), used - set(keys)
    assert {"CCRS_NOTIFY_URL", "CCRS_JUDGE_API_KEY", "CCRS_LLM_API_KEY"} <= keys["ccrs-secrets"]
    assert {"MLFLOW_BACKEND_STORE_URI", "MLFLOW_ARTIFACTS_DESTINATION", "AWS_SECRET_ACCESS_KEY"} <= keys[
        "ccrs-mlflow"]
    assert keys["hf-token"] == {"token"}
    paper = load_config(ROOT / "configs" / "paper-bioasq.yaml")
    assert {paper.client.api_key_env, paper.judge.api_key_env} <= keys["ccrs-secrets"]


def test_the_cronjob_reads_the_configmap_its_kustomization_generates():
    docs = {doc["kind"]: doc for doc in documents(K8S / "nightly-cronjob" / "cronjob-nightly.yaml")}
    pod = docs["CronJob"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["containers"][0]["command"][-1] == f"/manifests/{RAYJOB.name}"
    kustomization = yaml.safe_load((K8S / "nightly-cronjob" / "kustomization.yaml").read_text())
    generated = kustomization["configMapGenerator"]
    assert pod["volumes"][0]["configMap"]["name"] == generated[0]["name"]
    assert generated[0]["files"] == [RAYJOB.name] and generated[0]["options"]["disableNameSuffixHash"]
    assert "rayjobs" in docs["Role"]["rules"][0]["resources"]


def test_both_schedules_run_the_same_rayjob():
    (rayjob,) = documents(RAYJOB)
    (raycronjob,) = documents(K8S / "nightly-raycronjob" / "raycronjob-nightly.yaml")
    assert raycronjob["spec"]["jobTemplate"] == rayjob["spec"]


# --- the pieces agree ---------------------------------------------------------------------------------------

def test_every_ray_pod_mounts_the_volume_the_paper_config_reads():
    (claim,) = by_kind("PersistentVolumeClaim")
    (cluster,) = by_kind("RayCluster")
    pods = [cluster["spec"]["headGroupSpec"]["template"]["spec"]] + [
        group["template"]["spec"] for group in cluster["spec"]["workerGroupSpecs"]]
    for pod in pods:
        (volume,) = pod["volumes"]
        assert volume["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
        (mount,) = pod["containers"][0]["volumeMounts"]
        assert mount["name"] == volume["name"] and mount["mountPath"] == "/mnt/ccrs"
    paper = load_config(ROOT / "configs" / "paper-bioasq.yaml")
    assert paper.dataset.path.startswith("/mnt/ccrs/") and paper.run_dir.startswith("/mnt/ccrs/")


def test_every_ray_cluster_runs_with_token_authentication():
    """Ray 2.60 starts heads with token authentication on; the manifests ask KubeRay for it (authOptions,
    KubeRay >= 1.5.1, Ray >= 2.52): the operator creates each cluster's token Secret and sets RAY_AUTH_MODE
    and RAY_AUTH_TOKEN on every Ray container and on the submitter of a RayJob that runs on the cluster
    (clusterSelector). A variable set by hand would win over the operator's, so none is (docs/cluster.md)."""
    (cluster,) = by_kind("RayCluster")
    (service,) = by_kind("RayService")
    for spec in (cluster["spec"], service["spec"]["rayClusterConfig"]):
        assert spec["authOptions"] == {"mode": "token"}
        assert tuple(int(part) for part in spec["rayVersion"].split(".")[:2]) >= (2, 52)
    for rayjob in [*documents(RAYJOB), *(doc["spec"]["jobTemplate"] for doc in by_kind("RayCronJob"))]:
        spec = rayjob.get("spec", rayjob)
        assert spec["clusterSelector"] == {"ray.io/cluster": cluster["metadata"]["name"]}
        assert "rayClusterSpec" not in spec
    set_by_hand = {item["name"] for path in MANIFESTS for doc in documents(path) for item in env_entries(doc)}
    assert not set_by_hand & {"RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"}


def env_entries(node) -> list[dict]:
    """Every `env:` entry of every container in a manifest, wherever it is nested."""
    if isinstance(node, list):
        return [entry for item in node for entry in env_entries(item)]
    if not isinstance(node, dict):
        return []
    own = node["env"] if isinstance(node.get("env"), list) else []
    return own + [entry for key, value in node.items() if key != "env" for entry in env_entries(value)]


def test_the_ray_pods_log_to_the_mlflow_service():
    (service,) = by_kind("Service")
    (cluster,) = by_kind("RayCluster")
    head = cluster["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in head["env"]}
    name, port = service["metadata"]["name"], service["spec"]["ports"][0]["port"]
    assert env["MLFLOW_TRACKING_URI"] == f"http://{name}:{port}"
    (deployment,) = by_kind("Deployment")
    command = deployment["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[:2] == ["mlflow", "server"] and "--artifacts-destination" in command


def test_the_rayjob_entrypoint_is_one_nightly_command_the_readme_shows():
    (rayjob,) = documents(RAYJOB)
    (words,) = ccrs_commands(rayjob["spec"]["entrypoint"])
    assert words[1] == "nightly" and words[1] in SUBCOMMANDS
    load_config(ROOT / words[words.index("--config") + 1])
    assert " ".join(words) in (ROOT / "docs" / "nightly.md").read_text()


def test_rayservice_mirrors_the_cluster_serving_profile():
    from infra.serving import ServingConfig, llm_config_kwargs

    (service,) = by_kind("RayService")
    (app,) = yaml.safe_load(service["spec"]["serveConfigV2"])["applications"]
    assert app["import_path"] == "ray.serve.llm:build_openai_app"
    manifest = {c["model_loading_config"]["model_id"]: c for c in app["args"]["llm_configs"]}
    cluster = ServingConfig.for_profile("cluster")
    assert sorted(manifest) == sorted(cluster.model_ids())
    for model in cluster.models:
        expected = llm_config_kwargs(model, "cluster")
        deployed = manifest[model.model_id]
        assert deployed["engine_kwargs"] == expected["engine_kwargs"], model.model_id


def test_the_nightly_judges_ccrs_and_the_paper_claim_baseline():
    """Both schedules run `ccrs nightly` on the paper config, which judges both suites of Table 3."""
    (rayjob,) = documents(RAYJOB)
    (words,) = ccrs_commands(rayjob["spec"]["entrypoint"])
    paper = load_config(ROOT / words[words.index("--config") + 1])
    assert paper.judges == ["ccrs", "ragchecker"] and "--judges" not in words
    assert paper.judge.ccrs.prompt_version == paper.judge.ragchecker.prompt_version == "paper"


def test_every_paper_reader_fits_the_window_the_cluster_serves_its_model_with():
    """Each reader's context_window is its model's native window (config.json max_position_embeddings),
    and the cluster profile (so the RayService) serves that model with at least that max_model_len."""
    from infra.serving import ServingConfig

    native = {"mistralai/Mistral-7B-Instruct-v0.3": 32768, "meta-llama/Meta-Llama-3-8B-Instruct": 8192,
              "meta-llama/Llama-3.2-3B-Instruct": 131072}
    cluster = ServingConfig.for_profile("cluster")
    served = {model.model_id: model.engine_kwargs["max_model_len"] for model in cluster.models}
    paper = load_config(ROOT / "configs" / "paper-bioasq.yaml")
    assert {reader.model: reader.context_window for reader in paper.readers} == native
    for reader in paper.readers:
        assert reader.context_window <= served[reader.model], reader.model
    assert paper.judge.context_window <= served[paper.judge.model]


# --- the cron recipe and the image ---------------------------------------------------------------------

def test_the_cron_recipe_runs_ccrs_nightly_with_one_tracking_store():
    script = (ROOT / "infra" / "cron" / "nightly.sh").read_text()
    assert "exec .venv/bin/ccrs" in script and "args=(nightly --config" in script
    assert 'MLFLOW_TRACKING_URI:-sqlite:///$PWD/mlflow.db' in script
    assert "--notify env:CCRS_NOTIFY_URL" in script


def test_the_image_installs_the_lock_and_leaves_the_venv_out():
    dockerfile = (ROOT / "infra" / "docker" / "Dockerfile").read_text()
    assert "pip install --no-cache-dir -r /tmp/requirements-gpu.lock" in dockerfile
    assert "--no-deps" in dockerfile
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".venv", "runs", "mlruns", "mlflow.db", "mlartifacts"} <= set(ignored)
    lock = dict(line.split("==", 1) for line in (ROOT / "infra" / "docker" / "requirements-gpu.lock")
                .read_text().splitlines() if "==" in line and not line.startswith((" ", "#")))
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = project["dependencies"] + project["optional-dependencies"]["gpu"] + project[
        "optional-dependencies"]["tracking"]
    for requirement in wanted:
        name = re.split(r"[\[<>=!~ ]", requirement, maxsplit=1)[0].lower().replace("_", "-")
        assert name in {key.lower() for key in lock}, f"{name} is not pinned in the lock"
        pinned = re.search(r"==([\w.]+)$", requirement)
        if pinned:
            assert lock[name] == pinned.group(1), name
