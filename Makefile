GO       ?= go
BIN      := bin/staticpod
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# COMMIT and DATE (the commit's time, UTC; never the clock's) go into the binary with
# VERSION: staticpod version prints them.
COMMIT   ?= $(shell git rev-parse HEAD 2>/dev/null)
DATE     ?= $(shell TZ=UTC0 git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null)
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME ?= 10m
# FUZZFLAGS are added to each fuzz run, e.g. FUZZFLAGS=-parallel=1 on a shared machine.
FUZZFLAGS ?=
# FUZZ_TARGETS are the fuzz targets, package:function: manifest decoding, every API
# endpoint, the CRI log reader, and the labels state is rebuilt from after a restart.
FUZZ_TARGETS := manifests:FuzzLoad api:FuzzAPI logs:FuzzRead containerdrt:FuzzLabels

.PHONY: all build release release-check deps test-deps test test-containerd2 unit fuzz-quick fuzz chaos soak lint run run-clean bench bench-containerd2 bench-quick bench-compare bench-go clean man install vm-test vm-test-arm64

all: build

# build writes a static binary, the daemon and the CLI, that carries the small
# staticpod-helper program it installs under its root dir to run as each container's log
# writer and each pod's sandbox process. hack/build.sh builds the helper into
# internal/helper/bin first, then staticpod; the end-to-end tests build with it too.
build:
	GO=$(GO) VERSION=$(VERSION) COMMIT=$(COMMIT) DATE=$(DATE) ./hack/build.sh $(BIN)

# release writes into DIST the release of the commit checked out (hack/release.sh):
# static binaries for linux/amd64, arm64 and arm (v7), each carrying the helper program
# of its architecture, a CycloneDX SBOM of each, a .deb and an .rpm of each (nfpm), a
# tarball of each with install.sh, the systemd unit and the OpenRC script, and
# SHA256SUMS. Every byte comes from the commit: its time is every file's in the archives.
# About 1 minute with a warm Go cache (8 on a loaded 2-core machine with a cold one).
DIST ?= dist
release:
	GO=$(GO) VERSION=$(VERSION) COMMIT=$(COMMIT) DIST=$(DIST) ./hack/release.sh

# release-check builds the release twice, into two directories, and fails unless every
# file is the same bytes in both (twice make release: about 2 minutes; not in make test).
release-check:
	rm -rf $(DIST)/check-a $(DIST)/check-b
	$(MAKE) release DIST=$(DIST)/check-a
	$(MAKE) release DIST=$(DIST)/check-b
	cd $(DIST) && diff -r check-a check-b && cmp check-a/SHA256SUMS check-b/SHA256SUMS
	@echo "release-check: the two builds are identical"; cat $(DIST)/check-a/SHA256SUMS

# deps installs containerd, runc, busybox-static (when /bin/busybox is not static) and
# the CNI plugins through apt when they are missing; test-deps also puts promtool (which
# checks the alerting rules) in .cache/bin, out of Debian's prometheus package.
deps:
	./hack/deps.sh

test-deps:
	./hack/deps.sh test

# test runs every test, unit and integration (a private containerd is started by the
# tests themselves), then each fuzz target for a short while. e2e takes 5 to 10
# minutes on a 2-core machine, about go test's default bound for a package: 30m.
test: test-deps
	PATH="$(CURDIR)/.cache/bin:$$PATH" $(GO) test -count=1 -timeout 30m ./...
	$(MAKE) fuzz-quick

# test-containerd2 runs the tests of every package whose tests start a containerd
# (today containerdrt, containerdrt/images, e2e, internal/ctrd and internal/testenv)
# again, against containerd CONTAINERD2_VERSION and its runc shim, built from the Go
# module proxy by hack/containerd2.sh once per version into CONTAINERD2_CACHE and reused
# after that. CI runs it after make test, so that containerd 1.6 and 2.x are both gates.
CONTAINERD2_VERSION ?= v2.4.2
CONTAINERD2_CACHE   ?= /var/cache/staticpod-containerd
test-containerd2: test-deps
	GO=$(GO) CONTAINERD2_VERSION=$(CONTAINERD2_VERSION) CONTAINERD2_CACHE=$(CONTAINERD2_CACHE) \
		./hack/containerd2.sh test

# unit runs the tests that need no containerd.
unit:
	$(GO) test -count=1 -short ./...

# fuzz-quick runs each fuzz target for 3,000 inputs (seconds each; counted, not timed:
# Go 1.26's fuzzer can fail a duration-bound run with a bare "context deadline exceeded"
# when its time ends on a loaded machine, golang/go#75804, fixed in Go 1.27); fuzz for
# FUZZTIME each (10m unless set). Go fuzzes one target of one package per run, so they
# run one after the other.
fuzz-quick:
	$(MAKE) fuzz FUZZTIME=3000x FUZZMINIMIZE=100x

