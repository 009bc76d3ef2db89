"""Ray stages of the pipeline. Each stage reads/writes Parquet in a run directory and is keyed by a hash
of its inputs, config and code version (see tasks/runtime/stage.py). May import retrievers/, judges/,
stats/."""
