# One entry point for a fresh machine: `make demo` runs the default experiment,
# `make test` runs the whole test suite. Both install what they need first.
VENV      := .venv
PYTHON    ?= python3
BIN       := $(VENV)/bin
CORES     ?= 2
# Debian packages the sandboxed sessions and checks rely on: bwrap is the
# containment boundary; python3-pytest gives sandboxed verify/oracle commands a
# pytest that lives under /usr (host virtualenvs are never mounted); python3-pip installs the
# MCP SDK for that same system python3 (mcp-sdk); ripgrep is the `rg` opencode searches with (without it
# on PATH it tries to download one, and a cell has no network).
APT_PACKAGES := bubblewrap python3-pytest python3-pip git ripgrep

MCP_SDK   := tools/mcp-python

.PHONY: setup system python tools mcp-sdk prices browser gvisor demo mined-demo test test-cli clean report-screenshot inspect-screenshot

setup: system python tools mcp-sdk prices

system:
	@missing=""; \
	command -v bwrap >/dev/null || missing="$$missing bubblewrap"; \
	/usr/bin/python3 -c 'import pytest' 2>/dev/null || missing="$$missing python3-pytest"; \
	command -v git >/dev/null || missing="$$missing git"; \
	command -v rg >/dev/null || missing="$$missing ripgrep"; \
	/usr/bin/python3 -m pip --version >/dev/null 2>&1 || missing="$$missing python3-pip"; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

python: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,inspect]'
	touch $@

# The community price tables config `agent.prices.source` may name (tools/price-tables.json pins each release and
# its table's SHA-256): the release's wheel is downloaded, never installed or imported, and only its table is kept.
prices: tools/price-tables/.fetched

tools/price-tables/.fetched: tools/price-tables.json $(VENV)/.installed
	$(BIN)/python -m skillbench.execution.price_tables fetch
	touch $@

tools: tools/node_modules/.installed tools/copilot/.unpacked

# Copilot CLI unpacks its package (JavaScript, built-in skills, its own rg; 235 MB) into a cache on its first
# start. It is unpacked once here, next to a hard link of its native executable, into the one folder every
# session binds read-only (agents/copilot.py), so no cell unpacks or downloads anything.
tools/copilot/.unpacked: tools/node_modules/.installed
	rm -rf tools/copilot
	mkdir -p tools/copilot
	ln -f tools/node_modules/@github/copilot-linux-x64/copilot tools/copilot/copilot 2>/dev/null || \
	  cp tools/node_modules/@github/copilot-linux-x64/copilot tools/copilot/copilot
	env -i PATH=/usr/bin:/bin HOME=/nonexistent COPILOT_PKG_CACHE_HOME=$(CURDIR)/tools/copilot \
	  COPILOT_SEA_EXTRACT_ONLY=1 tools/copilot/copilot
	test -f tools/copilot/pkg/linux-x64/$$(node -p 'require("./tools/node_modules/@github/copilot/package.json").version')/.extraction-complete
	chmod -R a+rX,go-w tools/copilot
	touch $@

# `npm install` from the lock, not `npm ci`: the registry has no build of opencode for some platforms,
# so the lock cannot list every optional platform package and `npm ci` refuses it as out of sync. The
# lock must come out unchanged, so what is installed is still exactly what it pins.
tools/node_modules/.installed: tools/package.json tools/package-lock.json
	cp tools/package-lock.json tools/.package-lock.pinned
	cd tools && npm install --no-audit --no-fund --loglevel=error
	cmp -s tools/package-lock.json tools/.package-lock.pinned || \
	  { mv tools/.package-lock.pinned tools/package-lock.json; \
	    echo "tools/package-lock.json does not match tools/package.json: run npm install in tools/ and commit the lock" >&2; exit 1; }
	rm -f tools/.package-lock.pinned
	touch $@

# The MCP Python SDK for the demo's MCP server (config/mcp-demo.yaml). Servers run in a nested sandbox
# where host virtualenvs are not mounted: the SDK is installed, for the system python3 that runs the
# server, into a project folder the server's sandbox mounts read-only (world-readable, so it is bound
# as it is rather than copied into every cell).
mcp-sdk: $(MCP_SDK)/.installed

$(MCP_SDK)/.installed:
	rm -rf $(MCP_SDK)
	umask 022 && /usr/bin/python3 -m pip install -q --no-warn-script-location --root-user-action=ignore --target $(MCP_SDK) 'mcp==2.3.0'
	touch $@

# Headless Chromium (Debian's `chromium`) opens the report pages in the tests and takes the README's screenshots.
browser:
	@command -v chromium >/dev/null || { echo "installing Debian package: chromium"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; }

# gVisor's `runsc` (Debian's package; optional, not part of setup or test): the second containment boundary
# docs/gvisor.md measures with bench/gvisor_probe.py. Nothing in the pipeline uses it yet.
gvisor:
	@command -v runsc >/dev/null || { echo "installing Debian package: runsc"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends runsc; }
	runsc --version

