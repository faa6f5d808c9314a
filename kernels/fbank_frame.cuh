// fbank_frame.cuh: the per-frame stages of the fbank kernels (kernels/fbank.cu),
// written as lane functions so that the same code runs on the GPU (__syncwarp
// between phases) and on the host, where kernels/hosttest/fbank_frame_test.cpp
// replays the 32 lanes of each phase in order and checks the result against a
// float64 DFT.
//
// Mapping: a warp transforms 4 frames at once, 8 lanes a frame (lane l: frame
// group g = l/8, n1 = l%8). A frame of n_fft = N real samples is a packed
// complex signal z[n] = x[2n] + i·x[2n+1] of H = N/2 = 8·C points (C = 25
// for N = 400, 32 for N = 512). With n = n1 + 8·n2 and k = k2 + C·k1,
//   Z[k2 + C·k1] = Σ_n1 W8^(n1·k1) · W_H^(n1·k2) · Σ_n2 z[n1 + 8·n2]·W_C^(n2·k2):
//   Column: lane n1 loads its C points straight from the signal into
//           registers, does the C-point DFT in registers (5x5 or 4x8
//           Cooley-Tukey, constant twiddles), multiplies by W_H^(n1·k2)
//           (table colTw[k2·8 + n1], see colTw in plugins/fbank) and
//           stores the column to the frame's buffer T[n1][k2] (row pitch R).
//   Pairs:  after a warp barrier, lane n1 reads whole columns k2 (8 values),
//           does the 8-point DFTs in registers and, because it holds the
//           columns k2 and C-k2 together, splits the packed spectrum into the
//           real one locally: X[k] and X[H-k] from Z[k] and Z[H-k], and keeps
//           |X[k]|², |X[H-k]|² in registers;
//           after a second barrier it stores them over the warp's buffers as
//           the power rows, interleaved by frame (P[4·k + g], floats).
//   mel4:   lane m (filters m, m+32, ...) sums its band over the 4 frames'
//           power rows: one weight read and one 16-byte read of bin k of the
//           4 frames per band position.
// One shared-memory round trip of the spectrum (the column transpose) and one
// of the power row, instead of one per radix pass.
//
// Numerics: float32 throughout with twiddles rounded once from float64
// (table twN[k] = e^{-2πik/N}; the constant tables below); the FFT's error is
// about 1e-7 relative to the frame's energy, so bins 70 dB under the frame's
// peak keep ~3 digits, which is what the log-mel floors (Whisper: max - 8 in
// log10; Parakeet: ln(x + 2^-24)) need.
#pragma once

#ifdef __CUDACC__
#define EDGE_HD __host__ __device__ __forceinline__
#else
#include <cmath>
#define EDGE_HD inline
struct float2 {
  float x, y;
};
struct float4 {
  float x, y, z, w;
};
inline float2 make_float2(float x, float y) { return float2{x, y}; }
#endif

// FBANK_ABLATE: fbank.cu's timing probes (0: none; bit 1 leaves out mel4's
// band sums past each band's first bin; the other bits: fbank.cu).
#ifndef FBANK_ABLATE
#define FBANK_ABLATE 0
#endif

