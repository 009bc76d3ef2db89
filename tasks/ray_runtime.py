"""Connecting to Ray: an existing cluster (RAY_ADDRESS / config / `ray job submit`) or a local one."""
from __future__ import annotations

import os


def ensure_ray(address: str | None = None, num_cpus: int | None = None) -> str:
    """Initialise Ray once; returns the dashboard URL (or '' when Ray has none)."""
    import ray

    if not ray.is_initialized():
        address = address or os.environ.get("RAY_ADDRESS")
        kwargs: dict = {"ignore_reinit_error": True, "log_to_driver": False}
        if address:
            kwargs["address"] = address
        else:
            # Logical CPUs above the real count: the Serve ingress and vLLM replica must both fit
            # (shared/notes/cpu-llm-serving.md, pitfall 5).
            kwargs["num_cpus"] = num_cpus or max(8, (os.cpu_count() or 2) * 4)
            kwargs["include_dashboard"] = False
        ray.init(**kwargs)
    context = ray.get_runtime_context()
    return getattr(context, "dashboard_url", "") or ""
