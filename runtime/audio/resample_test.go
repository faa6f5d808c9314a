package audio

import (
	"fmt"
	"math"
	"math/rand/v2"
	goruntime "runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// commonRates are the input rates the tone tests take to 16 kHz.
var commonRates = []int{8000, 11025, 22050, 24000, 32000, 44100, 48000}

// qualities pairs each preset with the guarantees its doc comment states.
var qualities = []struct {
	name      string
	q         Quality
	flatTo    float64 // passband edge, fraction of the lower Nyquist ...
	flatDB    float64 // ... up to which the gain is within this many dB of 0
	stopFrom  float64 // stopband edge, fraction of the lower Nyquist ...
	stopDB    float64 // ... from which every tone is down by at least this
	residueDB float64 // 1 kHz tone: what is not the tone, relative to it
}{
	{"best", QualityBest, 0.80, 0.001, 1.02, 130, -120},
	{"fast", QualityFast, 0.70, 0.01, 1.02, 85, -85},
}

func sine(n, rate int, hz, amp float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(amp * math.Sin(2*math.Pi*hz*float64(i)/float64(rate)))
	}
	return x
}

// tone fits a*sin(2*pi*hz*t + phase) to y (sampled at rate, t = 0 at y[0])
// by a single-bin DFT; with a whole number of cycles in y the fit is exact.
func tone(y []float32, hz float64, rate int) (amp, phase float64) {
	var re, im float64
	for n, v := range y {
		a := 2 * math.Pi * hz * float64(n) / float64(rate)
		re += float64(v) * math.Sin(a)
		im += float64(v) * math.Cos(a)
	}
	re, im = 2*re/float64(len(y)), 2*im/float64(len(y))
	return math.Hypot(re, im), math.Atan2(im, re)
}

func db(ratio float64) float64 { return 20 * math.Log10(ratio) }

// measure resamples a tone of hz (amplitude 0.5) from -> 16 kHz and returns
// one second of output, away from the edge transients, starting at t0 s.
func measure(t *testing.T, q Quality, from int, hz float64) (seg []float32, t0 float64) {
	t.Helper()
	r, err := NewResampler(from, 16000, q)
	require.NoError(t, err)
	y, err := r.Resample(sine(from*11/10, from, hz, 0.5))
	require.NoError(t, err)
	require.Len(t, y, 17600)
	return y[800:16800], 800.0 / 16000
}

// TestResampleTone1k: a 1 kHz tone keeps its frequency, level and phase
// (no delay), and nothing else appears.
func TestResampleTone1k(t *testing.T) {
	for _, qc := range qualities {
		for _, from := range commonRates {
			t.Run(fmt.Sprintf("%s/%d", qc.name, from), func(t *testing.T) {
				seg, t0 := measure(t, qc.q, from, 1000)
				amp, phase := tone(seg, 1000, 16000)
				assert.InDelta(t, 0, db(amp/0.5), 0.01, "level change, dB")
				wantPhase := math.Remainder(2*math.Pi*1000*t0, 2*math.Pi)
				assert.InDelta(t, wantPhase, phase, 1e-4, "phase (a delay would shift it)")
				var res float64
				for n, v := range seg {
					d := float64(v) - amp*math.Sin(2*math.Pi*1000*float64(n)/16000+phase)
					res += d * d
				}
				rms := math.Sqrt(res / float64(len(seg)))
				assert.Less(t, db(rms/(0.5/math.Sqrt2)), qc.residueDB, "residue after removing the 1 kHz tone, dB")
			})
		}
	}
}

// TestResamplePassband: gain within the stated flatness up to the passband edge.
func TestResamplePassband(t *testing.T) {
	for _, qc := range qualities {
		for _, from := range []int{8000, 22050, 48000} {
			nyq := float64(min(from, 16000)) / 2
			for _, fr := range []float64{0.05, 0.25, 0.5, qc.flatTo} {
				hz := math.Round(fr * nyq)
				t.Run(fmt.Sprintf("%s/%d/%.0fHz", qc.name, from, hz), func(t *testing.T) {
					seg, _ := measure(t, qc.q, from, hz)
					amp, _ := tone(seg, hz, 16000)
					assert.InDelta(t, 0, db(amp/0.5), qc.flatDB)
				})
			}
		}
	}
}

