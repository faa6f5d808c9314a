// fbank.cu: log-mel filterbank kernels, the GPU side of the `fbank` op
// (plugins/fbank, launched by plugins/fbank/op_cuda.go). The CPU Frontend in
// plugins/fbank is the numerical reference; these kernels follow its
// contract for n_fft 400 (Whisper) and 512 (Parakeet/NeMo) with any window,
// hop, pad mode, pre-emphasis, filterbank, log mode, normalisation and layout.
//
// Pipeline, one stream, per batch (B items, n_mels = M, T = output frames):
//   1. fbank_logmel_n400 | fbank_logmel_n512: framing + window + FFT + |X|² +
//      mel + log, staged per block and written in the output layout, plus
//      per-block partial reductions and the finite-sample check.
//   2. fbank_stats (Parakeet): per-feature mean and 1/(std + 1e-5) from
//      the partials, in float64.
//   3. fbank_normalize: the normalisation, in place (Whisper: each block
//      reduces the item's maximum itself, then clamps, since 1. stored
//      (y + 4)/4 already).
// normalize=none stops after 1. (A fused variant, 1-3 in one launch with
// ticketed tiles normalising from L2, measured slower: docs/bench/fbank_gpu.md.)
// No cuFFT/cuBLAS: the FFT is fbank_frame.cuh. Build knobs (experiments;
// the committed fatbin uses the defaults): FBANK_MIN_BLOCKS,
// FBANK_MAX_WARPS (register budget), FBANK_MEL_TC (tensor-core mel),
// FBANK_PREFETCH.
//
// Every kernel parameter is 8 bytes (pointers, long long, double): the Go
// launcher (gorgonia.org/cu) passes each argument as one 64-bit word.
#include "fbank_frame.cuh"

using fbank::Band;
using fbank::kWarp;

