# dtrain: `make train` runs the main job, `make test` the whole suite. Both set up what they need.
CC      ?= cc
CXX     ?= c++
CFLAGS  ?= -O3 -march=native -fno-math-errno
CFLAGS  += -std=c11 -fPIC -Wall -Wextra -Werror=implicit-function-declaration
CXXFLAGS ?= -O2
CXXFLAGS += -std=c++17 -fPIC -Wall -Wextra
BUILD   := build

CORE_SRC := $(wildcard csrc/core/*.c)
CORE_HDR := $(wildcard csrc/core/*.h)
# The shared-memory transport (csrc/shm) shares the shim's fingerprints and kernels: one library.
GLOO_SRC := $(wildcard csrc/gloo/*.cc csrc/shm/*.cc)
GLOO_HDR := $(wildcard csrc/gloo/*.h csrc/shm/*.h)

DENO = $(shell scripts/bootstrap.sh | tail -n 1)

.PHONY: all build deps train test bench check clean

all: build

deps:
	@scripts/bootstrap.sh >/dev/null

build: deps $(BUILD)/libdtrain.so $(if $(GLOO_SRC),$(BUILD)/libdtrain_gloo.so)

$(BUILD)/libdtrain.so: $(CORE_SRC) $(CORE_HDR)
	@mkdir -p $(BUILD)
	$(CC) $(CFLAGS) -shared -o $@ $(CORE_SRC) -lopenblas -lm

$(BUILD)/libdtrain_gloo.so: $(GLOO_SRC) $(GLOO_HDR)
	@mkdir -p $(BUILD)
	$(CXX) $(CXXFLAGS) -shared -o $@ $(GLOO_SRC) -lgloo -lpthread -lrt

train: build
	$(DENO) run -A --v8-flags=--expose-gc src/train/main.ts $(ARGS)

test: build
	DENO=$(DENO) scripts/test.sh

bench: build
	$(DENO) run -A --v8-flags=--expose-gc bench/main.ts $(ARGS)

check: deps
	$(DENO) fmt --check
	$(DENO) lint
	$(DENO) check mod.ts src/ ffi/ tests/ bench/

clean:
	rm -rf $(BUILD)
