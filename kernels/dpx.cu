// dpx.cu: batched dynamic-programming decoders, the GPU side of the
// `ctc_align`, `viterbi` and `dtw` ops (plugins/dpx, launched by
// plugins/dpx/ops_cuda.go). The CPU functions of plugins/dpx are the
// reference: same recurrences, same float32 operations in the same order,
// same tie rules, same int32 fixed-point contract (DPX min/max), so the int32
// path is bit-identical and the float32 path takes the same decisions.
//
// Every kernel runs one batch in one launch: one thread block per item
// (ragged lengths read from per-item tables), a persistent loop over frames
// (or anti-diagonals) with one __syncthreads per step, backpointers packed
// to 2 bits per state (CTC, DTW: two 32-bit ballot planes per warp of
// states) or 16 bits (Viterbi: the argmax), and the backtrace on the device.
//
// Each kernel takes one parameter struct of params.h (Dpx*Params), read in
// place from the parameter space (__grid_constant__).
#include "dpx_ops.cuh"
#include "params.h"

// DPXK_DELAY_POST runs before a warp posts its highest state to the next
// warp (dpx_ctc_warp's pipeline): nothing on the GPU; the host replay
// (kernels/dpxemu) sleeps there, so the reading warp arrives first and its
// wait is exercised.
#ifndef DPXK_DELAY_POST
#define DPXK_DELAY_POST()
#endif

namespace dpxk {

constexpr unsigned kFull = 0xffffffffu;
constexpr int kMaxPass = 8;         // states per thread (S <= 8 * blockDim)
constexpr int kCtcNeg = -(1 << 29);  // int32 CTC: unreachable
constexpr int kCtcFloor = -(1 << 28);  // int32 CTC: saturation of reachable states
constexpr int kViterbiFloor = -32768;  // int32 Viterbi: candidate floor (int16)
constexpr int kLabelMask = 0x3fffffff;  // CTC table: label | skip << 30

// Value traits of the two precisions: the unreachable value and how an
// input log-prob / cost becomes a lane value.
template <class V>
struct Lane;
template <>
struct Lane<float> {
  static constexpr bool kInt = false;
  __device__ static float ctcNeg() { return -INFINITY; }
  __device__ static float top() { return INFINITY; }
  __device__ static float load(float x, double) { return x; }
  __device__ static float vmin(float a, float b) { return fminf(a, b); }
  __device__ static float vmax(float a, float b) { return fmaxf(a, b); }
};
template <>
struct Lane<int> {
  static constexpr bool kInt = true;
  __device__ static int ctcNeg() { return kCtcNeg; }
  __device__ static int top() { return INT_MAX; }
  __device__ static int load(float x, double scale) { return quant(x, scale); }
  __device__ static int vmin(int a, int b) { return min(a, b); }
  __device__ static int vmax(int a, int b) { return max(a, b); }
};

// warpMax is the maximum of v over the (full) warp.
__device__ __forceinline__ int warpMax(int v) {
#if __CUDA_ARCH__ >= 800
  return __reduce_max_sync(kFull, v);
#else
  for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(kFull, v, o));
  return v;
#endif
}

// rowMax reduces the per-warp maxima wm[0..nw) with three-way DPX max.
__device__ __forceinline__ int rowMax(const int* wm, int nw) {
  int m = wm[0];
  int w = 1;
  for (; w + 1 < nw; w += 2) m = max3(m, wm[w], wm[w + 1]);
  if (w < nw) m = max(m, wm[w]);
  return m;
}

// ArgBest is a (value, index) pair; better() keeps the larger value and, on
// equal values, the lower index (the CPU's first maximum).
template <class V>
struct ArgBest {
  V v;
  int i;
  __device__ void merge(V ov, int oi) {
    if (ov > v || (ov == v && oi < i)) v = ov, i = oi;
  }
};

// blockArgMax returns the block's best pair to every thread; scratch holds
// 32 values and 32 indices.
template <class V>
__device__ ArgBest<V> blockArgMax(ArgBest<V> a, V* sv, int* si) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  for (int o = 16; o > 0; o >>= 1) {
    V ov = __shfl_xor_sync(kFull, a.v, o);
    int oi = __shfl_xor_sync(kFull, a.i, o);
    a.merge(ov, oi);
  }
  __syncthreads();
  if (lane == 0) sv[warp] = a.v, si[warp] = a.i;
  __syncthreads();
  ArgBest<V> r{sv[0], si[0]};
  for (int w = 1; w < nw; ++w) r.merge(sv[w], si[w]);
  __syncthreads();
  return r;
}

// ---------------------------------------------------------------------------
// CTC forced alignment.
//
// Per item b, meta[4b..4b+4) = {T_b frames, S = 2L+1 states, table offset,
// backpointer offset (words)}; table[off .. off+3S) holds, per state,
// label | skip << 30 (skip: the s-2 -> s transition is allowed), then the
// first frame of torchaudio's state window that contains the state, then
// the first frame after it (the window (lo, hi) of the CPU Aligner's
// prepare only moves forward, so state s is inside it exactly for frames
// [first_s, end_s)).
//
// Thread mapping: one block per item; thread x owns states x + p*blockDim
// (p < MP, the kernel's compile-time pass count: 1, 2, 4, 6 or 8), so a warp
// owns 32 consecutive states per pass and its two __ballot_sync planes (c1:
// from s-1, c2: from s-2) are the packed backpointers of those states: 2
// bits per state and frame, bp[(t-1)][plane][ceil(S/32)] uint32. Frame t
// reads row t-1 from shared memory (double-buffered rows of S+2 values, two
// sentinels), so one __syncthreads per frame, and nothing in a frame's path
// touches global memory. Frames 1..T_b-1 run in blocks of F (the launch's
// `frames`):
// - emissions: each thread copies those of its own states for a block into
//   shared memory with cp.async, two blocks ahead (double-buffered [2][F][S]
//   floats), and reads frame t+1's value while frame t computes. Slots are
//   thread-private, so the copies need no barrier, only the thread's own
//   wait at a block's last frame.
// - backpointers: lane 0 of each warp puts its ballot words into a shared
//   ring (two halves of [F][2][ceil(S/32)] words); at the start of a block
//   the block copies the previous block's half to bp with coalesced stores
//   (no barrier of its own: the previous frame's barrier covers it).
// Per frame a warp runs about 50 instructions (float32, one pass; sm_90
// SASS); the earlier versions (per-frame emission and window loads or
// chunk bookkeeping, lane-0 global stores, row and slot index arithmetic)
// ran about 100 and were bound by their latency (ncu on the H200: 0.5
// issued instructions per cycle and scheduler, 9.5 cycles between two
// instructions of a warp).
// int32: the row maxima of frame t-1 are read as 32 per-warp maxima
// (unused warps hold the floor) with vector loads and a DPX max3 tree.
//
// Backtrace: warp 0 walks 32 frames per round: the lanes cp.async, for the
// 32 frames of the next round, the 5 backpointer words per plane that can
// hold the path (it moves at most 2 states a frame: 128 states from the
// current round's first state), while lane 0 walks the current round's
// words in shared memory; the lanes then write the 32 labels. Then the
// block gathers the frame scores (coalesced over frames) into shared memory
// in chunks and thread 0 sums them in float64, in frame order, as the CPU
// does.
//
// Shared memory (ctcShared in ops_cuda.go): per-warp maxima 256 B, labels
// 4*S, the ring 16*F*ceil(S/32), then a region of max(2*(S+2) + 2*F*S,
// 1024) 4-byte words: the rows and the emission blocks while aligning, the
// backtrace and sum scratch after. Registers: __launch_bounds__(1024), so at
// most 64 a thread. Global scratch: (T_b-1)*ceil(S/32)*8 bytes of
// backpointers per item.
//
// Numerics: float32: torchaudio's CPU rule (s-2 only if strictly greater
// than both, else s-1 only if strictly greater than both, else s), value r +
// e, states outside the window -Inf; the last frame ends on the last label
// unless the trailing blank is strictly greater. int32: the same rule on
// quantised values, renormalised by the previous row's maximum m: v =
// max(r - m + e, -2^28) (fused DPX add-max), unreachable -2^29. The flag
// when both end states are unreachable (status[3b+2] = 1).
constexpr int kCtcRegion = 1024;  // smallest scratch region, in words
constexpr int kBtWords = 5;        // backpointer words per plane and frame fetched by the backtrace

