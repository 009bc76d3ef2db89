"""`ccrs gqm testset`: the GQM thesis' test-set generator, one module a job: the corpus and the passages
each question's prompt shows (sources.py), the questions asked of the LLM and written as a dataset
(testset.py). `ccrs gqm testset` (pipelines/gqm_cmd.py) reaches them through the names below.
"""
from pipelines.tools.gqm.sources import draw_sources, read_corpus
from pipelines.tools.gqm.testset import Sampling, generate, write_testset

__all__ = ["Sampling", "draw_sources", "generate", "read_corpus", "write_testset"]
