# ObjectGraph — the commands the README promises.
#   make demo   the main job on the bundled Debian package index
#   make test   make lint, every test (a short, bounded property/fuzz pass included), then make docs' check
#   make docs   the DocC catalog into .build/docs, failing on any DocC warning
#   make format rewrite every tracked Swift file with the toolchain's swift format (.swift-format)
#   make lint   fail on any tracked Swift file that make format would change (part of make test)
#   make bench  the benchmark package (release mode)
#   make bench-mapping   JSON mapping against JSONDecoder + GRDB (Tools/Benchmarks/Results/mapping.md)
#   make bench-realjob   a Debian mirror's syncs, reopen and memory against JSONDecoder + GRDB (Tools/Benchmarks/Results/realjob.md)
#   make bench-encryption   the 1M bulk load and cold open, encrypted at rest against plain (Tools/Benchmarks/Results/encryption.md)
#   make bench-indexes   #Index fetches and import with 0, 1, 2 indexes against SQLite's CREATE INDEX (Tools/Benchmarks/Results/indexes.md)
#   make bench-links   many-to-many and ordered relationships against to-one slots: build, open, memory, removal (Tools/Benchmarks/Results/links.md)
#   make fuzz   longer property runs, then the libFuzzer targets: the journal reader's, and hostile payloads through open, point in time and a follower (FUZZ_SECONDS each)
#   make replication-test   the replication suites against real nats-server processes, with 20 kill rounds
#   make fault-check   FAULT_SECONDS (300) of faults on a 3-server cluster, a writer, a standby and a follower, then the Jepsen-style check
#   make bench-failover   20 failovers on a 3-server loopback cluster: SIGKILL to the standby's first acknowledged save (Tools/Benchmarks/Results/failover.md)
#   make soak   200 SIGKILL rounds of the crash test per durability policy, 2000 damage cases, then make tsan
#   make migration-soak   50 SIGKILLs of a process migrating a 100k-object store, and a fault at every I/O call of a migration
#   make tsan   the concurrency tests built with the thread sanitizer
#   make bench-concurrency   snapshot readers during an import, and group commit against SQLite (Tools/Benchmarks/Results/concurrency.md)
#   make bench-replication   journal shipping to a local nats-server: writer cost, follower lag, restore (Tools/Benchmarks/Results/replication.md)
#   make install   build graph-journal (release, Swift runtime linked statically) and install it to $(PREFIX)/bin
#   make example   the HTTP service of Tools/PackageService: its tests, then one curl of each endpoint
#   make example-cluster   that service as a primary and a read replica over a 3-server NATS JetStream cluster on loopback
#   make bench-http   that service under wrk, ObjectGraph against GRDB (Tools/PackageService/Results/http.md)

SHELL := /bin/bash
SWIFT ?= swift
PREFIX ?= /usr/local
DEPS := Tools/install-deps.sh

.PHONY: all deps build demo test docs format lint replication-test fault-check bench-failover fuzz soak migration-soak tsan bench bench-concurrency bench-replication bench-peers bench-mapping bench-http example example-cluster fixture install clean

all: build

deps:
	@bash $(DEPS)

build: deps
	$(SWIFT) build

# The demo runs a release build. Its `@Entity` macros are loaded from the debug build of the
# macro target (already made by `make test`, else built in debug here, a minute or two):
# compiling swift-syntax again in release would take minutes and change none of the demo's
# timings (Package.swift, OBJECTGRAPH_MACRO_PLUGIN).
MACRO_PLUGIN := $(CURDIR)/.build/debug/ObjectGraphMacros-tool

demo: deps
	$(SWIFT) build --product ObjectGraphMacros
	OBJECTGRAPH_MACRO_PLUGIN=$(MACRO_PLUGIN) $(SWIFT) run -c release objectgraph-demo Fixtures/debian-packages.jsonl.lz4

# The fault check's short pass runs alone, after the other suites: its servers, kills and
# partitions would otherwise share the 2-core machine with every other replication suite.
test: deps lint
	OBJECTGRAPH_SKIP_FAULT_CHECK=1 $(SWIFT) test
	$(SWIFT) test --skip-build --filter FaultCheckTests
	bash Tools/build-docs.sh

# The toolchain's own formatter (`swift format`, shipped with Swift 6; no package to resolve),
# configured by the committed .swift-format: four-space indents, 120 columns, the default rules
# except four that would undo styles this code uses on purpose: several statements on a line
# (DoNotUseSemicolons), several variables in one declaration (OneVariableDeclarationPerLine), a
# closure argument before a trailing closure (OnlyOneTrailingClosureArgument) and an inline
# `/* EIO */` naming a literal (NoBlockComments).
# Only tracked files: the packages under Tools/ keep their own .build trees of checkouts.
SWIFT_FILES = $(shell git ls-files '*.swift')