namespace {

// Warps per block of fbank_logmel (blockDim.x / 32): 4, or up to
// FBANK_MAX_WARPS (8 by default), the __launch_bounds__ thread count.
#ifndef FBANK_MAX_WARPS
#define FBANK_MAX_WARPS 8
#endif
constexpr int kMaxWarps = FBANK_MAX_WARPS;
constexpr int kMaxThreads = kMaxWarps * kWarp;
constexpr int kStatWarps = 8;  // warps per block of fbank_stats (256 threads)
// Blocks of fbank_logmel per SM (of kMaxWarps warps) that the register
// budget must allow: 2 (of 8 warps) gives 128 registers a thread.
#ifndef FBANK_MIN_BLOCKS
#define FBANK_MIN_BLOCKS 2
#endif

// FBANK_PREFETCH=0 drops the L2 prefetch of the next step's samples (to
// measure it).
#ifndef FBANK_PREFETCH
#define FBANK_PREFETCH 1
#endif

// Item geometry, one row of 3 long longs per item, computed on the host by
// plugins/fbank's Config.geometry.
// The statistics (maximum, moments) run over the computed frames, as the CPU
// Frontend's do.
struct Item {
  long long n;         // samples the STFT sees
  long long real;      // samples taken from the pcm row
  long long computed;  // leading frames with features; the rest are 0
};

// Statistics modes (the launcher's statsMode).
enum Stats : long long { kStatsNone = 0, kStatsMax = 1, kStatsMoments = 2 };

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

#ifndef FBANK_MEL_TC
#define FBANK_MEL_TC 0
#endif

#if FBANK_MEL_TC
__device__ __forceinline__ unsigned tf32_bits(float x) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

// c += A·B for one m16n8k8 TF32 tile (fp32 accumulate).
__device__ __forceinline__ void mma_tf32(float* c, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0,
                                         unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// mel_tc is the tensor-core mel projection (build flag FBANK_MEL_TC=1; the
// default build uses fbank::mel4): the step's R power rows (row r = 4·w + g:
// warp w's rows interleaved, bin k at P + w·pitchW + 4·k + g, k <= H) times
// the filterbank, as mma.sync m16n8k8 TF32
// in 3xTF32 (a_lo·b_hi + a_hi·b_lo + a_hi·b_hi, ~float32 accuracy). Warp w
// takes the 8-filter tiles w, w+W, ... for each block of 16 rows; a tile
// runs only over the k-steps its bands cover (mel_tiles[j] = first
// fragment, k-steps, first k/8; mel_frag: the B fragments as (b0 hi, b1 hi,
// b0 lo, b1 lo) per lane, packed by plugins/fbank's melTiles). Lane (g, t)
// = (lane/4, lane%4) loads A[g|g+8][k0+t|k0+t+4] (0 past bin H). Rows
// r < valid get fmaf(y, a, c), y = lg.log(mel), in stage[r·pitch + m];
// returns the lane's maximum y.
__device__ float mel_tc(const float* P, int pitchW, int rows, int valid, int H, const float4* __restrict__ frag,
                        const int4* __restrict__ tiles, int M, const fbank::LogMel& lg, float* stage, int pitch,
                        int warp, int W, int lane) {
  const int g = lane >> 2, t = lane & 3;
  float mx = -INFINITY;
  for (int rb = 0; rb < rows; rb += 16) {
    // Rows past the block's (rows < 16 for blocks of fewer than 4 warps)
    // read row rows-1 instead: in bounds, and their results are dropped.
    const int r0 = min(rb + g, rows - 1), r1 = min(rb + g + 8, rows - 1);
    const float* p0 = P + (r0 / fbank::kGroups) * pitchW + r0 % fbank::kGroups;
    const float* p1 = P + (r1 / fbank::kGroups) * pitchW + r1 % fbank::kGroups;
    for (int j = warp; j < (M + 7) / 8; j += W) {
      const int4 tl = tiles[j];
      float c[4] = {0.f, 0.f, 0.f, 0.f};
      for (int s = 0; s < tl.y; s++) {
        const int ka = 8 * (tl.z + s) + t, kb = ka + 4;
        constexpr int G = fbank::kGroups;
        const float a[4] = {ka <= H ? p0[G * ka] : 0.f, ka <= H ? p1[G * ka] : 0.f, kb <= H ? p0[G * kb] : 0.f,
                            kb <= H ? p1[G * kb] : 0.f};
        unsigned hi[4], lo[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
          hi[i] = tf32_bits(a[i]);
          lo[i] = tf32_bits(a[i] - __uint_as_float(hi[i]));
        }
        const float4 bf = __ldg(frag + (tl.x + s) * kWarp + lane);
        const unsigned bh0 = __float_as_uint(bf.x), bh1 = __float_as_uint(bf.y);
        mma_tf32(c, lo[0], lo[1], lo[2], lo[3], bh0, bh1);
        mma_tf32(c, hi[0], hi[1], hi[2], hi[3], __float_as_uint(bf.z), __float_as_uint(bf.w));
        mma_tf32(c, hi[0], hi[1], hi[2], hi[3], bh0, bh1);
      }
#pragma unroll
      for (int i = 0; i < 4; i++) {
        const int r = rb + g + 8 * (i >> 1), m = 8 * j + 2 * t + (i & 1);
        if (r < valid && m < M) {
          const float y = lg.log(c[i]);
          stage[r * pitch + m] = fmaf(y, lg.a, lg.c);
          mx = fmaxf(mx, y);
        }
      }
    }
  }
  return mx;
}
#endif

// logmel is block (x, b) of fbank_logmel_n{N}.
//
// Grid (ceil(T / F), B), block W·32 threads (W = 1, 2, 4 or 8 warps), R = 4·W rows
// a step, F = R·steps frames per block: block (x, b) owns frames t0 = x·F ..
// t0+F-1 of item b; in step st warp w transforms the 4 frames
// t0 + st·R + 4·w + g, g < 4, 8 lanes a frame (fbank_frame.cuh), and the block
// writes the step's R rows before the next step. Dynamic shared memory, in
// this order: W·4·S·8 bytes of frame buffers (S = Frame<N>::S float2: 200 for
// N 400, 264 for 512); for kStatsMoments 2·M doubles (the block's Σy, Σy²);
// R·(M+1)·4 bytes of staged log-mel rows (row pitch M+1 so that the mel_time
// transpose reads are conflict-free); when shared_w > 0, the filterbank:
// bands (2·M ints) and its shared_w weights (w[j·M + m], fbank_frame.cuh's
// Band), copied once per block.
// Registers: the __launch_bounds__ of 256 threads and FBANK_MIN_BLOCKS blocks
// per SM (ptxas.log).
//
// Per frame t < computed:
//   x[j] = window[j] · s(t·hop - pad + j), s = the pre-emphasised signal
//   with virtual reflect/zero padding (no padded copy), packed as H = N/2
//   complex points read straight into registers; FFT (column DFTs in
//   registers, one transpose through the frame buffer, 8-point DFTs in
//   registers); |X[k]|², k = 0..H, into the warp's power rows (interleaved
//   by frame, over its buffers); mel band sums and y = log2(max(mel + guard,
//   floor))·scale into the staging row, as (y + 4)/4 for kStatsMax.
// Frames t in [computed, T) are written as 0, in the layout (0: mel_time
// [B, M, T]; 1: time_mel [B, T, M]) with coalesced stores. At the end the
// block's partial statistics over its computed frames:
//   kStatsMax:     partial[b·G + x] = max y                      (float)
//   kStatsMoments: partial[((b·G + x)·M + m)·2 + {0,1}] = Σy, Σy² (double,
//                  summed in frame order)
// with G = gridDim.x (max and moments over y). Samples in [t·hop, (t+1)·hop) (the last computed frame:
// up to real) are checked: the smallest index of a NaN/Inf sample of item b
// goes to bad[b] (atomicMin; the caller presets it to all ones).
template <int N>
__device__ void logmel(const float* __restrict__ pcm, long long pcm_stride, const Item* __restrict__ items,
                       const float* __restrict__ window, const float2* __restrict__ twN,
                       const float2* __restrict__ colTw, const Band* __restrict__ bands, const float* __restrict__ weights, long long shared_w,
                       long long n_mels,
                       long long frames, long long hop, long long pad, long long reflect, double preemph,
                       double guard, double floor_, double scale, long long layout, long long steps,
                       float* __restrict__ out, void* __restrict__ partial, long long stats,
                       unsigned long long* __restrict__ bad, const float4* __restrict__ mel_frag,
                       const int4* __restrict__ mel_tiles) {
  using Fr = fbank::Frame<N>;
  const long long x = blockIdx.x, b = blockIdx.y, G = gridDim.x;
  extern __shared__ float2 smem[];
  const int W = blockDim.x / kWarp, threads = blockDim.x;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int g = lane / fbank::kLanes, n1 = lane % fbank::kLanes;
  const int M = (int)n_mels, R = fbank::kGroups * W, pitch = M + 1;
  const long long F = (long long)R * steps;
  float2* T = smem + warp * fbank::kGroups * Fr::S;  // the warp's 4 frame buffers
  double* acc = reinterpret_cast<double*>(smem + W * fbank::kGroups * Fr::S);  // Σy, Σy² per feature
  float* stage = reinterpret_cast<float*>(acc + (stats == kStatsMoments ? 2 * M : 0));
  const long long t0 = x * F;
  // The filterbank's shared copy (when shared_w > 0); mel4 is called with
  // these pointers directly so that its loads compile to LDS, not generic.
  Band* const sb = reinterpret_cast<Band*>(stage + R * pitch);
  float* const sw = reinterpret_cast<float*>(sb + M);
  if (shared_w > 0) {
    for (int i = threadIdx.x; i < M; i += threads) sb[i] = bands[i];
    for (int i = threadIdx.x; i < shared_w; i += threads) sw[i] = weights[i];
  }
  if (stats == kStatsMoments) {
    for (int i = threadIdx.x; i < 2 * M; i += threads) acc[i] = 0;
  }
  __syncthreads();
  const Item it = items[b];
  const float* row = pcm + b * pcm_stride;
  // Whisper (kStatsMax) stores (y + 4)/4 and its normalisation is then only
  // the clamp at the item's floor (norm1).
  const fbank::LogMel lg{(float)guard, (float)floor_, (float)scale, stats == kStatsMax ? 0.25f : 1.f,
                         stats == kStatsMax ? 1.f : 0.f};
  const float2* win2 = reinterpret_cast<const float2*>(window);

  float mx = -INFINITY;
  for (int st = 0; st < steps; st++) {
    const long long ts = t0 + (long long)st * R;  // the step's first frame
    if (ts >= frames) break;                         // block-uniform
    const int r0 = warp * fbank::kGroups;           // the warp's first staged row
    const int nact = (int)min((long long)fbank::kGroups, max(0LL, it.computed - (ts + r0)));
    if (nact > 0) {  // warp-uniform
      if (FBANK_PREFETCH && st + 1 < steps) {
        // Ask L2 for the samples of the warp's frames in the next step, one
        // 128-byte line a lane (a hint: in-bounds addresses only).
        const long long s0 = max(0LL, (ts + R + r0) * hop - pad) + 32LL * lane;
        if (s0 < it.real) asm volatile("prefetch.global.L2 [%0];" ::"l"(row + s0));
      }
      const long long t = ts + r0 + g;
      const bool active = g < nact;
      fbank::Source src{row, it.n, it.real, t * hop - pad, (int)reflect, (float)preemph};
      float2* Tg = T + g * Fr::S;
      {
        fbank::Column<N> col;
        col.load(src, win2, n1, active);
        // Finite check of the samples each frame owns, [t·hop, (t+1)·hop)
        // (the last computed frame: up to real): free when the interior
        // loads read them all and found them finite (x·0 is NaN only for a
        // NaN/Inf x); else, and to find the index, the warp's lanes pass
        // over them (a frame's owned samples are spread over its 8 lanes'
        // loads differently than over this loop, hence the warp vote).
        const long long lo = t * hop, hi = t + 1 == it.computed ? it.real : min(it.real, (t + 1) * hop);
        const bool clean = col.fast && lo >= src.start && hi <= src.start + N && col.nf == 0.f;
        if (__any_sync(0xffffffffu, active && !clean) && active) {
          for (long long j = lo + n1; j < hi; j += fbank::kLanes) {
            if (!isfinite(row[j])) atomicMin(bad + b, (unsigned long long)j);
          }
        }
        col.transform(colTw, n1);
        col.store(Tg, n1);
      }
      __syncwarp();
      fbank::Pairs<N> pr;
      pr.compute(Tg, twN, n1);
      __syncwarp();
      pr.store(reinterpret_cast<float*>(T), n1, g);
#if FBANK_MEL_TC
    }
    __syncthreads();  // every frame's power row
    const int valid = (int)max(0LL, min((long long)R, it.computed - ts));
    mx = fmaxf(mx, mel_tc(reinterpret_cast<const float*>(smem), fbank::kGroups * 2 * Fr::S, R, valid, Fr::H, mel_frag,
                          mel_tiles, M,
                          lg, stage, pitch, warp, W, lane));
#else
      __syncwarp();
      const float* P = reinterpret_cast<const float*>(T);
      mx = fmaxf(mx, shared_w > 0 ? fbank::mel4(P, nact, sb, sw, M, lg, stage + r0 * pitch, pitch, lane)
                                  : fbank::mel4(P, nact, bands, weights, M, lg, stage + r0 * pitch, pitch, lane));
    }
#endif
    __syncthreads();  // the step's rows are staged; the frame buffers are free again

    // Write the step's rows [ts, ts + rows) in the output layout.
    const int rows = (int)min((long long)R, frames - ts);
    const int comp = (int)max(0LL, min((long long)R, it.computed - ts));  // staged rows < comp hold features
    if (layout == 0) {
      // Thread (m0, r) = (tid / R, tid % R) writes rows r of features
      // m0, m0 + threads/R, ... (R divides threads): no divisions.
      const int r = threadIdx.x % R;
      if (r < rows) {
        float* dst = out + b * M * frames + ts + r;
        for (int m = threadIdx.x / R; m < M; m += threads / R) dst[m * frames] = r < comp ? stage[r * pitch + m] : 0.f;
      }
    } else {
      float* dst = out + (b * frames + ts) * M;
      int r = threadIdx.x / M, m = threadIdx.x % M;  // of idx, advanced without divisions
      const int dr = threads / M, dm = threads % M;
      for (int idx = threadIdx.x; idx < rows * M; idx += threads) {
        dst[idx] = r < comp ? stage[r * pitch + m] : 0.f;
        r += dr, m += dm;
        if (m >= M) m -= M, r++;
      }
    }
    if (stats == kStatsMoments) {
      for (int m = threadIdx.x; m < M; m += threads) {  // one thread per feature: no races
        double s1 = acc[2 * m], s2 = acc[2 * m + 1];
        for (int r = 0; r < comp; r++) {
          double y = stage[r * pitch + m];
          s1 += y;
          s2 = fma(y, y, s2);
        }
        acc[2 * m] = s1;
        acc[2 * m + 1] = s2;
      }
    }
    __syncthreads();  // the stage is free for the next step
  }

  if (stats == kStatsMax) {
    __shared__ float wmax[kMaxWarps];
    mx = warp_max(mx);
    if (lane == 0) wmax[warp] = mx;
    __syncthreads();
    if (threadIdx.x == 0) {
      float v = wmax[0];
      for (int w = 1; w < W; w++) v = fmaxf(v, wmax[w]);
      static_cast<float*>(partial)[b * G + x] = v;
    }
  } else if (stats == kStatsMoments) {
    double* p = static_cast<double*>(partial) + (b * G + x) * M * 2;
    for (int i = threadIdx.x; i < 2 * M; i += threads) p[i] = acc[i];  // after the step loop's barrier
  }
}

}  // namespace

