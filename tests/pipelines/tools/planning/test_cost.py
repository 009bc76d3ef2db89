import json

import pytest

from pipelines import cli
from pipelines.config import REPO_ROOT, load_config
from judges.suite import Sample
from pipelines.tools.planning.cost import cost_plan, judge_stages, model_parameters
from pipelines.tools.planning.cost_meter import PrefixCache, PromptMeter
from infra.models import default_tokenizer
from tests.conftest import bioasq_questions, sample_field

SAMPLE = str(REPO_ROOT / "data" / "bioasq-sample")


def test_prefix_cache_reuses_whole_blocks_of_an_earlier_prompt_only():
    cache = PrefixCache(block=2)
    assert cache.computed([1, 2, 3, 4, 5]) == 5
    assert cache.computed([1, 2, 3, 4, 9]) == 1      # blocks (1, 2), (3, 4) reused
    assert cache.computed([1, 2, 9, 9]) == 2         # (1, 2) reused, then the chain breaks
    assert cache.computed([9, 9, 1, 2]) == 4         # a block is reused only after the same prefix
    assert cache.computed([1, 2, 3, 4]) == 1         # a repeated prompt still computes its last token


def test_parameters_come_from_the_model_id():
    assert model_parameters("meta-llama/Meta-Llama-3-70B-Instruct") == 70e9
    assert model_parameters("meta-llama/Llama-3.2-3B-Instruct") == 3e9
    assert model_parameters("mistralai/Mistral-7B-Instruct-v0.3") == 7e9
    assert model_parameters("smollm2-135m-instruct") == 135e6
    assert model_parameters("extractive-top1") is None


