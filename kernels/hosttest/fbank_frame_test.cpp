// Host replay of the fbank frame stages (kernels/fbank_frame.cuh): the 32
// lanes of each warp phase run in order, then the next phase, which is what
// __syncwarp guarantees on the GPU. The power spectrum and the log-mel values
// are checked against a float64 DFT of the same windowed, pre-emphasised,
// padded frame. Run by kernels/hosttest/run.sh (g++, no GPU); exits 1 on a
// mismatch.
#include <array>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "../fbank_frame.cuh"

using namespace fbank;

// ref_sample mirrors Frontend.sample in float64.
static double ref_sample(const std::vector<float>& x, long long n, long long real, bool reflect, double a,
                         long long i) {
  if (i < 0 || i >= n) {
    if (!reflect) return 0;
    i = i < 0 ? -i : 2 * (n - 1) - i;
  }
  if (i >= real) return 0;
  double v = x[i];
  if (a != 0 && i > 0) v -= a * x[i - 1];
  return v;
}

template <int N>
static int check(std::mt19937& rng, bool reflect, double preemph, int win, long long start, int active, double gain) {
  constexpr int H = N / 2;
  std::normal_distribution<float> nd(0.f, 1.f);
  long long n = 4000, real = 3900;
  std::vector<float> x(n);
  for (auto& v : x) v = (float)(gain * nd(rng));
  // Periodic Hann of `win` centred in N.
  std::vector<float> window(N, 0.f);
  int off = (N - win) / 2;
  for (int j = 0; j < win; j++) window[off + j] = (float)(0.5 - 0.5 * std::cos(2 * M_PI * j / win));
  std::vector<float2> twN(N);
  for (int k = 0; k < N; k++) twN[k] = make_float2((float)std::cos(-2 * M_PI * k / N), (float)std::sin(-2 * M_PI * k / N));

  // One warp: 4 frames (starts start, start+37, ...), 8 lanes each; every
  // phase runs its 32 lanes in order, as __syncwarp separates them on the GPU.
  using Fr = Frame<N>;
  std::vector<float2> T(kGroups * Fr::S);
  std::vector<float2> win2(H);
  for (int m = 0; m < H; m++) win2[m] = make_float2(window[2 * m], window[2 * m + 1]);
  auto src = [&](int g) { return Source{x.data(), n, real, start + 37 * g, reflect ? 1 : 0, (float)preemph}; };
  std::vector<float2> colTw(Fr::C * kLanes);  // W_H^(n1·k) at [k·8 + n1]
  for (int k = 0; k < Fr::C; k++)
    for (int n1 = 0; n1 < kLanes; n1++) colTw[k * kLanes + n1] = twN[2 * n1 * k];
  std::vector<Column<N>> col(kWarp);
  for (int l = 0; l < kWarp; l++) {
    int g = l / kLanes, n1 = l % kLanes;
    col[l].load(src(g), win2.data(), n1, g < active, T.data() + g * Fr::S + n1 * Fr::R);
    col[l].transform(colTw.data(), n1);
    col[l].store(T.data() + g * Fr::S, n1);
  }
  std::vector<Pairs<N>> pr(kWarp);
  for (int l = 0; l < kWarp; l++) pr[l].compute(T.data() + (l / kLanes) * Fr::S, twN.data(), l % kLanes);
  for (int l = 0; l < kWarp; l++) pr[l].store(reinterpret_cast<float*>(T.data()), l % kLanes, l / kLanes);
  const float* P = reinterpret_cast<const float*>(T.data());  // P[4·k + g]

  // Mel: a random sparse band bank over the H+1 bins.
  const int M = 40, pitchOut = M + 3;
  std::vector<Band> bands(M);
  std::vector<float> w(12 * M, 0.f);  // w[j·M + m], bands of at most 12 bins
  std::uniform_int_distribution<int> st(0, H - 12), ln(1, 12);
  for (int m = 0; m < M; m++) {
    bands[m] = Band{st(rng), ln(rng)};
    for (int j = 0; j < bands[m].len; j++) w[j * M + m] = 0.01f + 0.001f * j + 0.0001f * m;
  }
  std::vector<float> mel(kGroups * pitchOut, NAN);
  float mx = -INFINITY, mn = INFINITY;
  const float guard = 1.0f / (1 << 24), fl = guard, scale = (float)M_LN2;
  // Stored as y/4 + 1 (Whisper's affine step) on every other call.
  const bool whisper = (start & 1) != 0;
  const LogMel lg{guard, fl, whisper ? scale / 4 : scale, whisper ? 1.f : 0.f};
  for (int l = 0; l < kWarp; l++) {
    mel4(P, bands.data(), w.data(), M, lg, l, [&](int m, const float* l2) {
      for (int g = 0; g < active; g++) {
        mel[g * pitchOut + m] = lg.store(l2[g]);
        mx = std::fmax(mx, l2[g]);
        mn = std::fmin(mn, l2[g]);
      }
    });
  }
  mx *= scale, mn *= scale;  // the statistics in y = l·scale (LogMel)

  // float64 reference DFT of each active frame.
  double worst = 0, melWorst = 0, refMax = -INFINITY, refMin = INFINITY;
  for (int g = 0; g < active; g++) {
    long long s0 = start + 37 * g;
    std::vector<double> fr(N);
    for (int j = 0; j < N; j++) fr[j] = window[j] * ref_sample(x, n, real, reflect, preemph, s0 + j);
    double peak = 0;
    std::vector<double> ref(H + 1);
    for (int k = 0; k <= H; k++) {
      double re = 0, im = 0;
      for (int j = 0; j < N; j++) {
        double ang = -2 * M_PI * (double)((long long)j * k % N) / N;
        re += fr[j] * std::cos(ang);
        im += fr[j] * std::sin(ang);
      }
      ref[k] = re * re + im * im;
      peak = std::fmax(peak, ref[k]);
    }
    for (int k = 0; k <= H; k++) worst = std::fmax(worst, std::fabs(P[kGroups * k + g] - ref[k]) / peak);
    for (int m = 0; m < M; m++) {
      double acc = 0;
      for (int j = 0; j < bands[m].len; j++) acc += (double)w[j * M + m] * ref[bands[m].start + j];
      double y = std::log(std::fmax(acc + guard, (double)fl));
      refMax = std::fmax(refMax, y);
      refMin = std::fmin(refMin, y);
      double got = whisper ? (mel[g * pitchOut + m] - 1.0) * 4 : mel[g * pitchOut + m];
      melWorst = std::fmax(melWorst, std::fabs(y - got));
    }
  }
  // Rows of inactive frames are not written.
  bool untouched = true;
  for (int g = active; g < kGroups; g++)
    for (int m = 0; m < M; m++) untouched = untouched && std::isnan(mel[g * pitchOut + m]);
  bool ok = worst < 2e-6 && melWorst < 1e-3 && std::fabs(mx - refMax) < 1e-3 && std::fabs(mn - refMin) < 1e-3 &&
            untouched;
  std::printf("%s N=%d reflect=%d preemph=%.2f win=%d start=%lld frames=%d gain=%g: max|P-ref|/peak=%.2e max|mel-ref|=%.2e\n",
              ok ? "ok  " : "FAIL", N, reflect, preemph, win, start, active, gain, worst, melWorst);
  return ok ? 0 : 1;
}