namespace fbank {

constexpr int kWarp = 32;
constexpr int kLanes = 8;     // lanes per frame
constexpr int kGroups = 4;    // frames per warp (kWarp / kLanes)

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

// twc<C>(j) = e^{-2πij/C} (j < C), float32 values of cos and -sin rounded
// once from float64 (kernels/hosttest checks them against std::cos/sin).
// Called with compile-time j only (unrolled loops), so they become immediates.
template <int C>
EDGE_HD float2 twc(int j);
template <>
EDGE_HD float2 twc<25>(int j) {
  constexpr float t[50] = {
      1.000000000e+00f, 0.000000000e+00f, 9.685831611e-01f, -2.486898872e-01f, 8.763066800e-01f, -4.817536741e-01f, 7.289686274e-01f, -6.845471059e-01f,
      5.358267950e-01f, -8.443279255e-01f, 3.090169944e-01f, -9.510565163e-01f, 6.279051953e-02f, -9.980267284e-01f, -1.873813146e-01f, -9.822872507e-01f,
      -4.257792916e-01f, -9.048270525e-01f, -6.374239897e-01f, -7.705132428e-01f, -8.090169944e-01f, -5.877852523e-01f, -9.297764859e-01f, -3.681245527e-01f,
      -9.921147013e-01f, -1.253332336e-01f, -9.921147013e-01f, 1.253332336e-01f, -9.297764859e-01f, 3.681245527e-01f, -8.090169944e-01f, 5.877852523e-01f,
      -6.374239897e-01f, 7.705132428e-01f, -4.257792916e-01f, 9.048270525e-01f, -1.873813146e-01f, 9.822872507e-01f, 6.279051953e-02f, 9.980267284e-01f,
      3.090169944e-01f, 9.510565163e-01f, 5.358267950e-01f, 8.443279255e-01f, 7.289686274e-01f, 6.845471059e-01f, 8.763066800e-01f, 4.817536741e-01f,
      9.685831611e-01f, 2.486898872e-01f,
  };
  return make_float2(t[2 * j], t[2 * j + 1]);
}
template <>
EDGE_HD float2 twc<32>(int j) {
  constexpr float t[64] = {
      1.000000000e+00f, 0.000000000e+00f, 9.807852804e-01f, -1.950903220e-01f, 9.238795325e-01f, -3.826834324e-01f, 8.314696123e-01f, -5.555702330e-01f,
      7.071067812e-01f, -7.071067812e-01f, 5.555702330e-01f, -8.314696123e-01f, 3.826834324e-01f, -9.238795325e-01f, 1.950903220e-01f, -9.807852804e-01f,
      0.000000000e+00f, -1.000000000e+00f, -1.950903220e-01f, -9.807852804e-01f, -3.826834324e-01f, -9.238795325e-01f, -5.555702330e-01f, -8.314696123e-01f,
      -7.071067812e-01f, -7.071067812e-01f, -8.314696123e-01f, -5.555702330e-01f, -9.238795325e-01f, -3.826834324e-01f, -9.807852804e-01f, -1.950903220e-01f,
      -1.000000000e+00f, 0.000000000e+00f, -9.807852804e-01f, 1.950903220e-01f, -9.238795325e-01f, 3.826834324e-01f, -8.314696123e-01f, 5.555702330e-01f,
      -7.071067812e-01f, 7.071067812e-01f, -5.555702330e-01f, 8.314696123e-01f, -3.826834324e-01f, 9.238795325e-01f, -1.950903220e-01f, 9.807852804e-01f,
      0.000000000e+00f, 1.000000000e+00f, 1.950903220e-01f, 9.807852804e-01f, 3.826834324e-01f, 9.238795325e-01f, 5.555702330e-01f, 8.314696123e-01f,
      7.071067812e-01f, 7.071067812e-01f, 8.314696123e-01f, 5.555702330e-01f, 9.238795325e-01f, 3.826834324e-01f, 9.807852804e-01f, 1.950903220e-01f,
  };
  return make_float2(t[2 * j], t[2 * j + 1]);
}

// dft_ct is the C = P1·P2 point DFT of a[0..C) in registers, in place, natural
// order out: n = na + P1·nb, k = kb + P2·ka; P1 DFTs of P2 points, twiddles
// W_C^(na·kb), P2 DFTs of P1 points.
template <int P1, int P2>
EDGE_HD void dft_ct(float2* a) {
  constexpr int C = P1 * P2;
  float2 b[P1][P2];
#pragma unroll
  for (int na = 0; na < P1; na++) {
#pragma unroll
    for (int nb = 0; nb < P2; nb++) b[na][nb] = a[na + P1 * nb];
    dft<P2>(b[na]);
#pragma unroll
    for (int kb = 1; kb < P2; kb++) {
      if (na > 0) b[na][kb] = cmul(b[na][kb], twc<C>(na * kb % C));
    }
  }
#pragma unroll
  for (int kb = 0; kb < P2; kb++) {
    float2 t[P1];
#pragma unroll
    for (int na = 0; na < P1; na++) t[na] = b[na][kb];
    dft<P1>(t);
#pragma unroll
    for (int ka = 0; ka < P1; ka++) a[kb + P2 * ka] = t[ka];
  }
}

// Geometry of one frame's buffer: H = N/2 = 8·C complex points as 8 rows
// (n1) of C columns (k2), row pitch R float2 (C+1 when C is even, so that
// the 8 lanes' row stores fall in distinct banks), frame pitch S = 8·R float2
// (≡ 8 mod 16: the 4 frames of a warp are conflict-free too). The power row
// P[0..H] (floats) reuses the buffer.
template <int N>
struct Frame {
  static constexpr int H = N / 2;
  static constexpr int C = H / kLanes;
  static constexpr int R = C % 2 == 0 ? C + 1 : C;
  static constexpr int S = kLanes * R;
  static_assert(C * kLanes == H && (C == 25 || C == 32), "n_fft must be 400 or 512");
};

template <int C>
struct ColumnDFT;
template <>
struct ColumnDFT<25> {
  EDGE_HD static void run(float2* a) { dft_ct<5, 5>(a); }
};
template <>
struct ColumnDFT<32> {
  EDGE_HD static void run(float2* a) { dft_ct<4, 8>(a); }
};

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

// Column is lane n1's part of the first stage: the points z[n1 + 8·n2],
// n2 < C, of one frame, then their C-point DFT times W_H^(n1·k2).
template <int N>
struct Column {
  using F = Frame<N>;
  float2 v[F::C];
  // fast: load took the interior path, which read every sample of
  // [start, start + N) raw. nf (set by transform) is Z·0 for the lane's
  // bin-0 sum Z = Σ_n2 z[n1 + 8·n2]: 0 when Z is finite, NaN when one of
  // the lane's samples is NaN or ±Inf (they reach Z through sums and
  // products by finite or zero window values: Inf·0, Inf - Inf and NaN all
  // give NaN) or when finite samples overflow the sum (a false alarm: the
  // caller then checks the samples one by one).
  bool fast;
  float nf;