demo: setup
	$(BIN)/snakemake --cores $(CORES)

# The mined demo (optional, not part of setup or test): a real library's history made from its pinned PyPI sdists
# (tasks/mined-demo.releases.json: more-itertools 6.0.0 to 11.2.1, one commit per release, the changelog entry as
# the message; downloaded in Bubblewrap, digests checked, never installed or imported), mined into tasks/mined-demo/
# by `skillbench tasks mine`, then run offline with config/mined-demo.yaml (whose check_task steps are the task
# check `skillbench check` runs). Everything lands under tasks/mined-demo/ (gitignored); rerunning keeps the history
# and the suite already made (remove the folder to mine again). The suite's slowest test (test_primes, half
# the suite's time from 10.6.0 on) is left out of every mined command.
MINED_DEMO      := tasks/mined-demo
MINE_JOBS       ?= 2
MINED_DEMO_TEST := python3 -m pytest -k 'not test_primes'

mined-demo: setup
	$(BIN)/python -m skillbench.tasksupply.releases tasks/mined-demo.releases.json $(MINED_DEMO)/more-itertools $(MINED_DEMO)/sdists
	test -f $(MINED_DEMO)/tasks.yaml || $(BIN)/skillbench tasks mine --repo $(MINED_DEMO)/more-itertools \
	  --out $(MINED_DEMO) --jobs $(MINE_JOBS) --test-command "$(MINED_DEMO_TEST)"
	$(BIN)/snakemake --cores $(CORES) --configfile config/mined-demo.yaml

# Test workers: each runs one test file at a time (a file's tests share its runs); the workflow tests'
# conftest puts the longest files first. TEST_WORKERS=0 runs the suite in one process.
TEST_WORKERS ?= 2

test: setup browser
	$(BIN)/ruff check scripts tests bench
	$(BIN)/ruff format --check scripts tests bench
	$(BIN)/snakefmt --check Snakefile workflow/rules
	$(BIN)/snakemake --lint
	$(BIN)/mypy
	PYTHONPATH=scripts $(BIN)/lint-imports
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=30

# The workflow tests against another Claude Code CLI than the pinned one: `make test-cli CLAUDE_CODE=2.1.332`
# installs that version once into tools/cli-<version>/ and points the test fixtures at it
# (SKILLBENCH_TEST_CLI sets agent.cli in every test project). WORKFLOW_TESTS narrows the run to some files.
CLAUDE_CODE    ?=
WORKFLOW_TESTS ?= tests/workflow
CLI_PREFIX      = tools/cli-$(CLAUDE_CODE)
ifneq ($(filter test-cli,$(MAKECMDGOALS)),)
ifeq ($(CLAUDE_CODE),)
$(error name the CLI version to test: make test-cli CLAUDE_CODE=2.1.332)
endif
endif

test-cli: setup $(CLI_PREFIX)/.installed
	SKILLBENCH_TEST_CLI=$(abspath $(CLI_PREFIX))/node_modules/.bin/claude $(BIN)/pytest -q $(WORKFLOW_TESTS)

tools/cli-%/.installed:
	npm install --prefix tools/cli-$* --save-exact --no-audit --no-fund --loglevel=error @anthropic-ai/claude-code@$*
	touch $@

# The HTML report of the demo run (`snakemake --report`), and PNGs taken with headless Chromium for the README:
# its run page (docs/report.png) and the page of one cell (docs/cell-page.png).
CELL_PAGE := results/demo/pages/gen1/cells/money-thousands/candidate_workflow/run0.html

report-screenshot: setup browser
	$(BIN)/snakemake --cores $(CORES)
	$(BIN)/snakemake --report results/demo/report.html
	$(BIN)/python -m skillbench.reporting.screenshot results/demo/report.html docs/report.png --size 1400,1150
	$(BIN)/python -m skillbench.reporting.screenshot $(CELL_PAGE) docs/cell-page.png --standalone --size 1200,1500

# `inspect view` on the demo's exported Inspect logs (docs/inspect-view.png): one candidate cell's messages.
INSPECT_PORT ?= 7575
INSPECT_LOG  := demo_gen1_candidate_workflow.eval
INSPECT_PAGE := http://127.0.0.1:$(INSPECT_PORT)/\#/logs/$(INSPECT_LOG)/samples/sample/money-thousands/1/messages

inspect-screenshot: setup browser
	$(BIN)/snakemake --cores $(CORES)
	$(BIN)/skillbench export --inspect results/demo
	$(BIN)/inspect view --log-dir results/demo/inspect --host 127.0.0.1 --port $(INSPECT_PORT) & viewer=$$!; \
	  trap 'kill $$viewer' EXIT; sleep 5; \
	  $(BIN)/python -m skillbench.reporting.screenshot '$(INSPECT_PAGE)' docs/inspect-view.png \
	    --wait-for ASSISTANT --size 1400,1000

clean:
	rm -rf results logs .snakemake