#define FBANK_LOGMEL_ARGS                                                                                      \
  const float *pcm, long long pcm_stride, const Item *items, const float *window, const float2 *twN,          \
      const float2 *colTw,                                                                                      \
      const Band *bands, const float *weights, long long shared_w, long long n_mels, long long frames, long long hop, \
      long long pad, \
      long long reflect, double preemph, double guard, double floor_, double scale, long long layout,         \
      long long steps, float *out, void *partial, long long stats, unsigned long long *bad, const float4 *mel_frag, \
      const int4 *mel_tiles
#define FBANK_LOGMEL_CALL                                                                                     \
  pcm, pcm_stride, items, window, twN, colTw, bands, weights, shared_w, n_mels, frames, hop, pad, reflect, preemph, guard, floor_, \
      scale, layout, steps, out, partial, stats, bad, mel_frag, mel_tiles

extern "C" __global__ void __launch_bounds__(kMaxThreads, FBANK_MIN_BLOCKS) fbank_logmel_n400(FBANK_LOGMEL_ARGS) {
  logmel<400>(FBANK_LOGMEL_CALL);
}

extern "C" __global__ void __launch_bounds__(kMaxThreads, FBANK_MIN_BLOCKS) fbank_logmel_n512(FBANK_LOGMEL_ARGS) {
  logmel<512>(FBANK_LOGMEL_CALL);
}

