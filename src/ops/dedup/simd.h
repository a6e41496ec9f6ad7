#pragma once
// The deduplicator kernels' x86 intrinsics and the CPU features they choose
// by at run time.

// GCC 12 reports the AVX-512 intrinsics' own _mm512_undefined_epi32 as
// uninitialized (GCC bug 105593) once they are inlined; clang has neither the
// bug nor the warning group.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#include <cpuid.h>

namespace djshard::ops::dedup {

// Whether the CPU has the SHA extensions (CPUID leaf 7, EBX bit 29), with the
// SSE4.1 and SSSE3 that their use needs. Read from CPUID: not every compiler's
// __builtin_cpu_supports knows "sha".
inline bool CpuHasShaExtensions() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || ((b >> 29) & 1) == 0) return false;
  return __builtin_cpu_supports("sse4.1") && __builtin_cpu_supports("ssse3");
}

}  // namespace djshard::ops::dedup
