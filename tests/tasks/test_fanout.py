"""The fan-out's per-worker client: reused across shards (its connections), reset for each one."""
from judges.config import ClientConfig
from tasks.fanout import shard_client


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
