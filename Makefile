# kafka-archive: make demo | make test | make lint
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-full test-unit test-integration lint docs install clean bench simulate

install: $(STAMP)

$(STAMP): pyproject.toml
	@command -v java >/dev/null 2>&1 || { echo "Spark needs Java 17+: apt-get install openjdk-17-jre-headless" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	PYTHONPATH=testbed $(BIN)/python samples/demo.py

# make bench [BENCH_SHAPE=keyed|even|wide|follow|compact] [BENCH_MB=1024] [BENCH_VALUE_BYTES=200]
#            [BENCH_FORMATS=JSON,BYTES] [BENCH_BROKER=tansu|kafka] [BENCH_CONNECT=1|0]
#            [BENCH_WIDE_RECORDS=10]
#            [BENCH_WIDE_TOPICS=50] [BENCH_WIDE_PARTITIONS=20] (BENCH_SHAPE=wide)
#            [BENCH_FOLLOW_RATE=5000] [BENCH_FOLLOW_SECONDS=60] [BENCH_POLL_INTERVAL=5]
#            [BENCH_FOLLOW_FLUSH_INTERVAL=1] [BENCH_FOLLOW_PARTITIONS=4]
#            [BENCH_FOLLOW_ACTIVE=4] (BENCH_SHAPE=follow)
# (wide, and BENCH_BROKER=kafka, run Apache Kafka: Java and Maven, as for make test; so does
# the Kafka Connect peer of keyed and even, BENCH_CONNECT=0 skips it)
bench: $(STAMP)
	$(BIN)/pip install --quiet -e '.[bench]'
	@# Bytecode as a pip install writes it: measure runs, not compiling (PYTHONDONTWRITEBYTECODE).
	$(BIN)/python -m compileall -q src >/dev/null
	PYTHONPATH=testbed $(BIN)/python bench/run.py

# The integration tests run Apache Kafka (tests/integration/kafka_broker.py): Java and Maven
# fetch it once from Maven Central (testbed/kafka/pom.xml) into ~/.cache/kafka-archive.
# The tests marked every_s3 also run against SeaweedFS's S3 gateway, which Go builds once
# from the Go module proxy (testbed/seaweedfs.py) into the same cache: about 6 minutes.
# Spark's Iceberg runtime (testbed/iceberg/pom.xml) and the pyspark it is built for come
# once into the same cache too (testbed/iceberg_spark.py: Maven, pip).
KAFKA_TOOLS = command -v mvn >/dev/null 2>&1 && command -v java >/dev/null 2>&1 || \
	{ echo "make test runs Apache Kafka and needs Java 17+ and Maven: apt-get install openjdk-17-jre-headless maven" >&2; exit 1; }; \
	command -v go >/dev/null 2>&1 || \
	{ echo "make test builds SeaweedFS (a second S3 implementation) and needs Go: https://go.dev/doc/install" >&2; exit 1; }; \
	command -v chromium >/dev/null 2>&1 || \
	{ echo "make test looks at the status page in a headless browser and needs Chromium: apt-get install chromium" >&2; exit 1; }
TESTBED = PYTHONPATH=testbed $(BIN)/python tests/integration/kafka_broker.py >/dev/null && \
	PYTHONPATH=testbed $(BIN)/python testbed/seaweedfs.py >/dev/null && \
	PYTHONPATH=testbed $(BIN)/python testbed/iceberg_spark.py >/dev/null

test: $(STAMP)
	@$(KAFKA_TOOLS)
	$(TESTBED)
	$(BIN)/python -m pytest -m "not full"

# The whole product of the read-side matrix (tests/integration/read/test_read_matrix.py).
test-full: $(STAMP)
	@$(KAFKA_TOOLS)
	$(TESTBED)
	$(BIN)/python -m pytest -m full

test-unit: $(STAMP)
	$(BIN)/python -m pytest -m "not integration"

test-integration: $(STAMP)
	@$(KAFKA_TOOLS)
	$(TESTBED)
	$(BIN)/python -m pytest -m "integration and not full"

# The commit protocol's deterministic simulation (issue 37, archiver/protocol/simulation.py) at
# nightly size; make test runs a few hundred schedules. A failure prints its seed and moves;
# replay one: .venv/bin/python -m kafka_archive.archiver.protocol.simulation --replay --seed N
# [--steps M] (SIM_STEPS: moves of each schedule before faults stop) [--mutation NAME] (a
# historical bug reintroduced, mutations.MUTATIONS: the run must find a violating seed); then the
# same with maintenance sessions among the writers (issue 38, protocol/rewritesim.py)
SIM_SCHEDULES ?= 100000
SIM_SEED ?= 0
SIM_STEPS ?= 250
simulate: $(STAMP)
	$(BIN)/python -m kafka_archive.archiver.protocol.simulation --schedules $(SIM_SCHEDULES) \
		--seed $(SIM_SEED) --steps $(SIM_STEPS)
	$(BIN)/python -m kafka_archive.archiver.protocol.rewritesim --schedules $(SIM_SCHEDULES) \
		--seed $(SIM_SEED) --steps $(SIM_STEPS)

lint: $(STAMP)
	$(BIN)/ruff check src tests testbed samples bench docs
	$(BIN)/ruff format --check src tests testbed samples bench docs
	$(BIN)/mypy
	$(BIN)/lint-imports
	@# The manual builds without a warning (a broken link, a page missing from nav); the site
	@# goes to a temporary directory, never into the tree.
	site=$$(mktemp -d) && NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet -d "$$site"; \
		status=$$?; rm -rf "$$site"; exit $$status

# The reference pages (docs/reference/) from the code's tables; tests/unit/docs fails when
# they are stale.
docs: $(STAMP)
	$(BIN)/python docs/gen_reference.py

clean:
	rm -rf $(VENV) build dist site src/*.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis
