/* Opens oneDNN 2.x at run time (libdnnl.so.2 is optional: without it bf16 products use dtrain's
 * own kernels) and resolves the C API into `api` (onednn_api.h), with its CPU engine. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

#include "dtrain.h"
#include "onednn.h"
#include "onednn_api.h"

struct onednn_api api;

#define SYM(slot, name) {(void **)&api.slot, name}

int onednn_load(char *why, size_t len) {
  void *lib = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    snprintf(why, len, "libdnnl.so.2 (oneDNN 2.x) does not load: %s", dlerror());
    return DT_EUNSUPPORTED;
  }
  struct { void **slot; const char *name; } syms[] = {
      SYM(engine_create, "dnnl_engine_create"), SYM(stream_create, "dnnl_stream_create"),
      SYM(stream_wait, "dnnl_stream_wait"), SYM(stream_destroy, "dnnl_stream_destroy"),
      SYM(md_init_by_strides, "dnnl_memory_desc_init_by_strides"),
      SYM(matmul_desc_init, "dnnl_matmul_desc_init"), SYM(pd_create, "dnnl_primitive_desc_create"),
      SYM(pd_query, "dnnl_primitive_desc_query"), SYM(pd_destroy, "dnnl_primitive_desc_destroy"),
      SYM(pd_query_md, "dnnl_primitive_desc_query_md"),
      SYM(md_get_size, "dnnl_memory_desc_get_size"), SYM(attr_create, "dnnl_primitive_attr_create"),
      SYM(attr_set_scratchpad_mode, "dnnl_primitive_attr_set_scratchpad_mode"),
      SYM(attr_destroy, "dnnl_primitive_attr_destroy"),
      SYM(primitive_create, "dnnl_primitive_create"),
      SYM(primitive_execute, "dnnl_primitive_execute"),
      SYM(primitive_destroy, "dnnl_primitive_destroy"), SYM(memory_create, "dnnl_memory_create"),
      SYM(memory_destroy, "dnnl_memory_destroy"), SYM(version, "dnnl_version"),
      SYM(effective_cpu_isa, "dnnl_get_effective_cpu_isa")};
  /* The library stays open on failure too: it is opened once per process. */
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
    if ((*syms[i].slot = dlsym(lib, syms[i].name)) == NULL) {
      snprintf(why, len, "libdnnl.so.2 lacks %s: not oneDNN 2.x's C API", syms[i].name);
      return DT_EUNSUPPORTED;
    }
  }
  *(void **)&api.omp_set_num_threads = dlsym(lib, "omp_set_num_threads");
  const version_t *v = api.version();
  if (v->major != 2) {
    snprintf(why, len, "libdnnl.so.2 is oneDNN %d.%d.%d, not 2.x", v->major, v->minor, v->patch);
    return DT_EUNSUPPORTED;
  }
  int st = api.engine_create(&api.engine, DNNL_CPU, 0);
  if (st != DNNL_SUCCESS) {
    snprintf(why, len, "oneDNN's CPU engine failed with status %d", st);
    return DT_EUNSUPPORTED;
  }
  return DT_OK;
}
