/* The fiber switch (fiber.h): saves the callee-saved registers on the current stack, swaps stack
 * pointers, and restores the other fiber's registers from its stack. The floating-point control
 * words are not switched: every fiber of a thread runs kernels under the thread's, which nothing
 * here changes (and restoring them costs more than the rest of a switch). A new fiber's stack is laid
 * out as if it had been switched away from just before its entry function. */
#include "fiber.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#if defined(__SANITIZE_ADDRESS__)
#define DT_HOST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DT_HOST_ASAN 1
#endif
#endif

#ifdef DT_HOST_ASAN
extern "C" void __sanitizer_start_switch_fiber(void **fake_stack_save, const void *bottom,
                                               size_t size);
extern "C" void __sanitizer_finish_switch_fiber(void *fake_stack_save, const void **bottom_old,
                                                size_t *size_old);
#endif

extern "C" void dt_host_switch_stacks(void **save_sp, void *load_sp);

#if defined(__x86_64__)
/* rdi: where to save this stack pointer; rsi: the stack pointer to resume. */
asm(R"(
  .pushsection .text
  .globl dt_host_switch_stacks
  .hidden dt_host_switch_stacks
  .type dt_host_switch_stacks,@function
dt_host_switch_stacks:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size dt_host_switch_stacks,.-dt_host_switch_stacks
  .popsection
)");
#elif defined(__aarch64__)
/* x0: where to save this stack pointer; x1: the stack pointer to resume. */
asm(R"(
  .pushsection .text
  .globl dt_host_switch_stacks
  .hidden dt_host_switch_stacks
  .type dt_host_switch_stacks,%function
dt_host_switch_stacks:
  sub sp, sp, #176
  stp x19, x20, [sp, #0]
  stp x21, x22, [sp, #16]
  stp x23, x24, [sp, #32]
  stp x25, x26, [sp, #48]
  stp x27, x28, [sp, #64]
  stp x29, x30, [sp, #80]
  stp d8, d9, [sp, #96]
  stp d10, d11, [sp, #112]
  stp d12, d13, [sp, #128]
  stp d14, d15, [sp, #144]
  mov x9, sp
  str x9, [x0]
  mov sp, x1
  ldp x19, x20, [sp, #0]
  ldp x21, x22, [sp, #16]
  ldp x23, x24, [sp, #32]
  ldp x25, x26, [sp, #48]
  ldp x27, x28, [sp, #64]
  ldp x29, x30, [sp, #80]
  ldp d8, d9, [sp, #96]
  ldp d10, d11, [sp, #112]
  ldp d12, d13, [sp, #128]
  ldp d14, d15, [sp, #144]
  add sp, sp, #176
  ret
  .size dt_host_switch_stacks,.-dt_host_switch_stacks
  .popsection
)");
#else
#error "the host CUDA build's fibers need x86-64 or AArch64"
#endif

namespace dt_host {

void fiber_prepare(fiber_context *fiber, void *bottom, size_t size, void (*entry)(void)) {
  uintptr_t top = ((uintptr_t)bottom + size) & ~(uintptr_t)15;
  fiber->stack_bottom = bottom;
  fiber->stack_size = size;
#if defined(__x86_64__)
  /* [top - 16]: entry, "returned" to by the switch with rsp = top - 8, as after a call. */
  uintptr_t *words = (uintptr_t *)(top - 16);
  words[0] = (uintptr_t)entry;
  words[1] = 0;
  uintptr_t *saved = words - 6;
  for (int i = 0; i < 6; i++) saved[i] = 0;
  fiber->sp = saved;
#elif defined(__aarch64__)
  uintptr_t *saved = (uintptr_t *)(top - 176);
  for (int i = 0; i < 22; i++) saved[i] = 0;
  saved[11] = (uintptr_t)entry; /* x30, the link register: where `ret` goes */
  fiber->sp = saved;
#endif
}

void fiber_switch(fiber_context *from, fiber_context *to) {
#ifdef DT_HOST_ASAN
  __sanitizer_start_switch_fiber(&from->fake_stack, to->stack_bottom, to->stack_size);
#endif
  dt_host_switch_stacks(&from->sp, to->sp);
#ifdef DT_HOST_ASAN
  __sanitizer_finish_switch_fiber(from->fake_stack, nullptr, nullptr);
#endif
}

void fiber_started(void) {
#ifdef DT_HOST_ASAN
  __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
#endif
}

void fiber_enter_scheduler(fiber_context *scheduler) {
  /* AddressSanitizer must be told the bounds of the stack a switch goes to: the thread's own. */
  pthread_attr_t attr;
  void *bottom = nullptr;
  size_t size = 0;
  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    pthread_attr_getstack(&attr, &bottom, &size);
    pthread_attr_destroy(&attr);
  }
  scheduler->stack_bottom = bottom;
  scheduler->stack_size = size;
}

} // namespace dt_host