format:
	$(SWIFT) format format --in-place --parallel $(SWIFT_FILES)

lint:
	$(SWIFT) format lint --strict --parallel $(SWIFT_FILES)

# The DocC catalog (Sources/ObjectGraph/ObjectGraph.docc) and every public doc comment, built
# into .build/docs as a static site; any DocC warning (a link that names nothing) fails it.
docs: deps
	$(SWIFT) build
	bash Tools/build-docs.sh

FUZZ_SECONDS ?= 300

fuzz: deps
	OBJECTGRAPH_PROPERTY_RUNS=2000 $(SWIFT) test --filter Property
	bash Tools/Fuzz/build.sh
	mkdir -p .build/fuzz/corpus
	.build/fuzz/journal-reader-fuzz -max_total_time=$(FUZZ_SECONDS) -max_len=8192 -artifact_prefix=.build/fuzz/ .build/fuzz/corpus Tools/Fuzz/corpus
	mkdir -p .build/fuzz/payload-corpus
	.build/fuzz/objectgraph-payload-fuzz -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -len_control=0 -artifact_prefix=.build/fuzz/payload- .build/fuzz/payload-corpus

# The replication suites (Tests/ReplicationTests) start their own nats-server processes on
# loopback (Debian's, installed by Tools/install-deps.sh) and stop them. `make test` runs them
# with 4 kill rounds; this runs them with 20, about 2 minutes.
replication-test: deps
	OBJECTGRAPH_REPLICATION_KILL_ROUNDS=20 $(SWIFT) test --filter ReplicationTests

# The fault checker (Tests/ReplicationTests/Faults; Docs/Replication.md, "Checking failover
# under faults"): 3 nats-servers, a writer under the synchronous policy, a standby and a plain
# follower, each a process (objectgraph-fault-child); for FAULT_SECONDS it injects one fault a
# round (kill -9 of the writer, SIGSTOP of the writer past its lease, kill -9 and restart of a
# server or the follower, and partitions over network namespaces where `ip netns` is allowed),
# then stops everything and checks the stream, every acknowledged save and every follower's
# directory. make test runs a short pass of 3 rounds. Needs root for the partitions; skipped
# with a message elsewhere.
FAULT_SECONDS ?= 300

fault-check: deps
	OBJECTGRAPH_FAULT_SECONDS=$(FAULT_SECONDS) $(SWIFT) test --filter FaultCheckTests

soak: deps
	OBJECTGRAPH_CRASH_ROUNDS=200 $(SWIFT) test --filter Crash
	OBJECTGRAPH_DAMAGE_CASES=2000 $(SWIFT) test --filter DamageMatrix
	$(MAKE) tsan

# The migration crash tests (Tests/ObjectGraphTests/MigrationCrashTests.swift) with 50 kills
# of a child migrating a 100k-object store at random moments instead of make test's 3; the
# seed is printed, OBJECTGRAPH_SEED replays it. Each kill copies the store, migrates and
# checks it: about 8 s a kill (7 minutes in all) in a debug build on two cores.
migration-soak: deps
	OBJECTGRAPH_MIGRATION_KILLS=50 $(SWIFT) test --filter MigrationCrash

# The suites where tasks and threads meet (snapshots read while a writer saves, group commit,
# cancellation from other tasks, change streams, the journal's reading helpers, page warming
# and unique index fills during replay), built with
# ThreadSanitizer in their own build folder: the sanitized build compiles everything again,
# swift-syntax included (5 to 12 minutes on two cores the first time), so it is not part of
# make test. The run itself takes about 2 minutes, and fails on any ThreadSanitizer report.
# One known blind spot: the hand-over of a contended Synchronization.Mutex happens in the
# uninstrumented standard library on Linux, so TSan can report a false race on data a Mutex
# guards (the tests' own shared state uses NSLock for that reason; the library types
# whose state is only touched inside their locks, and that were seen reported, are named in
# Tools/tsan-suppressions.txt).
TSAN_SUITES := AsyncStoreTests|ProgressCancellationTests|Observation|JournalStreamingReadTests|ChunkedPayloadTests|PayloadStreamBoundTests|PageWarmerTests|StreamingReplayTests|IndexFillJobTests