  // load forms the lane's points from the signal: z[n] = w[2n]·x(start+2n)
  // + i·w[2n+1]·x(start+2n+1), with win2[n] = (w[2n], w[2n+1]). Interior
  // frames without per-sample branches; frames that touch the padding or
  // the clip's end through sample(), staged in row (the lane's row of the
  // frame buffer, C float2; store overwrites it). An inactive lane (no
  // frame) loads 0.
  EDGE_HD void load(const Source& s, const float2* win2, int n1, bool active, float2* row) {
    fast = active && s.start >= 1 && s.start + N <= s.real;
    if (fast) {
      const float* p = s.pcm + s.start + 2 * n1;
      // The lanes read pairs (x[2n], x[2n+1]): one 8-byte load each when
      // the frame starts at an even address (the frame's 8 lanes agree).
      const bool pairs = (reinterpret_cast<unsigned long long>(p) & 7) == 0;
      const float a = s.preemph;
      if (pairs) {
        a != 0.f ? load_fast<true, true>(p, win2, n1, a) : load_fast<true, false>(p, win2, n1, a);
      } else {
        a != 0.f ? load_fast<false, true>(p, win2, n1, a) : load_fast<false, false>(p, win2, n1, a);
      }
      return;
    }
    // Edge frames are rare: a rolled loop through the lane's buffer row
    // keeps this path's code small (the unrolled one was a third of the
    // kernel's instructions).
#pragma unroll 1
    for (int j = 0; j < F::C; j++) {
      int m = n1 + kLanes * j;
      float2 w = win2[m];
      float x0 = active && w.x != 0.f ? w.x * sample(s, s.start + 2 * m) : 0.f;
      float x1 = active && w.y != 0.f ? w.y * sample(s, s.start + 2 * m + 1) : 0.f;
      row[j] = make_float2(x0, x1);
    }
#pragma unroll
    for (int j = 0; j < F::C; j++) v[j] = row[j];
  }

  // load_fast is load's interior path: p = pcm + start + 2·n1, kPairs: p is
  // 8-byte aligned, kPre: pre-emphasis a.
  template <bool kPairs, bool kPre>
  EDGE_HD void load_fast(const float* p, const float2* win2, int n1, float a) {
#pragma unroll
    for (int j = 0; j < F::C; j++) {
      const float2 w = win2[n1 + kLanes * j];
      float a0, a1;
      if (kPairs) {
        const float2 x = reinterpret_cast<const float2*>(p)[kLanes * j];
        a0 = x.x, a1 = x.y;
      } else {
        a0 = p[2 * kLanes * j], a1 = p[2 * kLanes * j + 1];
      }
      const float x0 = kPre ? fmaf(-a, p[2 * kLanes * j - 1], a0) : a0;
      const float x1 = kPre ? fmaf(-a, a0, a1) : a1;
      v[j] = make_float2(w.x * x0, w.y * x1);
    }
  }

  // transform: the C-point DFT (and nf from its bin 0), then v[k2] *=
  // W_H^(n1·k2) = colTw[k2·8 + n1] (the table laid out so that a frame's 8
  // lanes read 64 contiguous bytes).
  EDGE_HD void transform(const float2* colTw, int n1) {
    ColumnDFT<F::C>::run(v);
    nf = fmaf(v[0].y, 0.f, v[0].x * 0.f);
#pragma unroll
    for (int k = 1; k < F::C; k++) v[k] = cmul(v[k], colTw[k * kLanes + n1]);
  }

