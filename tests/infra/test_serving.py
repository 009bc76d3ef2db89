import httpx
import pytest

from infra.serving import ServingConfig, llm_config_kwargs, serve_status, start_serve_app, stop_serve_app


def test_cpu_profile_matches_the_verified_recipe():
    cfg = ServingConfig.for_profile("cpu")
    assert cfg.host == "127.0.0.1" and cfg.port == 8000
    (model,) = cfg.models
    assert model.model_id == "smollm2-135m-instruct"
    assert model.engine_kwargs == {"dtype": "float32", "enforce_eager": True, "max_model_len": 2048,
                                   "enable_prefix_caching": True, "enable_prompt_tokens_details": True,
                                   "block_size": 32}
    assert model.env_vars == {"VLLM_CPU_KVCACHE_SPACE": "2", "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
                              "HF_HUB_OFFLINE": "1"}


def test_cluster_profile_is_the_paper_setup():
    cfg = ServingConfig.for_profile("cluster")
    ids = cfg.model_ids()
    assert ids[0] == "meta-llama/Meta-Llama-3-70B-Instruct"
    assert set(ids[1:]) == {"mistralai/Mistral-7B-Instruct-v0.3", "meta-llama/Meta-Llama-3-8B-Instruct",
                            "meta-llama/Llama-3.2-3B-Instruct"}
    judge = llm_config_kwargs(cfg.models[0], "cluster")
    assert judge["engine_kwargs"]["tensor_parallel_size"] == 4
    assert judge["engine_kwargs"]["enable_prefix_caching"] is True
    assert judge["accelerator_type"] == "A100-80G"
    assert judge["deployment_config"]["autoscaling_config"]["max_replicas"] > 1
    assert "placement_group_config" not in judge


def test_cluster_judge_routes_by_prefix_and_every_engine_reports_cached_tokens():
    from infra.serving import PREFIX_AFFINITY_ROUTER

    cfg = ServingConfig.for_profile("cluster")
    judge = llm_config_kwargs(cfg.models[0], "cluster")
    assert judge["deployment_config"]["request_router_config"] == {
        "request_router_class": PREFIX_AFFINITY_ROUTER, "request_router_kwargs": {}}
    assert PREFIX_AFFINITY_ROUTER == "ray.serve.llm.request_router.PrefixCacheAffinityRouter"
    for model in cfg.models:
        assert model.engine_kwargs["enable_prompt_tokens_details"] is True, model.model_id
    reader = llm_config_kwargs(cfg.models[1], "cluster")
    assert "request_router_config" not in reader["deployment_config"]  # no prefix shared across prompts


def test_the_prefix_affinity_router_exists_in_the_installed_ray():
    import importlib

    from infra.serving import PREFIX_AFFINITY_ROUTER

    module, name = PREFIX_AFFINITY_ROUTER.rsplit(".", 1)
    assert hasattr(importlib.import_module(module), name)


def test_router_kwargs_without_a_router_are_rejected():
    from infra.serving import ServedModel

    with pytest.raises(ValueError, match="request_router_kwargs"):
        ServedModel(model_id="m", source="m", request_router_kwargs={"imbalanced_threshold": 8})


def test_code_defaults_equal_the_yaml_profiles():
    for profile in ("cpu", "cluster"):
        from_code = ServingConfig(profile=profile)
        from_yaml = ServingConfig.for_profile(profile)
        assert [m.model_id for m in from_code.models] == from_yaml.model_ids()


def test_unknown_fields_are_rejected():
    with pytest.raises(ValueError):
        ServingConfig(profile="cpu", prot=8000)


def test_external_profile_needs_a_url(monkeypatch):
    monkeypatch.delenv("CCRS_LLM_BASE_URL", raising=False)
    with pytest.raises(ValueError, match="CCRS_LLM_BASE_URL"):
        ServingConfig(profile="external").external_base_url()
    monkeypatch.setenv("CCRS_LLM_BASE_URL", "http://example:1/v1/")
    assert ServingConfig(profile="external").external_base_url() == "http://example:1/v1"


def test_external_endpoint_that_never_answers_times_out_clearly():
    cfg = ServingConfig(profile="external", base_url="http://127.0.0.1:9/v1", ready_timeout_s=1)
    with pytest.raises(TimeoutError, match="not ready after"):
        start_serve_app(cfg)


@pytest.mark.llm
def test_serve_app_answers_and_start_is_idempotent(llm_endpoint):
    if "127.0.0.1" not in llm_endpoint.base_url:
        pytest.skip("endpoint not started by this session")
    port = int(llm_endpoint.base_url.split(":")[-1].split("/")[0])
    cfg = ServingConfig.for_profile("cpu", port=port)
    assert start_serve_app(cfg) == llm_endpoint.base_url  # already up: returns at once
    status = serve_status(cfg)
    assert status["ready"] and llm_endpoint.judge_model in status["models"]
    external = ServingConfig(profile="external", base_url=llm_endpoint.base_url, ready_timeout_s=30)
    assert start_serve_app(external) == llm_endpoint.base_url
    reply = httpx.post(f"{llm_endpoint.base_url}/chat/completions", timeout=60, json={
        "model": llm_endpoint.judge_model,
        "messages": [{"role": "user", "content": "What is the capital of France?"}],
        "max_tokens": 12, "temperature": 0, "seed": 0})
    assert reply.status_code == 200 and "Paris" in reply.json()["choices"][0]["message"]["content"]


