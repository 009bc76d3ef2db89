"""The judge's endpoint for the tools that judge outside a run (`ccrs probe`, `ccrs vera score`,
`ccrs load-test`), found as `ccrs run` finds it: the judge's own endpoint (judge.base_url) where the config
names one, else the config's shared one (infra.serving.llm_endpoint: `serving.base_url` of an external
profile, else the Serve app, started when not already up and removed again afterwards)."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def judge_endpoint(config, shutdown_ray: bool = False,
                   announce: Callable[[str], None] | None = None) -> Iterator[str]:
    """The judge's /v1 URL for the `with` block. `shutdown_ray`: shut down a Ray started for the app."""
    if config.judge.base_url:
        yield config.judge.base_url
        return
    from infra.serving import llm_endpoint

    with llm_endpoint(config.serving, shutdown_ray=shutdown_ray, announce=announce) as url:
        yield url


def judge_client(config):
    """The client settings of the judge's requests (its own key where it has its own endpoint)."""
    from tasks.judge import judge_client_config

    return judge_client_config(config.judge, config.client)


def fitted_judge(config, suites: list[str], base_url: str, err: bool = True):
    """The config's judge with what its endpoint decides (tasks.judge.fit_judge: `scoring: expected`
    probed, `structured_output: if_accepted` settled), said in one line where the endpoint decided one
    (on stderr, a tool's note; `err=False`: on stdout, as `ccrs run` and `ccrs evaluate` say their
    settings)."""
    from infra.console import say
    from tasks.judge import fit_judge

    judge, line = fit_judge(suites, config.judge, judge_client(config), base_url)
    if line:
        say(line, err=err)
    return judge
