// dpx_ops.cuh: the primitives of the dpx kernels (dpx.cu): Hopper DPX
// min/max instructions where the toolkit has them, an emulated form with
// identical results elsewhere, the fixed-point quantiser of plugins/dpx
// (numeric.go), and the cp.async copies (sm_80+; plain copies in the host
// replay, kernels/dpxemu).
//
// CUDA >= 12 provides __vimax3_s32, __vimin3_s32 and __viaddmax_s32 on every
// architecture: single DPX instructions on sm_90, short instruction
// sequences on others. Older toolkits (the 11.8 used for local syntax
// checks) get the plain max/min expressions below; integer max/min are
// exact, so every form gives the same bits.
#pragma once
#include <cfloat>
#include <climits>

namespace dpxk {

#if defined(__CUDACC_VER_MAJOR__) && __CUDACC_VER_MAJOR__ >= 12
__device__ __forceinline__ int max3(int a, int b, int c) { return __vimax3_s32(a, b, c); }
__device__ __forceinline__ int min3(int a, int b, int c) { return __vimin3_s32(a, b, c); }
// addmax is max(a + b, c).
__device__ __forceinline__ int addmax(int a, int b, int c) { return __viaddmax_s32(a, b, c); }
#else
__device__ __forceinline__ int max3(int a, int b, int c) { return max(max(a, b), c); }
__device__ __forceinline__ int min3(int a, int b, int c) { return min(min(a, b), c); }
__device__ __forceinline__ int addmax(int a, int b, int c) { return max(a + b, c); }
#endif

// kQuantMax bounds every quantised value (plugins/dpx QuantMax).
constexpr int kQuantMax = 1 << 24;

// quant is plugins/dpx's quantizer.q: clamp(round(x * scale), ±2^24) with
// round half away from zero in float64; -Inf gives -2^24. NaN is rejected
// before (dpx_check).
__device__ __forceinline__ int quant(float x, double scale) {
  const double v = round((double)x * scale);
  if (v > kQuantMax) return kQuantMax;
  if (v < -kQuantMax) return -kQuantMax;
  return (int)v;
}

// cpAsync4 copies 4 bytes from global src to shared dst without holding a
// register (sm_80+ cp.async, L1-allocating); the copy lands after the
// issuing thread's cpAsyncWait. Elsewhere (the host replay) it is a plain
// copy. Only the issuing thread may read dst before a barrier.
__device__ __forceinline__ void cpAsync4(void* dst, const void* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src)
               : "memory");
#else
  *(unsigned*)dst = *(const unsigned*)src;
#endif
}

// cpAsync16 copies 16 bytes (both addresses 16-byte aligned) from global
// src to shared dst, bypassing L1 (cp.async.cg); same rules as cpAsync4.
__device__ __forceinline__ void cpAsync16(void* dst, const void* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src)
               : "memory");
#else
  for (int i = 0; i < 4; ++i) ((unsigned*)dst)[i] = ((const unsigned*)src)[i];
#endif
}

// cpAsyncCommit closes the thread's current group of cpAsync4 copies.
__device__ __forceinline__ void cpAsyncCommit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// cpAsyncWait waits until at most N of the thread's committed groups are
// still in flight.
template <int N>
__device__ __forceinline__ void cpAsyncWait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

}  // namespace dpxk