FUZZMINIMIZE ?= 10s
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		echo "fuzz $${t#*:} in ./$${t%%:*} for $(FUZZTIME)"; \
		$(GO) test -run='^$$' -fuzz="^$${t#*:}\$$" -fuzztime=$(FUZZTIME) -fuzzminimizetime=$(FUZZMINIMIZE) $(FUZZFLAGS) ./$${t%%:*}; \
	done

# chaos runs the fault-injection scenarios (TestChaos*): a URL flapping through every
# kind of bad answer, 1,000 manifest files at once, a manifest rewritten 100 times a
# second, the manifest directory moved away and back, kill -9 of staticpod while 20 pods
# change, containerd restarted and stopped for 30 s, SIGTERM inside grace periods, the
# log and root filesystems full or read-only. Each takes under a minute, about 2.5
# minutes in all, and make test runs them too.
chaos:
	$(GO) test -count=1 -run='^TestChaos' ./httpsource ./watcher ./e2e

# soak runs staticpod for DURATION (default 1h; not in CI) with pods crashing every few
# seconds, probes failing and recovering, an edit of every manifest each minute and a
# container spamming its log; it samples staticpod's goroutines, descriptors and RSS and
# containerd's objects every minute into SOAK_OUT, prints them, and fails when one of them
# rises over the second half or rotation lets the logs grow.
DURATION ?= 1h
SOAK_OUT ?= $(CURDIR)/soak-samples.tsv
soak: deps
	$(GO) test -tags soak -count=1 -v -timeout 0 -run '^TestSoak$$' ./e2e -args -soak.duration=$(DURATION) -soak.out=$(SOAK_OUT)

lint:
	$(GO) vet ./...
	$(GO) vet -tags soak ./e2e
	$(GO) run $(STATICCHECK) ./...

# bench measures staticpod against containerd's floor on this machine (a private
# containerd, images built from busybox-static: no registry) and writes BENCH.md,
# BENCH.json and the README's table from it; about 14 minutes. bench-compare shows
# what got worse in BENCH.json since an earlier run's file: make bench-compare
# BASE=old.json. bench-go runs the Go benchmarks of single functions.
bench: deps build
	mkdir -p .cache/bench-profiles
	$(GO) run ./internal/bench/cmd/staticpod-bench -staticpod $(BIN) -md BENCH.md -json BENCH.json -profile .cache/bench-profiles
	$(GO) test -count=1 -run TestREADMENumbersAreBENCHJSONs . -update-readme

# bench-containerd2 measures the starts (floors, start, present) again on containerd
# CONTAINERD2_VERSION, built or reused as for test-containerd2.
bench-containerd2: deps build
	bin=$$(GO=$(GO) CONTAINERD2_VERSION=$(CONTAINERD2_VERSION) CONTAINERD2_CACHE=$(CONTAINERD2_CACHE) ./hack/containerd2.sh build) && \
	PATH=$$bin:$$PATH STATICPOD_TEST_CONTAINERD=$$bin/containerd $(GO) run ./internal/bench/cmd/staticpod-bench -staticpod $(BIN) \
		-only floors,start,present -md BENCH-containerd2.md -json BENCH-containerd2.json

bench-quick: deps build
	$(GO) run ./internal/bench/cmd/staticpod-bench -staticpod $(BIN) -quick -md /tmp/BENCH-quick.md -json /tmp/BENCH-quick.json

bench-compare:
	@test -n "$(BASE)" || { echo "usage: make bench-compare BASE=old.json"; exit 2; }
	$(GO) run ./internal/bench/cmd/staticpod-bench -base $(BASE) -json BENCH.json

bench-go:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

# run does staticpod's main job on examples/: it builds the examples' image from
# busybox-static (no registry needed), starts a private containerd under .run/ unless
# one answers there, and runs the daemon on examples/ until Ctrl-C, which stops the
# pods. Pods not on the host network get the default bridge network (CNI), configured
# under .run/. `make run-clean` then stops the private containerd and removes .run/, and
# the iptables rules of pods still running (staticpod killed rather than stopped); the
# bridge staticpod0 stays, for the next `make run`.
RUN_DIR := $(CURDIR)/.run
RUN_FLAGS := --root-dir $(RUN_DIR)/root --pod-log-dir $(RUN_DIR)/log/pods \
	--container-log-dir $(RUN_DIR)/log/containers --image-dir $(RUN_DIR)/images \
	--containerd-address $(RUN_DIR)/containerd.sock --api-socket $(RUN_DIR)/staticpod.sock \
	--cni-conf-dir $(RUN_DIR)/cni/net.d --cni-default-bridge