  // store writes the lane's row T[n1][0..C) of the frame's buffer T.
  EDGE_HD void store(float2* T, int n1) const {
#pragma unroll
    for (int k = 0; k < F::C; k++) T[n1 * F::R + k] = v[k];
  }
};

// Pairs is lane n1's part of the second stage. The C columns are dealt out
// so that a lane transforms column c and its partner C-c together: Z[k] and
// Z[H-k] (k = c + C·k1, H-k = (C-c) + C·(7-k1)) then sit in the same lane.
// Column pair q = step·8 + n1 (q < Q = (C-1)/2 regular pairs) is (q+1,
// C-q-1); pair q = Q is the self-paired columns 0 (Z[C·k1] with Z[C·(8-k1)])
// and, for even C, C/2 (Z[C/2 + C·k1] with Z[C/2 + C·(7-k1)]); lanes with
// q > Q compute the self pair's values too and store nothing. Every lane
// runs the same instructions (the pair kinds differ only in which
// registers feed power, chosen by selects: no divergent paths). For each
// pair (a = Z[k], b = Z[H-k]):
//   s = (a + conj b)/2, d = (a - conj b)/2, u = e^{-2πik/N}·d,
//   |X[k]|² = |s - i·u|², |X[H-k]|² = |s + i·u|².
template <int N>
struct Pairs {
  using F = Frame<N>;
  static constexpr int kSteps = 2;
  static constexpr int kQ = (F::C - 1) / 2;
  float p[kSteps][8][2];  // |X[k]|², |X[H-k]|² per step and slot
  float mid;              // |X[H/2]|² (the lane with the self-paired columns)

  // bin is the k of slot i for pair q: regular (q < Q) q+1 + C·i;
  // self-paired C·i (i < 4) and C/2 + C·(i-4) (i >= 4; even C only).
  EDGE_HD static int bin(int q, int i) {
    return q < kQ ? q + 1 + F::C * i : i < 4 ? F::C * i : F::C / 2 + F::C * (i - 4);
  }

  // stored: slot i of pair q holds two bins of the spectrum.
  EDGE_HD static bool stored(int q, int i) { return q < kQ || (q == kQ && (i < 4 || F::C % 2 == 0)); }

  // power computes 2s, 2d and 2u and scales the squares by 1/4 at the end:
  // the same float32 results (scaling by powers of 2 is exact).
  EDGE_HD static void power(float2 a, float2 b, float2 w, float* pk, float* phk) {
    float2 s = make_float2(a.x + b.x, a.y - b.y);
    float2 d = make_float2(a.x - b.x, a.y + b.y);
    float2 u = cmul(w, d);
    float xr = s.x + u.y, xi = s.y - u.x;  // 2·X[k] = 2s - i·2u
    float yr = s.x - u.y, yi = s.y + u.x;  // 2·conj X[H-k] = 2s + i·2u
    *pk = 0.25f * (xr * xr + xi * xi);
    *phk = 0.25f * (yr * yr + yi * yi);
  }

  // compute reads the lane's columns of the frame's buffer T.
  EDGE_HD void compute(const float2* T, const float2* twN, int n1) {
    mid = 0.f;
#pragma unroll
    for (int st = 0; st < kSteps; st++) {
      const int q = st * kLanes + n1;
      const bool reg = q < kQ;
      const int c1 = reg ? q + 1 : 0, c2 = reg ? F::C - q - 1 : F::C % 2 == 0 ? F::C / 2 : 0;
      float2 y1[8], y2[8];
#pragma unroll
      for (int r = 0; r < 8; r++) {
        y1[r] = T[r * F::R + c1];
        y2[r] = T[r * F::R + c2];
      }
      dft8(y1);
      dft8(y2);
      if (q == kQ) mid = y1[4].x * y1[4].x + y1[4].y * y1[4].y;
#pragma unroll
      for (int i = 0; i < 8; i++) {
        // regular: (y1[i], y2[7-i]); self-paired: (y1[i], y1[(8-i)%8]) for
        // i < 4, (y2[i-4], y2[(11-i)%8]) for i >= 4.
        const float2 a = i < 4 || reg ? y1[i] : y2[(i - 4) & 7];
        const float2 b = reg ? y2[7 - i] : i < 4 ? y1[(8 - i) & 7] : y2[(11 - i) & 7];
        power(a, b, twN[bin(q, i)], &p[st][i][0], &p[st][i][1]);
      }
    }
  }

