# edge: the two commands a fresh machine needs are `make demo` and `make test`;
# each installs what it uses (Go modules, the ONNX Runtime library).
SHELL := /bin/bash
GO    ?= go
BIN   := bin
export CGO_ENABLED := 1
# Go 1.26's simd/archsimd (GOEXPERIMENT=simd) gives the fbank op its AVX2 path on amd64
# (GOFLAGS=-tags=fbank_avx512 for the AVX-512 one); without it, and on other CPUs, the
# portable scalar path runs. Override with GOEXPERIMENT= to build without it.
export GOEXPERIMENT ?= simd

# The CUDA build compiles against cuda.h and the libcuda.so link stub that
# `make cuda-deps` extracts from Debian's nvidia-cuda-dev package (per
# architecture, under ~/.cache/edge/cuda/linux-<arch>).
HOST_ARCH := $(shell $(GO) env GOARCH)
CUDA_DIR   = $(shell scripts/cuda-deps.sh $(1) --print-dir)
CUDA_ENV  := CGO_CFLAGS=-I$(call CUDA_DIR,$(HOST_ARCH))/include CGO_LDFLAGS=-L$(call CUDA_DIR,$(HOST_ARCH))/lib
# Cross-building linux/arm64 (Jetson): cgo with Debian's aarch64 cross compiler.
ARM64_ENV := GOOS=linux GOARCH=arm64 CGO_ENABLED=1 CC=aarch64-linux-gnu-gcc
# -trimpath for every arm64 build (the test binaries and the dist tarball too): one set of
# compiled packages in the Go build cache serves them all.
ARM64_FLAGS := -trimpath
ARM64_CUDA_ENV := $(ARM64_ENV) CGO_CFLAGS=-I$(call CUDA_DIR,arm64)/include CGO_LDFLAGS=-L$(call CUDA_DIR,arm64)/lib

.PHONY: demo test build install lint bench deps ort vad-model fuzz cuda-deps build-cuda test-cuda-bin clean \
	build-arm64 build-cuda-arm64 cross-deps test-arm64 test-arm64-ci test-ort-range dist test-dist

## deps: Go modules, the ONNX Runtime shared library and the Silero VAD model (cached under ~/.cache/edge)
deps: ort vad-model
	$(GO) mod download

ort:
	@scripts/fetch-ort.sh >/dev/null

# `edge version` prints the VCS revision: the go command stamps it in git
# checkouts, but not in git worktrees or with GOFLAGS=-buildvcs=false.
REVISION := $(shell r=$$(git rev-parse --short=12 HEAD 2>/dev/null) && { git diff --quiet HEAD -- 2>/dev/null || r=$$r+dirty; echo $$r; })
LDFLAGS  := -X main.revision=$(REVISION)

vad-model:
	@scripts/fetch-silero-vad.sh >/dev/null

## build: the edge CLI in bin/edge (this machine), and with the aarch64 cross compiler
## installed (`make cross-deps`) also bin/linux-arm64/edge
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/edge ./cmd/edge
	@if command -v aarch64-linux-gnu-gcc >/dev/null; then $(MAKE) --no-print-directory build-arm64; \
	else echo "build: no aarch64-linux-gnu-gcc, skipping linux/arm64 (make cross-deps)"; fi

## install: bin/edge to $(PREFIX)/bin and the default model to $(PREFIX)/share/edge/models/default,
## where an installed (or copied) binary finds it; DESTDIR is honoured
PREFIX ?= /usr/local
install: build
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/edge/models/default
	install -m 755 $(BIN)/edge $(DESTDIR)$(PREFIX)/bin/edge
	install -m 644 models/default/model.yaml models/default/model.onnx models/default/model.int8.onnx models/default/tokens.txt \
	  models/default/README.md $(DESTDIR)$(PREFIX)/share/edge/models/default/

## cross-deps: the Debian packages for linux/arm64 builds and tests (cross gcc, qemu-user)
cross-deps:
	@scripts/cross-deps.sh

## build-arm64: the CPU CLI for linux/arm64 in bin/linux-arm64/edge (cross-compiled)
build-arm64:
	$(ARM64_ENV) $(GO) build $(ARM64_FLAGS) -ldflags "$(LDFLAGS)" -o $(BIN)/linux-arm64/edge ./cmd/edge