def test_paper_config_plans_141570_ccrs_judge_calls(tmp_path, capsys):
    out = tmp_path / "cost_plan.json"
    code = cli.main(["plan", "cost", "--config", str(REPO_ROOT / "configs" / "paper-bioasq.yaml"),
                     "--questions", "4719", "--calibration-questions", "2", "--calibration-dataset", SAMPLE,
                     "--out", str(tmp_path)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "| judge_ccrs | meta-llama/Meta-Llama-3-70B-Instruct | 141,570 |" in printed
    assert "Assumptions:" in printed and "MFU" in printed
    plan = json.loads(out.read_text())
    stages = {(s["stage"], s["model"]): s for s in plan["stages"]}
    judge = stages[("judge_ccrs", "meta-llama/Meta-Llama-3-70B-Instruct")]
    assert judge["calls"] == 4719 * 6 * 5
    assert [s["calls"] for s in plan["stages"] if s["stage"] == "generate"] == [4719 * 2] * 3
    assert stages[("preflight", "meta-llama/Meta-Llama-3-70B-Instruct")]["calls"] == 112 * 4  # the gate
    assert 0 < judge["prompt_tokens_computed"] < judge["prompt_tokens_sent"]
    tokens = judge["prompt_tokens_computed"] + judge["output_tokens"]
    assert judge["flops"] == pytest.approx(2 * 70e9 * tokens)
    assert judge["gpus"] == 32 and judge["wall_hours"] == pytest.approx(judge["gpu_hours"] / 32)


def test_shared_prefix_layout_computes_fewer_judge_tokens():
    plans = [cost_plan(load_config(None, {"judge.ccrs.shared_prefix": shared, "judge.scoring": "integer"}), 4,
                       sample_size=2)
             for shared in (False, True)]
    judge = [next(s for s in plan["stages"] if s["stage"] == "judge_ccrs") for plan in plans]
    assert judge[0]["calls"] == judge[1]["calls"] == 4 * 6 * 5
    assert judge[1]["prompt_tokens_computed"] < judge[0]["prompt_tokens_computed"]
    assert judge[1]["prompt_tokens_sent"] == pytest.approx(judge[0]["prompt_tokens_sent"], rel=0.1)


def test_a_missing_dataset_is_a_clear_error(tmp_path, capsys):
    config = tmp_path / "c.yaml"
    text = (REPO_ROOT / "configs" / "cpu-demo.yaml").read_text()
    config.write_text(text.replace("path: data/bioasq-sample", f"path: {tmp_path / 'nowhere'}"))
    assert cli.main(["plan", "cost", "--config", str(config)]) == 2
    assert "--calibration-dataset" in capsys.readouterr().err


def _samples(n: int) -> list[Sample]:
    samples = []
    for question in bioasq_questions(n):
        ideal = sample_field(question["ideal_answer"])
        answer = ideal[0] if isinstance(ideal, list) else str(ideal)
        snippets = [s["text"] for s in sample_field(question["snippets"])][:3]
        samples.append(Sample(question["id"], "A", question["body"], answer, answer, snippets))
    return samples


@pytest.mark.parametrize("options, reply", [({"judge.structured_output": False}, "50"),
                                            ({}, '{"score": 50}'),
                                            ({"judge.ccrs.justification": True}, None)])
def test_judge_tokens_follow_each_suites_single_request_and_reply_estimate(options, reply):
    """CCRS units are one request each and reply with a mark (its JSON under structured output; a
    justification counts its budget, 96 tokens); GroUSE's calls depend on each other: units only."""
    config = load_config(None, {"judges": ["ccrs", "grouse"], "judge.scoring": "integer", **options})
    ccrs, grouse = judge_stages(config, _samples(2))
    assert (ccrs.stage, ccrs.calls) == ("judge_ccrs", 2 * 5) and 0 < ccrs.prompt_tokens_sent
    meter = PromptMeter(default_tokenizer(config.judge.model))  # the judge's tokenizer where it is here
    assert ccrs.output_tokens == ccrs.calls * (96 if reply is None else meter.reply_tokens(reply))
    assert (grouse.stage, grouse.calls, grouse.prompt_tokens_sent, grouse.prompt_tokens_computed,
            grouse.output_tokens) == ("judge_grouse", 2, 0, None, 0)
    assert grouse.notes == ["grouse: its calls depend on each other's replies; counted are its units (at "
                            "least one call each), not their tokens"]


def test_expected_marks_count_the_continuation_requests_of_split_digits():
    """SmolLM2 spells 85 as 8, 5: each judgment may send max_expansions continuations (its prompt again,
    prefix-cached, plus the reply up to the digit; one token out). Single-token numbers need none."""
    from pipelines.tools.planning import cost as module

    samples = _samples(2)
    integer, expected = (judge_stages(load_config(None, {"judge.scoring": scoring, "judge.expected":
                                                         {"max_expansions": 3, "continuation": "chat"}}),
                                      samples)[0]
                         for scoring in ("integer", "expected"))
    assert expected.calls == integer.calls * (1 + 3)
    assert expected.output_tokens == integer.output_tokens + 3 * integer.calls
    assert 3 * integer.prompt_tokens_sent < expected.prompt_tokens_sent - integer.prompt_tokens_sent
    # the repeated prompts are prefix-cached: far fewer computed than sent
    assert expected.prompt_tokens_computed - integer.prompt_tokens_computed < 0.2 * (
        expected.prompt_tokens_sent - integer.prompt_tokens_sent)
    assert "splits numbers into digits: 3 continuation requests" in expected.notes[0]
    assert module.continuation_prompt("P", '{"score": 50}') == 'P\n\n{"score": 5'
    assert module.continuation_prompt("P", None) == "P\n\n5"
    # expected.continuation: batched carries the same prompts in one request a judgment
    batched = judge_stages(load_config(None, {"judge.scoring": "expected", "judge.expected": {
        "max_expansions": 3, "continuation": "batched"}}), samples)[0]
    assert batched.calls == integer.calls * 2
    assert (batched.prompt_tokens_sent, batched.prompt_tokens_computed, batched.output_tokens) == (
        expected.prompt_tokens_sent, expected.prompt_tokens_computed, expected.output_tokens)
    assert "3 continuations a judgment counted" in batched.notes[0] and "in one request" in batched.notes[0]


def test_single_token_numbers_need_no_continuation_requests(monkeypatch):
    from pipelines.tools.planning import cost as module

    monkeypatch.setattr(module, "splits_numbers", lambda tokenizer: False)
    config = load_config(None, {"judge.scoring": "expected"})
    assert module.continuations(config.judge, "any") == (
        0, 0, "the judge's tokenizer has single-token numbers: no continuation requests counted")
    monkeypatch.setattr(module, "splits_numbers", lambda tokenizer: None)
    extra, prompts, why = module.continuations(config.judge, None)  # the demo's: batched, one request
    assert (extra, prompts) == (1, config.judge.expected.max_expansions) and "not available here" in why


def test_the_prefix_cache_blocks_are_those_of_the_engine_that_serves_the_model():
    """vLLM reuses whole KV blocks: 16 tokens on GPUs, 128 on its CPU backend, engine_kwargs wins."""
    from pipelines.tools.planning.cost_meter import kv_block_tokens

    cpu = load_config(None)
    assert kv_block_tokens(cpu, cpu.judge.model) == 32  # infra/serve_configs/cpu.yaml sets it
    models = [{**m.model_dump(), "engine_kwargs": {}} for m in cpu.serving.models]
    assert kv_block_tokens(load_config(None, {"serving.models": models}), cpu.judge.model) == 128
    paper = load_config(REPO_ROOT / "configs" / "paper-bioasq.yaml")
    assert kv_block_tokens(paper, paper.judge.model) == 16
    assert kv_block_tokens(paper, "a-model-the-profile-does-not-serve") == 16
    models = [{**m.model_dump(), "engine_kwargs": {"block_size": 64}} for m in cpu.serving.models]
    tuned = load_config(None, {"serving.models": models})
    assert kv_block_tokens(tuned, cpu.judge.model) == 64


def test_a_suite_whose_tokens_are_not_modelled_gets_no_flops_and_no_total_hours():
    """GroUSE's calls depend on each other's replies: zero counted tokens must not read as free compute."""
    from infra.serving import ServedModel
    from pipelines.tools.planning.cost import add_hardware, totals

    config = load_config(None, {"judges": ["ccrs", "grouse"]})
    served = {config.judge.model: ServedModel(model_id=config.judge.model, source=config.judge.model,
                                                   accelerator_type="A100-80G")}
    ccrs, grouse = (add_hardware(c, served, 0.3) for c in judge_stages(config, _samples(1)))
    assert ccrs.flops > 0 and ccrs.gpu_hours > 0
    assert (grouse.flops, grouse.gpu_hours, grouse.wall_hours) == (None, None, None)
    assert "tokens not modelled" in grouse.notes[-1]
    assert {k: totals([ccrs, grouse])[k] for k in ("flops", "gpu_hours", "wall_hours")} == {
        "flops": None, "gpu_hours": None, "wall_hours": None}


def test_a_metric_computed_without_the_judge_costs_no_call():
    """gqm_bertscore is computed here (judges/bertscore.py): it adds no judge call and no token."""
    samples = _samples(2)
    base = {"judges": ["gqm"], "judge.scoring": "integer"}
    (alone,) = judge_stages(load_config(None, {**base, "judge.gqm.metrics": ["attribution"]}), samples)
    (both,) = judge_stages(load_config(None, {**base, "judge.gqm.metrics": ["attribution", "bertscore"]}),
                           samples)
    assert alone.calls > 0
    assert (both.calls, both.prompt_tokens_sent) == (alone.calls, alone.prompt_tokens_sent)


def test_judge_repeats_multiply_the_judge_calls_and_k_1_adds_nothing():
    """Sampled repeats send each prompt k times (the prefix cache model computes it about once) and get k
    replies; perturbed repeats are k calls too, their reordered contexts computed again."""
    samples = _samples(2)
    base = {"judges": ["ccrs"], "judge.scoring": "integer"}
    (once,) = judge_stages(load_config(None, base), samples)
    (one,) = judge_stages(load_config(None, {**base, "judge.repeats": {"k": 1, "mode": "perturb"}}), samples)
    assert one == once and not once.notes
    (sampled,) = judge_stages(load_config(None, {**base, "judge.repeats": 3}), samples)
    assert (sampled.calls, sampled.prompt_tokens_sent, sampled.output_tokens) == (
        3 * once.calls, 3 * once.prompt_tokens_sent, 3 * once.output_tokens)
    assert once.prompt_tokens_computed <= sampled.prompt_tokens_computed < 1.2 * once.prompt_tokens_computed
    assert sampled.notes[0].startswith("ccrs: judge.repeats k = 3, mode sample: 3 x the calls")
    (perturbed,) = judge_stages(load_config(None, {**base, "judge.repeats": {"k": 3, "mode": "perturb"}}),
                                samples)
    assert perturbed.calls == 3 * once.calls
    assert perturbed.prompt_tokens_computed > sampled.prompt_tokens_computed


def test_the_calibration_gate_counts_its_calls_once_whatever_the_question_count(tmp_path):
    tests = tmp_path / "tests.jsonl"
    tests.write_text("".join((REPO_ROOT / "data" / "grouse-bioasq" / "train.jsonl").read_text()
                             .splitlines(keepends=True)[:3]))
    config = load_config(None, {"judge.preflight": {"tests": str(tests)}, "judge.scoring": "integer"})
    plans = [cost_plan(config, questions, sample_size=2) for questions in (4, 400)]
    gates = [next(s for s in plan["stages"] if s["stage"] == "preflight") for plan in plans]
    assert gates[0] == gates[1] and gates[0]["calls"] == 3 * 4  # all-calls: the four judged metrics a test
    assert gates[0]["model"] == config.judge.model and gates[0]["output_tokens"] == 3 * (3 * 512 + 2048)
    assert 0 < gates[0]["prompt_tokens_computed"] < gates[0]["prompt_tokens_sent"]  # one set's references
    assert "paid once per judge model + prompt version" in gates[0]["notes"][0]
    assert [s["stage"] for s in plans[0]["stages"]] == ["generate", "preflight", "judge_ccrs"]
    assert plans[0]["totals"]["calls"] == 4 * 2 + gates[0]["calls"] + 4 * 6 * 5  # LLM reader, gate, CCRS
    assert all(s["stage"] != "preflight" for s in cost_plan(load_config(None), 4, sample_size=2)["stages"])


@pytest.mark.parametrize("mode", ["sample", "perturb"])
def test_the_calibration_gates_stop_line_counts_the_judge_calls_the_cost_plan_counts(tmp_path, bioasq_inputs,
                                                                                     mode):
    """With judge.repeats.k = 3 both count each unit 3 times (planned_judge_units): 4 questions x 2
    retrievers x 2 extractive readers, CCRS (5 units an answer) and GroUSE (1 unit an answer)."""
    from judges.config import ClientConfig, PreflightOptions
    from tasks.calibration import Preflight, planned_judge_calls
    from tasks.generate import run_generation

    readers = [{"name": "extractive-top1", "kind": "extractive", "max_sentences": 1},
               {"name": "extractive-top3", "kind": "extractive", "max_sentences": 3}]
    config = load_config(None, {"judges": ["ccrs", "grouse"], "judge.scoring": "integer", "readers": readers,
                                "judge.repeats": {"k": 3, "mode": mode}, "retrieval.top_k": 2})
    plan = cost_plan(config, 4, sample_size=2)
    planned = sum(s["calls"] for s in plan["stages"] if s["stage"].startswith("judge_"))
    assert planned == 4 * 2 * 2 * (5 + 1) * 3

    generations = run_generation(tmp_path / "run", *bioasq_inputs, config.readers, ClientConfig(), None,
                                 top_k=2, progress=False).path
    seed = config.client.seed
    gate = planned_judge_calls(config.judges, *bioasq_inputs, generations, config.judge, seed, top_k=2)
    stopped = Preflight({"pass_rate_overall": 0.34}, PreflightOptions(min_pass_rate=0.6, on_fail="stop"))
    assert stopped.line(gate) == f"judge calibration 0.34 < 0.60: stopped before {planned:,} judge calls"
