/* A kernel launch in the host build: csrc/cuda writes every launch once, as
 * GRID_LAUNCH(kernel, grid, block, shared_bytes, stream)(arguments...) (internal.cuh), which nvcc
 * reads as kernel<<<grid, block, shared_bytes, stream>>>(arguments...) and the host compiler as
 * the launcher below: the arguments are converted to the kernel's parameter types and copied, as
 * a launch copies them, and the grid is queued on the stream (blocks.cc runs it). */
#pragma once

#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

namespace dt_host {

/* Queues `thread_body` to run once per thread of every block of `grid` on `stream` (NULL: the
 * current device's legacy stream). A bad configuration is what cudaGetLastError returns next, as
 * after a failed launch. `kernel` names the kernel in the message of a fault. */
void launch_grid(const char *kernel, dim3 grid, dim3 block, size_t shared_bytes,
                 cudaStream_t stream, std::function<void()> thread_body);

template <typename... Params> struct launcher {
  void (*kernel)(Params...);
  const char *name;
  dim3 grid, block;
  size_t shared_bytes;
  cudaStream_t stream;

  template <typename... Args> void operator()(Args &&...args) const {
    static_assert(sizeof...(Args) == sizeof...(Params), "a launch passes every kernel parameter");
    std::tuple<std::decay_t<Params>...> packed(std::forward<Args>(args)...);
    auto body = kernel;
    launch_grid(name, grid, block, shared_bytes, stream,
                [body, packed]() { std::apply(body, packed); });
  }
};

template <typename... Params>
launcher<Params...> make_launcher(void (*kernel)(Params...), const char *name, dim3 grid,
                                  dim3 block, size_t shared_bytes, cudaStream_t stream) {
  return launcher<Params...>{kernel, name, grid, block, shared_bytes, stream};
}

} // namespace dt_host
