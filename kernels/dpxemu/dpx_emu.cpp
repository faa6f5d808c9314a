// dpx_emu.cpp: host replay of the dpx kernels (../dpx.cu) with no GPU. Every
// thread of a block is a std::thread; __syncthreads is a block barrier and
// the warp primitives (__ballot_sync, __shfl_*, __reduce_max_sync via the
// shuffle fallback, __syncwarp) meet at a per-warp barrier, so the kernels'
// own source runs with their real thread mapping, shared-memory layout and
// packing. Blocks run one after another. Without __CUDACC_VER_MAJOR__ the
// DPX helpers take their emulated form (dpx_ops.cuh).
//
// Driven by plugins/dpx/cuda_emu_test.go (go test -tags dpxemu), which
// writes the inputs and the launch arguments into a directory, runs
//   dpx_emu ctc|viterbi|dtw f32|i32 DIR
// and compares the outputs with the CPU ops.
#include <algorithm>
#include <chrono>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__
#define __launch_bounds__(x)
#define __grid_constant__
#define __align__(x) __attribute__((aligned(x)))

using std::max;
using std::min;

struct uint3e {
  unsigned x, y, z;
};
thread_local uint3e threadIdx, blockIdx;
uint3e blockDim, gridDim;
struct int2 {
  int x, y;
};
struct int4 {
  int x, y, z, w;
};
struct uint2 {
  unsigned x, y;
};
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
inline int2 make_int2(int x, int y) { return {x, y}; }

namespace dpxk {
alignas(16) unsigned char smem[1 << 20];  // the kernels' extern __shared__ buffer
}

struct Warp {
  std::barrier<> bar{32};
  uint64_t v[32];
};
std::unique_ptr<std::barrier<>> blockBar;
std::unique_ptr<Warp[]> warps;
std::mutex atomicMu;

