"""How `ccrs label --design` draws the questions to label, and what `ccrs plan labels --design` plans for
(docs/human-labels.md): uniform, a seeded random order of every question; active, each question drawn once
with a probability that grows with the judge's uncertainty (pipelines/tools/labeling/design.py). A module
of its own, importing nothing: the labels extension declares the option with these names."""

UNIFORM, ACTIVE = "uniform", "active"
DESIGNS = (UNIFORM, ACTIVE)
DEFAULT_MARGIN = 0.05  # active: a pair whose anytime interval lies in [-margin, margin] is equivalent