// rowMax32 is the maximum of the 32 values at wm (16-byte aligned).
__device__ __forceinline__ int rowMax32(const int* wm) {
  const int4* v = reinterpret_cast<const int4*>(wm);
  int m[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int4 q = v[i];
    m[i] = max(max3(q.x, q.y, q.z), q.w);
  }
  return max3(max3(m[0], m[1], m[2]), max3(m[3], m[4], m[5]), max(m[6], m[7]));
}

template <class V, int MP>
__device__ void ctcAlign(const float* __restrict__ lp, long long T, long long C,
                         const long long* __restrict__ meta, const int* __restrict__ table,
                         unsigned* __restrict__ bp, long long blank, double star, double scale, int F,
                         int* __restrict__ alignment, float* __restrict__ frameScores,
                         float* __restrict__ score, long long* __restrict__ status) {
  extern __shared__ __align__(16) unsigned char smem[];
  using L = Lane<V>;
  const int b = blockIdx.x;
  const int tid = threadIdx.x, bd = blockDim.x, lane = tid & 31, warp = tid >> 5;
  const long long* mt = meta + 4 * b;
  const int Tb = (int)mt[0], S = (int)mt[1];
  const int* tab = table + mt[2];
  unsigned* bpi = bp + mt[3];
  const int W = (S + 31) >> 5;
  const float* x = lp + (long long)b * T * C;
  int* ali = alignment + (long long)b * T;
  float* fs = frameScores + (long long)b * T;

  // Shared memory: per-warp maxima, labels, the ring, then the region.
  int* wmax = (int*)smem;                       // [2][32]
  int* shLab = wmax + 64;                       // [S]
  unsigned* ring = (unsigned*)(shLab + S);      // [2][F][2W]
  V* row0 = (V*)(ring + 2 * F * 2 * W);         // [S+2]
  V* row1 = row0 + (S + 2);                     // [S+2]
  float* emb = (float*)(row1 + (S + 2));        // [2][F][S]
  unsigned* shBp = (unsigned*)row0;             // [2][32][2][kBtWords], backtrace only
  int* shPath = (int*)(shBp + 2 * 32 * 2 * kBtWords);  // [32], backtrace only
  float* shSum = (float*)row0;                  // frame-score chunks, last
  const int region = max(2 * (S + 2) + 2 * F * S, kCtcRegion);
  const V neg = L::ctcNeg();

  for (long long t = Tb + tid; t < T; t += bd) ali[t] = -1, fs[t] = 0.f;

  int first[MP], end[MP];
  unsigned skip = 0;
#pragma unroll
  for (int p = 0; p < MP; ++p) {
    const int s = p * bd + tid;
    first[p] = Tb, end[p] = 0;  // states >= S: never in the window
    if (s < S) {
      const int v = tab[s];
      shLab[s] = v & kLabelMask;
      if ((v >> 30) & 1) skip |= 1u << p;
      first[p] = tab[S + s], end[p] = tab[2 * S + s];
    }
  }
  const float starF = (float)star;
  auto in = [&](int t, int p) { return t >= first[p] && t < end[p]; };
  // Frames 1..Tb-1 go in blocks of F: block g is frames 1 + g*F ...
  const int G = (Tb - 1 + F - 1) / F;
  // fetch queues block g's emissions of this thread's states into buffer
  // g & 1; states outside their window (and the star column) are skipped
  // or written directly.
  auto fetch = [&](int g) {
    float* buf = emb + (g & 1) * F * S;
#pragma unroll
    for (int p = 0; p < MP; ++p) {
      const int s = p * bd + tid;
      const int l = s < S ? shLab[s] : 0;  // this thread's own label slot
      for (int k = 0, t = 1 + g * F; k < F && t < Tb; ++k, ++t) {
        if (in(t, p)) {
          if (l < C)
            cpAsync4(buf + k * S + s, x + (long long)t * C + l);
          else
            buf[k * S + s] = starF;
        }
      }
    }
    cpAsyncCommit();
  };
  // emission reads frame t's emissions from slot k of buffer buf.
  auto emission = [&](V* e, const float* buf, int k, int t) {
#pragma unroll
    for (int p = 0; p < MP; ++p) e[p] = in(t, p) ? L::load(buf[k * S + p * bd + tid], scale) : V(0);
  };
  // flush copies block g's ring half to its bp rows (coalesced).
  auto flush = [&](int g) {
    const unsigned* src = ring + (g & 1) * F * 2 * W;
    unsigned* dst = bpi + (long long)g * F * 2 * W;
    const int n = min(F, Tb - 1 - g * F) * 2 * W;
    for (int i = tid; i < n; i += bd) dst[i] = src[i];
  };

  if (G > 0) fetch(0);
  if (G > 1) fetch(1);
  for (int i = tid; i < 2 * (S + 2); i += bd) row0[i] = neg;
  for (int i = tid; i < 64; i += bd) wmax[i] = kCtcNeg;
  __syncthreads();
  {
    int wm = kCtcNeg;
#pragma unroll
    for (int p = 0; p < MP; ++p) {
      const int s = p * bd + tid;
      if (in(0, p)) {
        const int l = shLab[s];
        const V v = L::load(l < C ? x[l] : starF, scale);
        row0[s + 2] = v;
        if constexpr (L::kInt) wm = max(wm, (int)v);
      }
    }
    if constexpr (L::kInt) {
      wm = warpMax(wm);
      if (lane == 0) wmax[warp] = wm;
    }
  }
  V ecur[MP];
  if (G > 0) {
    if (G > 1)
      cpAsyncWait<1>();
    else
      cpAsyncWait<0>();
    emission(ecur, emb, 0, 1);
  }
  __syncthreads();

  const V* prev = row0;  // row t-1; the loop swaps the two each frame
  V* cur = row1;
  for (int g = 0; g < G; ++g) {
    if (g > 0) flush(g - 1);  // its last frame ended on a barrier
    const int t0 = 1 + g * F, n = min(F, Tb - t0);
    const float* eb = emb + (g & 1) * F * S;  // slot k+1 of it: frame t+1
    unsigned* slot = ring + (g & 1) * F * 2 * W;
    for (int k = 0, t = t0; k < n; ++k, ++t, slot += 2 * W, eb += S) {
      // Frame t+1's emissions, independent of the recurrence: from this
      // block's buffer, or at its last frame from the next block's (this
      // one's buffer is then refilled two blocks ahead).
      V enext[MP];
      if (k + 1 < n) {
        emission(enext, eb, 1, t + 1);
      } else if (t + 1 < Tb) {
        if (g + 2 < G) {
          fetch(g + 2);
          cpAsyncWait<1>();
        } else {
          cpAsyncWait<0>();
        }
        emission(enext, emb + ((g + 1) & 1) * F * S, 0, t + 1);
      }
      int m = 0;
      if constexpr (L::kInt) m = rowMax32(wmax + ((t - 1) & 1) * 32);
      int wm = kCtcNeg;
#pragma unroll
      for (int p = 0; p < MP; ++p) {
        const int s = p * bd + tid;
        V v = neg;
        bool c1 = false, c2 = false;
        if (in(t, p)) {
          const V x0 = prev[s + 2], x1 = prev[s + 1], x2p = prev[s];
          V x2;
          if constexpr (L::kInt)
            x2 = (skip >> p) & 1 ? x2p : neg;
          else
            x2 = x2p + ((skip >> p) & 1 ? 0.f : -INFINITY);
          c2 = x2 > x1 && x2 > x0;
          c1 = x1 > x0 && x1 > x2;
          const V r = c2 ? x2 : (c1 ? x1 : x0);
          if constexpr (L::kInt) {
            const int a = addmax(r - m, ecur[p], kCtcFloor);  // unconditional: m loads in parallel
            v = r == neg ? neg : a;
          } else {
            v = r + ecur[p];
          }
        }
        if (s < S) cur[s + 2] = v;
        const unsigned b1 = __ballot_sync(kFull, c1), b2 = __ballot_sync(kFull, c2);
        const int wi = (p * bd >> 5) + warp;
        if (lane == 0 && wi < W) slot[wi] = b1, slot[W + wi] = b2;
        if constexpr (L::kInt) wm = max(wm, (int)v);
      }
      if constexpr (L::kInt) {
        wm = warpMax(wm);
        if (lane == 0) wmax[(t & 1) * 32 + warp] = wm;
      }
#pragma unroll
      for (int p = 0; p < MP; ++p) ecur[p] = enext[p];
      const V* done = cur;
      cur = const_cast<V*>(prev);
      prev = done;
      __syncthreads();
    }
  }
  if (G > 0) flush(G - 1);

  // Final state (every warp reads it before the scratch overlays the rows).
  const V* fin = prev;  // row Tb-1
  int s = 0;
  if (S >= 2) {
    const V last = fin[S - 1 + 2], lastLabel = fin[S - 2 + 2];
    if (tid == 0 && last == neg && lastLabel == neg) status[3 * b + 2] = 1;
    s = last > lastLabel ? S - 1 : S - 2;
  }
  __syncthreads();
  if (warp == 0) {
    // fetchBp queues round r's words (frames t..t-31, rows t-1..t-32):
    // kBtWords words per plane from word w0 of each.
    auto fetchBp = [&](int r, int t, int wb) {
      const int tt = t - lane;
      unsigned* dst = shBp + ((r & 1) * 32 + lane) * 2 * kBtWords;
      if (tt >= 1) {
        const unsigned* row = bpi + (long long)(tt - 1) * 2 * W;
        for (int q = 0; q < kBtWords; ++q) {
          if (wb + q < W) {
            cpAsync4(dst + q, row + wb + q);
            cpAsync4(dst + kBtWords + q, row + W + wb + q);
          }
        }
      }
      cpAsyncCommit();
    };
    auto base = [](int st) { return max(st - 127, 0) >> 5; };
    int w0 = base(s), wNext = w0;
    fetchBp(0, Tb - 1, w0);
    for (int r = 0, t = Tb - 1; t > 0; ++r, t -= 32) {
      wNext = base(s);  // round r+1 starts within 64 states below s
      fetchBp(r + 1, t - 32, wNext);
      cpAsyncWait<1>();
      __syncwarp();
      if (lane == 0) {
        const unsigned* sh = shBp + (r & 1) * 32 * 2 * kBtWords - w0;
        // step moves s one frame back through frame k's words.
        auto step = [&](int k) {
          shPath[k] = s;
          const unsigned* w = sh + k * 2 * kBtWords + (s >> 5);
          const int bit = s & 31;
          s -= (int)((w[0] >> bit) & 1u) | (int)(((w[kBtWords] >> bit) & 1u) << 1);
        };
        if (t >= 32) {  // a whole round: unrolled, constant offsets
#pragma unroll
          for (int k = 0; k < 32; ++k) step(k);
        } else {
          for (int k = 0; k < t; ++k) step(k);
        }
      }
      __syncwarp();
      s = __shfl_sync(kFull, s, 0);
      w0 = wNext;
      if (t - lane >= 1) ali[t - lane] = shLab[shPath[lane]];
    }
    cpAsyncWait<0>();
    if (lane == 0) ali[0] = shLab[s];
  }
  __syncthreads();
  // Frame scores: gathered by the block in chunks, summed by thread 0.
  double sum = 0;
  for (int t0 = 0; t0 < Tb; t0 += region) {
    const int n = min(region, Tb - t0);
    for (int i = tid; i < n; i += bd) {
      const int k = ali[t0 + i];
      const float v = k < C ? x[(long long)(t0 + i) * C + k] : starF;
      fs[t0 + i] = v;
      shSum[i] = v;
    }
    __syncthreads();
    if (tid == 0)
      for (int i = 0; i < n; ++i) sum += (double)shSum[i];
    __syncthreads();
  }
  if (tid == 0) score[b] = (float)sum;
}

