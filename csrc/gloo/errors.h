// Error translation for collectives: a Gloo exception becomes a Failure that names the
// operation and, where known, the peer, and the context is aborted.
#pragma once

#include <exception>
#include <string>

#include "fingerprint.h"

namespace dtrain {

// Gloo prefixes messages with "[file:line] "; the location means nothing to our users.
std::string withoutLocation(const std::string& message);

// Marks the context broken and resets its connections, then throws Failure(status, message).
[[noreturn]] void abortWith(dt_gloo_ctx* ctx, dt_collective_status status,
                            const std::string& message);

// Turns a Gloo exception thrown during a collective (a timeout or a failed connection)
// into our error, and aborts the context.
[[noreturn]] void transportFailure(dt_gloo_ctx* ctx, const Fingerprint& fp,
                                   const std::exception& e);

}  // namespace dtrain
