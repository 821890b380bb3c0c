# ObjectGraph — the commands the README promises.
#   make demo   the main job on the bundled Debian package index
#   make test   every test (a short, bounded property/fuzz pass included)
#   make bench  the benchmark package (release mode)
#   make fuzz   longer property runs
#   make soak   200 SIGKILL rounds of the crash test per durability policy
#   make install   build graph-journal (release, Swift runtime linked statically) and install it to $(PREFIX)/bin

SWIFT ?= swift
PREFIX ?= /usr/local
DEPS := Tools/install-deps.sh

.PHONY: all deps build demo test fuzz soak bench bench-peers fixture install clean

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

soak: deps
	OBJECTGRAPH_CRASH_ROUNDS=200 $(SWIFT) test --filter Crash

bench: deps
	cd Tools/Benchmarks && $(SWIFT) package --allow-writing-to-directory .benchmarkBaselines benchmark

# Installs redis-server if missing, then compares ObjectGraph with SQLite (GRDB) and Redis's AOF
# (issue 7); writes Tools/Benchmarks/Results/peers.md and cold-start.svg. About 5-10 minutes.
bench-peers: deps
	@bash Tools/Benchmarks/install-peers.sh
	cd Tools/Benchmarks && $(SWIFT) run -c release peer-comparison

# Regenerates the bundled fixture from this machine's apt lists (run `apt-get update` first).
fixture: deps
	$(SWIFT) run -c release debian-fixture /var/lib/apt/lists/deb.debian.org_debian_dists_bookworm_main_binary-amd64_Packages.lz4 Fixtures/debian-packages.jsonl.lz4

# The operators' tool (README, "The journal tool").
# Linked with the Swift runtime and Foundation statically: the tool then starts in ~6 ms
# instead of ~12 ms (dynamic loading and relocation), a sixth of a 1M-object `verify`, and
# runs on a server that has no Swift toolchain.
install: deps
	$(SWIFT) build -c release --product graph-journal --static-swift-stdlib
	install -d "$(DESTDIR)$(PREFIX)/bin"
	install -m 0755 "$$($(SWIFT) build -c release --show-bin-path)/graph-journal" "$(DESTDIR)$(PREFIX)/bin/graph-journal"

clean:
	rm -rf .build demo-store Tools/Benchmarks/.build