// ---------------------------------------------------------------------------
// CTC forced alignment with the trellis in registers (dpx_ctc_warp_*).
//
// Same inputs, outputs, tables and numerics as ctcAlign above; a different
// thread mapping that takes the block barrier off the frame's path when one
// warp holds the whole trellis.
//
// Thread mapping: one block of NW warps per item (NW = blockDim/32, chosen
// by the launcher, 1 for small S); thread x owns the K consecutive states
// [x*K, x*K+K) (K even, the kernel's suffix, S <= K*blockDim) and keeps their
// scores, labels' columns, skip caps and window frames in registers. A frame
// updates the states in place from the highest down; the state below a
// thread's range is the previous thread's highest (__shfl_up_sync; a skip
// never enters a blank, so the one below that is never read). Across warps
// (NW > 1) lane 31's highest state goes through shared memory:
// - by default (lockstep) lane 31 posts its three highest states to a slot
//   of xtop (two parities) before a __syncthreads. The float path runs two
//   frames per barrier while the window's lower edge has not moved: for
//   the second frame, lane 0 needs the state below its range at the first
//   frame, and computes it itself (the "ghost": the same recurrence on the
//   three posted states, the state's column and skip cap), so the two
//   frames are one straight-line body whose second frame's upper states
//   overlap the first's lower ones. The int32 path keeps a barrier every
//   frame: each frame needs the whole previous row's maximum.
// - float with the pipeline flag (a benchmark hook): Warp w posts (frame << 32 | value) to its slot of a
//   ring of 2F frames (one 64-bit store) and lane 0 of warp w+1 polls that
//   slot for the frame's tag just before its two lowest states, which it
//   computes last; no warp waits for any other, so the warps drift apart
//   by up to a block of frames and only a block's end has a barrier (which
//   also bounds the drift to the ring's depth). Measured on the H200 (S =
//   601, 3-4 warps) the polling cost more than the barriers it saves.
// With NW = 1 neither: no barrier at all in the frame loop.
// Emissions: frames 1..T_b-1 run in blocks of F; a block's log-prob rows (C
// values each, contiguous in the input) are copied whole into shared memory
// with cp.async (16-byte copies when C % 4 == 0), one block ahead, into rows
// of Cp = C+2 rounded to 4 floats whose column C holds the star's log-prob
// and column C+1 the padding states' -Inf. int32: each thread quantises the
// values it copied, in place, once its copies landed (cp.async.wait_group),
// before the barrier that ends the block. A state reads its column from the
// frame's row (blank states share one read a thread).
// Window: torchaudio's window is tested per state ([first_s, end_s) in
// registers) on frames t >= end_0 (the first frame where the window's lower
// edge moved) and on every frame of the int32 path; on the float path the
// earlier frames skip the test: there the window is [0, hi(t)) and hi(t) is
// exactly the highest reachable state + 1 (the window's end advances by 2
// exactly when the skip into that state is allowed), so the states it
// excludes are -Inf anyway, and the padding states (>= S) are never read by
// real ones.
// Backpointers: 2 bits per state and frame, (c1 | c2 << 1) of state x*K+j at
// bit 2j of thread x's WT = ceil(2K/32) words, one frame's ceil(S/K)*WT
// words after another (bp[(t-1)][x][WT]), then two spare words that the
// threads without states store to; c1 and c2 are never both set, so
// the pair is the step back (0, 1 or 2 states). Stored as one 32- or 64-bit
// store per thread and frame.
// int32: the previous row's maximum m comes from a max3 tree over the
// thread's states and a warp reduction (NW > 1: 32 per-warp maxima in
// shared memory, as in ctcAlign).
//
// Backtrace: warp 0 walks 32 frames per round as in ctcAlign, lane 0
// reading each frame's step ahead for the three states the path can move
// to (one shared-memory read on the chain per two frames); the lanes
// prefetch, for the next round's 32 frames, the BTW = (126/K + 2)*WT words
// that hold every state within 126 below the current round's first state,
// and write the round's labels and frame scores (each lane one frame; the
// score's load overlaps the next round's walk). The score: the frame
// scores gathered by the block, summed by thread 0 in float64 in frame
// order.
//
// Shared memory (ctcWarpShared in ops_cuda.go): 1328 B (per-warp maxima,
// the warps' three highest states by interval parity, the two end
// states), the ring
// (2F x 32 x 8 B), a region of max(2*F*Cp, 64*BTW + 32, 1024) words (the
// emission rows while aligning, the backtrace and sum scratch after), and
// 4*S B of labels. Registers: K scores, 2K window frames, K/2 columns and
// caps, K/2+1 emissions (__launch_bounds__ per K below). Global scratch:
// ((T_b-1) * ceil(S/K) * WT + 2) * 4 B of backpointers per item.
template <bool B>
struct Flag {
  static constexpr bool value = B;
};

