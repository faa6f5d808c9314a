// fbank.cu: log-mel filterbank kernels, the GPU side of the `fbank` op
// (plugins/fbank, launched by plugins/fbank/cuda.go). The CPU Frontend in
// plugins/fbank is the numerical reference; these kernels follow its
// contract for n_fft 400 (Whisper) and 512 (Parakeet/NeMo) with any window,
// hop, pad mode, pre-emphasis, filterbank, log mode, normalisation and layout.
//
// Pipeline, one stream, per batch (B items, n_mels = M, T = output frames):
//   1. fbank_logmel_n400 | fbank_logmel_n512: framing + window + FFT + |X|² +
//      mel + log, staged per block and written in the output layout, plus
//      per-block partial reductions and the finite-sample check.
//   2. fbank_stats: per-item maximum (Whisper) or per-feature mean and
//      1/(std + 1e-5) (Parakeet), from the partials, in float64.
//   3. fbank_normalize: the normalisation, in place.
// normalize=none stops after 1. No cuFFT/cuBLAS: the FFT is fbank_frame.cuh.
//
// Every kernel parameter is 8 bytes (pointers, long long, double): the Go
// launcher (gorgonia.org/cu) passes each argument as one 64-bit word.
#include "fbank_frame.cuh"

using fbank::Band;
using fbank::kWarp;

