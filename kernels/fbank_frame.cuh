// fbank_frame.cuh: the per-frame stages of the fbank kernels (kernels/fbank.cu),
// written as lane functions so that the same code runs on the GPU (one warp
// per frame, __syncwarp between phases) and on the host, where
// kernels/hosttest/fbank_frame_test.cpp replays the 32 lanes of each phase in
// order and checks the result against a float64 DFT.
//
// A frame of n_fft = N real samples is transformed as a packed complex signal
// z[m] = x[2m] + i·x[2m+1] of H = N/2 points (a self-sorting Stockham FFT in
// shared memory, one radix pass at a time), then split into the H+1
// non-redundant bins of the real spectrum, whose |X[k]|² is stored in place.
//
// Numerics: float32 throughout with twiddles rounded once from float64
// (table twN[k] = e^{-2πik/N}); the FFT's error is about 1e-7 relative to the
// frame's energy, so bins 70 dB under the frame's peak keep ~3 digits, which
// is what the log-mel floors (Whisper: max - 8 in log10; Parakeet: ln(x + 2^-24))
// need.
#pragma once

#ifdef __CUDACC__
#define EDGE_HD __host__ __device__ __forceinline__
#else
#include <cmath>
#define EDGE_HD inline
struct float2 {
  float x, y;
};
inline float2 make_float2(float x, float y) { return float2{x, y}; }
#endif

namespace fbank {

constexpr int kWarp = 32;

// The FFT buffer of H points is stored with one float2 of padding after
// every 8 (Buffer<H>::kSize entries): the Stockham passes' strided stores
// (stride 8, 9·pp after padding) then fall in distinct banks.
EDGE_HD int pad(int i) { return i + (i >> 3); }
template <int H>
struct Buffer {
  static constexpr int kSize = H + H / 8;
};

EDGE_HD float2 cadd(float2 a, float2 b) { return make_float2(a.x + b.x, a.y + b.y); }
EDGE_HD float2 csub(float2 a, float2 b) { return make_float2(a.x - b.x, a.y - b.y); }
EDGE_HD float2 cmul(float2 a, float2 b) {
  return make_float2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}
// -i·a
EDGE_HD float2 cmul_negi(float2 a) { return make_float2(a.y, -a.x); }

// Small forward DFTs in registers: y_k = Σ_r a_r e^{-2πi rk/P}, in place.
EDGE_HD void dft4(float2* a) {
  float2 t0 = cadd(a[0], a[2]), t1 = csub(a[0], a[2]);
  float2 t2 = cadd(a[1], a[3]), t3 = cmul_negi(csub(a[1], a[3]));
  a[0] = cadd(t0, t2);
  a[2] = csub(t0, t2);
  a[1] = cadd(t1, t3);
  a[3] = csub(t1, t3);
}

EDGE_HD void dft5(float2* a) {
  const float c1 = 0.309016994374947424f;   // cos(2π/5)
  const float c2 = -0.809016994374947424f;  // cos(4π/5)
  const float s1 = 0.951056516295153572f;   // sin(2π/5)
  const float s2 = 0.587785252292473129f;   // sin(4π/5)
  float2 a0 = a[0];
  float2 p1 = cadd(a[1], a[4]), m1 = csub(a[1], a[4]);
  float2 p2 = cadd(a[2], a[3]), m2 = csub(a[2], a[3]);
  float2 r1 = make_float2(a0.x + c1 * p1.x + c2 * p2.x, a0.y + c1 * p1.y + c2 * p2.y);
  float2 r2 = make_float2(a0.x + c2 * p1.x + c1 * p2.x, a0.y + c2 * p1.y + c1 * p2.y);
  // i1 = s1·m1 + s2·m2, i2 = s2·m1 - s1·m2; y1,4 = r1 ∓ i·i1, y2,3 = r2 ∓ i·i2
  float2 i1 = make_float2(s1 * m1.x + s2 * m2.x, s1 * m1.y + s2 * m2.y);
  float2 i2 = make_float2(s2 * m1.x - s1 * m2.x, s2 * m1.y - s1 * m2.y);
  a[0] = make_float2(a0.x + p1.x + p2.x, a0.y + p1.y + p2.y);
  a[1] = make_float2(r1.x + i1.y, r1.y - i1.x);
  a[4] = make_float2(r1.x - i1.y, r1.y + i1.x);
  a[2] = make_float2(r2.x + i2.y, r2.y - i2.x);
  a[3] = make_float2(r2.x - i2.y, r2.y + i2.x);
}

EDGE_HD void dft8(float2* a) {
  const float h = 0.707106781186547524f;  // 1/√2
  float2 e[4], o[4];
  for (int r = 0; r < 4; r++) {
    e[r] = cadd(a[r], a[r + 4]);
    o[r] = csub(a[r], a[r + 4]);
  }
  // o[r] *= e^{-2πi r/8}
  o[1] = make_float2(h * (o[1].x + o[1].y), h * (o[1].y - o[1].x));
  o[2] = cmul_negi(o[2]);
  o[3] = make_float2(h * (o[3].y - o[3].x), -h * (o[3].x + o[3].y));
  dft4(e);
  dft4(o);
  for (int r = 0; r < 4; r++) {
    a[2 * r] = e[r];
    a[2 * r + 1] = o[r];
  }
}

template <int P>
EDGE_HD void dft(float2* a);
template <>
EDGE_HD void dft<4>(float2* a) { dft4(a); }
template <>
EDGE_HD void dft<5>(float2* a) { dft5(a); }
template <>
EDGE_HD void dft<8>(float2* a) { dft8(a); }

// Source describes where a frame's samples come from.
struct Source {
  const float* pcm;  // the item's row
  long long n;       // samples the STFT sees (after pad_to_seconds)
  long long real;    // samples taken from the row; [real, n) are zeros
  long long start;   // row index of frame sample 0 (t·hop - pad)
  int reflect;       // 1: mirror indices outside [0, n); 0: zeros there
  float preemph;     // y[i] = x[i] - a·x[i-1], y[0] = x[0]
};

// sample returns the (pre-emphasised) signal at row index i, resolving
// indices outside [0, n) through the pad mode, as plugins/fbank's
// Frontend.sample does.
EDGE_HD float sample(const Source& s, long long i) {
  if (i < 0 || i >= s.n) {
    if (!s.reflect) return 0.f;
    i = i < 0 ? -i : 2 * (s.n - 1) - i;
  }
  if (i >= s.real) return 0.f;
  float v = s.pcm[i];
  if (s.preemph != 0.f && i > 0) v = fmaf(-s.preemph, s.pcm[i - 1], v);
  return v;
}

// Pass is one Stockham radix-P pass over H points at stride S (S = product of
// the radices before it). Butterfly b = pp·S + q (pp < m = H/(P·S), q < S)
// reads a_r = z[q + S·(pp + r·m)] and writes
//   z[q + S·(P·pp + k)] = (Σ_r a_r e^{-2πi rk/P}) · e^{-2πi k·pp·S/H}.
// Lane l owns butterflies l, l+32, ...: load() reads them all into registers,
// and after a warp barrier store() writes them, so the pass runs in place.
template <int H, int P, int S>
struct Pass {
  static constexpr int kM = H / (P * S);
  static constexpr int kBf = H / P;
  static constexpr int kRounds = (kBf + kWarp - 1) / kWarp;
  static_assert(kM * P * S == H, "radix plan must factor H");
  float2 v[kRounds][P];

