# dtrain: `make train` runs the main job, `make test` the whole suite. Both set up what they need.
CC      ?= cc
CXX     ?= c++
# -fno-trapping-math lets the compiler turn the selects of the polynomial exp and erf (fast_exp.h) into
# vector blends: GELU and exp ran 8x slower as scalar loops. dtrain never reads floating-point traps.
CFLAGS  ?= -O3 -march=native -fno-math-errno -fno-trapping-math
CFLAGS  += -std=c11 -fPIC -Wall -Wextra -Werror=implicit-function-declaration
CXXFLAGS ?= -O2
CXXFLAGS += -std=c++17 -fPIC -Wall -Wextra
BUILD   := build

CORE_SRC := $(wildcard csrc/core/*.c)
CORE_HDR := $(wildcard csrc/core/*.h)
# The shared-memory transport (csrc/shm) shares the shim's fingerprints and kernels: one library.
GLOO_SRC := $(wildcard csrc/gloo/*.cc csrc/shm/*.cc)
GLOO_HDR := $(wildcard csrc/gloo/*.h csrc/shm/*.h) csrc/core/half_math.h
CUDA_SRC := $(wildcard csrc/cuda/*.cu)
# The CUDA files include libdtrain's declarations, per-element math and operand checks (csrc/core),
# and the collective codes and mismatch message shared with Gloo and shared memory (csrc/gloo).
CUDA_HDR := $(wildcard csrc/cuda/*.cuh csrc/cuda/*.h) csrc/core/dtrain.h csrc/core/scalar_math.h \
            csrc/core/broadcast.h csrc/core/half_math.h csrc/core/matmul_bf16_check.h \
            csrc/gloo/collective_codes.h csrc/gloo/mismatch.h

# The CUDA library is optional: built when nvcc is found (NVCC=... overrides), skipped with one line
# otherwise. cuBLAS and NCCL are opened at run time (csrc/cuda/libs.cu), never linked; the CUDA
# runtime is linked statically, so the library loads where no driver is and says so.
NVCC    ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
NVFLAGS ?= -O3 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=compute_80
NVFLAGS += -std=c++17 -Xcompiler -fPIC,-Wall -cudart static
CUDA_OBJ := $(patsubst csrc/cuda/%.cu,$(BUILD)/cuda/%.o,$(CUDA_SRC)) $(BUILD)/cuda/errors.o

DENO = $(shell scripts/bootstrap.sh | tail -n 1)

# Whether nvidia-smi lists a GPU here (asked once): what make train builds and make test runs on.
HAS_GPU := $(shell nvidia-smi -L 2>/dev/null | grep -m1 GPU)

.PHONY: all build build-cpu build-train deps train test bench check clean cuda cuda-host cuda-host-asan

all: build

deps:
	@scripts/bootstrap.sh >/dev/null

# The CPU libraries: what every job needs.
build-cpu: deps $(BUILD)/libdtrain.so $(if $(GLOO_SRC),$(BUILD)/libdtrain_gloo.so)

# Everything: the CPU libraries and, where nvcc is, the CUDA library (make test checks it).
build: build-cpu cuda

# What `make train` builds: the CUDA library only where a GPU is (nvidia-smi lists one) or NVCC
# is given (make train NVCC=/path/to/nvcc, or in the environment). Compiling it takes about a
# minute, which a machine without a GPU spent for nothing before its first step.
TRAIN_CUDA := $(if $(or $(HAS_GPU),$(filter command line environment,$(origin NVCC))),cuda)
build-train: build-cpu $(TRAIN_CUDA)

$(BUILD)/libdtrain.so: $(CORE_SRC) $(CORE_HDR)
	@mkdir -p $(BUILD)
	$(CC) $(CFLAGS) -shared -o $@ $(CORE_SRC) -lopenblas -lm

$(BUILD)/libdtrain_gloo.so: $(GLOO_SRC) $(GLOO_HDR)
	@mkdir -p $(BUILD)
	$(CXX) $(CXXFLAGS) -shared -o $@ $(GLOO_SRC) -lgloo -lpthread -lrt

ifneq ($(NVCC),)
cuda: $(BUILD)/libdtrain_cuda.so
else
cuda:
	@echo "cuda: skipping build/libdtrain_cuda.so: nvcc not found (put it on PATH or pass NVCC=/path/to/nvcc)"
endif

$(BUILD)/cuda/%.o: csrc/cuda/%.cu $(CUDA_HDR)
	@mkdir -p $(BUILD)/cuda
	$(NVCC) $(NVFLAGS) -c -o $@ $<

# libdtrain's error functions (dt_fail, dt_last_error), compiled into this library too.
$(BUILD)/cuda/errors.o: csrc/core/errors.c csrc/core/dtrain.h
	@mkdir -p $(BUILD)/cuda
	$(CC) -O2 -std=c11 -fPIC -Wall -c -o $@ $<

# -Bsymbolic: the kernels share libdtrain's names, and calls inside this library stay inside it.
# -z nodelete: Deno unloads a library when the worker that opened it ends (`deno test` runs each
# file in its own), but this one's threads (the CUDA runtime's, NCCL's, the host build's streams)
# live on: unmapping their code crashed the next test file (found on the host build).
$(BUILD)/libdtrain_cuda.so: $(CUDA_OBJ) csrc/cuda/exports.map
	@echo "cuda: $(NVCC) ($(shell $(NVCC) --version | tail -n 1)); cuBLAS and NCCL load at run time"
	$(NVCC) $(NVFLAGS) -shared -Xlinker -Bsymbolic -Xlinker -z,nodelete \
	  -Xlinker --version-script=csrc/cuda/exports.map \
	  -o $@ $(CUDA_OBJ) -ldl -lpthread -lrt

# The host build of the CUDA library ([Note: the host build] in csrc/cuda/host/cuda_runtime.h): the
# same csrc/cuda/*.cu files compiled by the host C++ compiler over csrc/cuda/host's runtime, so the
# GPU code runs in CI without a GPU. Its exports are libdtrain_cuda.so's (tests/cuda/host_build_test.ts).
# The cuBLAS and NCCL stand-ins it opens in tests are test sources (tests/cuda/host/), never shipped.
# `make cuda-host-asan` builds it with AddressSanitizer and UndefinedBehaviorSanitizer.
HOST_BUILD ?= $(BUILD)/cuda_host
HOST_LIB ?= $(BUILD)/libdtrain_cuda_host.so
HOST_CXXFLAGS ?= -O2
# `override`: cuda-host-asan passes its own HOST_CXXFLAGS on the command line, which would drop these.
override HOST_CXXFLAGS += -std=c++17 -fPIC -Wall -Wextra -Wno-unused-parameter -Wno-sign-compare -fvisibility=hidden \
                 -DDT_CUDA_HOST=1 -D__CUDACC__ -D__CUDA_ARCH__=900 -Icsrc/cuda/host
HOST_RT_SRC := $(wildcard csrc/cuda/host/*.cc)
HOST_HDR := $(CUDA_HDR) $(wildcard csrc/cuda/host/*.h)
HOST_OBJ := $(patsubst csrc/cuda/%.cu,$(HOST_BUILD)/%.o,$(CUDA_SRC)) \
            $(patsubst csrc/cuda/host/%.cc,$(HOST_BUILD)/host_%.o,$(HOST_RT_SRC)) $(HOST_BUILD)/errors.o
STANDINS := $(BUILD)/cuda_host/libcublas_standin.so $(BUILD)/cuda_host/libnccl_standin.so

cuda-host: $(HOST_LIB) $(STANDINS)

cuda-host-asan: $(STANDINS)
	@$(MAKE) -s --no-print-directory HOST_BUILD=$(BUILD)/cuda_host_asan \
	  HOST_LIB=$(BUILD)/libdtrain_cuda_host_asan.so \
	  HOST_CXXFLAGS="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined" \
	  HOST_LDFLAGS="-fsanitize=address,undefined" $(BUILD)/libdtrain_cuda_host_asan.so

$(HOST_BUILD)/%.o: csrc/cuda/%.cu $(HOST_HDR)
	@mkdir -p $(HOST_BUILD)
	$(CXX) $(HOST_CXXFLAGS) -x c++ -c -o $@ $<

$(HOST_BUILD)/host_%.o: csrc/cuda/host/%.cc $(HOST_HDR)
	@mkdir -p $(HOST_BUILD)
	$(CXX) $(HOST_CXXFLAGS) -c -o $@ $<

$(HOST_BUILD)/errors.o: csrc/core/errors.c csrc/core/dtrain.h
	@mkdir -p $(HOST_BUILD)
	$(CC) -O2 -std=c11 -fPIC -Wall -c -o $@ $<

$(HOST_LIB): $(HOST_OBJ) csrc/cuda/exports.map
	$(CXX) -shared -Wl,-Bsymbolic -Wl,-z,nodelete -Wl,--version-script=csrc/cuda/exports.map \
	  $(HOST_LDFLAGS) \
	  -o $@ $(HOST_OBJ) -ldl -lpthread

$(BUILD)/cuda_host/libcublas_standin.so: $(wildcard tests/cuda/host/cublas/*.cc) csrc/cuda/host/stream_abi.h
	@mkdir -p $(BUILD)/cuda_host
	$(CXX) $(CXXFLAGS) -shared -o $@ $(filter %.cc,$^) -lopenblas

$(BUILD)/cuda_host/libnccl_standin.so: $(wildcard tests/cuda/host/nccl/*.cc) csrc/cuda/host/stream_abi.h
	@mkdir -p $(BUILD)/cuda_host
	$(CXX) $(CXXFLAGS) -shared -o $@ $(filter %.cc,$^) -lgloo -lpthread

train: build-train
	$(DENO) run -A --v8-flags=--expose-gc src/train/main.ts $(ARGS)

# Where the GPU tests run: on the host build (CUDA=host, the default where nvidia-smi lists no GPU)
# or on the GPU with the real library (CUDA=gpu); scripts/test.sh says which.
CUDA ?= $(if $(HAS_GPU),gpu,host)

test: build $(if $(filter host,$(CUDA)),cuda-host cuda-host-asan)
	DENO=$(DENO) DTRAIN_TEST_CUDA=$(CUDA) scripts/test.sh

bench: build
	$(DENO) run -A --v8-flags=--expose-gc bench/main.ts $(ARGS)

check: deps
	$(DENO) fmt --check
	$(DENO) lint
	$(DENO) check mod.ts src/ ffi/ tests/ bench/

clean:
	rm -rf $(BUILD)
