// The reduce-scatter for payloads too large to ride on the first message.
#pragma once

#include <cstddef>

#include "internal.h"

namespace dtrain {

// Ring reduce-scatter over unbound buffers: n-1 steps; at step s rank r sends its partial
// sum of chunk (r-s-1) mod n to the right and folds chunk (r-s-2) mod n from the left into
// its own input. After the last step rank r holds the full reduction of chunk r.
// `in` holds n chunks of `chunk` elements of `elemSize` bytes; `out` receives this rank's.
void ringReduceScatter(dt_gloo_ctx* ctx, void* out, const void* in, size_t chunk,
                       size_t elemSize, ReduceFn fn);

}  // namespace dtrain
