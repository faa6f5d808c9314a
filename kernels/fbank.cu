// fbank.cu: log-mel filterbank kernels, the GPU side of the `fbank` op
// (plugins/fbank, launched by plugins/fbank/op_cuda.go). The CPU Frontend in
// plugins/fbank is the numerical reference; these kernels follow its
// contract for n_fft 400 (Whisper) and 512 (Parakeet/NeMo) with any window,
// hop, pad mode, pre-emphasis, filterbank, log mode, normalisation and layout.
//
// Pipeline, one stream, per batch (B items, n_mels = M, T = output frames,
// G tiles of F frames an item):
//   1. fbank_logmel_n400 | fbank_logmel_n512 (| fbank_logmel_n400_wide, which
//      writes two steps' rows at once; | fbank_logmel_n{400,512}_tabs, with
//      the window and column twiddles in shared memory): framing + window +
//      FFT + |X|² + mel + log, staged per block and written in the output
//      layout, the per-tile partial statistics and the finite-sample check;
//      the last tile of each item reduces the item's statistics (Whisper:
//      the floor, max - 8; Parakeet: per-feature mean and 1/(std + 1e-5),
//      float64). Fused (batches): the same launch also runs the
//      normalisation tiles, after every transform tile (or a lag behind
//      them).
//   2. otherwise fbank_stats (Parakeet, single long clips: the moments from
//      the partials by 32 threads a feature) and fbank_normalize (one block
//      a tile, in place).
// normalize=none stops after the transform. Both normalisations: Whisper
// clamps (1. stored (y + 4)/4 already) only the tiles whose minimum is under
// the floor; Parakeet (y - mean)·inv in float32 with the mean split hi+lo.
// No cuFFT/cuBLAS: the FFT is fbank_frame.cuh. Build knobs (experiments;
// the committed fatbin uses the defaults): FBANK_MIN_BLOCKS,
// FBANK_MAX_WARPS (register budget), FBANK_MEL_TC (tensor-core mel),
// FBANK_PREFETCH, FBANK_ABLATE (timing probes).
//
// Each kernel takes one parameter struct of params.h (Fbank*Params), read
// in place from the parameter space (__grid_constant__).
#include "fbank_frame.cuh"
#include "params.h"

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
constexpr int kStatWarps = 32;  // warps per block of fbank_stats (1024 threads)
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

// FBANK_ABLATE (timing probes only: the features are wrong): a bit mask of
// stages left out of fbank_logmel, to measure what each costs: 1 the mel
// band sums past each band's first bin, 2 the write-out of the rows to
// global memory, 4 the work of the fused launch's normalisation tiles
// (they return at once). 0 (the default, fbank_frame.cuh) leaves nothing
// out.

// FBANK_MEL_TC=1: the tensor-core mel (mel_tc) instead of the band sums.
#ifndef FBANK_MEL_TC
#define FBANK_MEL_TC 0
#endif


// Item geometry, one row of 3 long longs per item, computed on the host by
// plugins/fbank's Config.geometry (the params' items point to B of them).
// The statistics (maximum, moments) run over the computed frames, as the CPU
// Frontend's do.
struct Item {
  long long n;         // samples the STFT sees
  long long real;      // samples taken from the pcm row
  long long computed;  // leading frames with features; the rest are 0
};

// Statistics modes (the launcher's statsMode).
enum Stats : long long { kStatsNone = 0, kStatsMax = 1, kStatsMoments = 2 };

