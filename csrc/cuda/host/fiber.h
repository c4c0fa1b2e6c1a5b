/* Fibers for the host build's block threads: a stack and a saved stack pointer, switched by a few
 * instructions (x86-64 and AArch64; ucontext elsewhere). A block of 256 threads switches tens of
 * thousands of times a launch, which makes swapcontext (a signal-mask system call per switch)
 * too slow. AddressSanitizer is told of every switch so that its stack checks follow the fiber. */
#pragma once

#include <stddef.h>

namespace dt_host {

struct fiber_context {
  void *sp = nullptr;               /* the saved stack pointer */
  void *fake_stack = nullptr;       /* AddressSanitizer's record of the stack left */
  const void *stack_bottom = nullptr;
  size_t stack_size = 0;
};

/* Makes `fiber` start `entry` (which must never return) on the stack [bottom, bottom + size). */
void fiber_prepare(fiber_context *fiber, void *bottom, size_t size, void (*entry)(void));
/* Saves the running context into `from` and resumes `to`. */
void fiber_switch(fiber_context *from, fiber_context *to);
/* Called first thing on a fiber's first run (the pair of the switch that started it). */
void fiber_started(void);
/* Makes `scheduler` the calling OS thread's own stack, to which fibers switch back. */
void fiber_enter_scheduler(fiber_context *scheduler);

} // namespace dt_host
