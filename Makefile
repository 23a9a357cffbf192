# Two commands do everything on a machine with only Go: `make run`, `make test`.
GO      ?= go
# The race detector needs cgo and a C compiler; use it where one exists.
RACE    := $(shell command -v gcc >/dev/null 2>&1 && [ "$$($(GO) env CGO_ENABLED)" = 1 ] && echo -race)
PKGS    := ./...

.PHONY: run build image test lint fmt vet staticcheck fuzz compare bench redis-instructions clean

## run: serve the API on embedded stand-ins (or the servers the SECKILL_* variables name)
run:
	$(GO) run ./app

## build: the binary, bin/seckill
build:
	$(GO) build -o bin/seckill ./app

## image: the server's image (deploy/Containerfile), FROM scratch: nothing is pulled. Built
## with podman (in docker's format, which keeps the HEALTHCHECK), or docker where its daemon
## answers; IMAGE names it. The version and commit are the binary's (seckill version) and the
## image's labels.
IMAGE     ?= seckill:latest
CONTAINER ?= $(shell if command -v podman >/dev/null 2>&1; then echo podman; elif docker info >/dev/null 2>&1; then echo docker; fi)
COMMIT    := $(shell git rev-parse HEAD 2>/dev/null)
image:
	@test -n "$(CONTAINER)" || { echo "make image: needs podman, or docker with a daemon (Debian: apt-get install -y podman runc)"; exit 1; }
	rm -rf bin/image && mkdir -p bin/image
	CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=true -tags timetzdata -ldflags="-s -w" -o bin/image/seckill ./app
	cp /etc/ssl/certs/ca-certificates.crt bin/image/
	printf 'root:x:0:0:root:/:/sbin/nologin\nseckill:x:65532:65532:seckill:/:/sbin/nologin\n' > bin/image/passwd
	printf 'root:x:0:\nseckill:x:65532:\n' > bin/image/group
	$(CONTAINER) build -f deploy/Containerfile -t $(IMAGE) $(if $(filter podman,$(CONTAINER)),--format docker) \
		--label org.opencontainers.image.title=seckill \
		--label org.opencontainers.image.revision=$(COMMIT) \
		--label org.opencontainers.image.version="$$(bin/image/seckill version)" \
		bin/image

## test: every test, against embedded stand-ins, plus real Redis and MySQL
## when SECKILL_TEST_REDIS_URL and SECKILL_TEST_MYSQL_DSN are set
test:
	$(GO) test $(RACE) -count=1 -timeout 35m $(PKGS)

## fuzz: run the fuzz targets for FUZZTIME each (their seed corpora run in `make test`)
FUZZTIME ?= 60s
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzDecodeOrder -fuzztime $(FUZZTIME) ./core
	$(GO) test -run '^$$' -fuzz FuzzRequests -fuzztime $(FUZZTIME) ./app/server

## compare: the same sale on every backend, measured; writes compare-results/ (untracked).
## Real Redis and MySQL when SECKILL_REDIS_URL and SECKILL_MYSQL_DSN are set, embedded otherwise;
## COMPARE_FLAGS=-write-docs (real servers only) rewrites the committed docs/results.md.
COMPARE_FLAGS ?=
compare:
	$(GO) run ./app/lab/seckill-lab compare $(COMPARE_FLAGS)

## lifecycle: the order lifecycle per backend and expiry mechanism: how soon an expired unit
## is sold again, and the races (pay at the deadline, cancel while paying, a late notification,
## an instance killed mid-expiry, Redis lost); real servers only; writes compare-results/lifecycle.md,
## LIFECYCLE_FLAGS=-write-docs the committed docs/lifecycle.md.
LIFECYCLE_FLAGS ?=
lifecycle:
	$(GO) run ./app/lab/seckill-lab lifecycle $(LIFECYCLE_FLAGS)

## bench: Go benchmarks, then the load run that prints each ratio against its baseline, then the
## opening, open-loop past capacity (seckill-lab opening -h)
## (needs SECKILL_REDIS_URL and SECKILL_MYSQL_DSN; SECKILL_TEST_REDIS_URL for the Redis benchmark,
## SECKILL_TEST_MYSQL_DSN for the dead-letter one on MySQL, which otherwise says it ran on SQLite,
## and for the audit's snapshot of a long sale, which needs it)
BENCH_FLAGS ?=
OPENING_FLAGS ?=
bench:
	$(GO) build -o bin/seckill-lab ./app/lab/seckill-lab
	$(GO) test -run '^$$' -bench . -benchmem ./core ./adapters/redisreserve
	$(GO) test -run '^$$' -bench DeadLetters100k -benchtime 1x ./adapters/mysqlstore
	$(GO) test -run '^$$' -bench SaleSnapshot -benchmem ./adapters/mysqlstore
	$(GO) test -run '^$$' -bench RefundSweep10k -benchtime 1x ./app/server
	./bin/seckill-lab bench $(BENCH_FLAGS)
	./bin/seckill-lab opening $(OPENING_FLAGS)

## redis-instructions: Redis's own instructions per reservation, the batch script against the
## naive one (BenchmarkReserve's redis-instructions/order), counted by valgrind's callgrind
## around a redis-server of its own: a figure that does not move with the machine's speed, as
## time does here. Needs valgrind and redis-server. The buyers hashes are hash tables, as past a
## voucher's first 512 buyers (REDIS_INSTR_ARGS= for Redis's defaults: listpacks below 512).
REDIS_INSTR_ORDERS ?= 10000
REDIS_INSTR_ARGS   ?= --hash-max-listpack-entries 0
REDIS_INSTR_BENCH  ?= BenchmarkReserve/(naive-.*|batch32-compact|batch32-32vouchers-compact)$$
redis-instructions:
	@dir=$$(mktemp -d); \
	valgrind --tool=callgrind --callgrind-out-file=$$dir/callgrind.out redis-server --port 0 \
		--unixsocket $$dir/redis.sock --save '' --appendonly no --dir $$dir $(REDIS_INSTR_ARGS) >$$dir/redis.log 2>&1 & \
	pid=$$!; \
	for i in $$(seq 150); do [ -S $$dir/redis.sock ] && break; sleep 0.2; done; \
	SECKILL_TEST_REDIS_URL=unix://$$dir/redis.sock $(GO) test -run '^$$' -bench '$(REDIS_INSTR_BENCH)' \
		-benchtime $(REDIS_INSTR_ORDERS)x ./adapters/redisreserve; \
	rc=$$?; kill $$pid; wait $$pid 2>/dev/null; rm -rf $$dir; exit $$rc

## lint: gofmt, go vet and staticcheck (fetched by go run, pinned)
lint: fmt vet staticcheck
fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
vet:
	$(GO) vet $(PKGS)

clean:
	rm -rf bin

staticcheck:
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