// Tile is the work of one block: tile x of item b (G tiles an item, B items).
struct Tile {
  long long x, b, G, B;
};

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float warp_min(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fminf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// store_moments writes the (mean, 1/(std + eps)) of one feature from its
// sums over n frames (n >= 2; unbiased variance, floored at 0).
__device__ __forceinline__ void store_moments(double s, double s2, double n, double eps, double* mom) {
  const double mean = s / n;
  const double var = fmax(0.0, (s2 - s * mean) / (n - 1));
  mom[0] = mean;
  mom[1] = 1.0 / (sqrt(var) + eps);
}

// finish_item ends block (x, b) of fbank_logmel when the kernel reduces the
// statistics itself (tickets != 0; one word per item, 0 at the launch and
// reset to 0 by the last block): the item's block that finishes last (the
// threadfence reduction: each block's partials are visible device-wide
// before it takes its ticket) reduces the item's G partials in a fixed
// order (deterministic) into result:
//   kStatsMax:     floors[b] = (float)(max of the G partial maxima - clamp)
//                  (Whisper: clamp = 8), float result[B];
//   kStatsMoments: for each feature m, over n = computed frames (>= 2),
//                  mean = Σy/n, var = max(0, (Σy² - Σy·mean)/(n-1)),
//                  result[(b·M + m)·2 + {0,1}] = mean, 1/(√var + eps),
//                  double; the sums in float64, in partial order.
// Called by every thread of the block.
// With ready set (the fused launch), the last block then stores ready[b] =
// epoch for the item's normalisation tiles.
__device__ void finish_item(const Tile& tl, unsigned long long* tickets, const void* partial, long long stats, int M,
                            long long computed, double clamp, double eps, void* result, long long* ready,
                            long long epoch) {
  __shared__ bool last;
  __shared__ float wmax[kMaxWarps];
  const long long b = tl.b, G = tl.G;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(tickets + b, 1ull) == (unsigned long long)(G - 1);
  __syncthreads();
  if (!last) return;  // block-uniform
  __threadfence();
  if (threadIdx.x == 0) tickets[b] = 0;  // every block of the item has taken its ticket: ready for the next launch
  if (stats == kStatsMax) {
    const float* p = static_cast<const float*>(partial) + b * G;
    float mx = -INFINITY;
    for (long long g = threadIdx.x; g < G; g += blockDim.x) mx = fmaxf(mx, __ldcg(p + g));
    mx = warp_max(mx);
    if (threadIdx.x % kWarp == 0) wmax[threadIdx.x / kWarp] = mx;
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 1; w < (int)(blockDim.x / kWarp); w++) mx = fmaxf(mx, wmax[w]);
      static_cast<float*>(result)[b] = (float)((double)mx - clamp);
      if (ready != nullptr) {
        __threadfence();
        *reinterpret_cast<volatile long long*>(ready + b) = epoch;
      }
    }
    return;
  }
  for (int m = threadIdx.x; m < M; m += blockDim.x) {
    const double2* p = static_cast<const double2*>(partial) + b * G * M + m;
    double s = 0, s2 = 0;
#pragma unroll 8
    for (long long g = 0; g < G; g++) {  // in order; unrolled: 8 loads in flight
      const double2 v = __ldcg(p + g * M);
      s += v.x;
      s2 += v.y;
    }
    store_moments(s, s2, (double)computed, eps, static_cast<double*>(result) + (b * M + m) * 2);
  }
  if (ready != nullptr) {
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) *reinterpret_cast<volatile long long*>(ready + b) = epoch;
  }
}


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
// r < valid get lg.store(l), l = lg.log2(mel + guard), in
// stage[r·pitch + m]; returns the lane's maximum l and lowers mn to its
// minimum.
__device__ float mel_tc(const float* P, int pitchW, int rows, int valid, int H, const float4* __restrict__ frag,
                        const int4* __restrict__ tiles, int M, const fbank::LogMel& lg, float* stage, int pitch,
                        int warp, int W, int lane, float& mn) {
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
          const float l = lg.log2(c[i] + lg.guard);
          stage[r * pitch + m] = lg.store(l);
          mx = fmaxf(mx, l);
          mn = fminf(mn, l);
        }
      }
    }
  }
  return mx;
}
#endif

