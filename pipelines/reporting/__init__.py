"""Reporting of a run, below pipelines/ on the import graph and imported by no stage: the verdict
(summary.md), the reduce stage's tables/ and the failure tables."""