// Statistics of item b from its G partials, in float64, in a fixed order
// (deterministic):
//   kStatsMax:     floor = max over the G partials - clamp (Whisper:
//                  clamp = 8); fixed_floor instead when it is finite
//                  (normalize=global; partial is not read).
//   kStatsMoments: with n = computed frames (>= 2), for each feature m
//                  mean = Σy/n, var = max(0, (Σy² - Σy·mean)/(n-1)),
//                  moments[(b·M + m)·2 + {0,1}] = mean, 1/(√var + eps).
__device__ __forceinline__ void store_moments(double s, double s2, double n, double eps, double* mom) {
  const double mean = s / n;
  const double var = fmax(0.0, (s2 - s * mean) / (n - 1));
  mom[0] = mean;
  mom[1] = 1.0 / (sqrt(var) + eps);
}

// block_floor is kStatsMax for a whole block (every thread calls it; thread
// 0 writes *floor_b).
__device__ void block_floor(const float* p, long long groups, double clamp, double fixed_floor, float* floor_b) {
  __shared__ float wmax[kStatWarps];
  if (isfinite(fixed_floor)) {
    if (threadIdx.x == 0) *floor_b = (float)fixed_floor;
    return;
  }
  float mx = -INFINITY;
  for (long long g = threadIdx.x; g < groups; g += blockDim.x) mx = fmaxf(mx, __ldcg(p + g));
  mx = warp_max(mx);
  if (threadIdx.x % kWarp == 0) wmax[threadIdx.x / kWarp] = mx;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < (int)(blockDim.x / kWarp); w++) mx = fmaxf(mx, wmax[w]);
    *floor_b = (float)((double)mx - clamp);
  }
}