template <class V, int K>
__device__ void ctcWarp(const float* __restrict__ lp, long long T, long long C,
                        const long long* __restrict__ meta, const int* __restrict__ table,
                        unsigned* __restrict__ bp, long long blank, double star, double scale, long long frames,
                        int* __restrict__ alignment, float* __restrict__ frameScores,
                        float* __restrict__ score, long long* __restrict__ status) {
  static_assert(K % 2 == 0 && K >= 2 && K <= 32, "K: even, at most 32");
  constexpr int WT = (2 * K + 31) / 32;        // backpointer words per thread and frame
  constexpr int BTW = (126 / K + 2) * WT;      // words per frame fetched by the backtrace
  extern __shared__ __align__(16) unsigned char smem[];
  using L = Lane<V>;
  const int b = blockIdx.x;
  const int tid = threadIdx.x, bd = blockDim.x, lane = tid & 31, warp = tid >> 5, nw = bd >> 5;
  const long long* mt = meta + 4 * b;
  // frames: F, the frames per block, | 1 << 16 to pipeline the float
  // path's warps instead of a barrier every frame (a benchmark hook: on the
  // H200 the pipeline's polling cost more than the barrier it saves).
  // | 1 << 17 turns the float path's frame pairs off (a benchmark hook).
  const int F = (int)(frames & 0xffff);
  const bool pipe = !L::kInt && ((frames >> 16) & 1) && nw > 1;
  const bool pairs = !L::kInt && !((frames >> 17) & 1);
  const int Tb = (int)mt[0], S = (int)mt[1], Ci = (int)C;
  const int* tab = table + mt[2];
  unsigned* bpi = bp + mt[3];
  const int G = (S + K - 1) / K;  // threads that own states
  const int rowW = G * WT;        // backpointer words per frame
  const int Cp = (Ci + 5) & ~3;   // row stride: C log-probs, star, padding
  const int R = max(max(2 * F * Cp, 64 * BTW + 32), kCtcRegion);
  const float* x = lp + (long long)b * T * C;
  int* ali = alignment + (long long)b * T;
  float* fs = frameScores + (long long)b * T;

  int* wmax = (int*)smem;           // [2][32] per-warp row maxima (int32)
  V* xtop = (V*)(wmax + 64);        // [2][33][4]: slot w+1 holds warp w's three highest states, slot 0 -Inf
  V* fin = xtop + 264;              // [4] the two end states
  unsigned long long* ring = (unsigned long long*)(fin + 4);  // [2F][32]: (frame << 32 | highest state)
  float* emb = (float*)(ring + 64 * F);  // region: [2][F][Cp] emission rows
  int* shLab = (int*)(emb + R);     // [S]
  unsigned* shBp = (unsigned*)emb;  // [2][32][BTW], backtrace only
  int* shPath = (int*)(shBp + 64 * BTW);  // [32], backtrace only
  float* shSum = emb;               // frame-score chunks, last
  const V neg = L::ctcNeg();
  const float starF = (float)star;

  for (long long t = Tb + tid; t < T; t += bd) ali[t] = -1, fs[t] = 0.f;

  // This thread's states s0 + j: window frames, and for the label states
  // (odd j) the emission column (as a byte offset in a row) and the skip
  // cap (x2 = min(x2, cap)).
  const int s0 = tid * K;
  V v[K];
  int first[K], end[K], col[K / 2];
  V cap[K / 2];
#pragma unroll
  for (int j = 0; j < K; ++j) {
    const int s = s0 + j;
    first[j] = Tb, end[j] = 0;  // padding: never in the window
    int c = j & 1 ? Ci + 1 : (int)blank;
    V cp = neg;
    if (s < S) {
      const int w = tab[s], lab = w & kLabelMask;
      shLab[s] = lab;
      first[j] = tab[S + s], end[j] = tab[2 * S + s];
      if (j & 1) {
        c = lab < Ci ? lab : Ci;
        if ((w >> 30) & 1) cp = L::top();
      }
    }
    if (j & 1) col[j / 2] = 4 * c, cap[j / 2] = cp;
  }
  const int tLo = L::kInt ? 0 : tab[2 * S];  // float: frames before it skip the window test
  // pick is a label state's predecessor value by torchaudio's rule: x2
  // (skip, already capped) only if strictly greater than both others, else
  // x1 only if strictly greater than both, else x0; c1, c2 its choice.
  auto pick = [](V x0, V x1, V x2, bool& c1, bool& c2) {
    c2 = x2 > L::vmax(x0, x1);
    c1 = x1 > L::vmax(x0, x2);
    return c2 ? x2 : (c1 ? x1 : x0);
  };
  // The state below the thread's range (a label state: s0 is even), for
  // the float path's frame pairs: its column (byte offset) and skip cap.
  int gcol = 4 * (Ci + 1);
  V gcap = neg;
  if (s0 >= 1 && s0 - 1 < S) {
    const int w = tab[s0 - 1], lab = w & kLabelMask;
    gcol = 4 * (lab < Ci ? lab : Ci);
    if ((w >> 30) & 1) gcap = L::top();
  }
  auto in = [&](int t, int j) { return t >= first[j] && t < end[j]; };
  auto sync = [&] {
    if (nw > 1)
      __syncthreads();
    else
      __syncwarp();
  };

  // Frames 1..Tb-1 in blocks of F: block g is frames 1 + g*F ...
  const int NG = Tb > 1 ? (Tb - 2) / F + 1 : 0;
  const bool vec = (Ci & 3) == 0 && (reinterpret_cast<unsigned long long>(x) & 15) == 0;
  // chunks calls fn(dst, src, n) for this thread's copies of block g's rows
  // into buffer g & 1 (n = 4 or 1 floats).
  auto chunks = [&](int g, auto&& fn) {
    const int t0 = 1 + g * F, n = min(F, Tb - t0);
    float* buf = emb + (g & 1) * F * Cp;
    const float* src = x + (long long)t0 * C;
    if (vec) {
      const int c4 = Ci >> 2;
      for (int i = tid; i < n * c4; i += bd) {
        const int k = i / c4, c = (i - k * c4) * 4;
        fn(buf + k * Cp + c, src + (long long)k * C + c, 4);
      }
    } else {
      for (int i = tid; i < n * Ci; i += bd) {
        const int k = i / Ci, c = i - k * Ci;
        fn(buf + k * Cp + c, src + (long long)k * C + c, 1);
      }
    }
  };
  auto fetch = [&](int g) {
    chunks(g, [](float* d, const float* s, int n) {
      if (n == 4)
        cpAsync16(d, s);
      else
        cpAsync4(d, s);
    });
    cpAsyncCommit();
  };
  // landed waits for block g's copies and (int32) quantises them in place.
  auto landed = [&](int g) {
    cpAsyncWait<0>();
    if constexpr (L::kInt) {
      chunks(g, [&](float* d, const float*, int n) {
        for (int i = 0; i < n; ++i) reinterpret_cast<int*>(d)[i] = quant(d[i], scale);
      });
    }
  };

  if (NG > 0) fetch(0);
  for (int k = tid; k < 2 * F; k += bd) {
    V* row = (V*)(emb + k * Cp);
    row[Ci] = L::load(starF, scale);
    row[Ci + 1] = neg;
  }
  for (int i = tid; i < 64; i += bd) wmax[i] = kCtcNeg;
  for (int i = tid; i < 264; i += bd) xtop[i] = neg;
  for (int i = tid; i < 64 * F; i += bd) ring[i] = ~0ull;  // no frame's tag
  // Frame 0.
#pragma unroll
  for (int j = 0; j < K; ++j) {
    const int c = j & 1 ? col[j / 2] / 4 : (int)blank;
    v[j] = in(0, j) ? L::load(c < Ci ? x[c] : starF, scale) : neg;
  }
  // laneMax is the maximum of the thread's states (int32).
  auto laneMax = [&]() {
    int m = (int)v[0];
#pragma unroll
    for (int j = 1; j + 1 < K; j += 2) m = max3(m, (int)v[j], (int)v[j + 1]);
    return max(m, (int)v[K - 1]);
  };
  int m = 0;  // int32: the previous row's maximum
  if constexpr (L::kInt) m = warpMax(laneMax());
  __syncthreads();  // wmax initialised
  // Frame 0's slot in the ring is the last of block -1: 2F-1.
  auto post = [&](int t, int idx) {
    if constexpr (!L::kInt) {
      if (lane == 31) {
        DPXK_DELAY_POST();
        *reinterpret_cast<volatile unsigned long long*>(ring + idx * 32 + warp) =
            (unsigned long long)(unsigned)t << 32 | __float_as_uint(v[K - 1]);
      }
    }
  };
  // post3 gives the next warp this thread's three highest states (lane 31)
  // in xtop slot parity q.
  auto post3 = [&](int q) {
    if (lane == 31) {
      V* d = xtop + q * 132 + 4 * (warp + 1);
      d[0] = v[K - 1], d[1] = v[K - 2], d[2] = K >= 3 ? v[K >= 3 ? K - 3 : 0] : neg;
    }
  };
  int par = 0;  // the xtop parity read in this barrier interval
  if (nw > 1) {
    if (L::kInt && lane == 0) wmax[warp] = m;
    post3(0);
    if (pipe) post(0, 2 * F - 1);
  }
  if (NG > 0) landed(0);
  __syncthreads();

  // frame computes frame t from row t-1 (in v) and the emission row e,
  // and stores its backpointers at dst. The state below the thread's
  // range is the previous lane's highest, or for lane 0 the previous
  // warp's (slot 0: -Inf for warp 0): in lockstep from xtop, pipelined from
  // ring slot rIdx, waiting for its tag t-1 only before the two lowest
  // states, which are computed last. The state below that is only read by
  // a skip, which never enters a blank (j = 0).
  auto frame = [&](int t, const V* e, unsigned* dst, int rIdx, auto masked, auto piped, V left) {
    constexpr bool kPipe = decltype(piped)::value;
    V p1 = __shfl_up_sync(kFull, v[K - 1], 1);
    p1 = lane == 0 ? left : p1;
    const V eb = e[blank];
    V el[K / 2];
#pragma unroll
    for (int i = 0; i < K / 2; ++i) el[i] = *reinterpret_cast<const V*>(reinterpret_cast<const char*>(e) + col[i]);
    unsigned w[WT];
#pragma unroll
    for (int i = 0; i < WT; ++i) w[i] = 0;
#pragma unroll
    for (int j = K - 1; j >= 0; --j) {
      if constexpr (!L::kInt) {
        if (kPipe && j == 1 && lane == 0 && warp > 0) {
          // The slot's address depends (never in value: states are never
          // NaN) on the new states K-1..2, so the compiler keeps their work
          // before the wait.
          unsigned nan = 0;
#pragma unroll
          for (int i = 2; i < K; ++i) nan |= __float_as_uint(v[i]) == 0x7fc00001u;
          const volatile unsigned long long* q = ring + rIdx * 32 + warp - 1 + nan;
          unsigned long long x;
          do {
            x = *q;
          } while ((int)(x >> 32) != t - 1);
          p1 = __uint_as_float((unsigned)x);
        }
      }
      const V x0 = v[j], x1 = j >= 1 ? v[j - 1] : p1;
      bool c1, c2 = false;
      V r, ee;
      if (j & 1) {
        r = pick(x0, x1, L::vmin(j >= 2 ? v[j - 2] : p1, cap[j / 2]), c1, c2);
        ee = el[j / 2];
      } else {
        c1 = x1 > x0;
        r = c1 ? x1 : x0;
        ee = eb;
      }
      V nv;
      if constexpr (L::kInt)
        nv = r == neg ? neg : addmax(r - m, ee, kCtcFloor);
      else
        nv = r + ee;
      if constexpr (decltype(masked)::value) nv = in(t, j) ? nv : neg;
      v[j] = nv;
      if (c1) w[(2 * j) >> 5] |= 1u << ((2 * j) & 31);
      if (c2) w[(2 * j + 1) >> 5] |= 1u << ((2 * j + 1) & 31);
    }
    if constexpr (WT == 2)
      *reinterpret_cast<uint2*>(dst) = make_uint2(w[0], w[1]);
    else
      dst[0] = w[0];
  };

  // Frame t's words: bpi + (t-1)*rowW + tid*WT; threads without states
  // store to the item's spare words after its rows (no branch in a frame).
  const int dstStep = tid < G ? rowW : 0;
  unsigned* dst = tid < G ? bpi + tid * WT : bpi + (long long)(Tb - 1) * rowW;
  int rIdx = 2 * F - 1;  // ring slot of frame t-1 (pipelined float path)
  for (int g = 0; g < NG; ++g) {
    if (g + 1 < NG) fetch(g + 1);  // into the buffer block g-1 read
    const int t0 = 1 + g * F, n = min(F, Tb - t0);
    const V* e = (const V*)(emb + (g & 1) * F * Cp);
    for (int k = 0, wIdx = (g & 1) * F; k < n;) {
      const int t = t0 + k;
      if constexpr (!L::kInt && K >= 4) {
        // Float, two frames before the window's lower edge moves: one
        // straight-line body and one barrier for both. Lane 0 computes the
        // state below its range for the first frame itself (the ghost:
        // the same recurrence on the previous warp's three highest states
        // of frame t-1) and uses it as the second frame's neighbour, so
        // the second frame's upper states overlap the first's lower ones.
        if (pairs && !pipe && k + 1 < n && t + 1 < tLo) {
          const V* q = xtop + par * 132 + 4 * warp;
          bool gc1, gc2;
          const V a0 = q[0];
          const V ghost = pick(a0, q[1], L::vmin(q[2], gcap), gc1, gc2) +
                          *reinterpret_cast<const V*>(reinterpret_cast<const char*>(e) + gcol);
          frame(t, e, dst, rIdx, Flag<false>{}, Flag<false>{}, a0);
          frame(t + 1, e + Cp, dst + dstStep, rIdx, Flag<false>{}, Flag<false>{}, ghost);
          if (nw > 1) {
            post3(par ^ 1);
            __syncthreads();
            par ^= 1;
          }
          k += 2, e += 2 * Cp, dst += 2 * dstStep, rIdx = wIdx + 1, wIdx += 2;
          continue;
        }
      }
      const V left = pipe ? neg : xtop[par * 132 + 4 * warp];
      if constexpr (L::kInt) {
        if (nw > 1) m = rowMax32(wmax + ((t - 1) & 1) * 32);
      }
      // Four specialisations: window test or not, pipeline or not.
      if (pipe) {
        if (t >= tLo)
          frame(t, e, dst, rIdx, Flag<true>{}, Flag<!L::kInt>{}, left);
        else
          frame(t, e, dst, rIdx, Flag<false>{}, Flag<!L::kInt>{}, left);
      } else {
        if (t >= tLo)
          frame(t, e, dst, rIdx, Flag<true>{}, Flag<false>{}, left);
        else
          frame(t, e, dst, rIdx, Flag<false>{}, Flag<false>{}, left);
      }
      if constexpr (L::kInt) {
        const int wm = warpMax(laneMax());
        if (nw == 1)
          m = wm;
        else if (lane == 0)
          wmax[(t & 1) * 32 + warp] = wm;
      }
      if (pipe) {
        post(t, wIdx);
      } else if (nw > 1) {
        post3(par ^ 1);
        __syncthreads();
        par ^= 1;
      }
      ++k, e += Cp, dst += dstStep, rIdx = wIdx++;
    }
    if (g + 1 < NG) landed(g + 1);
    sync();
  }

  // Final state: the two end states of row Tb-1.
#pragma unroll
  for (int j = 0; j < K; ++j) {
    if (s0 + j == S - 1) fin[0] = v[j];
    if (s0 + j == S - 2) fin[1] = v[j];
  }
  __syncthreads();
  int s = 0;
  if (S >= 2) {
    const V last = fin[0], lastLabel = fin[1];
    if (tid == 0 && last == neg && lastLabel == neg) status[3 * b + 2] = 1;
    s = last > lastLabel ? S - 1 : S - 2;
  }
  if (warp == 0) {
    // fetchBp queues round r's words (frames t..t-31, rows t-1..t-32): BTW
    // words of each row from thread g0's.
    auto fetchBp = [&](int r, int t, int g0) {
      const int tt = t - lane;
      unsigned* dst = shBp + ((r & 1) * 32 + lane) * BTW;
      if (tt >= 1) {
        const unsigned* row = bpi + (long long)(tt - 1) * rowW + g0 * WT;
        const int n = min(BTW, rowW - g0 * WT);
        for (int q = 0; q < n; ++q) cpAsync4(dst + q, row + q);
      }
      cpAsyncCommit();
    };
    auto base = [](int st) { return max(st - 126, 0) / K; };
    int g0 = base(s), gNext = g0;
    // A round's frame scores are stored in the next round, so their loads
    // overlap its walk.
    int pendT = -1;
    float pendV = 0.f;
    fetchBp(0, Tb - 1, g0);
    for (int r = 0, t = Tb - 1; t > 0; ++r, t -= 32) {
      gNext = base(s);  // round r+1 stays within 126 states below s
      fetchBp(r + 1, t - 32, gNext);
      cpAsyncWait<1>();
      __syncwarp();
      if (lane == 0) {
        const unsigned* sh = shBp + (r & 1) * 32 * BTW - g0 * WT;
        // code is state st's step back (0, 1 or 2) at frame k of the round.
        auto code = [&](int k, int st) {
          const int g = st / K, j2 = 2 * (st - g * K);
          return (int)((sh[k * BTW + g * WT + (j2 >> 5)] >> (j2 & 31)) & 3u);
        };
        // step moves s one frame back; d is its step at frame k, and the
        // next frame's is picked from the codes of the three states s can
        // move to, read before the move: the walk's chain is one read per
        // two frames.
        int d = code(0, s);
        auto step = [&](int k, bool more) {
          shPath[k] = s;
          int c0 = 0, c1 = 0, c2 = 0;
          if (more) c0 = code(k + 1, s), c1 = code(k + 1, max(s - 1, 0)), c2 = code(k + 1, max(s - 2, 0));
          s -= d;
          d = d == 0 ? c0 : (d == 1 ? c1 : c2);
        };
        if (t >= 32) {
#pragma unroll
          for (int k = 0; k < 32; ++k) step(k, k < 31);
        } else {
          for (int k = 0; k < t; ++k) step(k, k + 1 < t);
        }
      }
      __syncwarp();
      s = __shfl_sync(kFull, s, 0);
      g0 = gNext;
      if (pendT >= 0) fs[pendT] = pendV;
      pendT = -1;
      if (t - lane >= 1) {
        const int lab = shLab[shPath[lane]];
        pendT = t - lane;
        ali[pendT] = lab;
        pendV = lab < Ci ? x[(long long)pendT * C + lab] : starF;
      }
    }
    if (pendT >= 0) fs[pendT] = pendV;
    cpAsyncWait<0>();
    if (lane == 0) {
      const int lab = shLab[s];
      ali[0] = lab;
      fs[0] = lab < Ci ? x[lab] : starF;
    }
  }
  __syncthreads();
  // Score: the frame scores gathered by the block in chunks (coalesced),
  // summed by thread 0 in frame order.
  double sum = 0;
  for (int t0 = 0; t0 < Tb; t0 += R) {
    const int n = min(R, Tb - t0);
    for (int i = tid; i < n; i += bd) shSum[i] = fs[t0 + i];
    __syncthreads();
    if (tid == 0)
      for (int i = 0; i < n; ++i) sum += (double)shSum[i];
    __syncthreads();
  }
  if (tid == 0) score[b] = (float)sum;
}

