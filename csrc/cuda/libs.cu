/* Finds cuBLAS and NCCL at run time, in a fixed order: the environment variable naming an explicit
 * path (DTRAIN_CUBLAS_LIB, DTRAIN_NCCL_LIB), the loader's standard names, then the folders of
 * NVIDIA's Python wheels (site-packages/nvidia/<any>/lib) of the python3 on PATH. A library that
 * is not found leaves every path tried in the message, so the user sees what to install. */
#include <dlfcn.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mutex>
#include <string>
#include <vector>

#include "internal.cuh"
#include "libs.h"

/* The site-packages folders of the python3 on PATH, one per line (empty when there is none). */
static std::vector<std::string> python_site_dirs(void) {
  std::vector<std::string> dirs;
  FILE *p = popen("python3 -c 'import site; print(\"\\n\".join(site.getsitepackages() + "
                  "[site.getusersitepackages()]))' 2>/dev/null",
                  "r");
  if (p == NULL) return dirs;
  char line[4096];
  while (fgets(line, sizeof line, p) != NULL) {
    line[strcspn(line, "\n")] = '\0';
    if (line[0] != '\0') dirs.push_back(line);
  }
  pclose(p);
  return dirs;
}

/* Opens the first of the candidates for `names` that loads; NULL with every attempt in `tried`. */
static void *open_first(const char *env_var, const char *const *names, std::string &tried) {
  std::vector<std::string> candidates;
  const char *explicit_path = getenv(env_var);
  if (explicit_path != NULL && explicit_path[0] != '\0') candidates.push_back(explicit_path);
  for (const char *const *n = names; *n != NULL; n++) candidates.push_back(*n);
  for (int pass = 0; pass < 2; pass++) {
    for (const auto &path : candidates) {
      void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle != NULL) return handle;
      const char *why = dlerror();
      tried += "\n  " + path + ": " + (why ? why : "dlopen failed");
    }
    if (pass == 1) break;
    /* The wheels' folders cost a python3 start-up, so they are looked at only when needed. */
    candidates.clear();
    for (const auto &dir : python_site_dirs()) {
      for (const char *const *n = names; *n != NULL; n++) {
        glob_t found;
        std::string pattern = dir + "/nvidia/*/lib/" + *n;
        if (glob(pattern.c_str(), 0, NULL, &found) == 0) {
          for (size_t i = 0; i < found.gl_pathc; i++) candidates.push_back(found.gl_pathv[i]);
        }
        globfree(&found);
      }
    }
    if (candidates.empty()) tried += "\n  (no site-packages/nvidia/*/lib folder of python3 on PATH has it)";
  }
  return NULL;
}

/* dlsym every entry of `table` (pairs of name and slot); false with the missing name in `tried`. */
struct symbol_slot {
  const char *name;
  void **slot;
};
static bool resolve(void *handle, const symbol_slot *slots, size_t n, std::string &missing) {
  for (size_t i = 0; i < n; i++) {
    *slots[i].slot = dlsym(handle, slots[i].name);
    if (*slots[i].slot == NULL) {
      missing = slots[i].name;
      return false;
    }
  }
  return true;
}

#define SLOT(api, field, name) {name, (void **)&(api).field}

static dt_cublas_api cublas;
static const dt_cublas_api *cublas_loaded;
static std::string cublas_error;
static std::once_flag cublas_once;

