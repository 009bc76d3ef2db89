"""Tools behind the `ccrs` subcommands that are not stages of `ccrs run`: load test, injection evaluation,
judge meta-evaluation, GQM report, regression compare, VERA bootstrap and topicality.

They may import tasks/, judges/, retrievers/ and stats/ (pipelines -> tasks -> libraries); no stage
imports them.
"""