tsan: deps
	$(SWIFT) build --build-tests --sanitize=thread --scratch-path .build-tsan
	set -o pipefail; TSAN_OPTIONS="suppressions=$(CURDIR)/Tools/tsan-suppressions.txt" $(SWIFT) test --skip-build --sanitize=thread --scratch-path .build-tsan --filter "$(TSAN_SUITES)" 2>&1 | tee .build-tsan/last-run.log
	@! grep -q "WARNING: ThreadSanitizer" .build-tsan/last-run.log || { echo "ThreadSanitizer reported a race (.build-tsan/last-run.log)"; exit 1; }

bench: deps
	cd Tools/Benchmarks && $(SWIFT) package --allow-writing-to-directory .benchmarkBaselines benchmark

# Installs redis-server if missing, then compares ObjectGraph with SQLite (GRDB) and Redis's AOF;
# writes Tools/Benchmarks/Results/peers.md, peers.json and the charts bulk-upsert.svg,
# cold-start.svg and memory.svg. About 5-10 minutes.
bench-peers: deps
	@bash Tools/Benchmarks/install-peers.sh
	$(SWIFT) build --product ObjectGraphMacros
	cd Tools/Benchmarks && OBJECTGRAPH_MACRO_PLUGIN=$(MACRO_PLUGIN) $(SWIFT) run -c release peer-comparison

# Readers on snapshots while a writer imports 1M updates, and eight tasks committing durable
# transactions against SQLite's DatabasePool and Redis with appendfsync always; writes Tools/Benchmarks/Results/concurrency.md
# stamped with the commit. About 3 minutes after the release build. The macros come from the
# debug build of the macro target, as for make demo.
bench-concurrency: deps
	@bash Tools/Benchmarks/install-peers.sh
	$(SWIFT) build --product ObjectGraphMacros
	cd Tools/Benchmarks && export OBJECTGRAPH_MACRO_PLUGIN=$(MACRO_PLUGIN) \
	  && $(SWIFT) build -c release --product concurrency-comparison \
	  && $(SWIFT) build -c release --product commit-comparison \
	  && bin=$$($(SWIFT) build -c release --show-bin-path) \
	  && { echo "Measured at commit $$(git rev-parse --short HEAD), $$(date -u +%Y-%m-%dT%H:%MZ), on $$(nproc) cores."; echo; \
	       $$bin/concurrency-comparison; echo; $$bin/commit-comparison; } > Results/concurrency.md
	cat Tools/Benchmarks/Results/concurrency.md

# Journal shipping to NATS JetStream against a nats-server the benchmark starts on a free
# loopback port (Debian's, which `deps` installs): what shipping costs one-record saves, group
# commit and a 1M-object save; a follower's lag under 5k transactions per second; a restore of a
# 1M-object store from the stream against a local cold start. Writes
# Tools/Benchmarks/Results/replication.md stamped with the commit and the load average. About
# 3 minutes after the release build; macros as for make demo.
bench-replication: deps
	$(SWIFT) build --product ObjectGraphMacros
	cd Tools/Benchmarks && export OBJECTGRAPH_MACRO_PLUGIN=$(MACRO_PLUGIN) \
	  && $(SWIFT) build -c release --product replication-comparison \
	  && bin=$$($(SWIFT) build -c release --show-bin-path) \
	  && { echo "Measured at commit $$(git rev-parse --short HEAD), $$(date -u +%Y-%m-%dT%H:%MZ), on $$(nproc) cores; load average $$(cat /proc/loadavg)."; echo; \
	       echo "Command: \`make bench-replication\` (\`replication-comparison\`, release build)."; echo; \
	       $$bin/replication-comparison; } > Results/replication.md
	cat Tools/Benchmarks/Results/replication.md

# 20 failovers on three nats-servers in one JetStream cluster on loopback (free ports, stores in a
# temporary directory): a writer with the stream's lease (default time to live) saving under the
# synchronous policy is SIGKILLed, and the time until its standby took the stream over and until
# the standby's first acknowledged save is measured; the standby is then the writer and a new one
# starts. Writes Tools/Benchmarks/Results/failover.md (p50 and p99 against the lease's time to
# live) stamped with the commit, the date and the load average. About 2 minutes after the release
# build; macros as for make demo.
bench-failover: deps
	$(SWIFT) build --product ObjectGraphMacros
	cd Tools/Benchmarks && export OBJECTGRAPH_MACRO_PLUGIN=$(MACRO_PLUGIN) \
	  && $(SWIFT) build -c release --product failover-comparison \
	  && bin=$$($(SWIFT) build -c release --show-bin-path) \
	  && { echo "Measured at commit $$(git rev-parse --short HEAD), $$(date -u +%Y-%m-%dT%H:%MZ), on $$(nproc) cores; \`uptime\` before: $$(uptime)."; echo; \
	       echo "Command: \`make bench-failover\` (\`failover-comparison\`, release build)."; echo; \
	       $$bin/failover-comparison 20; echo; echo "\`uptime\` after: $$(uptime)."; } > Results/failover.md.new \
	  && mv Results/failover.md.new Results/failover.md
	cat Tools/Benchmarks/Results/failover.md