namespace {

constexpr int kWarps = 8;  // warps per block of fbank_logmel
constexpr int kThreads = kWarps * kWarp;
// Blocks of fbank_logmel per SM that the register budget must allow.
#ifndef FBANK_MIN_BLOCKS
#define FBANK_MIN_BLOCKS 3
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

struct WarpLanes {
  int lane;
  template <class P>
  __device__ __forceinline__ void pass(float2* z, const float2* twN) const {
    P st;
    st.load(z, lane);
    __syncwarp();
    st.store(z, twN, lane);
    __syncwarp();
  }
};

// logmel is fbank_logmel_n{N}.
//
// Grid (ceil(T / F), B), block 256 threads = 8 warps, F = 8·fpw frames per
// block: block (x, b) owns frames t0 = x·F .. t0+F-1 of item b, warp w the
// frames t0 + w·fpw .. + fpw-1, one at a time. Dynamic shared memory:
// 8·(N/2 + N/16)·8 bytes of FFT buffers (one per warp, padded) + F·(M+1)·4
// bytes of staged log-mel rows (row pitch M+1 so that the mel_time transpose
// reads are conflict-free) + when shared_w > 0, the filterbank: bands
// (3·M ints) and its shared_w weights, copied once per block (the lanes'
// band reads are scattered: from shared memory they cost bank conflicts at
// worst, from L1 one cache line each).
//
// Per frame t < computed (the warp's lanes cooperate, fbank_frame.cuh):
//   x[j] = window[j] · s(t·hop - pad + j), s = the pre-emphasised signal
//   with virtual reflect/zero padding (no padded copy), packed as H = N/2
//   complex points read straight into the first radix-8 pass's registers
//   (each lane's window pairs are loaded once per block); Stockham FFT;
//   |X[k]|², k = 0..H, in place; mel band sums
//   and y = log2(max(mel + guard, floor))·scale into the staging row.
// Frames t in [computed, T) are written as 0. The block then writes its rows
// to out in the layout (0: mel_time [B, M, T]; 1: time_mel [B, T, M]) with
// coalesced stores, and its partial statistics over its computed frames:
//   kStatsMax:     partial[b·G + x] = max y                      (float)
//   kStatsMoments: partial[((b·G + x)·M + m)·2 + {0,1}] = Σy, Σy² (double)
// with G = gridDim.x. Samples in [t·hop, (t+1)·hop) (the last computed frame:
// up to real) are checked: the smallest index of a NaN/Inf sample of item b
// goes to bad[b] (atomicMin; the caller presets it to all ones).
template <int N>
__device__ void logmel(const float* __restrict__ pcm, long long pcm_stride, const Item* __restrict__ items,
                       const float* __restrict__ window, const float2* __restrict__ twN,
                       const Band* __restrict__ bands, const float* __restrict__ weights, long long shared_w,
                       long long n_mels,
                       long long frames, long long hop, long long pad, long long reflect, double preemph,
                       double guard, double floor_, double scale, long long layout, long long fpw,
                       float* __restrict__ out, void* __restrict__ partial, long long stats,
                       unsigned long long* __restrict__ bad) {
  constexpr int H = N / 2;
  extern __shared__ float2 smem[];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int M = (int)n_mels, F = kWarps * (int)fpw, pitch = M + 1;
  float2* z = smem + warp * fbank::Buffer<H>::kSize;
  float* stage = reinterpret_cast<float*>(smem + kWarps * fbank::Buffer<H>::kSize);
  const long long b = blockIdx.y, t0 = (long long)blockIdx.x * F;
  if (shared_w > 0) {
    Band* sb = reinterpret_cast<Band*>(stage + F * pitch);
    float* sw = reinterpret_cast<float*>(sb + M);
    for (int i = threadIdx.x; i < M; i += kThreads) sb[i] = bands[i];
    for (int i = threadIdx.x; i < shared_w; i += kThreads) sw[i] = weights[i];
    bands = sb;
    weights = sw;
    __syncthreads();
  }
  const Item it = items[b];
  fbank::Source src{pcm + b * pcm_stride, it.n, it.real, 0, (int)reflect, (float)preemph};
  const float g = (float)guard, fl = (float)floor_, sc = (float)scale;

  using First = typename fbank::FFTPlan<H>::First;
  float2 wr[8];  // this lane's window pairs for the first pass, fixed across frames
  First::load_window(window, wr, lane);
  float mx = -INFINITY;
  for (int i = 0; i < fpw; i++) {
    const int r = warp * (int)fpw + i;
    const long long t = t0 + r;
    if (t >= it.computed) break;
    // Finite check of the samples this frame owns.
    long long lo = t * hop, hi = t + 1 == it.computed ? it.real : min(it.real, (t + 1) * hop);
    for (long long j = lo + lane; j < hi; j += kWarp) {
      if (!isfinite(src.pcm[j])) atomicMin(bad + b, (unsigned long long)j);
    }
    src.start = t * hop - pad;
    First first;  // the previous frame's readers of z finished at the loop's last __syncwarp
    first.load_signal(src, wr, lane);
    first.store(z, twN, lane);
    __syncwarp();
    fbank::FFTPlan<H>::run_rest(z, twN, WarpLanes{lane});
    fbank::Power<H> pw;
    pw.load(z, twN, lane);
    __syncwarp();
    float* power = reinterpret_cast<float*>(z);
    pw.store(power, lane);
    __syncwarp();
    float m = fbank::mel_log(power, bands, weights, M, g, fl, sc, stage + r * pitch, lane);
    mx = fmaxf(mx, m);
    __syncwarp();
  }
  __syncthreads();

  // Write the block's rows [t0, t0 + rows) in the output layout.
  const long long rows = min((long long)F, frames - t0);
  const long long comp = it.computed - t0;  // staged rows < comp hold features
  if (layout == 0) {
    for (int idx = threadIdx.x; idx < M * F; idx += kThreads) {
      int m = idx / F, r = idx % F;
      if (r < rows) out[(b * M + m) * frames + t0 + r] = r < comp ? stage[r * pitch + m] : 0.f;
    }
  } else {
    float* dst = out + (b * frames + t0) * M;
    for (int idx = threadIdx.x; idx < rows * M; idx += kThreads) {
      int r = idx / M, m = idx % M;
      dst[idx] = r < comp ? stage[r * pitch + m] : 0.f;
    }
  }

  if (stats == kStatsMax) {
    __shared__ float wmax[kWarps];
    mx = warp_max(mx);
    if (lane == 0) wmax[warp] = mx;
    __syncthreads();
    if (threadIdx.x == 0) {
      float v = wmax[0];
      for (int w = 1; w < kWarps; w++) v = fmaxf(v, wmax[w]);
      static_cast<float*>(partial)[b * gridDim.x + blockIdx.x] = v;
    }
  } else if (stats == kStatsMoments) {
    const long long nv = min((long long)F, max(0LL, it.computed - t0));
    double* p = static_cast<double*>(partial) + (b * gridDim.x + blockIdx.x) * M * 2;
    for (int m = threadIdx.x; m < M; m += kThreads) {
      double s = 0, s2 = 0;
      for (int r = 0; r < nv; r++) {
        double y = stage[r * pitch + m];
        s += y;
        s2 = fma(y, y, s2);
      }
      p[2 * m] = s;
      p[2 * m + 1] = s2;
    }
  }
}

}  // namespace

#define FBANK_LOGMEL_ARGS                                                                                      \
  const float *pcm, long long pcm_stride, const Item *items, const float *window, const float2 *twN,          \
      const Band *bands, const float *weights, long long shared_w, long long n_mels, long long frames, long long hop, \
      long long pad, \
      long long reflect, double preemph, double guard, double floor_, double scale, long long layout,         \
      long long fpw, float *out, void *partial, long long stats, unsigned long long *bad
#define FBANK_LOGMEL_CALL                                                                                     \
  pcm, pcm_stride, items, window, twN, bands, weights, shared_w, n_mels, frames, hop, pad, reflect, preemph, guard, floor_, \
      scale, layout, fpw, out, partial, stats, bad

extern "C" __global__ void __launch_bounds__(kThreads, FBANK_MIN_BLOCKS) fbank_logmel_n400(FBANK_LOGMEL_ARGS) {
  logmel<400>(FBANK_LOGMEL_CALL);
}

