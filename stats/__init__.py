"""Pure statistics kernels: arrays (or validated score frames) in, typed results out; numpy, scipy and pandas
only, no file read or written, no other project package imported (tests/test_architecture.py checks it).
Reading scores and hypotheses files and writing stats.json, tables and plots is tasks/ (report.py,
hypotheses_io.py, tables.py, plots.py)."""
