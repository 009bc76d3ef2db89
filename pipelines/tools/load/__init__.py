"""`ccrs load-test`: real CCRS judge requests fired at an endpoint at several concurrency levels, one module a
job: the requests and their pool (pool.py), one request and one level measured (measure.py), the whole test
(run.py) and its files (outputs.py). `ccrs load-test` (pipelines/load_cmd.py) reaches them through the
names below.
"""
from pipelines.tools.load.outputs import write_outputs
from pipelines.tools.load.pool import LoadTestError
from pipelines.tools.load.run import LoadTestConfig, run_load_test

__all__ = ["LoadTestConfig", "LoadTestError", "run_load_test", "write_outputs"]
