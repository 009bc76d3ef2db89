"""The cluster commands of the README and docs/cluster.md: one head start line (which the `ray job submit`
test runs), token authentication on every submission, and a head sized for the CPU profile's app and
stages (pure: the docs and the configs)."""
from __future__ import annotations

from infra.serving import ServingConfig, cpu_app_cpus
from pipelines.config import DEFAULT_CONFIG, load_config
from tests.cluster_doc import CLUSTER_DOC, REPO, head_start_words, ray_command, ray_commands, section

README = (REPO / "README.md").read_text()
README_CLUSTER = section(README, "## On a Ray cluster")


def test_the_readme_starts_the_head_as_docs_cluster_md_does():
    env, words = ray_command(README_CLUSTER, "start")
    assert not env and words == head_start_words()


def test_every_submission_the_docs_show_authenticates():
    for text in (README_CLUSTER, CLUSTER_DOC.read_text()):
        submissions = [env for env, words in ray_commands(text) if words[1:3] == ["job", "submit"]]
        assert submissions and all(env.get("RAY_AUTH_MODE") == "token" for env in submissions), submissions


def test_the_documented_head_holds_the_cpu_profile_app_and_the_stages():
    """Stages ask 1 logical CPU per task or actor, at most this many at once; the app's CPUs stay held
    when it is up before a run (`ccrs serve up`, --keep-serving)."""
    (cpus,) = [int(word.split("=", 1)[1]) for word in head_start_words() if word.startswith("--num-cpus=")]
    demo = load_config(DEFAULT_CONFIG)
    stages = max(demo.chunking.max_parallel, demo.retrieval.max_parallel, demo.embedder.num_workers)
    assert cpus == cpu_app_cpus(ServingConfig.for_profile("cpu")) + stages
