from pathlib import Path

import pytest

from pipelines.config import ConfigError, load_config

ROOT = Path(__file__).resolve().parents[2]


RUN_CONFIGS = [ROOT / "configs" / name
               for name in ("cpu-demo.yaml", "paper-bioasq.yaml", "gqm-thesis-cpu.yaml")]


@pytest.mark.parametrize("path", RUN_CONFIGS, ids=lambda p: p.name)
def test_shipped_run_configs_validate(path):
    config = load_config(path)
    assert config.readers and config.judge.ccrs.metrics


def _write(tmp_path, text):
    path = tmp_path / "run.yaml"
    path.write_text(text)
    return path


def test_unknown_key_is_an_error_naming_the_key(tmp_path):
    path = _write(tmp_path, "readers: [{name: r1, kind: extractive}]\nchunking: {chunk_tokns: 5}\n")
    with pytest.raises(ConfigError, match="chunk_tokns"):
        load_config(path)


def test_impossible_values_are_errors(tmp_path):
    path = _write(tmp_path, "readers: [{name: r1, kind: extractive}]\n"
                            "chunking: {chunk_tokens: 50, overlap_tokens: 50}\n")
    with pytest.raises(ConfigError, match="overlap_tokens"):
        load_config(path)
    path = _write(tmp_path, "readers: [{name: r1, kind: extractive}, {name: r1, kind: extractive}]\n")
    with pytest.raises(ConfigError, match="unique"):
        load_config(path)


def test_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="YAML"):
        load_config(_write(tmp_path, "readers: [\n"))


def test_dotted_overrides_apply(tmp_path):
    path = _write(tmp_path, "readers: [{name: r1, kind: extractive}]\n")
    config = load_config(path, {"dataset.limit": 3, "run_dir": str(tmp_path / "r")})
    assert config.dataset.limit == 3
    assert config.resolved_run_dir() == tmp_path / "r"


def test_judges_flag_replaces_the_configs_suites_and_is_checked_against_the_registry(capsys):
    from pipelines.cli import main

    assert main(["run", "--judges", "ccrs, grouse,vera,ragchecker", "--check-config"]) == 0
    assert "judges ccrs, grouse, vera, ragchecker)" in capsys.readouterr().out
    assert main(["run", "--config", str(ROOT / "configs" / "paper-bioasq.yaml"), "--check-config"]) == 0
    paper_line = "config OK: ccrs-paper-bioasq (3 readers x 2 retrievers; judges ccrs, ragchecker)"
    assert paper_line in capsys.readouterr().out
    assert main(["run", "--judges", "ccrs,nosuch", "--check-config"]) == 2
    assert "nosuch" in capsys.readouterr().err


def test_prompt_versions_are_checked_against_the_template_folders(tmp_path):
    paper = load_config(ROOT / "configs" / "paper-bioasq.yaml")
    assert paper.judge.ccrs.prompt_version == "paper" and paper.judges == ["ccrs", "ragchecker"]
    assert (paper.judge.ragchecker.prompt_version, paper.judge.ragchecker.max_claims) == ("paper", None)
    assert load_config(ROOT / "configs" / "cpu-demo.yaml").judge.ccrs.prompt_version == "v1"
    readers = "readers: [{name: r1, kind: extractive}]\n"
    with pytest.raises(ConfigError, match="v9"):
        load_config(_write(tmp_path, readers + "judge: {ccrs: {prompt_version: v9}}\n"))
    with pytest.raises(ConfigError, match="input order"):
        load_config(_write(tmp_path, readers + "judge: {ccrs: {prompt_version: paper, "
                                                "shared_prefix: true}}\n"))
    with pytest.raises(ConfigError, match="(?i)grouse prompt version"):
        load_config(_write(tmp_path, readers + "judges: [grouse]\njudge: {grouse: {prompt_version: v9}}\n"))


def test_each_selected_suite_checks_its_settings_when_the_config_loads(tmp_path):
    """Through the suites' check_config: the messages name the setting and the choices."""
    readers = "readers: [{name: r1, kind: extractive}]\n"
    with pytest.raises(ConfigError, match=r"ccrs prompt version 'v9' does not exist; choose from \['paper'"):
        load_config(_write(tmp_path, readers + "judge: {ccrs: {prompt_version: v9}}\n"))
    with pytest.raises(ConfigError, match="ragchecker prompt version 'v9' does not exist"):
        load_config(_write(tmp_path, readers + "judges: [ragchecker]\n"
                                                "judge: {ragchecker: {prompt_version: v9}}\n"))
    vera_v1 = readers + "judges: [vera]\njudge: {vera: {prompt_version: v1}}\n"
    with pytest.raises(ConfigError, match="has no recall.txt for vera_retrieval_recall"):
        load_config(_write(tmp_path, vera_v1))
    assert load_config(_write(tmp_path, readers + "judge: {vera: {prompt_version: v1}}\n")).judges == ["ccrs"]


