// pipeline.cu: the small device-side steps of the zero-copy ASR pipeline
// (issue 10) that the host did before: the encoder's input normalisation and
// output log-softmax (runtime/onnx, encoder_cuda.go) and CTC greedy decoding
// (the `ctc_greedy` op's CUDA implementation, plugins/dpx/greedy_cuda.go).
// They keep features and emissions on the device between fbank, the ONNX
// Runtime encoder and ctc_align.
//
// The CPU code is the reference: runtime/onnx's normalizeUtterance and
// logSoftmaxRows, plugins/dpx's Greedy. Same tie rule (argmax: lowest index),
// same padding (-1 tokens and spans past an item's length).
//
// Each kernel takes one parameter struct of params.h (Pipeline*Params),
// read in place from the parameter space (__grid_constant__).
//
// Budgets (nvcc 13.0 ptxas, sm_90a / sm_87; no spills, no stack): log_softmax
// 30 registers, no shared memory; normalize_pcm 34 registers, 256 B static
// shared; ctc_argmax 31, no shared memory; ctc_collapse 29 (32 on sm_87),
// 128 B static shared. All are memory-bound streaming passes (one read of
// their input, one write of their output).
#include <cfloat>
#include <climits>

#include "params.h"

namespace pipek {

constexpr unsigned kFull = 0xffffffffu;

__device__ __forceinline__ float warpMaxF(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFull, v, o));
  return v;
}

__device__ __forceinline__ float warpSumF(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  return v;
}

__device__ __forceinline__ double warpSumD(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  return v;
}

// blockSumD returns the sum of v over the block to every thread; scratch
// holds 32 doubles. blockDim.x is a multiple of 32.
__device__ double blockSumD(double v, double* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warpSumD(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < nw ? scratch[lane] : 0.0;
  return warpSumD(v);
}

// blockScan returns the inclusive prefix sum of v over the block and the
// block total in *total; scratch holds 32 ints. blockDim.x is a multiple of 32.
__device__ int blockScan(int v, int* scratch, int* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  for (int o = 1; o < 32; o <<= 1) {
    const int u = __shfl_up_sync(kFull, v, o);
    if (lane >= o) v += u;
  }
  __syncthreads();
  if (lane == 31) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    int w = lane < nw ? scratch[lane] : 0;
    for (int o = 1; o < 32; o <<= 1) {
      const int u = __shfl_up_sync(kFull, w, o);
      if (lane >= o) w += u;
    }
    if (lane < nw) scratch[lane] = w;
  }
  __syncthreads();
  *total = scratch[nw - 1];
  return v + (warp > 0 ? scratch[warp - 1] : 0);
}

}  // namespace pipek

// pipeline_log_softmax replaces each of `rows` rows of V floats by its
// log-softmax: y = x - (m + log(sum_c exp(x_c - m))), m the row maximum.
// x and y may alias (in place). One warp per row, lanes stride the V
// columns; the max and the sum are warp reductions in float32 (the host
// reference sums in float64: the results differ by a few ulp of the lse).
// A row holding NaN gives NaN, like the host's. Grid: ceil(rows / (block/32)),
// block: a multiple of 32 (256). No shared memory; a few registers a lane.
extern "C" __global__ void pipeline_log_softmax(const __grid_constant__ PipelineLogSoftmaxParams p) {
  const float* __restrict__ x = p.x;
  float* y = p.y;
  const long long rows = p.rows, V = p.V;
  const long long row = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;
  const float* xr = x + row * V;
  float m = -INFINITY;
  bool nan = false;
  for (long long c = lane; c < V; c += 32) {
    const float v = xr[c];
    nan |= v != v;
    m = fmaxf(m, v);
  }
  m = pipek::warpMaxF(m);
  nan = __any_sync(pipek::kFull, nan);
  float s = 0.f;
  if (m > -INFINITY && m < INFINITY)
    for (long long c = lane; c < V; c += 32) s += expf(xr[c] - m);
  s = pipek::warpSumF(s);
  // m = +-Inf: every value becomes NaN (+Inf - Inf) or -Inf - -Inf, as on the host.
  const float lse = (m > -INFINITY && m < INFINITY) ? m + logf(s) : m;
  float* yr = y + row * V;
  for (long long c = lane; c < V; c += 32) yr[c] = nan ? __int_as_float(0x7fc00000) : xr[c] - lse;
}

// pipeline_normalize_pcm writes per-utterance normalised waveform: item b's
// valid samples x[b*N .. b*N+len_b) become (x - mean) / sqrt(var + 1e-7)
// (population variance) and the rest of its N samples 0, like HF's
// Wav2Vec2FeatureExtractor and runtime/onnx's normalizeUtterance: the sums
// run in float64 shifted by the item's first sample, the output is computed
// in float64 and rounded once. x and y must not alias. lengths: i64 [B] in
// 1..N (checked by the host). Grid: B blocks; block: a multiple of 32
// (1024); shared memory: 32 doubles (static).
extern "C" __global__ void pipeline_normalize_pcm(const __grid_constant__ PipelineNormalizePCMParams p) {
  const float* __restrict__ x = p.x;
  float* __restrict__ y = p.y;
  const long long* __restrict__ lengths = p.lengths;
  const long long N = p.N;
  __shared__ double scratch[32];
  const long long b = blockIdx.x, len = lengths[b];
  const float* xb = x + b * N;
  float* yb = y + b * N;
  const double k = xb[0];
  double s = 0, q = 0;
  for (long long i = threadIdx.x; i < len; i += blockDim.x) {
    const double a = (double)xb[i] - k;
    s += a;
    q += a * a;
  }
  s = pipek::blockSumD(s, scratch);
  q = pipek::blockSumD(q, scratch);
  const double dm = s / (double)len;
  const double var = fmax(0.0, q / (double)len - dm * dm);
  const double mean = k + dm, inv = 1.0 / sqrt(var + 1e-7);
  for (long long i = threadIdx.x; i < N; i += blockDim.x) yb[i] = i < len ? (float)(((double)xb[i] - mean) * inv) : 0.f;
}

