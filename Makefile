# The two set-up commands of the README.
.PHONY: demo test
demo:  ## install (CPU stack) and run the main job on the embedded default
	bash infra/local/install.sh && .venv/bin/ccrs run
test:  ## install (CPU stack + headless Chromium), lint (ruff), run the whole test suite in random order
	bash infra/local/install.sh --with-browser && .venv/bin/python -m ruff check . && .venv/bin/python -m pytest -q --durations=15 tests