// logmel is transform tile (x, b) of fbank_logmel_n{N} (entry: grid (G, B),
// or (G, 2·B) fused, G = ceil(T / F)), block W·32 threads (W = 1, 2, 4 or 8
// warps), R = 4·W rows a step, F = R·steps frames per block: tile (x, b) owns frames t0 = x·F ..
// t0+F-1 of item b; in step st warp w transforms the 4 frames
// t0 + st·R + 4·w + g, g < 4, 8 lanes a frame (fbank_frame.cuh), and the block
// writes the step's R rows before the next step (kWide, with two
// stages in the mel_time float4 write-out without per-feature sums: the
// rows of an even step and the next odd one together, 2R rows, after the
// odd step: whole 128-byte lines a feature). Dynamic shared memory, in
// this order: W·4·S·8 bytes of frame buffers (S = Frame<N>::S float2: 200 for
// N 400, 264 for 512); for kStatsMoments 2·M doubles (the block's Σy, Σy²);
// stages (1 or 2: double-buffered, one barrier a step instead of two) times
// R·(M+4)·4 bytes of staged log-mel rows (row pitch M+2 for mel_time, so
// that its transposing float4 write-out reads 32 banks, M+1 when wide, M+4
// for time_mel, 16-byte rows; M+1 when M is not a multiple of 8 or 4: the
// scalar write-out); when shared_w > 0, the filterbank:
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
//   floor))·scale into the staging row as y·a + c, computed as
//   fmaf(log2(..), as, c) with mel_affine = bits(as = scale·a) | bits(c)
//   << 32 (float32 bit patterns; kStatsMax: a = 1/4, c = 1, (y + 4)/4;
//   else a = 1, c = 0).
// Frames t in [computed, T) are written as 0, in the layout (0: mel_time
// [B, M, T]; 1: time_mel [B, T, M]) with coalesced stores. At the end the
// block's partial statistics over its computed frames:
//   kStatsMax:     partial[b·G + x] = max y, partial[(B + b)·G + x] =
//                  min y                                         (float)
//   kStatsMoments: partial[((b·G + x)·M + m)·2 + {0,1}] = Σy, Σy² (double,
//                  summed in frame order)
// (max, min and moments over y); with tickets set, the item's last block
// reduces them (finish_item). Samples in
// [t·hop, (t+1)·hop) (the last computed frame: up to real) are checked: the
// smallest index of a NaN/Inf sample of item b goes to bad[b] (atomicMin;
// the caller presets it to all ones).
template <int N, bool kWide, bool kTabs>
__device__ void logmel(const Tile& tl, const float* __restrict__ pcm, long long pcm_stride, const Item* __restrict__ items,
                       const float* __restrict__ window, const float2* __restrict__ twN,
                       const float2* __restrict__ colTw, const Band* __restrict__ bands, const float* __restrict__ weights, long long shared_w,
                       long long n_mels,
                       long long frames, long long hop, long long pad, long long reflect, double preemph,
                       double guard, double floor_, double scale, long long layout, long long steps,
                       float* __restrict__ out, void* __restrict__ partial, long long stats,
                       unsigned long long* __restrict__ bad, const float4* __restrict__ mel_frag,
                       const int4* __restrict__ mel_tiles, unsigned long long* tickets, double clamp, double eps,
                       void* result, long long* ready, long long epoch, long long stages,
                       long long mel_affine) {
  using Fr = fbank::Frame<N>;
  const long long x = tl.x, b = tl.b, G = tl.G;
  extern __shared__ float2 smem[];
  const int W = blockDim.x / kWarp, threads = blockDim.x;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int g = lane / fbank::kLanes, n1 = lane % fbank::kLanes;
  const int M = (int)n_mels, R = fbank::kGroups * W;
  // The stage's row pitch (<= M + 4): see the write-out below.
  // kWide: the mel_time float4 write-out of two steps' rows at once (see
  // the write-out below); only with two stages and without per-feature sums.
  const bool wide = kWide && layout == 0 && frames % 4 == 0 && stages == 2 && stats != kStatsMoments &&
                    !FBANK_MEL_TC;
  const int pitch = layout == 0 ? (M % 8 == 0 && !wide ? M + 2 : M + 1) : (M % 4 == 0 ? M + 4 : M + 1);
  const long long F = (long long)R * steps;
  float2* T = smem + warp * fbank::kGroups * Fr::S;  // the warp's 4 frame buffers
  double* acc = reinterpret_cast<double*>(smem + W * fbank::kGroups * Fr::S);  // Σy, Σy² per feature
  float* const stage0 = reinterpret_cast<float*>(acc + (stats == kStatsMoments ? 2 * M : 0));
  const long long t0 = x * F;
  // The filterbank's shared copy (when shared_w > 0); mel4 is called with
  // these pointers directly so that its loads compile to LDS, not generic.
  Band* const sb = reinterpret_cast<Band*>(stage0 + stages * R * pitch);
  float* const sw = reinterpret_cast<float*>(sb + M);
  const Item it = items[b];  // first: its latency hides under the copies below
  const float* row = pcm + b * pcm_stride;
  const int r0 = warp * fbank::kGroups;  // the warp's first staged row
  if (shared_w > 0) {
    // Loads 8 at a time before their stores (a dependent load-store loop
    // waited a memory latency a word: 2-3% of the kernel).
    for (int i = threadIdx.x; i < M; i += threads) sb[i] = bands[i];
    constexpr int kU = 8;
    for (int i0 = threadIdx.x; i0 < shared_w; i0 += kU * threads) {
      float v[kU];
#pragma unroll
      for (int u = 0; u < kU; u++) v[u] = i0 + u * threads < shared_w ? weights[i0 + u * threads] : 0.f;
#pragma unroll
      for (int u = 0; u < kU; u++) {
        if (i0 + u * threads < shared_w) sw[i0 + u * threads] = v[u];
      }
    }
  }
  if (stats == kStatsMoments) {
    for (int i = threadIdx.x; i < 2 * M; i += threads) acc[i] = 0;
  }
  // kTabs: the window pairs (N/2 float2) and the column twiddles (N/2
  // float2) in shared memory past the filterbank's weights (8-byte
  // aligned), read by every step (LDS instead of L1 loads).
  float2* const tabs = reinterpret_cast<float2*>(sw + ((shared_w + 1) & ~1LL));
  if (kTabs) {
    const float2* w2 = reinterpret_cast<const float2*>(window);
    for (int i = threadIdx.x; i < N / 2; i += threads) tabs[i] = w2[i], tabs[N / 2 + i] = colTw[i];
  }
  __syncthreads();
  // Whisper (kStatsMax) stores (y + 4)/4 and its normalisation is then only
  // the clamp at the item's floor (norm1): mel_affine's (as, c) (LogMel),
  // from a kernel parameter so that the compiler reads them from the
  // constant bank rather than recomputing them from stats in the mel loop.
  const fbank::LogMel lg{(float)guard, fmaxf((float)floor_, 1.17549435e-38f),
                         __int_as_float((int)(mel_affine & 0xffffffff)), __int_as_float((int)(mel_affine >> 32))};
  const float2* const win2 = kTabs ? tabs : reinterpret_cast<const float2*>(window);
  const float2* const colTw2 = kTabs ? tabs + N / 2 : colTw;

  float mx = -INFINITY, mn = INFINITY;
  for (int st = 0; st < steps; st++) {
    const long long ts = t0 + (long long)st * R;  // the step's first frame
    if (ts >= frames) break;                         // block-uniform
    float* const stage = stage0 + (stages == 2 ? (st & 1) * R * pitch : 0);
    const int nact = (int)min((long long)fbank::kGroups, max(0LL, it.computed - (ts + r0)));
    if (nact > 0) {  // warp-uniform
      __syncwarp();    // every lane is done with the previous step's power rows (mel4) before they are overwritten
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
        col.load(src, win2, n1, active, Tg + n1 * Fr::R);
        col.transform(colTw2, n1);
        // Finite check of the samples each frame owns, [t·hop, (t+1)·hop)
        // (the last computed frame: up to real): free when the interior
        // loads read them all and the lane's bin-0 sum is finite (col.nf);
        // else, and to find the index, the warp's lanes pass over them (a
        // frame's owned samples are spread over its 8 lanes' loads
        // differently than over this loop, hence the warp vote).
        const long long lo = t * hop, hi = t + 1 == it.computed ? it.real : min(it.real, (t + 1) * hop);
        const bool clean = col.fast && lo >= src.start && hi <= src.start + N && col.nf == 0.f;
        if (__any_sync(0xffffffffu, active && !clean) && active) {
          for (long long j = lo + n1; j < hi; j += fbank::kLanes) {
            if (!isfinite(row[j])) atomicMin(bad + b, (unsigned long long)j);
          }
        }
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
                          lg, stage, pitch, warp, W, lane, mn));
#else
      __syncwarp();
      const float* P = reinterpret_cast<const float*>(T);
      // The warp's 4 frames of feature m: the computed ones' values (their
      // maximum and minimum l), zeros past computed.
      float* const st0 = stage + r0 * pitch;
      auto emit = [&](int m, const float* l) {
        if (nact == fbank::kGroups) {  // warp-uniform: the common case, no predicates
#pragma unroll
          for (int i = 0; i < fbank::kGroups; i++) {
            st0[i * pitch + m] = lg.store(l[i]);
            mx = fmaxf(mx, l[i]), mn = fminf(mn, l[i]);
          }
          return;
        }
#pragma unroll
        for (int i = 0; i < fbank::kGroups; i++) {
          if (i < nact) {
            st0[i * pitch + m] = lg.store(l[i]);
            mx = fmaxf(mx, l[i]), mn = fminf(mn, l[i]);
          }
        }
      };
      if (shared_w > 0) {
        fbank::mel4(P, sb, sw, M, lg, lane, emit);
      } else {
        fbank::mel4(P, bands, weights, M, lg, lane, emit);
      }
    }
