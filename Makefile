# The two set-up commands of the README.
.PHONY: demo test
demo:  ## install (CPU stack) and run the main job on the embedded default
	bash infra/local/install.sh && .venv/bin/ccrs run
test:  ## install (CPU stack + headless Chromium) and run the whole test suite
	bash infra/local/install.sh --with-browser && .venv/bin/python -m pytest -q tests
