"""Prefix-aware order, group-preserving shards and the per-worker client of the fan-out
(tasks/runtime/fanout.py);
on the CCRS plan of real BioASQ samples (no server: the plan renders the prompts locally)."""
import pandas as pd

from judges.ccrs import unit_request
from judges.config import CcrsOptions, ClientConfig, JudgeConfig, ReaderConfig
from judges.suite import get_suite
from tasks.runtime.fanout import _CLIENTS, group_shards, prefix_order, shard_client
from tasks.generate import build_items, generate_extractive
from tasks.runtime.judge_session import judge_counter, load_samples, ordered_for_prefix_reuse


def test_prefix_order_keeps_groups_together_in_order_of_first_appearance():
    groups = ["a", "b", "a", "c", "b", "a"]
    assert prefix_order(groups) == [0, 2, 5, 1, 4, 3]
    assert prefix_order(groups, within=[2, 1, 1, 0, 0, 0]) == [5, 2, 0, 4, 1, 3]
    assert prefix_order([]) == []


def test_group_shards_never_split_a_group():
    groups = ["a"] * 3 + ["b"] * 2 + ["c"] * 5 + ["d"]
    indices = list(range(len(groups)))
    assert group_shards(indices, 4, groups) == [[0, 1, 2], [3, 4], [5, 6, 7, 8, 9], [10]]
    assert group_shards(indices, 6, groups) == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9, 10]]
    assert group_shards(indices, 4) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10]]  # no groups: fixed size
    assert group_shards([0, 1, 5, 6], 2, groups) == [[0, 1], [5, 6]]  # a requeue pass: a subset


def _bioasq_units(bioasq_inputs, shared_prefix: bool):
    queries, retrieved = (pd.read_parquet(p) for p in bioasq_inputs)
    readers = [ReaderConfig(name=f"top{n}", kind="extractive", max_sentences=n) for n in (1, 2, 3)]
    items = build_items(queries, retrieved, readers, top_k=3)
    samples, _ = load_samples(queries, retrieved, pd.DataFrame([generate_extractive(i) for i in items]), 3)
    judge = JudgeConfig(ccrs=CcrsOptions(shared_prefix=shared_prefix))
    suite, count = get_suite("ccrs"), judge_counter(judge)
    return [unit for sample in samples for unit in suite.plan(sample, judge, 0, count)], samples


def test_units_of_one_question_and_retriever_go_out_together_and_share_the_context_prefix(bioasq_inputs):
    units, samples = _bioasq_units(bioasq_inputs, shared_prefix=True)
    ordered, groups = ordered_for_prefix_reuse(units)
    assert sorted(u.id for u in ordered) == sorted(u.id for u in units)  # a permutation: nothing lost
    n_groups = len({(s.query_id, tuple(s.context)) for s in samples})  # question x retriever
    assert len(set(groups)) == n_groups == 4 * 2
    runs = [g for i, g in enumerate(groups) if i == 0 or groups[i - 1] != g]
    assert len(runs) == n_groups  # each group is one contiguous run: 3 readers x 5 metrics
    first = [u for u, g in zip(ordered, groups) if g == groups[0] and u.metrics != ("QR",)]
    assert len(first) == 3 * 4
    shared_prefix = JudgeConfig(ccrs=CcrsOptions(shared_prefix=True))
    texts = [unit_request(u, shared_prefix).messages[0]["content"] for u in first]
    shared = texts[0][:texts[0].index("</context>")]
    assert all(text.startswith(shared) for text in texts)  # context-first: one prefix for all 12
    shards = group_shards(list(range(len(ordered))), ClientConfig().shard_size, groups)
    assert all(len({groups[i] for i in shard}) == 1 for shard in shards)  # 15 units, shard_size 16


def test_paper_layout_orders_the_prompts_of_one_metric_next_to_each_other(bioasq_inputs):
    units, _ = _bioasq_units(bioasq_inputs, shared_prefix=False)
    ordered, groups = ordered_for_prefix_reuse(units)
    group = [u for u, g in zip(ordered, groups) if g == groups[0]]
    assert [u.metrics[0] for u in group] == ["AC"] * 3 + ["CC"] * 3 + ["ID"] * 3 + ["IR"] * 3 + ["QR"] * 3
    cc = [unit_request(u, JudgeConfig()).messages[0]["content"] for u in group if u.metrics == ("CC",)]
    assert len({text[:text.index("</context>")] for text in cc}) == 1  # intro + context shared by 3 readers


# --- the per-worker client: reused across shards (its connections), reset for each one ---
def test_shard_client_is_reused_per_endpoint_and_config_and_reset_for_each_shard():
    cfg = ClientConfig(max_concurrency=4, circuit_failure_threshold=1)
    first = shard_client(cfg, "http://127.0.0.1:9/v1")
    first._count(calls=3, failed=3)
    first.breaker.record_failure()
    assert first.breaker.state == "open"
    again = shard_client(cfg, "http://127.0.0.1:9/v1")
    assert again is first
    assert again.stats["calls"] == 0 and again.breaker.state == "closed"  # as a new client would be
    other = shard_client(cfg.model_copy(update={"max_concurrency": 8}), "http://127.0.0.1:9/v1")
    assert other is not first and other.config.max_concurrency == 8
    other.close()
    _CLIENTS.clear()  # no client left behind for other tests