// twiddles checks the constant tables of twc<C> against float64 cos/sin.
template <int C>
static int twiddles() {
  double worst = 0;
  for (int j = 0; j < C; j++) {
    float2 t = twc<C>(j);
    worst = std::fmax(worst, std::fabs(t.x - std::cos(2 * M_PI * j / C)));
    worst = std::fmax(worst, std::fabs(t.y + std::sin(2 * M_PI * j / C)));
  }
  bool ok = worst < 1e-7;
  std::printf("%s twc<%d>: max error %.2e\n", ok ? "ok  " : "FAIL", C, worst);
  return ok ? 0 : 1;
}

// nonfinite checks Column's nf on the interior (fast) path: 0 in every lane
// of a frame of finite samples; NaN in the lane that loaded a NaN or ±Inf
// sample (also where the window is 0: Inf·0 is NaN), 0 in the frame's other
// lanes.
template <int N>
static int nonfinite() {
  constexpr int H = N / 2;
  using Fr = Frame<N>;
  std::vector<float2> win2(H), colTw(Fr::C * kLanes, make_float2(1.f, 0.f));
  for (int m = 0; m < H; m++) win2[m] = make_float2(m == 0 ? 0.f : 0.5f, 0.25f);  // w[0] = 0
  int fails = 0;
  for (float bad : {0.f, NAN, INFINITY, -INFINITY}) {
    for (int pos : {0, 1, 17, N - 1}) {  // pos 0: under the zero window value
      std::vector<float> x(2000, 0.5f);
      const long long start = 600;
      x[start + pos] = bad == 0.f ? 1e30f : bad;  // 1e30: finite and large
      for (int n1 = 0; n1 < kLanes; n1++) {
        Column<N> col;
        std::vector<float2> row(Fr::C);
        col.load(Source{x.data(), 2000, 2000, start, 0, 0.f}, win2.data(), n1, true, row.data());
        col.transform(colTw.data(), n1);
        const bool mine = (pos / 2) % kLanes == n1;
        const bool want = bad == 0.f || !mine ? col.nf == 0.f : std::isnan(col.nf);
        if (!col.fast || !want) {
          std::printf("FAIL nonfinite N=%d bad=%g pos=%d lane %d: fast=%d nf=%g\n", N, bad, pos, n1, col.fast, col.nf);
          fails++;
        }
      }
    }
  }
  std::printf("%s nonfinite<%d>\n", fails ? "FAIL" : "ok  ", N);
  return fails ? 1 : 0;
}

int main() {
  std::mt19937 rng(7);
  int fails = twiddles<25>() + twiddles<32>() + nonfinite<400>() + nonfinite<512>();
  // Starts cover reflect/zero padding on the left, the interior fast path
  // (start >= 1), frames that reach past real and past n; active < 4 leaves
  // frame groups without a frame.
  int active = 0;
  for (long long start : {-200LL, -256LL, -1LL, 0LL, 1LL, 1234LL, 3300LL, 3389LL, 3500LL, 3501LL, 3590LL}) {
    active = active % 4 + 1;
    fails += check<400>(rng, true, 0.0, 400, start, active, 0.3);
    fails += check<400>(rng, false, 0.97, 400, start, 4, 1.0);
    fails += check<512>(rng, false, 0.97, 400, start, active, 0.5);
    fails += check<512>(rng, true, 0.0, 512, start, 4, 1e-3);
  }
  std::printf("%d failures\n", fails);
  return fails ? 1 : 0;
}