// ---------------------------------------------------------------------------
// Viterbi (max-plus HMM).
//
// Thread mapping: one block per item; thread x owns states j = x +
// p*blockDim. For each frame, thread j scans i = 0..S-1: prev[i] from shared
// memory (a broadcast), trans[i][j] from global memory (coalesced over j,
// L2-resident across the batch). Rows are double-buffered in shared memory
// (8*S bytes); backpointers are the argmax, 16 bits per state and frame
// (bp[(t-1)*S + j], (T_b-1)*S*2 bytes per item); thread 0 backtraces.
//
// Numerics: float32: candidates prev[i] + trans[i][j] in float32, first
// maximum (lowest i) wins, then + e[j]; final state the lowest argmax.
// int32: quantised inputs; each row is renormalised to maximum 0 (the
// shift is added back in int64 for the score); a candidate is max(prev[i] +
// trans[i][j], -32768) (DPX fused add-max), and when every quantised
// transition is <= 32767 (maxq) the candidates are packed as (c << 16) |
// (0xFFFF - i) and reduced with three-way DPX max, which picks the largest
// c and, on ties, the lowest i; otherwise they are compared one by one.
template <class V>
__device__ void viterbi(const float* __restrict__ em, long long T, long long S,
                        const V* __restrict__ trans, const V* __restrict__ priors,
                        const long long* __restrict__ lens, const int* __restrict__ maxq,
                        unsigned short* __restrict__ bp, double scale, int* __restrict__ path,
                        float* __restrict__ score) {
  extern __shared__ __align__(16) unsigned char smem[];
  using L = Lane<V>;
  const int b = blockIdx.x;
  const int tid = threadIdx.x, bd = blockDim.x, lane = tid & 31, warp = tid >> 5, nw = bd >> 5;
  const int Tb = (int)lens[b];
  const int P = ((int)S + bd - 1) / bd;
  const float* e = em + (long long)b * T * S;
  unsigned short* bpi = bp + (long long)b * (T - 1) * S;
  int* out = path + (long long)b * T;
  V* row0 = (V*)smem;
  V* row1 = row0 + S;
  int* wmax = (int*)(row1 + S);       // [32]
  V* sv = (V*)(wmax + 32);            // [32]
  int* si = (int*)(sv + 32);          // [32]
  const bool packed = L::kInt && *maxq <= 32767;

  for (long long t = Tb + tid; t < T; t += bd) out[t] = -1;

  // renorm subtracts the row maximum from row (int32) and returns it.
  auto renorm = [&](V* row) -> long long {
    if constexpr (!L::kInt) {
      __syncthreads();
      return 0;
    } else {
      int wm = INT_MIN;
      for (int j = tid; j < S; j += bd) wm = max(wm, (int)row[j]);
      wm = warpMax(wm);
      if (lane == 0) wmax[warp] = wm;
      __syncthreads();
      const int m = rowMax(wmax, nw);
      for (int j = tid; j < S; j += bd) row[j] -= m;
      __syncthreads();
      return m;
    }
  };

  for (int j = tid; j < S; j += bd) row0[j] = priors[j] + L::load(e[j], scale);
  long long norm = renorm(row0);

  float en[kMaxPass];
#pragma unroll
  for (int p = 0; p < kMaxPass; ++p) {
    const int j = p * bd + tid;
    en[p] = (Tb > 1 && p < P && j < S) ? e[S + j] : 0.f;
  }
  for (int t = 1; t < Tb; ++t) {
    const V* prev = (t & 1) ? row0 : row1;
    V* cur = (t & 1) ? row1 : row0;
    unsigned short* bpt = bpi + (long long)(t - 1) * S;
#pragma unroll
    for (int p = 0; p < kMaxPass; ++p) {
      if (p >= P) break;
      const int j = p * bd + tid;
      if (j >= S) break;
      const float ej = en[p];
      if (t + 1 < Tb) en[p] = e[(long long)(t + 1) * S + j];
      const V* col = trans + j;
      V best;
      int bi;
      if constexpr (L::kInt) {
        if (packed) {
          auto pk = [&](int i) { return (addmax(prev[i], col[(long long)i * S], kViterbiFloor) << 16) | (0xFFFF - i); };
          int acc = pk(0);
          int i = 1;
          for (; i + 1 < S; i += 2) acc = max3(acc, pk(i), pk(i + 1));
          if (i < S) acc = max(acc, pk(i));
          best = acc >> 16;
          bi = 0xFFFF - (acc & 0xFFFF);
        } else {
          best = max(prev[0] + col[0], kViterbiFloor), bi = 0;
          for (int i = 1; i < S; ++i) {
            const int c = max(prev[i] + col[(long long)i * S], kViterbiFloor);
            if (c > best) best = c, bi = i;
          }
        }
      } else {
        best = prev[0] + col[0], bi = 0;
        for (int i = 1; i < S; ++i) {
          const float c = prev[i] + col[(long long)i * S];
          if (c > best) best = c, bi = i;
        }
      }
      cur[j] = best + L::load(ej, scale);
      bpt[j] = (unsigned short)bi;
    }
    norm += renorm(cur);
  }
  const V* fin = ((Tb - 1) & 1) ? row1 : row0;
  ArgBest<V> a{fin[0], 0};
  for (int j = tid; j < S; j += bd) a.merge(fin[j], j);
  a = blockArgMax(a, sv, si);
  if (tid == 0) {
    if constexpr (L::kInt)
      score[b] = (float)((double)((long long)a.v + norm) / scale);
    else
      score[b] = a.v;
    int j = a.i;
    out[Tb - 1] = j;
    for (int t = Tb - 1; t > 0; --t) {
      j = bpi[(long long)(t - 1) * S + j];
      out[t - 1] = j;
    }
  }
}

