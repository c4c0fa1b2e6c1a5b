/* The thread-local error message behind every non-zero status. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "dtrain.h"

static _Thread_local char last_error[512];

int dt_fail(int status, const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, args);
  va_end(args);
  return status;
}

/* Copy the calling thread's last error message into buf (NUL-terminated); returns its length. */
int dt_last_error(char *buf, int64_t len) {
  if (buf == NULL || len <= 0) return (int)strlen(last_error);
  snprintf(buf, (size_t)len, "%s", last_error);
  return (int)strlen(last_error);
}