// TestResampleStopband: every tone beyond the stopband edge comes out at
// least stopDB down, measured by a DFT at the frequency it folds to
// (downsampling) or at its image (upsampling), and by the output's total
// energy when downsampling (where nothing should remain at all).
func TestResampleStopband(t *testing.T) {
	for _, qc := range qualities {
		for _, from := range commonRates {
			lowNyq := float64(min(from, 16000)) / 2
			t.Run(fmt.Sprintf("%s/%d", qc.name, from), func(t *testing.T) {
				if from > 16000 {
					// Tones from the stopband edge up to the input Nyquist.
					for fr := qc.stopFrom; fr*lowNyq < 0.99*float64(from)/2; fr += 0.173 {
						hz := math.Round(fr * lowNyq)
						seg, _ := measure(t, qc.q, from, hz)
						alias := math.Abs(hz - 16000*math.Round(hz/16000))
						amp, _ := tone(seg, alias, 16000)
						assert.Less(t, db(amp/0.5), -qc.stopDB, "%.0f Hz folds to %.0f Hz", hz, alias)
						var e float64
						for _, v := range seg {
							e += float64(v) * float64(v)
						}
						rms := math.Sqrt(e / float64(len(seg)))
						assert.Less(t, db(rms/(0.5/math.Sqrt2)), -qc.stopDB, "%.0f Hz: output energy", hz)
					}
					return
				}
				// Upsampling: a tone at hz leaves an image at from-hz, which
				// lies beyond the stopband edge for hz up to (2-stopFrom)*lowNyq.
				for fr := 0.05; fr <= 2-qc.stopFrom; fr += 0.097 {
					hz := math.Round(fr * lowNyq)
					seg, _ := measure(t, qc.q, from, hz)
					image := float64(from) - hz
					amp, _ := tone(seg, image, 16000)
					assert.Less(t, db(amp/0.5), -qc.stopDB, "%.0f Hz images to %.0f Hz", hz, image)
				}
			})
		}
	}
}

// directSinc evaluates the resampler's defining formula directly, in float64,
// one output sample at a time (directSincAt), for every output sample.
func directSinc(x []float32, from, to int, q Quality) []float64 {
	y := make([]float64, int(math.Ceil(float64(len(x))*float64(to)/float64(from))))
	for j := range y {
		y[j] = directSincAt(x, from, to, q, j)
	}
	return y
}

// directSincAt is output sample j: sum_n x[n] h(n/from - j/to), with
// h(s) = (2fc/from) sinc(2fc s) kaiser(2fc s / W), fc = Rolloff*min(from,to)/2.
func directSincAt(x []float32, from, to int, q Quality, j int) float64 {
	fc2 := q.Rolloff * float64(min(from, to))
	w := float64(q.ZeroCrossings)
	var y float64
	for i, v := range x {
		u := fc2 * (float64(i)/float64(from) - float64(j)/float64(to))
		if math.Abs(u) >= w {
			continue
		}
		s := 1.0
		if u != 0 {
			s = math.Sin(math.Pi*u) / (math.Pi * u)
		}
		k := besselI0(q.Beta*math.Sqrt(1-(u/w)*(u/w))) / besselI0(q.Beta)
		y += float64(v) * fc2 / float64(from) * s * k
	}
	return y
}

// TestResampleMatchesDirectSinc checks the polyphase tables and edge handling
// against the direct formula, including odd ratios and inputs shorter than
// the filter.
func TestResampleMatchesDirectSinc(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, c := range []struct{ from, to, n int }{
		{48000, 16000, 700}, {44100, 16000, 500}, {8000, 16000, 300}, {16000, 44100, 200},
		{7, 5, 300}, {5, 7, 300}, {22050, 16000, 1}, {16000, 8000, 2}, {11025, 16000, 5},
	} {
		for _, qc := range qualities {
			t.Run(fmt.Sprintf("%s/%d-%d/n=%d", qc.name, c.from, c.to, c.n), func(t *testing.T) {
				x := make([]float32, c.n)
				for i := range x {
					x[i] = float32(rng.NormFloat64() * 0.3)
				}
				r, err := NewResampler(c.from, c.to, qc.q)
				require.NoError(t, err)
				got, err := r.Resample(x)
				require.NoError(t, err)
				want := directSinc(x, c.from, c.to, qc.q)
				require.Len(t, got, len(want))
				for j := range want {
					require.InDelta(t, want[j], got[j], 2e-6, "sample %d", j)
				}
			})
		}
	}
}