extern "C" __global__ void __launch_bounds__(kThreads, FBANK_MIN_BLOCKS) fbank_logmel_n512(FBANK_LOGMEL_ARGS) {
  logmel<512>(FBANK_LOGMEL_CALL);
}

// fbank_stats reduces the partials of fbank_logmel (G per item) in a fixed
// order (deterministic) and in float64. Block 256 threads.
//
// kStatsMax: grid (1, B): floor[b] = max over the item's G partials - clamp
//   (Whisper: clamp = 8); when fixed_floor is finite (normalize=global)
//   floor[b] = fixed_floor instead and partial is not read.
// kStatsMoments: grid (ceil(M/32), B): thread (g0, j) = (tid/32, tid%32)
//   sums groups g0, g0+8, ... of feature m = 32·blockIdx.x + j (a warp reads
//   32 consecutive features: coalesced), the 8 sums of a feature are added
//   in g0 order, and with n = computed frames (>= 2)
//   mean = Σy/n, var = max(0, (Σy² - Σy·mean)/(n-1)), inv = 1/(√var + eps),
//   moments[(b·M + m)·2 + {0,1}] = mean, inv.
extern "C" __global__ void fbank_stats(const Item* items, const void* partial, long long groups, long long n_mels,
                                       long long stats, double clamp, double fixed_floor, double eps, float* floor_,
                                       double* moments) {
  const long long b = blockIdx.y;
  if (stats == kStatsMax) {
    if (isfinite(fixed_floor)) {
      if (threadIdx.x == 0) floor_[b] = (float)fixed_floor;
      return;
    }
    __shared__ float wmax[kWarps];
    const float* p = static_cast<const float*>(partial) + b * groups;
    float mx = -INFINITY;
    for (long long g = threadIdx.x; g < groups; g += blockDim.x) mx = fmaxf(mx, p[g]);
    mx = warp_max(mx);
    if (threadIdx.x % kWarp == 0) wmax[threadIdx.x / kWarp] = mx;
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 1; w < (int)(blockDim.x / kWarp); w++) mx = fmaxf(mx, wmax[w]);
      floor_[b] = (float)((double)mx - clamp);
    }
    return;
  }
  __shared__ double sums[kWarps][kWarp][2];
  const int j = threadIdx.x % kWarp, g0 = threadIdx.x / kWarp;
  const long long m = (long long)blockIdx.x * kWarp + j;
  double s = 0, s2 = 0;
  if (m < n_mels) {
    const double* p = static_cast<const double*>(partial) + (b * groups * n_mels + m) * 2;
    for (long long g = g0; g < groups; g += kWarps) {
      s += p[g * n_mels * 2];
      s2 += p[g * n_mels * 2 + 1];
    }
  }
  sums[g0][j][0] = s;
  sums[g0][j][1] = s2;
  __syncthreads();
  if (g0 != 0 || m >= n_mels) return;
  for (int w = 1; w < kWarps; w++) {
    s += sums[w][j][0];
    s2 += sums[w][j][1];
  }
  const double n = (double)items[b].computed;
  const double mean = s / n;
  const double var = fmax(0.0, (s2 - s * mean) / (n - 1));
  moments[(b * n_mels + m) * 2] = mean;
  moments[(b * n_mels + m) * 2 + 1] = 1.0 / (sqrt(var) + eps);
}

// fbank_normalize normalises the computed frames of out in place.
// Grid (ceil(M·T / 1024), B), block 256, 4 elements per thread (stride 256,
// coalesced). Element (m, t) of item b, t < computed:
//   kStatsMax:     y = (max(y, floor[b]) + 4) / 4
//   kStatsMoments: y = (float)((y - mean[b,m]) · inv[b,m])   (float64 math)
// Frames t >= computed were written as 0 by fbank_logmel and stay 0.
extern "C" __global__ void fbank_normalize(float* out, const Item* items, long long n_mels, long long frames,
                                           long long layout, long long stats, const float* floor_,
                                           const double* moments) {
  const long long b = blockIdx.y;
  const unsigned M = (unsigned)n_mels, T = (unsigned)frames;
  const unsigned total = M * T;
  const long long computed = items[b].computed;
  float* item = out + b * (long long)total;
  const float fl = stats == kStatsMax ? floor_[b] : 0.f;
  const double* mom = moments + b * n_mels * 2;
  unsigned idx = blockIdx.x * 1024u + threadIdx.x;
#pragma unroll
  for (int k = 0; k < 4; k++, idx += 256u) {
    if (idx >= total) return;
    unsigned m, t;
    if (layout == 0) {
      m = idx / T;
      t = idx - m * T;
    } else {
      t = idx / M;
      m = idx - t * M;
    }
    if (t >= computed) continue;
    float y = item[idx];
    if (stats == kStatsMax) {
      item[idx] = (fmaxf(y, fl) + 4.f) / 4.f;
    } else {
      item[idx] = (float)(((double)y - mom[2 * m]) * mom[2 * m + 1]);
    }
  }
}