def test_endpoint_systems_make_empty_readers_valid_and_are_checked(tmp_path):
    service = "systems: [{kind: endpoint, name: my-rag, url: 'http://127.0.0.1:9/answer'}]\n"
    config = load_config(_write(tmp_path, "readers: []\n" + service))
    assert config.systems[0].name == "my-rag" and not config.readers
    with pytest.raises(ConfigError, match="at least one reader, or `systems:`"):
        load_config(_write(tmp_path, "readers: []\n"))
    with pytest.raises(ConfigError, match=r"names \['A'\] are the labels of built-in systems"):
        load_config(_write(tmp_path, "systems: [{name: A, url: 'http://127.0.0.1:9/'}]\n"))
    with pytest.raises(ConfigError, match="url"):
        load_config(_write(tmp_path, "systems: [{name: mine, url: 'ftp://host/'}]\n"))


def test_the_judge_endpoint_is_its_own_and_only_the_judge_needs_it(tmp_path):
    path = _write(tmp_path, "readers: [{name: r1, kind: extractive}]\n"
                            "judge: {base_url: 'http://127.0.0.1:9/v1', model: judge-70b}\n")
    config = load_config(path)
    assert not config.needs_llm_endpoint()  # extractive readers, a judge of its own: no Serve app
    with_llm_reader = load_config(path, {"readers": [{"name": "r1", "kind": "llm", "model": "m"}]})
    assert with_llm_reader.needs_llm_endpoint()
    assert not with_llm_reader.needs_llm_endpoint(generates=False)  # `ccrs evaluate` generates nothing


def test_the_former_top_level_ccrs_keys_move_under_ccrs_with_one_warning(tmp_path):
    readers = "readers: [{name: r1, kind: extractive}]\n"
    new = load_config(_write(tmp_path, readers + "judge: {ccrs: {metrics: [QR], prompt_version: paper}}\n"))
    with pytest.warns(FutureWarning, match=r"judge\.ccrs") as caught:
        old = load_config(_write(tmp_path, readers + "judge: {metrics: [QR], prompt_version: paper}\n"))
    assert len(caught) == 1 and "['metrics', 'prompt_version']" in str(caught[0].message)
    assert old.judge == new.judge and old.judge.model_dump() == new.judge.model_dump()
    with pytest.raises(ConfigError, match="both at the top level"):
        load_config(_write(tmp_path, readers + "judge: {metrics: [QR], ccrs: {metrics: [CC]}}\n"))
    with pytest.raises(ConfigError, match="extra_forbidden"):
        load_config(_write(tmp_path, readers + "judge: {ccrs: {nosuch: 1}}\n"))


def test_the_calibration_gate_is_off_in_the_demo_on_in_the_paper_config_and_its_tests_load_first(tmp_path):
    assert load_config(RUN_CONFIGS[0]).extension_block("judge.preflight") is None
    gate = load_config(RUN_CONFIGS[1]).extension_block("judge.preflight")
    assert (gate.tests, gate.min_pass_rate, gate.on_fail) == ("builtin", 0.6, "stop")
    assert gate.protocol == "all-calls"
    from pipelines.config import BUILTIN_UNIT_TESTS, unit_tests_path

    assert unit_tests_path("builtin") == BUILTIN_UNIT_TESTS and BUILTIN_UNIT_TESTS.is_file()
    with pytest.raises(ConfigError, match="cannot read the unit tests .*nowhere.jsonl"):
        load_config(None, {"judge.preflight": {"tests": str(tmp_path / "nowhere.jsonl")}})
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"input": "q"}\n')
    with pytest.raises(ConfigError, match="bad.jsonl:1: missing key"):
        load_config(None, {"judge.preflight": {"tests": str(bad)}})
    with pytest.raises(ConfigError, match="on_fail"):
        load_config(None, {"judge.preflight": {"on_fail": "ignore"}})


def test_an_extensions_block_inside_the_judge_block_is_validated_located_and_dumped_in_place():
    """judge.sequential is the sequential extension's block, not a JudgeConfig field: the config accepts
    it where a user writes it, refuses a bad one at its key as a field's, and dumps it where it was."""
    from judges.config import JudgeConfig
    from pipelines.config import RunConfig
    from pipelines.extensions import extensions

    sequential = extensions()["sequential"]
    config = load_config(None, {"judge.sequential": {"margin": 0.1}})
    assert "sequential" not in JudgeConfig.model_fields and sequential.enabled(config)
    assert sequential.block(config) == config.extension_block("judge.sequential") and \
        sequential.block(config).margin == 0.1
    judge = config.model_dump(mode="json")["judge"]
    assert list(judge)[-1] == "sequential" and judge["sequential"]["margin"] == 0.1
    assert load_config(None).model_dump(mode="json")["judge"]["sequential"] is None  # off: null, as ever
    assert RunConfig.model_validate(config.model_dump(mode="json")) == config
    with pytest.raises(ConfigError, match=r"judge\.sequential\.margin\n  Input should be less than 1(.|\n)*"
                                          r"judge\.sequential\.volume\n  Extra inputs are not permitted"):
        load_config(None, {"judge.sequential": {"margin": 2, "volume": 11}})
    with pytest.raises(ConfigError, match=r"judge\.sequential\.margin(.|\n)*stats\.b"):  # with the rest's
        load_config(None, {"judge.sequential": {"margin": 2}, "stats.b": 1})
    with pytest.raises(ConfigError, match=r"judge\.sequential\.metrics \['ZZ'\]: name metrics this run"):
        load_config(None, {"judge.sequential": {"metrics": ["ZZ"]}})
