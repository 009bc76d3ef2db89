"""`ccrs serve up|down|status`: the Ray Serve LLM app that hosts the readers and the judge.

`up` starts a Ray head that outlives the command (its pid is recorded under $CCRS_HOME/serve/), deploys
the app and waits for readiness (a clear TimeoutError after --ready-timeout seconds). `down` deletes the
app and stops that head. `status` prints what the endpoint serves, as JSON (it only asks the endpoint, so
it has no log file). Log records of `up` and `down`: $CCRS_HOME/logs/serve-<action>-<UTC time>.log.
--config takes a run config (its `serving:` block: what `ccrs run --config` would deploy) or a serving
config of its own (infra/serve_configs/<profile>.yaml, the default).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from pipelines import options


def add_arguments(parser: argparse.ArgumentParser, name: str) -> None:
    parser.add_argument("action", choices=["up", "down", "status"])
    parser.add_argument("--profile", choices=["cpu", "cluster", "external"], default="cpu")
    options.add_config(parser, name)
    options.add(parser, name, "--host", default=(None, "the config's serving.host, 127.0.0.1"))
    options.add(parser, name, "--port")
    parser.add_argument("--ready-timeout", type=float, dest="ready_timeout_s", metavar="SECONDS",
                        help="how long `up` waits for the app to answer")
    options.add_endpoint(parser, aliases=("--base-url",), command=name)


def console_log(args: argparse.Namespace) -> Path | None:
    from infra.console import home_log_file

    return None if args.action == "status" else home_log_file(f"serve-{args.action}")


def load_config(args: argparse.Namespace):
    from infra.serving import ServingConfig

    overrides = {"host": args.host, "port": args.port, "ready_timeout_s": args.ready_timeout_s,
                 "base_url": args.llm_base_url}
    if args.config and _is_run_config(args.config):
        from pipelines.config import load_config

        serving = load_config(args.config).serving
        return serving.model_copy(update={k: v for k, v in overrides.items() if v is not None})
    if args.config:
        return ServingConfig.from_yaml(args.config, **overrides)
    return ServingConfig.for_profile(args.profile, **overrides)


def _is_run_config(path: str) -> bool:
    """A run config holds a `serving:` block; a serving config is that block's content."""
    import yaml

    data = yaml.safe_load(Path(path).read_text()) or {}
    return isinstance(data, dict) and "serving" in data


def main(args: argparse.Namespace) -> int:
    from infra.console import say
    from infra.serving import serve_status, start_serve_app, stop_serve_app

    cfg = load_config(args)
    if args.action == "up":
        cfg = cfg.model_copy(update={"detached": True})
        try:
            url = start_serve_app(cfg)
        except TimeoutError as exc:
            say(f"error: {exc}", err=True)
            return 1
        say(f"serving {', '.join(cfg.model_ids()) or 'external endpoint'} at {url}")
        return 0
    if args.action == "down":
        stop_serve_app(cfg)
        say("stopped")
        return 0
    status = serve_status(cfg)
    say(json.dumps(status, indent=2))
    return 0 if status["ready"] else 3