  EDGE_HD void load(const float2* z, int lane) {
#pragma unroll
    for (int r = 0; r < kRounds; r++) {
      int b = lane + r * kWarp;
      if (b < kBf) {
        int pp = b / S, q = b % S;
#pragma unroll
        for (int j = 0; j < P; j++) v[r][j] = z[pad(q + S * (pp + j * kM))];
      }
    }
  }

  // The first pass (S = 1, one round) reads its inputs from the signal
  // instead of the buffer: butterfly b takes the packed points m = b + j·kM,
  // z[m] = w[2m]·x(start+2m) + i·w[2m+1]·x(start+2m+1), j < P. load_window
  // fetches the lane's window pairs wr[j] once; load_signal then forms the
  // points of one frame (interior frames without per-sample branches; frames
  // that touch the padding or the clip's end through sample()).
  EDGE_HD static void load_window(const float* window, float2* wr, int lane) {
    static_assert(S == 1 && kRounds == 1, "only the first pass reads the signal");
    if (lane >= kBf) return;
#pragma unroll
    for (int j = 0; j < P; j++) {
      int m = lane + j * kM;
      wr[j] = make_float2(window[2 * m], window[2 * m + 1]);
    }
  }

  EDGE_HD void load_signal(const Source& s, const float2* wr, int lane) {
    static_assert(S == 1 && kRounds == 1, "only the first pass reads the signal");
    if (lane >= kBf) return;
    if (s.start >= 1 && s.start + 2 * H <= s.real) {
      const float* p = s.pcm + s.start;
#pragma unroll
      for (int j = 0; j < P; j++) {
        int m = lane + j * kM;
        float a0 = p[2 * m], a1 = p[2 * m + 1];
        float x0 = s.preemph != 0.f ? fmaf(-s.preemph, p[2 * m - 1], a0) : a0;
        float x1 = s.preemph != 0.f ? fmaf(-s.preemph, a0, a1) : a1;
        v[0][j] = make_float2(wr[j].x * x0, wr[j].y * x1);
      }
      return;
    }
#pragma unroll
    for (int j = 0; j < P; j++) {
      int m = lane + j * kM;
      float x0 = wr[j].x != 0.f ? wr[j].x * sample(s, s.start + 2 * m) : 0.f;
      float x1 = wr[j].y != 0.f ? wr[j].y * sample(s, s.start + 2 * m + 1) : 0.f;
      v[0][j] = make_float2(x0, x1);
    }
  }