#endif
    // wide: an even step that is not the block's last keeps its rows in
    // stage 0 for the next step's write-out (no barrier: the next step
    // stages into stage 1, and each warp's frame buffers are its own).
    if (wide && (st & 1) == 0 && st + 1 < steps && ts + R < frames) continue;  // block-uniform
    __syncthreads();  // the step's rows are staged; the frame buffers are free again

    // Write the rows [tw, tw + rows) in the output layout: the step's (the
    // last two steps' after an odd step when wide: both stages, 2R rows
    // from stage0).
    const long long tw = wide && (st & 1) ? ts - R : ts;
    const int RR = (int)(ts + R - tw);  // staged rows to write: R, or 2R
    const int rows = (int)min((long long)RR, frames - tw);
    const int comp = (int)max(0LL, min((long long)RR, it.computed - tw));  // staged rows < comp hold features
    if (FBANK_ABLATE & 2) {
      // timing probe: no write-out
    } else if (layout == 0 && frames % 4 == 0) {
      // Thread (m0, j) = (tid / q4, tid % q4), q4 = RR/4 (W, or 2W when
      // wide), writes frames 4j .. 4j+3 (a float4; rows is a multiple of 4)
      // of features m0, m0 + threads/q4, ...: a feature's RR frames are
      // q4 consecutive threads' 16 bytes each (64 bytes a feature, 128 when
      // wide: whole lines). With the pitch ≡ 2 (mod 8) (wide: ≡ 1 (mod 8))
      // a warp's 4 column reads are conflict-free.
      const int q4 = RR / 4, r = 4 * (threadIdx.x % q4);
      const float* const ws = wide ? stage0 : stage;
      if (r < rows) {
        // Indexed from a float4 pointer (a float* plus an offset was stored
        // as 4 floats): frames, tw and r are multiples of 4.
        float4* dst = reinterpret_cast<float4*>(out) + (b * M * frames + tw + r) / 4;
        const int rowq = (int)(frames / 4);
        for (int m = threadIdx.x / q4; m < M; m += threads / q4) {
          const float* s = ws + r * pitch + m;
          dst[m * rowq] = make_float4(r < comp ? s[0] : 0.f, r + 1 < comp ? s[pitch] : 0.f,
                                      r + 2 < comp ? s[2 * pitch] : 0.f, r + 3 < comp ? s[3 * pitch] : 0.f);
        }
      }
    } else if (layout != 0 && M % 4 == 0) {
      // Warp w writes rows w, w + W, ..., each q = M/4 float4 chunks of
      // lanes (the pitch ≡ 0 (mod 4) keeps the stage reads aligned): a row
      // is 16·q contiguous bytes in both.
      const int q = M / 4;
      float4* dst = reinterpret_cast<float4*>(out + (b * frames + ts) * M);
      for (int r = warp; r < rows; r += W) {
        const float4* src = reinterpret_cast<const float4*>(stage + r * pitch);
        for (int j = lane; j < q; j += kWarp) dst[r * q + j] = r < comp ? src[j] : make_float4(0.f, 0.f, 0.f, 0.f);
      }
    } else if (layout == 0) {
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
    // One stage: it must be free for the next step. Two: the next step
    // stages into the other, and its barrier (after its mel stage) comes
    // after every thread's write-out of this one. Wide: the next step
    // stages into stage 0, which this write-out read.
    if (stages == 1 || wide) __syncthreads();
  }
  if (stages == 2) __syncthreads();  // every thread's last write-out and sums (acc)

  // The block's partial statistics over its computed frames.
  if (stats == kStatsMax) {
    __shared__ float wmax[kMaxWarps], wmin[kMaxWarps];
    mx = warp_max(mx) * (float)scale;  // y = l·scale (LogMel)
    mn = warp_min(mn) * (float)scale;
    if (lane == 0) wmax[warp] = mx, wmin[warp] = mn;
    __syncthreads();
    if (threadIdx.x == 0) {
      float v = wmax[0], u = wmin[0];
      for (int w = 1; w < W; w++) v = fmaxf(v, wmax[w]), u = fminf(u, wmin[w]);
      float* p = static_cast<float*>(partial);
      p[b * G + x] = v;
      p[(tl.B + b) * G + x] = u;
    }
  } else if (stats == kStatsMoments) {
    double* p = static_cast<double*>(partial) + (b * G + x) * M * 2;
    for (int i = threadIdx.x; i < 2 * M; i += threads) p[i] = acc[i];  // after the step loop's barrier
  }
  if (tickets != nullptr) finish_item(tl, tickets, partial, stats, M, it.computed, clamp, eps, result, ready, epoch);
}

}  // namespace