# Maps 1M records into a store, against JSONDecoder + GRDB: the real shape (packages, a
# maintainer connected by e-mail, dependencies by a list of names, shuffled) and flat people
# records, first runs in fresh processes, alternating; then the flat records' re-run, scaling
# and sync. Writes Tools/Benchmarks/Results/mapping.md. About 10 minutes after the release build;
# MAPPING_ARGS="--headline-only" runs the first table alone (about 4 minutes), "--records N"
# another size. Macros as for make demo (`--product` links the macro executable, which
# `--target` alone leaves unlinked in a tree that has not built the library yet).
MAPPING_ARGS ?=
bench-mapping: deps
	@bash Tools/Benchmarks/install-peers.sh
	$(SWIFT) build --product ObjectGraphMacros
	cd Tools/Benchmarks && OBJECTGRAPH_MACRO_PLUGIN=$(MACRO_PLUGIN) $(SWIFT) run -c release mapping-comparison $(MAPPING_ARGS)

# The job a Debian mirror does, on a generated index of bookworm's size (63,436 packages): a first
# sync, a second sync of the index with an overlay applied (with the sweep), a no-op resync, reopen
# and read, peak memory; ObjectGraph against JSONDecoder + GRDB, each run in a fresh process, 7
# rounds (REALJOB_ARGS="--rounds 5" for fewer). Writes Tools/Benchmarks/Results/realjob.md. A few
# minutes after the release build; macros as for make demo.
REALJOB_ARGS ?=
# Encryption at rest against none: the people workload's 1M bulk upsert and durable save, then
# the cold open, each in a fresh process, the two configurations alternating (ENCRYPTION_ARGS,
# default 25 rounds: a cold open of 70 ms varies by tens of percent from run to run here).
# Writes Tools/Benchmarks/Results/encryption.md; macros as for make demo. About a minute.
.PHONY: bench-encryption
bench-encryption: deps
	$(SWIFT) build --product ObjectGraphMacros
	cd Tools/Benchmarks && OBJECTGRAPH_MACRO_PLUGIN=$(MACRO_PLUGIN) $(SWIFT) run -c release encryption-comparison $(ENCRYPTION_ARGS)

.PHONY: bench-realjob
bench-realjob: deps
	@bash Tools/Benchmarks/install-peers.sh
	$(SWIFT) build --product ObjectGraphMacros
	cd Tools/Benchmarks && OBJECTGRAPH_MACRO_PLUGIN=$(MACRO_PLUGIN) $(SWIFT) run -c release realjob-comparison $(REALJOB_ARGS)

# Relationships stored as links (many-to-many, ordered to-many) against to-one slots over the same
# 100k owners and 1M members: build and durable save, open, heap per link, single removals from
# 1k, 10k and 100k members; each measurement in a fresh process. Writes
# Tools/Benchmarks/Results/links.md. About 2 minutes after the release build; macros as for make demo.
.PHONY: bench-links
bench-links: deps
	$(SWIFT) build --product ObjectGraphMacros
	cd Tools/Benchmarks && OBJECTGRAPH_MACRO_PLUGIN=$(MACRO_PLUGIN) $(SWIFT) run -c release links-comparison

# A custom migration stage that rewrites each of 1M objects, against a bulk import of the same
# objects at the new version, and a lightweight stage's open against a plain open; each phase in
# a fresh process, medians of 5 runs. Writes Tools/Benchmarks/Results/migration.md.
.PHONY: bench-migration
bench-migration: deps
	$(SWIFT) build --product ObjectGraphMacros
	cd Tools/Benchmarks && OBJECTGRAPH_MACRO_PLUGIN=$(MACRO_PLUGIN) $(SWIFT) run -c release migration-comparison