@pytest.mark.llm
def test_stop_without_config_leaves_apps_it_did_not_start_alone(llm_endpoint):
    stop_serve_app()  # what a pipeline does in its `finally`
    port = int(llm_endpoint.base_url.split(":")[-1].split("/")[0])
    assert serve_status(ServingConfig.for_profile("cpu", port=port))["ready"]


def test_serve_cli_overrides_the_profile_file():
    import argparse

    from pipelines.serve_cmd import add_arguments, load_config

    parser = argparse.ArgumentParser()
    add_arguments(parser, "serve")
    cfg = load_config(parser.parse_args(["status", "--profile", "cluster", "--port", "8123"]))
    assert cfg.profile == "cluster" and cfg.port == 8123 and cfg.host == "0.0.0.0"
    assert len(cfg.models) == 4


def test_stop_without_config_is_a_no_op_when_nothing_was_started():
    stop_serve_app()  # no Ray, no Serve: nothing to do, no error


def test_prepared_model_folder_is_cached():
    from infra.models import is_prepared, prepare_local_models

    prepared = prepare_local_models()  # converted by `ccrs setup` (install.sh); instant when cached
    folder = prepared["smollm2-135m-instruct"]
    assert is_prepared(folder)
    names = {p.name for p in folder.iterdir()}
    assert {"config.json", "tokenizer.json", "chat_template.jinja", "model.safetensors"} <= names


# The routing itself, without vLLM: PrefixCacheAffinityRouter, configured as infra/serving.py configures it,
# in front of two plain Serve replicas that answer with their own id, on the session's Ray. That two vLLM
# replicas behind it then serve each prefix from their cache is a measurement:
# benchmarks/bench_prefix_cache.py (`--routing-check` for the two-context scenario; docs/testing.md).
def _replica_id(request) -> str:
    from ray import serve

    return serve.get_replica_context().replica_id.unique_id


def _serve_was_running() -> bool:
    import ray
    from ray.serve._private.constants import SERVE_CONTROLLER_NAME, SERVE_NAMESPACE

    try:
        ray.get_actor(SERVE_CONTROLLER_NAME, namespace=SERVE_NAMESPACE)
    except ValueError:
        return False
    return True


def test_the_prefix_affinity_router_sends_each_prefix_to_the_replica_that_served_it(ray_session):
    from types import SimpleNamespace

    import ray
    from ray import serve
    from ray.serve.config import RequestRouterConfig

    from infra.serving import ServedModel
    from tests.conftest import bioasq_questions

    model = ServedModel(model_id="m", source="m", request_router="prefix_affinity")
    router = llm_config_kwargs(model, "cpu")["deployment_config"]["request_router_config"]
    app, name = "ccrs-router-test", "replica"
    deployment = serve.deployment(_replica_id, name=name, num_replicas=2, ray_actor_options={"num_cpus": 0},
                                  request_router_config=RequestRouterConfig(**router))
    was_running = _serve_was_running()
    if not was_running:  # no proxy: the session's model server sets Serve's HTTP options when it starts
        serve.start(proxy_location="Disabled")
    try:
        handle = serve.run(deployment.bind(), name=app, route_prefix=None)
        contexts = ["\n".join(s["text"] for s in q["snippets"])[:2500] for q in bioasq_questions(2)]
        served = [[handle.remote(SimpleNamespace(messages=[{"role": "user", "content": f"{context}\n\n{q}"}]))
                   .result(timeout_s=60) for q in ("Summarize it.", "Name one entity.", "Is it a disease?")]
                  for context in contexts]
    finally:
        serve.delete(app)
        if not was_running:
            serve.shutdown()
        else:  # the router's prefix tree: a detached actor that only serve.shutdown() would remove
            for actor in ray.util.list_named_actors(all_namespaces=True):
                if actor["namespace"] == f"serve::{app}::{name}":
                    ray.kill(ray.get_actor(actor["name"], namespace=actor["namespace"]))
    assert [len(set(replicas)) for replicas in served] == [1, 1], served  # each prefix stays on its replica
    assert served[0][0] != served[1][0], served  # a new prefix goes to the replica holding less


def test_health_check_options_reach_serve_only_when_set():
    from infra.serving import ServedModel

    assert "health_check_timeout_s" not in llm_config_kwargs(ServedModel(model_id="m", source="m"),
                                                             "cpu")["deployment_config"]
    slow = ServedModel(model_id="m", source="m", health_check_period_s=30, health_check_timeout_s=120)
    deployment = llm_config_kwargs(slow, "cpu")["deployment_config"]
    assert (deployment["health_check_period_s"], deployment["health_check_timeout_s"]) == (30, 120)
