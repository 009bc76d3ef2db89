"""What the stages of tasks/ share and none of them is: the stage runner and its keys (stage.py), the run
directory's paths (layout.py, RunLayout), the bounded Ray fan-out (fanout.py) and the judge session with
its batch store (judge_session.py, judge_batches.py). Every module directly in tasks/ defines a stage."""
