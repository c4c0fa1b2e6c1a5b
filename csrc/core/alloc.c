/* Tensor storage: 64-byte aligned blocks from the C heap, with a live-byte counter so that tests
 * can prove a training loop returns every byte it takes. Each block carries its size in a header
 * so that dt_free needs no size from the caller. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain.h"

#define HEADER 64

static _Atomic int64_t live_bytes;
static _Atomic int64_t live_blocks;

/* Allocate nbytes, zero-filled when zero != 0. The one function that returns a pointer rather than a
 * status: NULL means failure, with the reason in dt_last_error(). */
void *dt_alloc(int64_t nbytes, int32_t zero) {
  if (nbytes < 0) {
    dt_fail(DT_EINVAL, "dt_alloc: negative size %lld", (long long)nbytes);
    return NULL;
  }
  size_t total = HEADER + (size_t)(nbytes > 0 ? nbytes : 1);
  total = (total + 63) & ~(size_t)63;
  char *block = aligned_alloc(64, total);
  if (block == NULL) {
    dt_fail(DT_ENOMEM, "dt_alloc: out of memory allocating %lld bytes", (long long)nbytes);
    return NULL;
  }
  *(int64_t *)block = nbytes;
  if (zero) memset(block + HEADER, 0, (size_t)nbytes);
  atomic_fetch_add(&live_bytes, nbytes);
  atomic_fetch_add(&live_blocks, 1);
  return block + HEADER;
}

void dt_free(void *ptr) {
  if (ptr == NULL) return;
  char *block = (char *)ptr - HEADER;
  atomic_fetch_sub(&live_bytes, *(int64_t *)block);
  atomic_fetch_sub(&live_blocks, 1);
  free(block);
}

int64_t dt_allocated_bytes(void) { return atomic_load(&live_bytes); }
int64_t dt_allocated_blocks(void) { return atomic_load(&live_blocks); }
