# ObjectGraph — the commands the README promises.
#   make demo   the main job on the bundled Debian package index
#   make test   every test (a short, bounded property/fuzz pass included)
#   make bench  the benchmark package (release mode)
#   make fuzz   longer property runs

SWIFT ?= swift
DEPS := Tools/install-deps.sh

.PHONY: all deps build demo test fuzz bench fixture clean

all: build

deps:
	@bash $(DEPS)

build: deps
	$(SWIFT) build

demo: deps
	$(SWIFT) run -c release objectgraph-demo Fixtures/debian-packages.jsonl.lz4

test: deps
	$(SWIFT) test

fuzz: deps
	OBJECTGRAPH_PROPERTY_RUNS=2000 $(SWIFT) test --filter Property

bench: deps
	cd Tools/Benchmarks && $(SWIFT) package --allow-writing-to-directory .benchmarkBaselines benchmark

# Regenerates the bundled fixture from this machine's apt lists (run `apt-get update` first).
fixture: deps
	$(SWIFT) run -c release debian-fixture /var/lib/apt/lists/deb.debian.org_debian_dists_bookworm_main_binary-amd64_Packages.lz4 Fixtures/debian-packages.jsonl.lz4

clean:
	rm -rf .build demo-store Tools/Benchmarks/.build