// fbank_stats computes the per-feature moments of every item
// (kStatsMoments) from the partials of fbank_logmel (G per item). Block 256
// threads, grid (ceil(M/32), B): thread (g0, j) = (tid/32, tid%32) sums
// groups g0, g0+8, ... of feature m = 32·blockIdx.x + j (a warp reads 32
// consecutive features: coalesced), the 8 sums of a feature are added in g0
// order. (Whisper's maximum needs no launch of its own: fbank_normalize's
// blocks reduce the item's G partial maxima themselves.)
extern "C" __global__ void fbank_stats(const Item* items, const double* partial, long long groups, long long n_mels,
                                       double eps, double* moments) {
  const long long b = blockIdx.y;
  __shared__ double sums[kStatWarps][kWarp][2];
  const int j = threadIdx.x % kWarp, g0 = threadIdx.x / kWarp;
  const long long m = (long long)blockIdx.x * kWarp + j;
  double s = 0, s2 = 0;
  if (m < n_mels) {
    const double* p = partial + (b * groups * n_mels + m) * 2;
#pragma unroll 8
    for (long long g = g0; g < groups; g += kStatWarps) {  // in order; unrolled: 8 loads in flight
      s += p[g * n_mels * 2];
      s2 += p[g * n_mels * 2 + 1];
    }
  }
  sums[g0][j][0] = s;
  sums[g0][j][1] = s2;
  __syncthreads();
  if (g0 != 0 || m >= n_mels) return;
  for (int w = 1; w < kStatWarps; w++) {
    s += sums[w][j][0];
    s2 += sums[w][j][1];
  }
  store_moments(s, s2, (double)items[b].computed, eps, moments + (b * n_mels + m) * 2);
}

