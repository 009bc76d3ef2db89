"""Production traces as the systems of a run, and the run's judgments written back onto them (issue 47).

select.py picks the traces of an MLflow experiment (filter, since, max, a seeded uniform sample);
mapping.py reads each into one row of the outputs table (tasks/outputs.py: question, answer, contexts,
reference, system) or counts it under the reason it could not be used; write_back.py logs each judgment as
MLflow feedback on its trace, once. docs/traces.md describes all three.
"""