// fbank_stats computes the per-feature moments of every item
// (kStatsMoments) from the partials of fbank_logmel (G per item), for
// launches whose fbank_logmel does not reduce them itself (tickets = 0).
// Block 1024 threads, grid (ceil(M/32), B): thread (g0, j) = (tid/32,
// tid%32) sums groups g0, g0+32, ... of feature m = 32·blockIdx.x + j (a
// warp reads 32 consecutive features' (Σy, Σy²): coalesced; 32 warps so
// that one long clip's few blocks keep enough loads in flight: 188 tiles
// took 8.5 us with 8), the 32 sums of a feature are added in g0 order;
// store_moments as finish_item.
extern "C" __global__ void __launch_bounds__(kStatWarps * kWarp)
    fbank_stats(const __grid_constant__ FbankStatsParams p) {
  const Item* items = reinterpret_cast<const Item*>(p.items);
  const double* partial = p.partial;
  const long long groups = p.groups, n_mels = p.nMels;
  const double eps = p.eps;
  double* moments = p.moments;
  const long long b = blockIdx.y;
  __shared__ double sums[kStatWarps][kWarp][2];
  const int j = threadIdx.x % kWarp, g0 = threadIdx.x / kWarp;
  const long long m = (long long)blockIdx.x * kWarp + j;
  double s = 0, s2 = 0;
  if (m < n_mels) {
    const double2* p = reinterpret_cast<const double2*>(partial) + b * groups * n_mels + m;
#pragma unroll 8
    for (long long g = g0; g < groups; g += kStatWarps) {  // in order; unrolled: 8 loads in flight
      const double2 v = p[g * n_mels];
      s += v.x;
      s2 += v.y;
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

namespace {

// The normalisations of a value y of feature m, compile-time types so that
// norm_rows runs one of them without the other's loads or selects (a
// runtime choice inside the noinline norm_rows_deep cost ~16 instructions
// and local-memory loads an element, 15% of the fused Whisper launch's):
//   ClampOp (kStatsMax): max(y, c), c = (floor + 4)/4: fbank_logmel stored
//     (y + 4)/4, so this is (max(y, floor) + 4)/4 exactly (the rounding of
//     (x + 4)/4 is monotone); it stores only the chunks it changes;
//   MomentsOp (kStatsMoments): ((y - mh[m]) - ml[m])·inv[m], the mean split
//     into a float32 head and tail (mh + ml) and inv = 1/(std + eps)
//     rounded to float32: y - mh is exact where it cancels (y near the
//     mean), so the result is within a few float32 ulps of
//     (float)((y - mean)·inv) in float64.
struct ClampOp {
  static constexpr bool kStoresAll = false;
  float c;
  __device__ float operator()(float y, int) const { return fmaxf(y, c); }
};
struct MomentsOp {
  static constexpr bool kStoresAll = true;
  const float *mh, *ml, *inv;  // n_mels each (shared memory)
  __device__ float operator()(float y, int m) const { return ((y - mh[m]) - ml[m]) * inv[m]; }
};

// norm_chunk applies op to the float4 v of feature m (byRow: all four; else
// m .. m+3) and stores it at dst when Op stores every chunk or it changed.
template <class Op>
__device__ __forceinline__ void norm_chunk(float4* dst, float4 v, int m, bool byRow, const Op& op) {
  const float4 w = make_float4(op(v.x, m), op(v.y, byRow ? m : m + 1), op(v.z, byRow ? m : m + 2),
                               op(v.w, byRow ? m : m + 3));
  if (Op::kStoresAll || w.x != v.x || w.y != v.y || w.z != v.z || w.w != v.w) *dst = w;
}

// norm_rows_by_warp applies op in place to `rows` rows of len floats at p +
// r·stride, feature m = r (byRow) or the position in the row. Row r's
// floats are h (< 4) before its first 16-byte boundary, q float4 chunks,
// then t < 4 more (h = t = 0 when p, stride and len are multiples of 4
// floats; mel_time rows of an odd T are not). Warp w takes rows w, w + W,
// ... (W warps), kU of them at a time, its lanes the chunks j = lane,
// lane + 32, ... of each (kU float4 a thread in flight; the fused launch's
// 4-warp blocks take kU = 16, 32 KB a block, enough to stream a tile), then
// lanes < h + t the row's ends one float each. Stores what Op says
// (norm_chunk).
template <int kU, class Op>
__device__ __forceinline__ void norm_rows_by_warp(float* p, int rows, int stride, int len, bool byRow, const Op& op) {
  const int W = blockDim.x / kWarp, warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  // The floats of row r before its first 16-byte boundary.
  auto head = [&](int r) {
    return min(len, (int)((4 - (reinterpret_cast<unsigned long long>(p + (long long)r * stride) >> 2 & 3)) & 3));
  };
  for (int r0 = warp; r0 < rows; r0 += kU * W) {
    for (int j = lane; j < (len + 3) / 4; j += kWarp) {
      float4 v[kU];
#pragma unroll
      for (int u = 0; u < kU; u++) {
        const int r = r0 + u * W, h = head(r);
        if (r < rows && 4 * j + 4 <= len - h) {
          v[u] = __ldcg(reinterpret_cast<const float4*>(p + (long long)r * stride + h) + j);
        }
      }
#pragma unroll
      for (int u = 0; u < kU; u++) {
        const int r = r0 + u * W, h = head(r);
        if (r >= rows) break;
        if (4 * j + 4 <= len - h) {
          norm_chunk(reinterpret_cast<float4*>(p + (long long)r * stride + h) + j, v[u], byRow ? r : h + 4 * j, byRow,
                     op);
        }
      }
    }
    for (int u = 0; u < kU; u++) {
      const int r = r0 + u * W;
      if (r >= rows) break;
      const int h = head(r), q = (len - h) / 4;
      if (lane < len - 4 * q) {  // the h head floats, then the tail's
        const int e = lane < h ? lane : 4 * q + lane;
        float* const a = p + (long long)r * stride + e;
        const float y = *a, z = op(y, byRow ? r : e);
        if (Op::kStoresAll || z != y) *a = z;
      }
    }
  }
}

// norm_rows_deep is norm_rows_by_warp with kU = 16 for the fused launch.
// Not inlined: its 64 registers of loads in flight would otherwise weigh on
// fbank_logmel's register allocation (op is passed by value: in
// registers).
template <class Op>
__device__ __noinline__ void norm_rows_deep(float* p, int rows, int stride, int len, bool byRow, const Op op) {
  norm_rows_by_warp<16>(p, rows, stride, len, byRow, op);
}

// norm_rows has norm_rows_by_warp's contract, for fbank_normalize's 8-warp
// blocks. Rows that are 16-byte aligned (p, stride and len multiples of 4
// floats) it takes as one run of float4 chunks k, k + blockDim.x, ... of the
// block's threads (4 in flight: the loads, then op and the stores); other
// rows go to norm_rows_by_warp with kU = 4 (inlined: fbank_normalize has
// registers to spare).
template <class Op>
__device__ void norm_rows(float* p, int rows, int stride, int len, bool byRow, const Op& op) {
  constexpr int kU = 4;
  const bool vec = ((reinterpret_cast<unsigned long long>(p) | (4ull * stride) | (4ull * len)) & 15) == 0;
  if (!vec) {
    norm_rows_by_warp<4>(p, rows, stride, len, byRow, op);
    return;
  }
  const int q = len / 4, chunks = rows * q;  // float4 chunks a row, in all
  for (int k0 = threadIdx.x; k0 < chunks; k0 += kU * blockDim.x) {
    float4 v[kU];
    int r[kU], j[kU];
#pragma unroll
    for (int u = 0; u < kU; u++) {
      const int k = k0 + u * blockDim.x;
      r[u] = k / q, j[u] = 4 * (k - r[u] * q);
      if (k < chunks) v[u] = __ldcg(reinterpret_cast<const float4*>(p + (long long)r[u] * stride + j[u]));
    }
#pragma unroll
    for (int u = 0; u < kU; u++) {
      if (k0 + u * blockDim.x >= chunks) break;
      norm_chunk(reinterpret_cast<float4*>(p + (long long)r[u] * stride + j[u]), v[u], byRow ? r[u] : j[u], byRow,
                 op);
    }
  }
}

// norm_item normalises n frames from t0 of item (its rows: see
// normalize_tile) with op; kDeep: norm_rows_deep (the fused launch).
template <bool kDeep, class Op>
__device__ void norm_item(float* item, long long t0, int n, int M, int T, long long layout, const Op& op) {
  if (kDeep) {
    if (layout == 0) {
      norm_rows_deep(item + t0, M, T, n, true, op);
    } else {
      norm_rows_deep(item + t0 * M, n, M, M, false, op);
    }
  } else if (layout == 0) {
    norm_rows(item + t0, M, T, n, true, op);
  } else {
    norm_rows(item + t0 * M, n, M, M, false, op);
  }
}

// normalize_tile normalises tile x of item b of out in place: frames [x·F,
// min(x·F + F, computed)) (F = tile; frames >= computed were written as 0
// and stay 0), every feature, as rows of contiguous floats (norm_rows):
// time_mel [B, T, M], a row of M features a frame; mel_time [B, M, T], a row
// of the tile's frames a feature. kDeep (the fused launch's 4-warp blocks):
// norm_rows_deep, else norm_rows. With ready set (the fused launch) it
// first waits until ready[b] == epoch (finish_item of item b).
//   kStatsMax: floor = fixed_floor when finite (normalize=global), else
//     result[b] (float: finish_item). A tile whose minimum y,
//     partial[(B + b)·G + x], is >= floor has nothing under it and is
//     skipped: for speech without long silences this reads two words a tile.
//   kStatsMoments: (mean, inv) of item b's features, result[(b·M + m)·2 +
//     {0,1}] (float64, by finish_item or fbank_stats), converted to MomentsOp's
//     float32 form in nsm (3·M floats of shared memory).
// Called by every thread of the block.
template <bool kDeep>
__device__ void normalize_tile(const Tile& tl, float* out, const Item* items, long long n_mels, long long frames,
                               long long layout, long long stats, long long tile, const float* partial,
                               double fixed_floor, const void* result, float* nsm, const long long* ready,
                               long long epoch) {
  const long long b = tl.b, x = tl.x, G = tl.G;
  const int M = (int)n_mels, T = (int)frames;
  const long long t0 = x * tile, t1 = min(t0 + tile, items[b].computed);
  if (t1 <= t0) return;  // block-uniform
  if (ready != nullptr) {
    if (threadIdx.x == 0) {
      while (*reinterpret_cast<const volatile long long*>(ready + b) != epoch) __nanosleep(256);
      __threadfence();
    }
    __syncthreads();
  }
  float* item = out + b * M * T;
  const int n = (int)(t1 - t0);
  if (stats == kStatsMax) {
    const float fl = isfinite(fixed_floor) ? (float)fixed_floor : __ldcg(static_cast<const float*>(result) + b);
    if (__ldcg(partial + (tl.B + b) * G + x) >= fl) return;  // block-uniform
    norm_item<kDeep>(item, t0, n, M, T, layout, ClampOp{(fl + 4.f) / 4.f});
    return;
  }
  const double* moments = static_cast<const double*>(result) + b * M * 2;
  for (int m = threadIdx.x; m < M; m += blockDim.x) {
    const double mean = __ldcg(moments + 2 * m), inv = __ldcg(moments + 2 * m + 1);
    const float h = (float)mean;
    nsm[m] = h;
    nsm[M + m] = (float)(mean - h);
    nsm[2 * M + m] = (float)inv;
  }
  __syncthreads();
  norm_item<kDeep>(item, t0, n, M, T, layout, MomentsOp{nsm, nsm + M, nsm + 2 * M});
}

}  // namespace

// fbank_normalize normalises the computed frames of out in place after
// fbank_logmel (the separate launch): grid (G, B), block 256 threads, block
// (x, b) does tile x of item b (normalize_tile); dynamic shared memory 3·M
// floats for kStatsMoments.
extern "C" __global__ void __launch_bounds__(256)
    fbank_normalize(const __grid_constant__ FbankNormalizeParams p) {
  extern __shared__ float nsm[];
  normalize_tile<false>(Tile{blockIdx.x, blockIdx.y, gridDim.x, gridDim.y}, p.out,
                        reinterpret_cast<const Item*>(p.items), p.nMels, p.frames, p.layout, p.stats, p.tile,
                        p.partial, p.fixedFloor, p.result, nsm, nullptr, 0);
}

namespace {

// transform is transform tile tl of fbank_logmel_n{N} (logmel) with the
// launch's parameters. logmel gets ready only in a fused launch: its
// item's last block (finish_item) then publishes the item's statistics
// there for the normalisation tiles.
template <int N, bool kWide, bool kTabs>
__device__ __forceinline__ void transform(const Tile& tl, const FbankLogmelParams& p) {
  logmel<N, kWide, kTabs>(tl, p.pcm, p.pcmStride, reinterpret_cast<const Item*>(p.items), p.window,
                          reinterpret_cast<const float2*>(p.twN), reinterpret_cast<const float2*>(p.colTw),
                          reinterpret_cast<const Band*>(p.bands), p.weights, p.sharedW, p.nMels, p.frames, p.hop,
                          p.pad, p.reflect, p.preemph, p.guard, p.melFloor, p.scale, p.layout, p.steps, p.out,
                          p.partial, p.stats, p.bad, reinterpret_cast<const float4*>(p.melFrag),
                          reinterpret_cast<const int4*>(p.melTiles), p.tickets, p.clamp, p.eps, p.result,
                          p.fused ? p.ready : nullptr, p.epoch, p.stages, p.melAffine);
}

// entry runs block (blockIdx.x, blockIdx.y) of fbank_logmel_n{N}:
//   fused = 0: grid (G, B), the block is tile (x, b) (logmel);
//   fused = 1 or 2: grid (G, 2·B): G·B transform tiles T(b, x) and G·B
//     normalisation tiles N(b, x) (normalize_tile), handed out in the order
//     blocks start (counters[0], a ticket) in this sequence, L = min(lag, B):
//     T(0..L-1); then for s = L..B-1: T(s), N(s-L); then N(B-L..B-1), or
//     with fused = 2 N(B-1) down to N(B-L) (the items transformed last,
//     whose features are likeliest still in L2, first); each item's G
//     tiles in x order. A normalisation tile waits for its item
//     (ready[b] == epoch, set by the item's last transform tile); every
//     transform tile of that item was handed to a block that started before
//     it, so the wait ends. With the lag about the items in flight, the
//     normalisation of the items done first runs among the transforms
//     still going (its memory traffic under their arithmetic) and the
//     separate normalize launch goes. counters[1] counts finished blocks;
//     the last one resets both (0 at the next launch). Needs tickets (the
//     in-kernel statistics).
template <int N, bool kWide, bool kTabs = false>
__device__ void entry(const FbankLogmelParams& p) {
  if (!p.fused) {
    transform<N, kWide, kTabs>(Tile{blockIdx.x, blockIdx.y, gridDim.x, gridDim.y}, p);
    return;
  }
  __shared__ unsigned long long id;
  if (threadIdx.x == 0) id = atomicAdd(p.counters, 1ull);
  __syncthreads();
  const long long G = gridDim.x, B = gridDim.y / 2, L = min(p.lag, B);
  long long k = (long long)id, item, norm;  // the tile's item, and whether it normalises
  if (k < L * G) {
    item = k / G, norm = 0;
  } else if ((k -= L * G) < (B - L) * 2 * G) {
    const long long s = L + k / (2 * G);
    norm = k % (2 * G) >= G, item = norm ? s - L : s;
    k = k % (2 * G) - (norm ? G : 0);
  } else {
    k -= (B - L) * 2 * G;
    item = p.fused == 2 ? B - 1 - k / G : B - L + k / G, norm = 1;
  }
  const Tile tl{k % G, item, G, B};
  if (!norm) {
    transform<N, kWide, kTabs>(tl, p);
  } else if (!(FBANK_ABLATE & 4)) {
    extern __shared__ float2 smem[];
    normalize_tile<true>(tl, p.out, reinterpret_cast<const Item*>(p.items), p.nMels, p.frames, p.layout, p.stats,
                         p.tile, static_cast<const float*>(p.partial), p.fixedFloor, p.result,
                         reinterpret_cast<float*>(smem), p.ready, p.epoch);
  }
  __syncthreads();
  if (threadIdx.x == 0 && atomicAdd(p.counters + 1, 1ull) == (unsigned long long)(2 * G * B - 1)) {
    p.counters[0] = 0;
    p.counters[1] = 0;
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kMaxThreads, FBANK_MIN_BLOCKS)
    fbank_logmel_n400(const __grid_constant__ FbankLogmelParams p) {
  entry<400, false>(p);
}

extern "C" __global__ void __launch_bounds__(kMaxThreads, FBANK_MIN_BLOCKS)
    fbank_logmel_n512(const __grid_constant__ FbankLogmelParams p) {
  entry<512, false>(p);
}

// fbank_logmel_n400_wide is fbank_logmel_n400 with logmel's kWide: in the
// mel_time layout with two stages (Whisper), the rows of two steps written
// together (whole 128-byte lines a feature), one barrier a step as before.
extern "C" __global__ void __launch_bounds__(kMaxThreads, FBANK_MIN_BLOCKS)
    fbank_logmel_n400_wide(const __grid_constant__ FbankLogmelParams p) {
  entry<400, true>(p);
}

// fbank_logmel_n{400,512}_tabs are fbank_logmel_n{N} with logmel's kTabs:
// the window and the column twiddles copied to shared memory once a block
// (N·8 bytes more of it, past the filterbank) and read from there.
extern "C" __global__ void __launch_bounds__(kMaxThreads, FBANK_MIN_BLOCKS)
    fbank_logmel_n400_tabs(const __grid_constant__ FbankLogmelParams p) {
  entry<400, false, true>(p);
}

extern "C" __global__ void __launch_bounds__(kMaxThreads, FBANK_MIN_BLOCKS)
    fbank_logmel_n512_tabs(const __grid_constant__ FbankLogmelParams p) {
  entry<512, false, true>(p);
}