// ---------------------------------------------------------------------------
// DTW (min-plus, steps diagonal / (i-1, j) / (i, j-1)).
//
// Thread mapping: one block per item, an anti-diagonal wavefront: at step d
// thread x computes the cells (i, d-i) for its rows i = x + r*blockDim
// (r < ceil(N/blockDim) <= 8). Diagonals d-1 and d-2 are read from shared
// memory (three rotating buffers of N values; 12*N + 1040 bytes with the
// backtrace scratch), one __syncthreads per diagonal; the costs of diagonal
// d+1 are loaded while d computes. Choices are packed by warp ballots into two bit planes per
// diagonal: bp[d][plane][ceil(N/32)] uint32 ((N+M-1)*ceil(N/32)*8 bytes
// per item). Warp 0 backtraces, fetching the backpointer words of 32 steps
// at a time; the block then moves the path to the front of its [N+M, 2] row
// and pads it with -1.
//
// Numerics: D = cost + min(diag, up, left) in the value type (float32 sums
// as the CPU rounds them; int32 on quantised costs, DPX three-way min), ties
// to diagonal, then up, then left; total = D[n-1][m-1] (int32: / scale).
template <class V>
__device__ void dtw(const float* __restrict__ cost, long long N, long long M,
                    const long long* __restrict__ dims, unsigned* __restrict__ bp, double scale,
                    int* __restrict__ path, int* __restrict__ pathLen, float* __restrict__ total) {
  extern __shared__ __align__(16) unsigned char smem[];
  using L = Lane<V>;
  const int b = blockIdx.x;
  const int tid = threadIdx.x, bd = blockDim.x, lane = tid & 31, warp = tid >> 5;
  const int n = (int)dims[2 * b], m = (int)dims[2 * b + 1];
  const int R = ((int)N + bd - 1) / bd;
  const int W = ((int)N + 31) >> 5;
  const int K = (int)(N + M);
  const float* c = cost + (long long)b * N * M;
  unsigned* bpi = bp + (long long)b * (N + M - 1) * 2 * W;
  int2* out = (int2*)(path + (long long)b * K * 2);
  V* diag = (V*)smem;  // [3][N]
  int* shLen = (int*)(diag + 3 * N);

  float cn[kMaxPass];
  auto fetch = [&](int d) {
#pragma unroll
    for (int r = 0; r < kMaxPass; ++r) {
      const int i = r * bd + tid, j = d - i;
      cn[r] = (r < R && i < n && j >= 0 && j < m) ? c[(long long)i * M + j] : 0.f;
    }
  };
  fetch(0);
  for (int d = 0; d <= n + m - 2; ++d) {
    V* cur = diag + (d % 3) * N;
    const V* p1 = diag + ((d + 2) % 3) * N;  // diagonal d-1
    const V* p2 = diag + ((d + 1) % 3) * N;  // diagonal d-2
    float cc[kMaxPass];
#pragma unroll
    for (int r = 0; r < kMaxPass; ++r) cc[r] = cn[r];
    if (d + 1 <= n + m - 2) fetch(d + 1);
    unsigned* bpd = bpi + (long long)d * 2 * W;
#pragma unroll
    for (int r = 0; r < kMaxPass; ++r) {
      if (r >= R) break;
      const int i = r * bd + tid, j = d - i;
      int k = 0;
      if (i < n && j >= 0 && j < m) {
        const V cv = L::load(cc[r], scale);
        V v;
        if (i == 0 && j == 0) {
          v = cv;
        } else if (i == 0) {
          v = cv + p1[0], k = 2;
        } else if (j == 0) {
          v = cv + p1[i - 1], k = 1;
        } else {
          const V ul = p2[i - 1], up = p1[i - 1], left = p1[i];
          V mn;
          if constexpr (L::kInt)
            mn = min3(ul, up, left);
          else
            mn = fminf(fminf(ul, up), left);
          k = ul == mn ? 0 : (up <= left ? 1 : 2);
          v = cv + (k == 0 ? ul : (k == 1 ? up : left));  // the CPU's operand, signed zeros included
        }
        cur[i] = v;
      }
      const unsigned b1 = __ballot_sync(kFull, k & 1), b2 = __ballot_sync(kFull, k >> 1);
      const int wi = (r * bd >> 5) + warp;
      if (lane == 0 && wi < W) bpd[wi] = b1, bpd[W + wi] = b2;
    }
    __syncthreads();
  }
  if (tid == 0) {
    const V v = diag[((n + m - 2) % 3) * N + n - 1];
    if constexpr (L::kInt)
      total[b] = (float)((double)v / scale);
    else
      total[b] = v;
  }
  if (warp == 0) {
    // Backtrace, 32 steps per round: the path moves down at most one row
    // and two diagonals a step, so the lanes first fetch, for diagonals
    // d0..d0-63, the two words (both planes) holding rows i0-31..i0; then
    // lane 0 walks them in shared memory, writing the cells from the end of
    // the output row.
    unsigned* sh = (unsigned*)(shLen + 4);  // [64 diagonals][2 planes][2 words]
    int i = n - 1, j = m - 1, k = 0;
    bool done = false;
    while (!done) {
      const int d0 = i + j, wb = i >= 31 ? (i - 31) >> 5 : 0;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int rel = lane + 32 * h, dd = d0 - rel;
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          const int wi = wb + q;
          const bool ok = dd >= 0 && wi < W;
          const unsigned* w = bpi + (long long)dd * 2 * W + wi;
          sh[rel * 4 + q] = ok ? w[0] : 0u;
          sh[rel * 4 + 2 + q] = ok ? w[W] : 0u;
        }
      }
      __syncwarp();
      if (lane == 0) {
        for (int st = 0; st < 32; ++st) {
          out[K - 1 - k] = make_int2(i, j);
          if (i == 0 && j == 0) {
            done = true;
            break;
          }
          const int rel = d0 - (i + j), q = (i >> 5) - wb, bit = i & 31;
          const int ch = (int)((sh[rel * 4 + q] >> bit) & 1u) | (int)(((sh[rel * 4 + 2 + q] >> bit) & 1u) << 1);
          if (ch == 0)
            --i, --j;
          else if (ch == 1)
            --i;
          else
            --j;
          ++k;
        }
      }
      __syncwarp();
      i = __shfl_sync(kFull, i, 0);
      j = __shfl_sync(kFull, j, 0);
      k = __shfl_sync(kFull, k, 0);
      done = __shfl_sync(kFull, (int)done, 0) != 0;
    }
    if (lane == 0) {
      *shLen = k + 1;
      pathLen[b] = k + 1;
    }
  }
  __syncthreads();
  const int len = *shLen, off = K - len;
  // Move [off, K) to [0, len) in ascending chunks: a chunk's writes end
  // below the next chunk's reads, so read, sync, write, sync is race-free.
  for (int base = 0; base < len; base += bd) {
    const int q = base + tid;
    int2 v = make_int2(-1, -1);
    if (q < len) v = out[off + q];
    __syncthreads();
    if (q < len) out[q] = v;
    __syncthreads();
  }
  for (int q = len + tid; q < K; q += bd) out[q] = make_int2(-1, -1);
}

}  // namespace dpxk