# Secondary indexes (#Index) against SQLite's CREATE INDEX through GRDB on 1M people-like
# records: an equality and a range fetch of 1% of the objects, and bulk import with 0, 1 and 2
# indexes (and the first query after it); each measurement in a fresh process, medians of 5
# rounds. Writes Tools/Benchmarks/Results/indexes.md. About 5 minutes after the release build.
.PHONY: bench-indexes
bench-indexes: deps
	@bash Tools/Benchmarks/install-peers.sh
	$(SWIFT) build --product ObjectGraphMacros
	cd Tools/Benchmarks && OBJECTGRAPH_MACRO_PLUGIN=$(MACRO_PLUGIN) $(SWIFT) run -c release indexes-comparison

# Structs converted one call at a time (upsert by a URL no unique constraint covers, then
# again to update, then plain inserts) at 10k, 50k and 100k objects: the time per struct, which
# must not grow with the number of objects. About a minute after the release build.
.PHONY: bench-struct-conversion
bench-struct-conversion: deps
	$(SWIFT) build --product ObjectGraphMacros
	cd Tools/Benchmarks && OBJECTGRAPH_MACRO_PLUGIN=$(MACRO_PLUGIN) $(SWIFT) run -c release struct-conversion

# Tools/PackageService, a separate package with its own .build (Hummingbird, GRDB): builds it
# in debug, runs its tests (each starts the service on a free loopback port and sends it real
# HTTP requests, over both backends), then starts it on a fresh store, curls every endpoint and
# stops it with SIGTERM (example.sh). The first build takes 10-15 minutes on two cores; after it,
# 25 seconds, or a minute when the library changed. `test --skip-build` runs what `build
# --build-tests` built: a plain `swift test` builds with other flags and would compile again.
example: deps
	@bash Tools/PackageService/install-bench-tools.sh
	cd Tools/PackageService && $(SWIFT) build --build-tests && $(SWIFT) test --skip-build
	bash Tools/PackageService/example.sh

# The same service as a primary (--replicate) and a read replica (--follow) over three
# nats-servers with JetStream on loopback (Tools/PackageService/cluster/nats-{1,2,3}.conf, client
# ports 14222-14224, stores in a temporary directory): a sync sent to the primary is read back
# from the replica, then everything the script started is stopped (example-cluster.sh). The
# service's debug build, made as make example makes it (--build-tests: the same flags, so
# neither target compiles again after the other); the run itself takes under a minute.
example-cluster: deps
	cd Tools/PackageService && $(SWIFT) build --build-tests
	bash Tools/PackageService/example-cluster.sh

# The service under wrk on loopback, ObjectGraph against SQLite through GRDB, alone and while
# syncs run; writes Tools/PackageService/Results/http.md. Release build, then about 5 minutes.
bench-http: deps
	bash Tools/PackageService/bench.sh

# Regenerates the bundled fixture from this machine's apt lists (run `apt-get update` first).
fixture: deps
	$(SWIFT) run -c release debian-fixture /var/lib/apt/lists/deb.debian.org_debian_dists_bookworm_main_binary-amd64_Packages.lz4 Fixtures/debian-packages.jsonl.lz4

# The operators' tool (README, "The journal tool").
# A fully static executable (Swift runtime, Foundation, liblz4 and glibc linked in): it runs on
# a server without a Swift toolchain, and starts in ~4 ms instead of ~7 ms for a PIE linked
# with the Swift runtime statically (the dynamic loader applied 76k relocations; measured with
# `perf stat -r 40 graph-journal --version`), a tenth of a 1M-object `verify`. The linker warns
# that Foundation's user-name, host and bundle lookups would need glibc's shared NSS modules at
# run time; the tool calls none of them. Built in its own scratch directory, so that the flags
# do not invalidate `.build`.
# The static link's known warnings (glibc's user, group, host and dlopen lookups, and its note
# on mktemp in Foundation) are filtered from the output: the tool calls none of those paths.
# Any other warning, and the build's exit status, come through. The installed binary is
# stripped (83 MB with symbols, 61 MB without).
STATIC_LINK_NOTES := -e "in statically linked applications requires at runtime the shared libraries" -e "the use of \`mktemp' is dangerous"

install: deps
	set -o pipefail; $(SWIFT) build -c release --product graph-journal --static-swift-stdlib -Xswiftc -static-executable --scratch-path .build/install 2>&1 \
		| { grep -v $(STATIC_LINK_NOTES) || true; }
	install -d "$(DESTDIR)$(PREFIX)/bin"
	install -m 0755 -s .build/install/release/graph-journal "$(DESTDIR)$(PREFIX)/bin/graph-journal"

clean:
	rm -rf .build demo-store demo-store-sync Tools/Benchmarks/.build