static void load_cublas(void) {
  static const char *const names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so", NULL};
  std::string tried;
  void *handle = open_first("DTRAIN_CUBLAS_LIB", names, tried);
  if (handle == NULL) {
    cublas_error = "cuBLAS not found (set DTRAIN_CUBLAS_LIB, or install the CUDA toolkit's "
                   "libcublas or the nvidia-cublas wheel); tried:" + tried;
    return;
  }
  const symbol_slot slots[] = {
      SLOT(cublas, create, "cublasCreate_v2"),
      SLOT(cublas, destroy, "cublasDestroy_v2"),
      SLOT(cublas, set_stream, "cublasSetStream_v2"),
      SLOT(cublas, set_math_mode, "cublasSetMathMode"),
      SLOT(cublas, gemm_ex, "cublasGemmEx"),
      SLOT(cublas, gemm_strided_batched_ex, "cublasGemmStridedBatchedEx"),
      SLOT(cublas, status_string, "cublasGetStatusString"),
  };
  std::string missing;
  if (!resolve(handle, slots, sizeof slots / sizeof slots[0], missing)) {
    cublas_error = "cuBLAS lacks " + missing + " (a cuBLAS of CUDA 12 or later is needed)";
    return;
  }
  cublas_loaded = &cublas;
}

const dt_cublas_api *dt_cublas(void) {
  std::call_once(cublas_once, load_cublas);
  if (cublas_loaded == NULL) dt_fail(DT_EUNSUPPORTED, "%s", cublas_error.c_str());
  return cublas_loaded;
}

static dt_nccl_api nccl;
static const dt_nccl_api *nccl_loaded;
static std::string nccl_error;
static std::once_flag nccl_once;

static void load_nccl(void) {
  static const char *const names[] = {"libnccl.so.2", "libnccl.so", NULL};
  std::string tried;
  void *handle = open_first("DTRAIN_NCCL_LIB", names, tried);
  if (handle == NULL) {
    nccl_error = "NCCL not found (set DTRAIN_NCCL_LIB, or install libnccl2 or the "
                 "nvidia-nccl wheel); tried:" + tried;
    return;
  }
  const symbol_slot slots[] = {
      SLOT(nccl, get_unique_id, "ncclGetUniqueId"),
      SLOT(nccl, comm_init_rank, "ncclCommInitRank"),
      SLOT(nccl, comm_destroy, "ncclCommDestroy"),
      SLOT(nccl, comm_abort, "ncclCommAbort"),
      SLOT(nccl, comm_get_async_error, "ncclCommGetAsyncError"),
      SLOT(nccl, all_reduce, "ncclAllReduce"),
      SLOT(nccl, broadcast, "ncclBroadcast"),
      SLOT(nccl, all_gather, "ncclAllGather"),
      SLOT(nccl, reduce_scatter, "ncclReduceScatter"),
      SLOT(nccl, send, "ncclSend"),
      SLOT(nccl, recv, "ncclRecv"),
      SLOT(nccl, group_start, "ncclGroupStart"),
      SLOT(nccl, group_end, "ncclGroupEnd"),
      SLOT(nccl, error_string, "ncclGetErrorString"),
      SLOT(nccl, last_error, "ncclGetLastError"),
      SLOT(nccl, get_version, "ncclGetVersion"),
  };
  std::string missing;
  if (!resolve(handle, slots, sizeof slots / sizeof slots[0], missing)) {
    nccl_error = "NCCL lacks " + missing + " (NCCL 2.13 or later is needed)";
    return;
  }
  nccl_loaded = &nccl;
}

const dt_nccl_api *dt_nccl(void) {
  std::call_once(nccl_once, load_nccl);
  if (nccl_loaded == NULL) dt_fail(DT_EUNSUPPORTED, "%s", nccl_error.c_str());
  return nccl_loaded;
}

/* Whether cuBLAS or NCCL (enum dt_cuda_library) can be loaded; the reason in dt_last_error. */
DT_EXPORT int dt_cuda_library_available(int32_t which) {
  CHECK(which == DT_CUDA_LIBRARY_CUBLAS || which == DT_CUDA_LIBRARY_NCCL,
        "dt_cuda_library_available: unknown library %d", which);
  if (which == DT_CUDA_LIBRARY_CUBLAS) return dt_cublas() != NULL ? DT_OK : DT_EUNSUPPORTED;
  return dt_nccl() != NULL ? DT_OK : DT_EUNSUPPORTED;
}