  // twN[j] = e^{-2πij/N} with N = 2H, so w = e^{-2πi·pp·S/H} = twN[2·pp·S]
  // and the k-th output's twiddle w^k is built by k-1 complex products: one
  // table read per butterfly instead of P-1 scattered ones (the reads of
  // different lanes fall in different cache lines), for a relative error
  // of a few 1e-7 in w^k.
  EDGE_HD void store(float2* z, const float2* twN, int lane) {
#pragma unroll
    for (int r = 0; r < kRounds; r++) {
      int b = lane + r * kWarp;
      if (b < kBf) {
        int pp = b / S, q = b % S;
        dft<P>(v[r]);
        z[pad(q + S * (P * pp))] = v[r][0];
        const float2 w1 = twN[2 * pp * S];
        float2 w = w1;
#pragma unroll
        for (int k = 1; k < P; k++) {
          z[pad(q + S * (P * pp + k))] = cmul(v[r][k], w);
          w = cmul(w, w1);
        }
      }
    }
  }
};

// FFTPlan<H> is the H-point transform: First, the radix-8 pass that reads
// the signal, then run_rest, the passes over the buffer. n_fft 400 -> H = 200
// = 8·5·5; n_fft 512 -> H = 256 = 8·8·4.
template <int H>
struct FFTPlan;

// Sync is the barrier between phases: __syncwarp on the GPU.
#ifdef __CUDACC__
struct WarpSync {
  __device__ __forceinline__ void operator()() const { __syncwarp(); }
};
#endif

template <>
struct FFTPlan<200> {
  using First = Pass<200, 8, 1>;  // reads the signal (load_signal)
  template <class Lanes>
  EDGE_HD static void run_rest(float2* z, const float2* twN, Lanes lanes) {
    lanes.template pass<Pass<200, 5, 8>>(z, twN);
    lanes.template pass<Pass<200, 5, 40>>(z, twN);
  }
};

template <>
struct FFTPlan<256> {
  using First = Pass<256, 8, 1>;  // reads the signal (load_signal)
  template <class Lanes>
  EDGE_HD static void run_rest(float2* z, const float2* twN, Lanes lanes) {
    lanes.template pass<Pass<256, 8, 8>>(z, twN);
    lanes.template pass<Pass<256, 4, 64>>(z, twN);
  }
};

// Power splits the packed spectrum Z (H points) into the real spectrum
// X[k] = (Z[k] + conj Z[H-k])/2 - i/2·e^{-2πik/N}·(Z[k] - conj Z[H-k]),
// k = 0..H (Z[H] = Z[0]), and stores |X[k]|² over z viewed as float[H+1]
// (unpadded).
template <int H>
struct Power {
  static constexpr int kRounds = (H + 1 + kWarp - 1) / kWarp;
  float p[kRounds];

  EDGE_HD void load(const float2* z, const float2* twN, int lane) {
#pragma unroll
    for (int r = 0; r < kRounds; r++) {
      int k = lane + r * kWarp;
      if (k <= H) {
        float2 a = z[pad(k == H ? 0 : k)], b = z[pad(k == 0 ? 0 : H - k)];
        // s = (a + conj b)/2, d = (a - conj b)/2
        float2 s = make_float2(0.5f * (a.x + b.x), 0.5f * (a.y - b.y));
        float2 d = make_float2(0.5f * (a.x - b.x), 0.5f * (a.y + b.y));
        float2 w = twN[k];  // k <= H < N
        float2 wd = cmul(w, d);
        // X = s - i·wd
        float xr = s.x + wd.y, xi = s.y - wd.x;
        p[r] = xr * xr + xi * xi;
      }
    }
  }

  EDGE_HD void store(float* power, int lane) const {
#pragma unroll
    for (int r = 0; r < kRounds; r++) {
      int k = lane + r * kWarp;
      if (k <= H) power[k] = p[r];
    }
  }
};

// Band is one mel filter's non-zero span: weights w[off .. off+len) for the
// bins start .. start+len.
struct Band {
  int start, len, off;
};

// mel_log writes, for the filters m ≡ lane mod 32,
//   out[m] = log2(max(Σ_j w[off+j]·power[start+j] + guard, floor)) · scale
// (scale = ln 2 for ln, log10 2 for log10) and returns the lane's maximum.
EDGE_HD float log2_approx(float x) {
#ifdef __CUDACC__
  return __log2f(x);  // MUFU.LG2: |error| < 2^-21 on normal inputs
#else
  return std::log2(x);
#endif
}

EDGE_HD float mel_log(const float* power, const Band* bands, const float* w, int n_mels, float guard,
                      float floor_, float scale, float* out, int lane) {
  float mx = -INFINITY;
  for (int m = lane; m < n_mels; m += kWarp) {
    Band b = bands[m];
    float acc = 0.f;
    for (int j = 0; j < b.len; j++) acc = fmaf(w[b.off + j], power[b.start + j], acc);
    float v = fmaxf(acc + guard, floor_);
    float y = log2_approx(v) * scale;
    out[m] = y;
    mx = fmaxf(mx, y);
  }
  return mx;
}

}  // namespace fbank
