GO       ?= go
BIN      := bin/staticpod
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME ?= 10m

.PHONY: all build deps test unit fuzz-quick fuzz lint run bench clean

all: build

# build writes a static binary: the same file runs as the daemon, the CLI, the pod
# sandbox process (inside a root that holds nothing else) and the log writer.
build:
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) .

# deps installs containerd, runc and busybox-static through apt when they are missing.
deps:
	./hack/deps.sh

# test runs every test, unit and integration (a private containerd is started by the
# tests themselves), then the manifest fuzzer for a short while.
test: deps
	$(GO) test -count=1 ./...
	$(MAKE) fuzz-quick

# unit runs the tests that need no containerd.
unit:
	$(GO) test -count=1 -short ./...

fuzz-quick:
	$(GO) test -run='^$$' -fuzz=FuzzLoad -fuzztime=10s -fuzzminimizetime=5s ./manifests

fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzLoad -fuzztime=$(FUZZTIME) -fuzzminimizetime=10s ./manifests

lint:
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

bench: deps
	$(GO) test -run='^$$' -bench=. -benchmem ./...

# run does staticpod's main job on examples/. Until `staticpod run` is built, it
# validates the examples.
run: deps build
	$(BIN) validate examples/

clean:
	rm -rf bin
