/* Whether this CPU can run oneDNN's bf16 products: the instructions (cpuid) and the OS's saving
 * of their registers (XCR0). Apart from onednn.c, whose oneDNN-facing half it does not need. */
#include <stdio.h>

#include "onednn.h"
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

int onednn_cpu_has_bf16(char *why, size_t len) {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) {
    snprintf(why, len, "the CPU reports no extended features (cpuid leaf 7)");
    return 0;
  }
  unsigned subleaves = eax;
  int amx_bf16 = (edx >> 22) & 1, avx512f = (ebx >> 16) & 1, avx512_bf16 = 0;
  if (subleaves >= 1 && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) avx512_bf16 = (eax >> 5) & 1;
  if (!(avx512f && avx512_bf16) && !amx_bf16) {
    snprintf(why, len, "the CPU has neither avx512_bf16 nor amx_bf16 instructions (cpuid)");
    return 0;
  }
  /* The instructions are usable only where the OS saves the AVX-512 registers (XCR0 bits 1, 2
   * and 5-7); AMX's tile state is oneDNN's to request, checked by its effective ISA below. */
  __get_cpuid(1, &eax, &ebx, &ecx, &edx);
  unsigned lo = 0, hi = 0;
  if ((ecx >> 27) & 1) __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & 0xe6) != 0xe6) {
    snprintf(why, len, "the CPU has bf16 instructions but the OS does not enable AVX-512 state");
    return 0;
  }
  return 1;
#else
  snprintf(why, len, "not an x86 CPU: oneDNN's bf16 products are used on avx512_bf16/amx_bf16 only");
  return 0;
#endif
}