run: deps build
	mkdir -p $(RUN_DIR)/images
	$(GO) run ./internal/testenv/cmd/mkimage -ref localhost/busybox:static -o $(RUN_DIR)/images/busybox.tar
	$(BIN) run --start-containerd --stop-pods-on-exit --pod-manifest-path examples $(RUN_FLAGS)

run-clean:
	-for t in $$(ctr -a $(RUN_DIR)/containerd.sock -n staticpod tasks ls -q 2>/dev/null); do \
		ctr -a $(RUN_DIR)/containerd.sock -n staticpod tasks delete --force $$t; done
	-pkill -f "[c]ontainerd --config $(RUN_DIR)/root/containerd/config.toml"
	-pkill -f "[c]ontainerd-shim-runc-v2 .*-address $(RUN_DIR)/"
	-./hack/cni-clean.sh $(RUN_DIR)/root
	-grep -o " $(RUN_DIR)[^ ]*" /proc/mounts | sort -r | xargs -r umount -l
	rm -rf $(RUN_DIR)

clean:
	rm -rf bin internal/helper/bin/staticpod-helper-*

# man writes the man pages, staticpod(8) and staticpod-COMMAND(8) for each command,
# into MAN_DIR, rendered from the CLI's own definitions (`staticpod man`).
MAN_DIR ?= bin/man
man: build
	rm -rf $(MAN_DIR)
	$(BIN) man $(MAN_DIR)

# install puts staticpod on this machine as a systemd service: the binary in
# $(PREFIX)/bin, the man pages in $(PREFIX)/share/man/man8, the bash completion in
# $(PREFIX)/share/bash-completion/completions, the unit (contrib/systemd, its
# ExecStart pointed there) in $(UNITDIR), and the default directories. DESTDIR installs into another root (the VM
# test's guest, a package). It neither enables nor starts the service:
# `systemctl enable --now staticpod` does. See docs/operating.md.
PREFIX  ?= /usr/local
UNITDIR ?= /etc/systemd/system
install: build man
	install -D -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/staticpod
	install -d -m 0755 $(DESTDIR)$(PREFIX)/share/man/man8 $(DESTDIR)$(PREFIX)/share/bash-completion/completions
	install -m 0644 $(MAN_DIR)/*.8 $(DESTDIR)$(PREFIX)/share/man/man8/
	$(BIN) completion bash >$(DESTDIR)$(PREFIX)/share/bash-completion/completions/staticpod
	install -d -m 0755 $(DESTDIR)$(UNITDIR)
	sed 's|@BINDIR@|$(PREFIX)/bin|' contrib/systemd/staticpod.service >$(DESTDIR)$(UNITDIR)/staticpod.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/staticpod.service
	install -d -m 0755 $(DESTDIR)/etc/kubernetes/manifests $(DESTDIR)/var/lib/staticpod \
		$(DESTDIR)/var/log/pods $(DESTDIR)/var/log/containers
	@if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then systemctl daemon-reload; fi
	@echo "installed; start it with: systemctl enable --now staticpod"

# vm-test boots a Debian bookworm guest with systemd and the unified cgroup hierarchy
# under qemu (software emulation: no KVM needed), with staticpod installed by
# `make install` and started by its unit, and runs hack/vm/guest/run.sh in it. The
# guest's root is built once per set of inputs and kept in VM_CACHE. It needs
# qemu-system-x86, debootstrap and linux-image-amd64. VM_DEB=<a .deb> installs that
# package in the guest instead of `make install`.
VM_CACHE ?= /var/cache/staticpod-vm
vm-test: build
	GO=$(GO) VM_DEB="$(VM_DEB)" ./hack/vm/test.sh $(VM_CACHE)

# vm-test-arm64 runs the same test on a Debian bookworm arm64 guest under
# qemu-system-aarch64 (TCG, machine virt, no KVM): the guest's root made by debootstrap
# with qemu-user (qemu-user-static; its binfmt_misc entry is enabled when it is not),
# booted with its own linux-image-arm64, staticpod cross-built for arm64 (the arm64
# helper embedded) or, with VM_DEB=dist/staticpod_<version>_arm64.deb, that package.
# It needs qemu-system-arm, qemu-user-static, binfmt-support and debootstrap; see
# docs/architecture.md for how long it takes. Its guest's root is cached apart from
# vm-test's, in VM_CACHE_ARM64.
VM_CACHE_ARM64 ?= /var/cache/staticpod-vm-arm64
vm-test-arm64:
	GO=$(GO) VM_DEB="$(VM_DEB)" ./hack/vm/test.sh $(VM_CACHE_ARM64) arm64