// ---------------------------------------------------------------------------
// Input checks and quantisation, shared by the three ops.

// dpx_check scans item b's [rows, cols] block of x (item stride, row
// stride in elements; rows, cols = dims[b*dimStride], dims[b*dimStride+1])
// for NaN, +Inf and (unless allowNegInf) -Inf. status[3b] gets ~k of the
// smallest bad flat index k = r*cols + c (0: none) and status[3b+1] the bit
// pattern of the largest finite |x|. Grid (any, B), any block size.
extern "C" __global__ void dpx_check(const __grid_constant__ DpxCheckParams p) {
  const float* __restrict__ x = p.x;
  const long long itemStride = p.itemStride, rowStride = p.rowStride;
  const long long* __restrict__ dims = p.dims;
  const long long dimStride = p.dimStride, allowNegInf = p.allowNegInf;
  unsigned long long* __restrict__ status = p.status;
  const int b = blockIdx.y;
  const long long rows = dims[b * dimStride], cols = dims[b * dimStride + 1];
  const long long n = rows * cols;
  const float* xb = x + b * itemStride;
  unsigned long long bad = 0;
  unsigned amax = 0;
  for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += (long long)gridDim.x * blockDim.x) {
    const long long r = k / cols, c = k - r * cols;
    const float v = xb[r * rowStride + c];
    const bool finite = fabsf(v) <= FLT_MAX;
    if (!finite && !(allowNegInf && v == -INFINITY)) {
      bad = ~(unsigned long long)k;
      break;
    }
    if (finite) amax = max(amax, __float_as_uint(fabsf(v)));
  }
  if (bad) atomicMax(status + 3 * b, bad);
  if (amax) atomicMax(status + 3 * b + 1, (unsigned long long)amax);
}

// dpx_quantize writes quant(x[k], scale) to out[k] for k < n and the
// largest value to *maxq (which the caller initialises low).
extern "C" __global__ void dpx_quantize(const __grid_constant__ DpxQuantizeParams p) {
  const float* __restrict__ x = p.x;
  const long long n = p.n;
  const double scale = p.scale;
  int* __restrict__ out = p.out;
  int* __restrict__ maxq = p.maxq;
  int mx = INT_MIN;
  for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += (long long)gridDim.x * blockDim.x) {
    const int q = dpxk::quant(x[k], scale);
    out[k] = q;
    mx = max(mx, q);
  }
  mx = dpxk::warpMax(mx);
  if ((threadIdx.x & 31) == 0) atomicMax(maxq, mx);
}