## build-cuda-arm64: the -tags cuda CLI for linux/arm64 (Jetson) in bin/linux-arm64/edge-cuda, vetted
build-cuda-arm64:
	@scripts/cuda-deps.sh arm64
	$(ARM64_CUDA_ENV) $(GO) build $(ARM64_FLAGS) -tags cuda -o $(BIN)/linux-arm64/edge-cuda ./cmd/edge
	$(ARM64_CUDA_ENV) $(GO) vet -tags cuda ./...

## test-arm64: the CPU test suite cross-compiled natively for linux/arm64, the binaries run
## under qemu-user with the arm64 ONNX Runtime (no -race; which tests: scripts/test-arm64.sh)
test-arm64: deps
	@scripts/fetch-ort.sh --arch arm64 >/dev/null
	scripts/test-arm64.sh

## test-arm64-ci: the part of test-arm64 CI runs (about 4 minutes under qemu): the fbank, dpx and
## rvq golden tests (arm64 against the amd64 goldens), the encoder op, the transcript writers,
## and asr's end-to-end tests of the bundled model
ARM64_CI_PKGS := plugins/fbank plugins/dpx plugins/rvq runtime/onnx asr/transcript
test-arm64-ci: deps
	@scripts/fetch-ort.sh --arch arm64 >/dev/null
	scripts/test-arm64.sh $(addprefix github.com/edgespeech/edge/,$(ARM64_CI_PKGS))
	EDGE_ARM64_TEST_ARGS=-test.run=TestDefaultModel scripts/test-arm64.sh github.com/edgespeech/edge/asr

## test-ort-range: the encoder and ASR tests against every pinned ONNX Runtime release from the
## minimum (1.24) to the newest, and the older ones refused with a clear error
test-ort-range: deps
	scripts/ort-range.sh

## dist: dist/edge-<version>-linux-<arch>.tar.gz for each of DIST_ARCHES (default amd64 arm64):
## binary, default model, Silero VAD model, ONNX Runtime, licences
DIST_ARCHES ?= amd64 arm64
dist:
	scripts/dist.sh $(DIST_ARCHES)

## test-dist: unpack each tarball into an empty directory and transcribe the demo clip
## (arm64 under qemu-user)
test-dist: dist
	scripts/dist.sh --test $(DIST_ARCHES)

## demo: transcribe the bundled clip with the bundled default model
demo: deps build
	$(BIN)/edge transcribe --format tsv models/default/testdata/demo.wav

## test: vet, then every test (fuzz seed corpora included) with the race detector, then the
## rvq golden cases once more without it (its portable kernel is too slow instrumented)
test: deps
	$(GO) vet ./...
	$(GO) test -race -count=1 ./...
	$(GO) test -count=1 -run Golden ./plugins/rvq/

## lint: formatting and vet (default and cuda builds)
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed: $$out"; exit 1; fi
	$(GO) vet ./...

## bench: every Go benchmark
bench: deps
	$(GO) test -run '^$$' -bench . -benchmem ./...

## fuzz: run each fuzz target for FUZZTIME (default 30s)
FUZZTIME ?= 30s
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; done

## cuda-deps: cuda.h and the libcuda.so stub for -tags cuda builds (no GPU needed)
cuda-deps:
	@scripts/cuda-deps.sh

## build-cuda: compile and vet the -tags cuda build so GPU code cannot rot
build-cuda: cuda-deps
	$(CUDA_ENV) $(GO) build -tags cuda -ldflags "$(LDFLAGS)" -o $(BIN)/edge-cuda ./cmd/edge
	$(CUDA_ENV) $(GO) vet -tags cuda ./...

## test-cuda-bin: -tags cuda test binaries in bin/cuda/, to run on a GPU host. With
## KERNELS=external they embed no fatbin and no debug info (a quarter of the size to ship;
## run them with EDGE_KERNELS_FATBIN=kernels/edge.fatbin, as scripts/gpu-test.sh does)
comma := ,
CUDA_TEST_FLAGS := $(if $(filter external,$(KERNELS)),-tags cuda$(comma)kernels_external -ldflags=-s\ -w,-tags cuda)
test-cuda-bin: cuda-deps
	@mkdir -p $(BIN)/cuda
	@for pkg in $$($(CUDA_ENV) $(GO) list -tags cuda -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' ./...); do \
	  name=$$(echo $${pkg#github.com/edgespeech/edge/} | tr / _); \
	  echo "$(BIN)/cuda/$$name.test"; \
	  $(CUDA_ENV) $(GO) test -c $(CUDA_TEST_FLAGS) -o $(BIN)/cuda/$$name.test $$pkg || exit 1; \
	done

clean:
	rm -rf $(BIN) dist