// pipeline_ctc_argmax labels every frame with its best class: for item b
// (of B) and frame t < lengths[b], labels[b*T+t] = argmax_c lp[(b*T+t)*C+c]
// (ties to the lowest c), and -1 for t >= lengths[b]. A NaN or +Inf value
// (-Inf is allowed) makes status[b] the largest ~k over the bad flat
// indexes k = t*C + c of the item, so ~status[b] is the first one (0: none;
// the caller zeroes status). One warp per frame; grid (ceil(T / (block/32)), B),
// block a multiple of 32 (256). No shared memory.
extern "C" __global__ void pipeline_ctc_argmax(const __grid_constant__ PipelineCtcArgmaxParams p) {
  const float* __restrict__ lp = p.lp;
  const long long* __restrict__ lengths = p.lengths;
  const long long T = p.T, C = p.C;
  int* __restrict__ labels = p.labels;
  unsigned long long* __restrict__ status = p.status;
  const long long b = blockIdx.y;
  const long long t = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (t >= T) return;
  if (t >= lengths[b]) {
    if (lane == 0) labels[b * T + t] = -1;
    return;
  }
  const float* row = lp + (b * T + t) * C;
  float best = -INFINITY;
  int arg = INT_MAX;
  unsigned long long bad = 0;
  for (long long c = lane; c < C; c += 32) {
    const float v = row[c];
    if (!(v <= FLT_MAX) && v != -INFINITY) {  // NaN or +Inf
      if (!bad) bad = ~(unsigned long long)(t * C + c);
    } else if (arg == INT_MAX || v > best) {
      best = v;
      arg = (int)c;
    }
  }
  // Lanes hold their columns' best in increasing column order, so a strict
  // > keeps each lane's lowest index; the reduction keeps the lowest index
  // among equal values.
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(pipek::kFull, best, o);
    const int oa = __shfl_xor_sync(pipek::kFull, arg, o);
    if (ov > best || (ov == best && oa < arg)) best = ov, arg = oa;
  }
  for (int o = 16; o > 0; o >>= 1) {
    const unsigned long long ob = __shfl_xor_sync(pipek::kFull, bad, o);
    bad = ob > bad ? ob : bad;
  }
  if (lane == 0) {
    labels[b * T + t] = arg;
    if (bad) atomicMax(status + b, bad);
  }
}

// pipeline_ctc_collapse turns item b's frame labels (from
// pipeline_ctc_argmax, -1 past its length) into CTC tokens: runs of one
// non-blank label become one token, blanks are dropped. tokens[b*N+i] gets
// the i-th token id, spans[(b*N+i)*2 .. +1] its frames [start, end), and
// tokenLengths[b] the count; entries past the count are -1. N >= T (a path
// has at most T tokens). One block per item (grid B, block a multiple of 32,
// 1024), looping over T in tiles of blockDim with a block prefix scan of the
// run starts; static shared memory: 32 ints.
extern "C" __global__ void pipeline_ctc_collapse(const __grid_constant__ PipelineCtcCollapseParams p) {
  const int* __restrict__ labels = p.labels;
  const long long T = p.T, N = p.N, blank = p.blank;
  long long* __restrict__ tokens = p.tokens;
  int* __restrict__ spans = p.spans;
  long long* __restrict__ tokenLengths = p.tokenLengths;
  __shared__ int scratch[32];
  const long long b = blockIdx.x;
  const int* lb = labels + b * T;
  long long* tk = tokens + b * N;
  int* sp = spans + b * N * 2;
  int base = 0;  // tokens before this tile
  for (long long t0 = 0; t0 < T; t0 += blockDim.x) {
    const long long t = t0 + threadIdx.x;
    const int k = t < T ? lb[t] : -1;
    const int prev = (t > 0 && t < T) ? lb[t - 1] : -1;
    const int next = t + 1 < T ? lb[t + 1] : -1;
    const bool tok = k >= 0 && k != blank;
    const bool start = tok && k != prev;
    const bool end = tok && k != next;
    int total;
    const int incl = pipek::blockScan(start ? 1 : 0, scratch, &total);
    const int idx = base + incl - 1;  // the token whose run holds frame t
    if (start) {
      tk[idx] = k;
      sp[2 * idx] = (int)t;
    }
    if (end) sp[2 * idx + 1] = (int)(t + 1);
    base += total;
  }
  for (long long i = base + threadIdx.x; i < N; i += blockDim.x) {
    tk[i] = -1;
    sp[2 * i] = -1;
    sp[2 * i + 1] = -1;
  }
  if (threadIdx.x == 0) tokenLengths[b] = base;
}
