# The two commands of the README:
#   make up     build and run a one-machine cluster in ./poolfs-data
#   make test   run the whole test suite (installs PostgreSQL and fio if missing)
GO       ?= go
BIN      := bin/poolfs
UPFLAGS  ?=

.PHONY: build up test lint bench clean

build:
	./scripts/deps.sh
	$(GO) build -buildvcs=auto -o $(BIN) ./cmd/poolfs

up: build
	$(BIN) up $(UPFLAGS)

test:
	./scripts/deps.sh test
	@test -z "$$(gofmt -l cmd internal)" || { echo "gofmt needed:"; gofmt -l cmd internal; exit 1; }
	$(GO) vet ./...
	# The two longest packages first: go test starts packages in the order
	# named (-p of them at once, one per CPU), so neither is left to run last
	# and alone while the other CPU idles.
	$(GO) test -race -timeout 20m ./cmd/poolfs/ ./internal/cluster/ ./...
	# The mount tests again with requests over /dev/fuse (the run above
	# serves them over io_uring where the kernel has it), but for two long
	# ones that check the file system above the transport (fallocate's
	# property test, drop-behind of the page cache).
	POOLFS_TEST_URING=0 $(GO) test -race -timeout 10m -skip 'TestFallocateProperty|TestDropBehind' ./internal/fusefs/

lint:
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

bench: build
	./scripts/deps.sh bench
	./bench/run.sh

clean:
	rm -rf bin
