/* Read-only file mappings for token data larger than memory: the file's pages stay the page
 * cache's, read on first touch and dropped under pressure, so a batch costs only the pages of its
 * rows and the process never holds a copy of the file (nanoGPT's np.memmap, llm.c's shards). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dtrain.h"

/* Fails with the path and errno's text in the message, and errno itself for the caller to tell a
 * missing file from the rest. */
static int map_failure(const char *path, const char *step, int error, int32_t *out_errno) {
  *out_errno = error;
  return dt_fail(DT_EINVAL, "%s: cannot map it (%s: %s)", path, step, strerror(error));
}

int dt_map_file(const char *path, int32_t access, void **out_ptr, int64_t *out_len,
                int32_t *out_errno) {
  CHECK_PTR(path);
  CHECK_PTR(out_ptr);
  CHECK_PTR(out_len);
  CHECK_PTR(out_errno);
  CHECK(access >= DT_MAP_NORMAL && access <= DT_MAP_SEQUENTIAL, "dt_map_file: %s: unknown access %d",
        path, access);
  *out_ptr = NULL;
  *out_len = 0;
  *out_errno = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return map_failure(path, "open", errno, out_errno);
  struct stat info;
  if (fstat(fd, &info) != 0) {
    int error = errno;
    close(fd);
    return map_failure(path, "fstat", error, out_errno);
  }
  if (!S_ISREG(info.st_mode)) {
    close(fd);
    return map_failure(path, "not a regular file", ENODEV, out_errno);
  }
  /* mmap refuses a length of 0: an empty file is an empty mapping, NULL, with nothing to unmap. */
  if (info.st_size == 0) {
    close(fd);
    return DT_OK;
  }
  void *ptr = mmap(NULL, (size_t)info.st_size, PROT_READ, MAP_SHARED, fd, 0);
  int error = errno;
  /* The mapping holds its own reference to the file: the descriptor is not needed past mmap. */
  close(fd);
  if (ptr == MAP_FAILED) return map_failure(path, "mmap", error, out_errno);
  /* Only a hint: the kernel's default read-ahead serves if it is refused. Random access (nanoGPT's
   * get_batch) reads just the touched pages instead of 128 KiB around each; sequential (llm.c's
   * shards) reads further ahead and lets the pages behind go first. */
  static const int advice[] = {POSIX_MADV_NORMAL, POSIX_MADV_RANDOM, POSIX_MADV_SEQUENTIAL};
  posix_madvise(ptr, (size_t)info.st_size, advice[access]);
  *out_ptr = ptr;
  *out_len = (int64_t)info.st_size;
  return DT_OK;
}

int dt_unmap_file(void *ptr, int64_t len) {
  CHECK_COUNT(len);
  if (ptr == NULL || len == 0) return DT_OK;
  if (munmap(ptr, (size_t)len) != 0) {
    return dt_fail(DT_EINVAL, "dt_unmap_file: munmap of %lld bytes at %p failed: %s",
                   (long long)len, ptr, strerror(errno));
  }
  return DT_OK;
}