// norm1 is the normalisation of element (m, t) with value y, t < computed:
//   kStatsMax:     y = max(y, fl), fl = (floor[b] + 4)/4: logmel stored
//                  (y + 4)/4, so this is (max(y, floor) + 4)/4 exactly
//                  (the rounding of (x + 4)/4 is monotone)
//   kStatsMoments: y = (float)((y - mean[b,m]) · inv[b,m])   (float64 math)
// Frames t >= computed were written as 0 by fbank_logmel and stay 0.
__device__ __forceinline__ float norm1(float y, unsigned m, unsigned t, long long computed, long long stats, float fl,
                                       const double* mom) {
  if (t >= computed) return y;
  if (stats == kStatsMax) return fmaxf(y, fl);
  return (float)(((double)y - mom[2 * m]) * mom[2 * m + 1]);
}

// normalize_span normalises elements [lo, hi) of an item's features in place
// (element idx = m·T + t for mel_time, t·M + m for time_mel; norm1), storing
// only the chunks that change (for Whisper a read of the features). Thread
// i takes the chunks of 4 elements at lo + 4·i + 4·k·blockDim.x, 8 chunks in
// flight per round (coalesced; float4 when item + lo is 16-byte aligned).
// mom: the item's (mean, inv) per feature.
__device__ void normalize_span(float* item, unsigned lo, unsigned hi, long long computed, unsigned M, unsigned T,
                               long long layout, long long stats, float fl, const double* mom) {
  constexpr int kChunks = 8;
  const unsigned inner = layout == 0 ? T : M;  // idx = outer·inner + in
  const bool vec = (reinterpret_cast<unsigned long long>(item + lo) & 15) == 0;
  for (unsigned c0 = lo + 4 * threadIdx.x; c0 < hi; c0 += 4 * kChunks * blockDim.x) {
    float y[kChunks][4];
#pragma unroll
    for (int k = 0; k < kChunks; k++) {
      const unsigned c = c0 + 4 * k * blockDim.x;
      if (vec && c + 4 <= hi) {
        const float4 v = __ldcg(reinterpret_cast<const float4*>(item + c));
        y[k][0] = v.x, y[k][1] = v.y, y[k][2] = v.z, y[k][3] = v.w;
      } else {
#pragma unroll
        for (int e = 0; e < 4; e++) y[k][e] = c + e < hi ? __ldcg(item + c + e) : 0.f;
      }
    }
#pragma unroll
    for (int k = 0; k < kChunks; k++) {
      const unsigned c = c0 + 4 * k * blockDim.x;
      if (c >= hi) break;
      unsigned out = c / inner, in = c % inner;
      bool changed = false;
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const float v = norm1(y[k][e], layout == 0 ? out : in, layout == 0 ? in : out, computed, stats, fl, mom);
        changed |= v != y[k][e];
        y[k][e] = v;
        if (++in == inner) in = 0, out++;
      }
      if (!changed) continue;  // Whisper: only values under the floor change
      if (vec && c + 4 <= hi) {
        *reinterpret_cast<float4*>(item + c) = make_float4(y[k][0], y[k][1], y[k][2], y[k][3]);
      } else {
#pragma unroll
        for (int e = 0; e < 4; e++) {
          if (c + e < hi) item[c + e] = y[k][e];
        }
      }
    }
  }
}

// fbank_normalize normalises the computed frames of out in place.
// Grid (ceil(M·T / 4096), B), block 256: block (x, b) does elements
// [4096·x, 4096·x + 4096) of item b (normalize_span). kStatsMax: the block
// first computes the item's floor from its G partial maxima (block_floor);
// kStatsMoments: moments from fbank_stats.
extern "C" __global__ void fbank_normalize(float* out, const Item* items, long long n_mels, long long frames,
                                           long long layout, long long stats, const float* partial, long long groups,
                                           double clamp, double fixed_floor, const double* moments) {
  __shared__ float floor_b;
  const long long b = blockIdx.y;
  if (stats == kStatsMax) {
    block_floor(partial + b * groups, groups, clamp, fixed_floor, &floor_b);
    __syncthreads();
  }
  const unsigned M = (unsigned)n_mels, T = (unsigned)frames, total = M * T;
  const unsigned lo = blockIdx.x * 4096u, hi = min(total, lo + 4096u);
  normalize_span(out + b * (long long)total, lo, hi, items[b].computed, M, T, layout, stats,
                 stats == kStatsMax ? (floor_b + 4.f) / 4.f : 0.f, moments + b * n_mels * 2);
}
