"""Retrieval half of the pipeline: dataset loaders, E5-tokenizer chunking, embedders, BM25/k-NN indexes,
retrieval metrics. Pure library code: imports neither judges/, pipelines/ nor Ray stage code (tasks/)."""
