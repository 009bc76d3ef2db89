"""pipelines/pipeline.py's pure parts."""
from __future__ import annotations

from pipelines.config import DEFAULT_CONFIG, load_config
from pipelines.pipeline import served_identity


def test_the_served_identity_of_the_deployed_app_names_its_weights_and_their_dtype(monkeypatch):
    """The same weights in another precision give other outputs: the dtype the app is configured to load
    them in is part of the identity (and so of the stage and judgment-cache keys); an external endpoint's
    identity is only what it reports."""
    import infra.readiness

    reported = {"id": "smollm2-135m-instruct", "max_model_len": 2048}
    monkeypatch.setattr(infra.readiness, "endpoint_identity", lambda *args, **kwargs: dict(reported))
    config = load_config(DEFAULT_CONFIG)
    (served,) = config.serving.models
    identity = served_identity(config, served.model_id, "http://127.0.0.1:8000/v1", "")
    assert identity == {**reported, "source": served.source, "dtype": "float32"}

    served.engine_kwargs["dtype"] = "bfloat16"
    assert served_identity(config, served.model_id, "http://x/v1", "")["dtype"] == "bfloat16"
    external = load_config(DEFAULT_CONFIG, {"serving": {"profile": "external", "base_url": "http://x/v1"}})
    assert served_identity(external, served.model_id, "http://x/v1", "") == reported