inline void __syncthreads() { blockBar->arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { warps[threadIdx.x >> 5].bar.arrive_and_wait(); }
template <class T>
T exchange(T v, int src) {
  Warp& w = warps[threadIdx.x >> 5];
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  w.v[threadIdx.x & 31] = bits;
  w.bar.arrive_and_wait();
  T out;
  bits = w.v[src];
  std::memcpy(&out, &bits, sizeof(T));
  w.bar.arrive_and_wait();
  return out;
}
template <class T>
T __shfl_sync(unsigned, T v, int src) { return exchange(v, src); }
template <class T>
T __shfl_up_sync(unsigned, T v, int d) {
  const int l = (int)(threadIdx.x & 31);
  return exchange(v, l >= d ? l - d : l);
}
template <class T>
T __shfl_xor_sync(unsigned, T v, int o) { return exchange(v, (int)(threadIdx.x & 31) ^ o); }
inline unsigned __ballot_sync(unsigned, bool p) {
  Warp& w = warps[threadIdx.x >> 5];
  w.v[threadIdx.x & 31] = p;
  w.bar.arrive_and_wait();
  unsigned r = 0;
  for (int i = 0; i < 32; ++i) r |= (w.v[i] ? 1u : 0u) << i;
  w.bar.arrive_and_wait();
  return r;
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
template <class T>
T atomicMax(T* p, T v) {
  std::lock_guard<std::mutex> g(atomicMu);
  T old = *p;
  *p = max(old, v);
  return old;
}

// Readers of dpx_ctc_warp's pipeline arrive before the writers.
#define DPXK_DELAY_POST() std::this_thread::sleep_for(std::chrono::microseconds(300))
// The parameter structs hold host pointers here (typed, as in CUDA).
#define EDGE_PARAMS_HOST_POINTERS
#include "../dpx.cu"

template <class F>
void launch(int gx, int gy, int bd, F kernel) {
  blockDim = {(unsigned)bd, 1, 1};
  gridDim = {(unsigned)gx, (unsigned)gy, 1};
  for (int by = 0; by < gy; ++by)
    for (int bx = 0; bx < gx; ++bx) {
      blockBar = std::make_unique<std::barrier<>>(bd);
      warps = std::make_unique<Warp[]>(bd / 32);
      std::vector<std::thread> ts;
      for (int t = 0; t < bd; ++t)
        ts.emplace_back([=] {
          threadIdx = {(unsigned)t, 0, 0};
          blockIdx = {(unsigned)bx, (unsigned)by, 0};
          kernel();
        });
      for (auto& t : ts) t.join();
    }
}

static std::string dir;
template <class T>
std::vector<T> readv(const char* name) {
  std::ifstream f(dir + "/" + name, std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "dpx_emu: cannot read %s\n", name);
    std::exit(2);
  }
  std::vector<char> b((std::istreambuf_iterator<char>(f)), {});
  std::vector<T> v(b.size() / sizeof(T));
  std::memcpy(v.data(), b.data(), v.size() * sizeof(T));
  return v;
}
template <class T>
void writev(const char* name, const std::vector<T>& v) {
  std::ofstream f(dir + "/" + name, std::ios::binary);
  f.write((const char*)v.data(), v.size() * sizeof(T));
}

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: dpx_emu ctc|viterbi|dtw f32|i32 DIR\n");
    return 2;
  }
  const std::string op = argv[1];
  const bool i32 = std::string(argv[2]) == "i32";
  dir = argv[3];
  std::vector<double> a = readv<double>("args.f64");
  if (op == "ctc") {  // args: B T C blank star scale bd frames [K]
    const long long B = a[0], T = a[1], C = a[2], blank = a[3], bd = a[6], frames = a[7];
    const double star = a[4], scale = a[5];
    auto lp = readv<float>("lp.f32");
    auto meta = readv<long long>("meta.i64");
    auto table = readv<int>("table.i32");
    long long words = 0, maxS = 1;
    for (long long b = 0; b < B; ++b) {
      const long long S = meta[4 * b + 1], Tb = meta[4 * b];
      words = max(words, meta[4 * b + 3] + (Tb - 1) * 2 * ((S + 31) / 32));
      maxS = max(maxS, S);
    }
    std::vector<unsigned> bp(words + 1, 0xdeadbeefu);
    std::vector<int> ali(B * T, 12345);
    std::vector<float> fs(B * T, 777.f), score(B, 777.f);
    std::vector<long long> status(3 * B, 0);
    // The smallest compiled pass count that covers the states, as the
    // launcher picks it.
    const long long need = (maxS + bd - 1) / bd;
    const int pi = need <= 1 ? 0 : need <= 2 ? 1 : need <= 4 ? 2 : need <= 6 ? 3 : 4;
    using Kernel = void (*)(const DpxCtcParams);
    const Kernel f32[] = {dpx_ctc_align_f32_p1, dpx_ctc_align_f32_p2, dpx_ctc_align_f32_p4, dpx_ctc_align_f32_p6,
                          dpx_ctc_align_f32_p8};
    const Kernel i32k[] = {dpx_ctc_align_i32_p1, dpx_ctc_align_i32_p2, dpx_ctc_align_i32_p4, dpx_ctc_align_i32_p6,
                           dpx_ctc_align_i32_p8};
    Kernel k = (i32 ? i32k : f32)[pi];
    // args[8] > 0: the register-resident kernel with that many states per
    // thread (dpx_ctc_warp_*_k<K>).
    const int K = a.size() > 8 ? (int)a[8] : 0;
    if (K > 0) {
      const int ks[] = {2, 4, 6, 8, 12, 16, 20, 24, 32};
      const Kernel wf[] = {dpx_ctc_warp_f32_k2,  dpx_ctc_warp_f32_k4,  dpx_ctc_warp_f32_k6,
                           dpx_ctc_warp_f32_k8,  dpx_ctc_warp_f32_k12, dpx_ctc_warp_f32_k16,
                           dpx_ctc_warp_f32_k20, dpx_ctc_warp_f32_k24, dpx_ctc_warp_f32_k32};
      const Kernel wi[] = {dpx_ctc_warp_i32_k2,  dpx_ctc_warp_i32_k4,  dpx_ctc_warp_i32_k6,
                           dpx_ctc_warp_i32_k8,  dpx_ctc_warp_i32_k12, dpx_ctc_warp_i32_k16,
                           dpx_ctc_warp_i32_k20, dpx_ctc_warp_i32_k24, dpx_ctc_warp_i32_k32};
      int ki = 0;
      while (ki < 8 && ks[ki] != K) ++ki;
      if (ks[ki] != K || K * bd < maxS) {
        std::fprintf(stderr, "dpx_emu: no warp kernel with K=%d states a thread for S=%lld, %lld threads\n", K, maxS, bd);
        return 2;
      }
      k = (i32 ? wi : wf)[ki];
      // Its backpointer layout: ceil(S/K) * ceil(2K/32) words a frame.
      words = 0;
      for (long long b = 0; b < B; ++b) {
        const long long S = meta[4 * b + 1], Tb = meta[4 * b];
        words = max(words, meta[4 * b + 3] + (Tb - 1) * ((S + K - 1) / K) * ((2 * K + 31) / 32) + 2);
      }
      bp.assign(words + 2, 0xdeadbeefu);
    }
    std::memset(dpxk::smem, 0x5A, sizeof dpxk::smem);  // stale shared memory (positive words: a missed initialisation shows)
    const DpxCtcParams p{.lp = lp.data(), .T = T, .C = C, .meta = meta.data(), .table = table.data(),
                         .bp = bp.data(), .blank = blank, .star = star, .scale = scale, .frames = frames,
                         .alignment = ali.data(), .frameScores = fs.data(), .score = score.data(),
                         .status = status.data()};
    launch(B, 1, bd, [&] { k(p); });
    writev("alignment.i32", ali);
    writev("frame_scores.f32", fs);
    writev("score.f32", score);
    writev("status.i64", status);
  } else if (op == "viterbi") {  // args: B T S scale bd
    const long long B = a[0], T = a[1], S = a[2], bd = a[4];
    const double scale = a[3];
    auto em = readv<float>("em.f32");
    auto tr = readv<float>("tr.f32");
    auto pr = readv<float>("pr.f32");
    auto lens = readv<long long>("lens.i64");
    std::vector<int> trq(S * S), prq(S), maxq(2, (int)0x80808080);
    if (i32) {
      const DpxQuantizeParams qt{.x = tr.data(), .n = S * S, .scale = scale, .out = trq.data(), .maxq = maxq.data()};
      const DpxQuantizeParams qp{.x = pr.data(), .n = S, .scale = scale, .out = prq.data(), .maxq = maxq.data() + 1};
      launch(3, 1, 64, [&] { dpx_quantize(qt); });
      launch(2, 1, 32, [&] { dpx_quantize(qp); });
    }
    std::vector<unsigned short> bp(B * max(T - 1, 1LL) * S, 0xbeef);
    std::vector<int> path(B * T, 12345);
    std::vector<float> score(B, 777.f);
    const DpxViterbiParams p{.em = em.data(), .T = T, .S = S, .trans = i32 ? (const void*)trq.data() : tr.data(),
                             .priors = i32 ? (const void*)prq.data() : pr.data(), .lens = lens.data(),
                             .maxq = maxq.data(), .bp = bp.data(), .scale = scale, .path = path.data(),
                             .score = score.data()};
    launch(B, 1, bd, [&] {
      if (i32)
        dpx_viterbi_i32(p);
      else
        dpx_viterbi_f32(p);
    });
    writev("path.i32", path);
    writev("score.f32", score);
    writev("maxq.i32", maxq);
  } else if (op == "dtw") {  // args: B N M scale bd
    const long long B = a[0], N = a[1], M = a[2], bd = a[4];
    const double scale = a[3];
    auto cost = readv<float>("cost.f32");
    auto dims = readv<long long>("dims.i64");
    const long long W = (N + 31) / 32;
    std::vector<unsigned> bp(B * (N + M - 1) * 2 * W, 0xdeadbeefu);
    std::vector<int> path(B * (N + M) * 2, 12345), plen(B, -7);
    std::vector<float> total(B, 777.f);
    std::vector<unsigned long long> status(3 * B, 0);
    const DpxCheckParams c{.x = cost.data(), .itemStride = N * M, .rowStride = M, .dims = dims.data(),
                           .dimStride = 2, .allowNegInf = 0, .status = status.data()};
    const DpxDtwParams p{.cost = cost.data(), .N = N, .M = M, .dims = dims.data(), .bp = bp.data(), .scale = scale,
                         .path = path.data(), .pathLen = plen.data(), .total = total.data()};
    launch(2, B, 64, [&] { dpx_check(c); });
    launch(B, 1, bd, [&] {
      if (i32)
        dpx_dtw_i32(p);
      else
        dpx_dtw_f32(p);
    });
    writev("path.i32", path);
    writev("path_len.i32", plen);
    writev("cost_total.f32", total);
    writev("status.u64", status);
  } else {
    std::fprintf(stderr, "dpx_emu: unknown op %s\n", op.c_str());
    return 2;
  }
  return 0;
}
