# One-command set-up on a fresh machine (run as root, or with sudo available for apt-get).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PIP := $(VENV)/bin/pip
AUDIT := $(VENV)/bin/audit
SYSTEM_PKGS := espeak-ng flite sox ffmpeg libsndfile1
TEST_PKGS := sctk pocketsphinx-testdata chromium
APT := $(shell command -v sudo >/dev/null 2>&1 && [ "$$(id -u)" != 0 ] && echo sudo) apt-get
EXTRAS := bundled,speaker,semantic,report,conversation,kokoro,demo
# Where pip takes torch from. Empty: pip's default index (on Linux the CUDA build, right for GPU
# machines). CPU-only machines: make demo TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
TORCH_INDEX_URL ?=
# make demo: the quick demo (a balanced 45-clip subset of the demo corpus). FULL=1: all 208 clips.
FULL ?=
DEMO_RECIPE := $(if $(FULL),demo-full,demo)
DEMO_CORPUS := $(if $(FULL),data/demo,data/demo-small)
DEMO_SUBSET := $(if $(FULL),full,small)
DEMO_TIMES := runs/$(DEMO_RECIPE)-times.tsv
STAGE := scripts/demo_stage.sh

.PHONY: help system system-test venv venv-test corpus demo test test-fast test-families clean

help:
	@echo "make demo   - install everything and run the quick demo audit (results in runs/demo); FULL=1: all 208 clips"
	@echo "make test   - install everything (plus test-only packages) and run the test suite"
	@echo "make test-families - the model families too heavy for make test (NeMo, qwen-asr), each in its own venv"

system:
	@missing=""; for p in $(SYSTEM_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing system packages:$$missing"; \
	  $(APT) update -qq && DEBIAN_FRONTEND=noninteractive $(APT) install -y -qq $$missing; fi

system-test: system
	@missing=""; for p in $(TEST_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing test packages:$$missing"; \
	  $(APT) update -qq && DEBIAN_FRONTEND=noninteractive $(APT) install -y -qq $$missing; fi

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip "setuptools<81" wheel

$(VENV)/.stamp-install: $(VENV)/bin/python pyproject.toml constraints.txt
	$(PIP) install -q -c constraints.txt torch==2.13.0 $(if $(TORCH_INDEX_URL),--index-url $(TORCH_INDEX_URL))
	$(PIP) install -q -c constraints.txt -e ".[$(EXTRAS)]"
	@touch $@

$(VENV)/.stamp-test: $(VENV)/.stamp-install
	$(PIP) install -q -c constraints.txt -e ".[$(EXTRAS),ray,test]"
	@touch $@

venv: $(VENV)/.stamp-install
venv-test: $(VENV)/.stamp-test

corpus: system venv
	@[ -f $(DEMO_CORPUS)/corpus.json ] || $(AUDIT) corpus demo --subset $(DEMO_SUBSET) --out $(DEMO_CORPUS)

# Each stage is timed (wall and CPU); the table is printed at the end and kept in $(DEMO_TIMES).
demo:
	@mkdir -p runs && rm -f $(DEMO_TIMES)
	@$(STAGE) $(DEMO_TIMES) "system packages" $(MAKE) --no-print-directory system
	@$(STAGE) $(DEMO_TIMES) "venv" $(MAKE) --no-print-directory venv
	@$(STAGE) $(DEMO_TIMES) "corpus" $(MAKE) --no-print-directory corpus FULL=$(FULL)
	@$(STAGE) $(DEMO_TIMES) "audit" $(AUDIT) run $(DEMO_RECIPE) --out runs/$(DEMO_RECIPE)
	@echo "Results are in runs/$(DEMO_RECIPE): summary.json, utterances.parquet, report.md, report.html"
	@$(STAGE) --table $(DEMO_TIMES)

test: system-test venv-test
	$(VENV)/bin/python -m pytest -q

test-fast: venv-test
	$(VENV)/bin/python -m pytest -q -m "not slow"

# NeMo and qwen-asr pin their own library releases (qwen-asr: transformers 4.57), so each family
# gets a virtual environment of its own (.venv-nemo, .venv-qwen-asr) and its own test file.
FAMILY_EXTRAS := qwen-asr nemo

test-families: system-test
	@set -e; for fam in $(FAMILY_EXTRAS); do v=.venv-$$fam; \
	  [ -x $$v/bin/python ] || { $(PYTHON) -m venv $$v; $$v/bin/python -m pip install -q --upgrade pip "setuptools<81" wheel; }; \
	  $$v/bin/python -m pip install -q torch==2.13.0 $(if $(TORCH_INDEX_URL),--index-url $(TORCH_INDEX_URL)); \
	  $$v/bin/python -m pip install -q -e ".[$$fam,report]" "pytest>=8"; \
	  echo "== family tests: $$fam ($$v)"; \
	  $$v/bin/python -m pytest -q -p no:cacheprovider tests/test_families_$$(echo $$fam | tr - _).py; \
	done

clean:
	rm -rf runs .pytest_cache
