"""Planning a run before it is made (`ccrs plan`), one module a job: how many questions (power.py), how
many human labels (labels.py), what a config will cost (cost.py, with its calibration sample in
cost_sample.py, its prompt-token meter in cost_meter.py and its text in cost_render.py)."""