// TestResampleParallel: the multi-core split gives bit-identical results to
// one pass.
func TestResampleParallel(t *testing.T) {
	defer goruntime.GOMAXPROCS(goruntime.GOMAXPROCS(5))
	rng := rand.New(rand.NewPCG(3, 4))
	for _, from := range []int{44100, 8000} {
		x := make([]float32, 4*parallelMin)
		for i := range x {
			x[i] = float32(rng.Float64() - 0.5)
		}
		r, err := NewResampler(from, 16000, QualityFast)
		require.NoError(t, err)
		got, err := r.Resample(x)
		require.NoError(t, err)
		want := make([]float32, r.OutputLen(len(x)))
		r.run(want, x, 0)
		require.Equal(t, want, got, "from %d", from)
	}
}

func TestResampleLengths(t *testing.T) {
	for _, c := range []struct{ from, to, n, want int }{
		{48000, 16000, 0, 0}, {48000, 16000, 1, 1}, {48000, 16000, 3, 1}, {48000, 16000, 4, 2},
		{44100, 16000, 44100, 16000}, {44100, 16000, 44101, 16001}, {8000, 16000, 5, 10},
		{16000, 16000, 7, 7},
	} {
		y, err := Resample(make([]float32, c.n), c.from, c.to)
		require.NoError(t, err)
		assert.Len(t, y, c.want, "%d -> %d, %d samples", c.from, c.to, c.n)
	}
	// Equal rates: a copy, not the input itself.
	x := []float32{1, 2, 3}
	y, err := Resample(x, 16000, 16000)
	require.NoError(t, err)
	y[0] = 9
	assert.Equal(t, float32(1), x[0])
}

func TestResampleErrors(t *testing.T) {
	for _, c := range []struct {
		name     string
		from, to int
		q        Quality
		x        []float32
		want     string
	}{
		{"zero input rate", 0, 16000, QualityBest, nil, "input sample rate 0 Hz out of range [1, 768000]"},
		{"negative output rate", 16000, -8000, QualityBest, nil, "output sample rate -8000 Hz out of range"},
		{"rate too high", 1000000, 16000, QualityBest, nil, "input sample rate 1000000 Hz out of range"},
		{"irregular ratio", 44101, 16000, QualityBest, nil, "cannot resample 44101 Hz to 16000 Hz: the reduced ratio 44101/16000 needs a filter bank of about"},
		{"bad quality", 48000, 16000, Quality{ZeroCrossings: 0, Rolloff: 0.9}, nil, "invalid resampler quality"},
		{"bad rolloff", 48000, 16000, Quality{ZeroCrossings: 8, Rolloff: 1.5}, nil, "Rolloff in (0, 1]"},
		{"bad beta", 48000, 16000, Quality{ZeroCrossings: 8, Rolloff: 0.9, Beta: math.NaN()}, nil, "Beta in [0, 50]"},
		{"nan input", 48000, 16000, QualityFast, []float32{0, 0, float32(math.NaN())}, "resample input sample 2 is NaN; want finite samples"},
		{"inf input", 16000, 16000, QualityFast, []float32{float32(math.Inf(1))}, "resample input sample 0 is +Inf"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := NewResampler(c.from, c.to, c.q)
			if err == nil {
				_, err = r.Resample(c.x)
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

func TestBesselI0(t *testing.T) {
	// Reference values (Abramowitz & Stegun table 9.8 / scipy.special.i0).
	for _, c := range []struct{ x, want float64 }{
		{0, 1}, {1, 1.2660658777520082}, {5, 27.239871823604442}, {14.769656459379492, 271903.6406814566},
	} {
		assert.InEpsilon(t, c.want, besselI0(c.x), 1e-14, "I0(%v)", c.x)
	}
}

// TestResampleCache: Resample reuses filter banks and keeps at most
// cacheSize of them, concurrently safe.
func TestResampleCache(t *testing.T) {
	x := noise(1000)
	want, err := NewResampler(44100, 16000, QualityBest)
	require.NoError(t, err)
	wantY, err := want.Resample(x)
	require.NoError(t, err)
	done := make(chan []float32)
	for range 4 {
		go func() {
			y, err := Resample(x, 44100, 16000)
			assert.NoError(t, err)
			done <- y
		}()
	}
	for range 4 {
		assert.Equal(t, wantY, <-done)
	}
	r1, _ := cachedResampler(44100, 16000)
	r2, _ := cachedResampler(44100, 16000)
	assert.Same(t, r1, r2)
	for from := 1000; from <= 1000*3*cacheSize; from += 1000 {
		_, err := Resample(x[:10], from, 16000)
		require.NoError(t, err)
		cache.Lock()
		assert.LessOrEqual(t, len(cache.m), cacheSize)
		cache.Unlock()
	}
}