  // store writes the lane's bins into the warp's power rows, interleaved by
  // frame: P[4·k + g] = |X_g[k]|², k = 0..H (so that mel4 reads a bin of the
  // 4 frames at once, and the 32 lanes' stores hit 32 banks). P overlays the
  // warp's 4 frame buffers (after the barrier that ends every lane's
  // compute).
  EDGE_HD void store(float* P, int n1, int g) const {
#pragma unroll
    for (int st = 0; st < kSteps; st++) {
      const int q = st * kLanes + n1;
#pragma unroll
      for (int i = 0; i < 8; i++) {
        if (!stored(q, i)) continue;
        const int k = bin(q, i);
        P[kGroups * k + g] = p[st][i][0];
        P[kGroups * (F::H - k) + g] = p[st][i][1];
      }
      if (q == kQ) P[kGroups * (F::H / 2) + g] = mid;
    }
  }
};

// Band is one mel filter's span of bins: start .. start+len-1. The weights
// are laid out by position in the band, w[j·n_mels + m] for filter m's j-th
// bin (0 past its non-zero span), so that the lanes of a warp, one filter
// each, read consecutive words (no bank conflicts; filters' spans of ~10
// words made w[off_m + j] 4-way conflicted).
struct Band {
  int start, len;
};

// log2_approx is log2 of a normal x (LogMel's floor keeps x >= 2^-126).
EDGE_HD float log2_approx(float x) {
#ifdef __CUDACC__
  // lg2.approx.ftz: MUFU.LG2 alone, |error| < 2^-21 (__log2f adds a
  // denormal fix-up the floor makes dead code).
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return std::log2(x);
#endif
}

// LogMel is the log of a mel value and how it is stored:
//   l = log2(max(mel + guard, floor))   (floor >= 2^-126; mel4 starts its
//                                        sums at guard),
//   y = l · scale (scale = ln 2 for ln, log10 2 for log10) is the feature,
//   stored as fmaf(l, as, c) = y·a + c with as = scale·a (Whisper: a = 1/4,
//   c = 1, its final (y + 4)/4; else a = 1, c = 0: y itself); the
//   statistics' maximum and minimum are taken over l and scaled once at the
//   end (the rounding of l·scale is monotone: the same values).
struct LogMel {
  float guard, floor, as, c;
  EDGE_HD float log2(float sum) const { return log2_approx(fmaxf(sum, floor)); }
  EDGE_HD float store(float l) const { return fmaf(l, as, c); }
};

// mel4 computes, for the filters m ≡ lane mod 32, the log-mel values of the
// warp's 4 frames from their interleaved power rows (P[4·k + g],
// Pairs::store; 16-byte aligned): l[g] = lg.log2(guard + mel_g) (LogMel),
// mel_g = Σ_{j < len} w[j·n_mels+m]·P[4·(start+j) + g] with (start, len) =
// bands[m], and calls emit(m, l) (all 4 frames: the caller keeps those it
// has). plugins/fbank's melBands gives the 32 filters a warp runs together
// one len (zero weights pad the shorter bands), so the band loop has the
// same trip count in every lane.
template <class Emit>
EDGE_HD void mel4(const float* P, const Band* bands, const float* w, int n_mels, const LogMel& lg, int lane,
                  Emit&& emit) {
  const float4* const P4 = reinterpret_cast<const float4*>(P);
  for (int m = lane; m < n_mels; m += kWarp) {
    const Band b = bands[m];
    float acc[kGroups] = {lg.guard, lg.guard, lg.guard, lg.guard};
    const int len = (FBANK_ABLATE & 1) ? (b.len > 0 ? 1 : 0) : b.len;  // fbank.cu's timing probe
    const float* wp = w + m;
    const float4* pp = P4 + b.start;  // bin start+j of the 4 frames
#pragma unroll 2
    for (int j = 0; j < len; j++, wp += n_mels, pp++) {
      const float wt = *wp;
      const float4 q = *pp;
      acc[0] = fmaf(wt, q.x, acc[0]);
      acc[1] = fmaf(wt, q.y, acc[1]);
      acc[2] = fmaf(wt, q.z, acc[2]);
      acc[3] = fmaf(wt, q.w, acc[3]);
    }
    float l[kGroups];
#pragma unroll
    for (int g = 0; g < kGroups; g++) l[g] = lg.log2(acc[g]);
    emit(m, l);
  }
}

}  // namespace fbank
