"""`ccrs serve up|down|status`: the Ray Serve LLM app that hosts the readers and the judge.

`up` starts a Ray head that outlives the command (its pid is recorded under $CCRS_HOME/serve/), deploys
the app and waits for readiness (a clear TimeoutError after --ready-timeout seconds). `down` deletes the
app and stops that head. `status` prints what the endpoint serves, as JSON (it only asks the endpoint, so
it has no log file). Log records of `up` and `down`: $CCRS_HOME/logs/serve-<action>-<UTC time>.log.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser, name: str) -> None:
    parser.add_argument("action", choices=["up", "down", "status"])
    parser.add_argument("--profile", choices=["cpu", "cluster", "external"], default="cpu")
    parser.add_argument("--config", help="a ServingConfig YAML (default: infra/serve_configs/<profile>.yaml)")
    parser.add_argument("--host", help="bind address of the HTTP proxy (default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="HTTP port (default 8000)")
    parser.add_argument("--ready-timeout", type=float, dest="ready_timeout_s")
    parser.add_argument("--llm-base-url", "--base-url", dest="base_url",
                        help="external profile: OpenAI-compatible /v1 URL")


def console_log(args: argparse.Namespace) -> Path | None:
    from infra.console import home_log_file

    return None if args.action == "status" else home_log_file(f"serve-{args.action}")


def load_config(args: argparse.Namespace):
    from infra.serving import ServingConfig

    overrides = {"host": args.host, "port": args.port, "ready_timeout_s": args.ready_timeout_s,
                 "base_url": args.base_url}
    if args.config:
        return ServingConfig.from_yaml(args.config, **overrides)
    return ServingConfig.for_profile(args.profile, **overrides)


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