// dpx_ctc_align_{f32,i32}_p{1,2,4,6,8}: ctcAlign with MP = 1, 2, 4, 6, 8 state
// passes per thread (the launcher picks the smallest that covers S with
// blockDim <= 1024); p.frames is F, the frames per block of staged emissions
// and backpointers.
namespace dpxk {
template <class V, int MP>
__device__ __forceinline__ void ctcAlign(const DpxCtcParams& p) {
  ctcAlign<V, MP>(p.lp, p.T, p.C, p.meta, p.table, p.bp, p.blank, p.star, p.scale, (int)p.frames, p.alignment,
                  p.frameScores, p.score, p.status);
}
template <class V, int K>
__device__ __forceinline__ void ctcWarp(const DpxCtcParams& p) {
  ctcWarp<V, K>(p.lp, p.T, p.C, p.meta, p.table, p.bp, p.blank, p.star, p.scale, p.frames, p.alignment,
                p.frameScores, p.score, p.status);
}
template <class V>
__device__ __forceinline__ void viterbi(const DpxViterbiParams& p) {
  viterbi<V>(p.em, p.T, p.S, static_cast<const V*>(p.trans), static_cast<const V*>(p.priors), p.lens, p.maxq, p.bp,
             p.scale, p.path, p.score);
}
template <class V>
__device__ __forceinline__ void dtw(const DpxDtwParams& p) {
  dtw<V>(p.cost, p.N, p.M, p.dims, p.bp, p.scale, p.path, p.pathLen, p.total);
}
}  // namespace dpxk

// (Written out, not macro-generated: ptxas 11.8 crashes on the line info of
// kernels expanded from one macro line.)
extern "C" __global__ void __launch_bounds__(1024) dpx_ctc_align_f32_p1(const __grid_constant__ DpxCtcParams p) {
  dpxk::ctcAlign<float, 1>(p);
}
extern "C" __global__ void __launch_bounds__(1024) dpx_ctc_align_f32_p2(const __grid_constant__ DpxCtcParams p) {
  dpxk::ctcAlign<float, 2>(p);
}
extern "C" __global__ void __launch_bounds__(1024) dpx_ctc_align_f32_p4(const __grid_constant__ DpxCtcParams p) {
  dpxk::ctcAlign<float, 4>(p);
}
extern "C" __global__ void __launch_bounds__(1024) dpx_ctc_align_f32_p6(const __grid_constant__ DpxCtcParams p) {
  dpxk::ctcAlign<float, 6>(p);
}
extern "C" __global__ void __launch_bounds__(1024) dpx_ctc_align_f32_p8(const __grid_constant__ DpxCtcParams p) {
  dpxk::ctcAlign<float, 8>(p);
}
extern "C" __global__ void __launch_bounds__(1024) dpx_ctc_align_i32_p1(const __grid_constant__ DpxCtcParams p) {
  dpxk::ctcAlign<int, 1>(p);
}
extern "C" __global__ void __launch_bounds__(1024) dpx_ctc_align_i32_p2(const __grid_constant__ DpxCtcParams p) {
  dpxk::ctcAlign<int, 2>(p);
}
extern "C" __global__ void __launch_bounds__(1024) dpx_ctc_align_i32_p4(const __grid_constant__ DpxCtcParams p) {
  dpxk::ctcAlign<int, 4>(p);
}
extern "C" __global__ void __launch_bounds__(1024) dpx_ctc_align_i32_p6(const __grid_constant__ DpxCtcParams p) {
  dpxk::ctcAlign<int, 6>(p);
}
extern "C" __global__ void __launch_bounds__(1024) dpx_ctc_align_i32_p8(const __grid_constant__ DpxCtcParams p) {
  dpxk::ctcAlign<int, 8>(p);
}

// dpx_ctc_warp_{f32,i32}_k{2,4,6,8,12,16,20,24,32}: ctcWarp with K states per
// thread; any block of whole warps with K*blockDim >= S (the launch bound:
// 1024 threads for K <= 8, 512 for K <= 16, 128 above, so each keeps its
// states in registers without spilling); p.frames is F.
extern "C" __global__ void __launch_bounds__(1024) dpx_ctc_warp_f32_k2(const __grid_constant__ DpxCtcParams p) {
  dpxk::ctcWarp<float, 2>(p);
}
extern "C" __global__ void __launch_bounds__(1024) dpx_ctc_warp_f32_k4(const __grid_constant__ DpxCtcParams p) {
  dpxk::ctcWarp<float, 4>(p);
}
extern "C" __global__ void __launch_bounds__(1024) dpx_ctc_warp_f32_k6(const __grid_constant__ DpxCtcParams p) {
  dpxk::ctcWarp<float, 6>(p);
}
extern "C" __global__ void __launch_bounds__(1024) dpx_ctc_warp_f32_k8(const __grid_constant__ DpxCtcParams p) {
  dpxk::ctcWarp<float, 8>(p);
}
extern "C" __global__ void __launch_bounds__(512) dpx_ctc_warp_f32_k12(const __grid_constant__ DpxCtcParams p) {
  dpxk::ctcWarp<float, 12>(p);
}
extern "C" __global__ void __launch_bounds__(512) dpx_ctc_warp_f32_k16(const __grid_constant__ DpxCtcParams p) {
  dpxk::ctcWarp<float, 16>(p);
}
extern "C" __global__ void __launch_bounds__(128) dpx_ctc_warp_f32_k20(const __grid_constant__ DpxCtcParams p) {
  dpxk::ctcWarp<float, 20>(p);
}
extern "C" __global__ void __launch_bounds__(128) dpx_ctc_warp_f32_k24(const __grid_constant__ DpxCtcParams p) {
  dpxk::ctcWarp<float, 24>(p);
}
extern "C" __global__ void __launch_bounds__(128) dpx_ctc_warp_f32_k32(const __grid_constant__ DpxCtcParams p) {
  dpxk::ctcWarp<float, 32>(p);
}
extern "C" __global__ void __launch_bounds__(1024) dpx_ctc_warp_i32_k2(const __grid_constant__ DpxCtcParams p) {
  dpxk::ctcWarp<int, 2>(p);
}
extern "C" __global__ void __launch_bounds__(1024) dpx_ctc_warp_i32_k4(const __grid_constant__ DpxCtcParams p) {
  dpxk::ctcWarp<int, 4>(p);
}
extern "C" __global__ void __launch_bounds__(1024) dpx_ctc_warp_i32_k6(const __grid_constant__ DpxCtcParams p) {
  dpxk::ctcWarp<int, 6>(p);
}
extern "C" __global__ void __launch_bounds__(1024) dpx_ctc_warp_i32_k8(const __grid_constant__ DpxCtcParams p) {
  dpxk::ctcWarp<int, 8>(p);
}
extern "C" __global__ void __launch_bounds__(512) dpx_ctc_warp_i32_k12(const __grid_constant__ DpxCtcParams p) {
  dpxk::ctcWarp<int, 12>(p);
}
extern "C" __global__ void __launch_bounds__(512) dpx_ctc_warp_i32_k16(const __grid_constant__ DpxCtcParams p) {
  dpxk::ctcWarp<int, 16>(p);
}
extern "C" __global__ void __launch_bounds__(128) dpx_ctc_warp_i32_k20(const __grid_constant__ DpxCtcParams p) {
  dpxk::ctcWarp<int, 20>(p);
}
extern "C" __global__ void __launch_bounds__(128) dpx_ctc_warp_i32_k24(const __grid_constant__ DpxCtcParams p) {
  dpxk::ctcWarp<int, 24>(p);
}
extern "C" __global__ void __launch_bounds__(128) dpx_ctc_warp_i32_k32(const __grid_constant__ DpxCtcParams p) {
  dpxk::ctcWarp<int, 32>(p);
}

extern "C" __global__ void __launch_bounds__(1024) dpx_viterbi_f32(const __grid_constant__ DpxViterbiParams p) {
  dpxk::viterbi<float>(p);
}
extern "C" __global__ void __launch_bounds__(1024) dpx_viterbi_i32(const __grid_constant__ DpxViterbiParams p) {
  dpxk::viterbi<int>(p);
}

extern "C" __global__ void __launch_bounds__(1024) dpx_dtw_f32(const __grid_constant__ DpxDtwParams p) {
  dpxk::dtw<float>(p);
}
extern "C" __global__ void __launch_bounds__(1024) dpx_dtw_i32(const __grid_constant__ DpxDtwParams p) {
  dpxk::dtw<int>(p);
}
