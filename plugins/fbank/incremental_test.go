package fbank

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/runtime"
)

// pieceSchedules are the ways a clip is cut into writes: one sample at a
// time, primes in turn, random sizes, and the whole clip at once.
var pieceSchedules = map[string]func(rng *rand.Rand, i int) int{
	"one":    func(*rand.Rand, int) int { return 1 },
	"primes": func(_ *rand.Rand, i int) int { return []int{2, 7, 13, 101, 331, 997, 4099}[i%7] },
	"random": func(rng *rand.Rand, _ int) int { return 1 + rng.IntN(3000) },
	"whole":  func(*rand.Rand, int) int { return math.MaxInt32 },
}

// streamFrames writes x to s in pieces cut by next, flushes, and returns
// every frame (time-major) and the valid frame count. It checks that frames
// come out in whole groups before the flush.
func streamFrames(t *testing.T, s *Incremental, x []float32, next func(i int) int) ([]float32, int) {
	t.Helper()
	ctx := context.Background()
	var out []float32
	nm := s.Config().NumMels
	for i, at := 0, 0; at < len(x); i++ {
		n := min(next(i), len(x)-at)
		var err error
		out, err = s.Write(ctx, x[at:at+n], out)
		require.NoError(t, err)
		require.Zero(t, len(out)/nm%s.Group(), "frames before the flush come in whole groups")
		require.Equal(t, len(out)/nm, s.Frames())
		at += n
	}
	out, valid, err := s.Flush(ctx, out)
	require.NoError(t, err)
	return out, valid
}

// timeMajor is item 0 of offline features as [frames, mels].
func timeMajor(f *Features) []float32 {
	if f.Layout == TimeMel {
		return f.Data[:f.Frames*f.Mels]
	}
	out := make([]float32, f.Frames*f.Mels)
	for m := 0; m < f.Mels; m++ {
		for t := 0; t < f.Frames; t++ {
			out[t*f.Mels+m] = f.Data[m*f.Frames+t]
		}
	}
	return out
}

// causalConfigs are configurations whose normalisation needs no future.
func causalConfigs(t *testing.T) map[string]Config {
	out := map[string]Config{}
	for _, name := range []string{"parakeet-128", "nemo-legacy-80", "whisper-128"} {
		c := mustPreset(t, name)
		if c.Normalize == PerUtterance {
			c.Normalize = Global
		} else {
			c.Normalize = None
		}
		out[name] = c
	}
	c := mustPreset(t, "parakeet-80")
	c.Normalize, c.PadMode, c.Layout = None, PadNone, MelTime
	out["parakeet-80 pad none"] = c
	c = mustPreset(t, "parakeet-80")
	c.Normalize, c.LogClampMin, c.ValidFrames = None, 1e-5, ValidCeil
	out["parakeet-80 clamp ceil"] = c
	c = mustPreset(t, "whisper-80")
	c.Normalize, c.GlobalLogMelMax, c.Layout = Global, 0.5, TimeMel
	out["whisper-80 global 0.5"] = c
	c = mustPreset(t, "parakeet-80")
	c.Normalize = Fixed
	c.FixedMean, c.FixedStd = fixedStats(80)
	out["parakeet-80 fixed"] = c
	return out
}

// fixedStats is a deterministic per-bin mean and std for normalize=fixed.
func fixedStats(n int) (mean, std []float64) {
	mean, std = make([]float64, n), make([]float64, n)
	for m := range mean {
		mean[m], std[m] = -8+0.05*float64(m), 1.5+0.01*float64(m%7)
	}
	return mean, std
}

// TestFixedNormalization: normalize=fixed is none's ln(x + 2^-24) then
// (x - mean[m]) / std[m] on the valid frames, the rest 0; its statistics
// must be num_mels finite values (std > 0), and only apply to it.
func TestFixedNormalization(t *testing.T) {
	x := noisySpeech(16000+123, 8)
	none := mustPreset(t, "parakeet-80")
	none.Normalize = None
	fixed := none
	fixed.Normalize = Fixed
	fixed.FixedMean, fixed.FixedStd = fixedStats(80)
	fa, err := NewFrontend(none)
	require.NoError(t, err)
	fb, err := NewFrontend(fixed)
	require.NoError(t, err)
	a, err := fa.Compute(context.Background(), [][]float32{x}, 2)
	require.NoError(t, err)
	b, err := fb.Compute(context.Background(), [][]float32{x}, 2)
	require.NoError(t, err)
	require.Equal(t, a.Lengths, b.Lengths)
	ta, tb := timeMajor(a), timeMajor(b)
	for i, v := range ta {
		tm, m := i/80, i%80
		want := float32((float64(v) - fixed.FixedMean[m]) / fixed.FixedStd[m])
		if tm >= int(a.Lengths[0]) {
			want = 0
		}
		require.Equal(t, want, tb[i], "frame %d mel %d", tm, m)
	}
	bad := fixed
	bad.FixedStd = append([]float64(nil), fixed.FixedStd...)
	bad.FixedStd[5] = 0
	_, err = NewFrontend(bad)
	require.ErrorContains(t, err, "fixed_std[5] = 0")
	bad.FixedStd = bad.FixedStd[:10]
	_, err = NewFrontend(bad)
	require.ErrorContains(t, err, "num_mels = 80")
	bad = none
	bad.FixedMean = fixed.FixedMean
	_, err = NewFrontend(bad)
	require.ErrorContains(t, err, "apply only to normalize=fixed")

	// Through the op, statistics from npy files.
	f64 := func(v []float64) *runtime.Tensor {
		return runtime.Must(runtime.FromSlice(runtime.F64, runtime.Shape{len(v)}, v))
	}
	inst, err := runtime.New("fbank", map[string]any{"preset": "parakeet-80", "normalize": "fixed",
		"fixed_mean": writeNpy(t, "mean.npy", f64(fixed.FixedMean)), "fixed_std": writeNpy(t, "std.npy", f64(fixed.FixedStd))}, runtime.CPU)
	require.NoError(t, err)
	out, err := inst.Run(context.Background(), runtime.Tensors{"pcm": f32(runtime.Shape{len(x)}, x)})
	require.NoError(t, err)
	require.Equal(t, b.Data[:len(out["features"].F32())], out["features"].F32())
}

// TestIncrementalEqualsOffline: for normalize none and global, a stream cut
// into pieces of any sizes gives exactly the offline frames and lengths,
// on clips of several lengths (shorter than one group, not a multiple of
// the hop, a few seconds).
func TestIncrementalEqualsOffline(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 1))
	for name, cfg := range causalConfigs(t) {
		fe, err := NewFrontend(cfg)
		require.NoError(t, err)
		for _, n := range []int{401, 1234, 16000 + 77, 3*16000 + 91} {
			x := noisySpeech(n, uint64(n))
			want, err := fe.Compute(context.Background(), [][]float32{x}, 2)
			require.NoError(t, err)
			for sched, next := range pieceSchedules {
				if sched == "one" && n > 16000+77 {
					continue // one-sample writes of 3 s: covered by the shorter clips
				}
				s, err := NewIncremental(cfg)
				require.NoError(t, err)
				got, valid := streamFrames(t, s, x, func(i int) int { return next(rng, i) })
				require.Equal(t, int(want.Lengths[0]), valid, "%s n=%d %s: lengths", name, n, sched)
				require.Equal(t, timeMajor(want), got, "%s n=%d %s: frames", name, n, sched)
			}
		}
	}
}

// TestIncrementalOpEqualsOffline: the op-backed stream (the code path of
// the CUDA op) on the CPU backend gives the offline op's frames exactly.
func TestIncrementalOpEqualsOffline(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 1))
	x := noisySpeech(2*16000+333, 9)
	for _, params := range []map[string]any{
		{"preset": "parakeet-128", "normalize": "none"},
		{"preset": "whisper-128", "normalize": "global"},
		{"preset": "nemo-legacy-80", "normalize": "none", "layout": "time_mel"},
	} {
		inst, err := runtime.New("fbank", params, runtime.CPU)
		require.NoError(t, err)
		out, err := inst.Run(context.Background(), runtime.Tensors{"pcm": runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{len(x)}, x))})
		require.NoError(t, err)
		cfg, err := ConfigFromParams(inst.Params)
		require.NoError(t, err)
		want := opFeatures(cfg, out)
		for sched, next := range pieceSchedules {
			if sched == "one" {
				continue // each write that completes a group runs the op: TestIncrementalEqualsOffline covers one-sample writes
			}
			s, err := NewIncrementalOp(params, runtime.CPU)
			require.NoError(t, err)
			assert.Equal(t, opGroup, s.Group())
			got, valid := streamFrames(t, s, x, func(i int) int { return next(rng, i) })
			require.NoError(t, s.Close())
			require.Equal(t, int(out["lengths"].I64()[0]), valid, "%v %s: lengths", params, sched)
			require.Equal(t, timeMajor(want), got, "%v %s: frames", params, sched)
		}
	}
}

// opFeatures wraps an fbank op's host outputs (one item) as Features.
func opFeatures(cfg Config, out runtime.Tensors) *Features {
	f := out["features"]
	frames, mels := f.Shape()[2], f.Shape()[1]
	if cfg.Layout == TimeMel {
		frames, mels = f.Shape()[1], f.Shape()[2]
	}
	return &Features{Data: f.F32(), Batch: 1, Mels: mels, Frames: frames, Layout: cfg.Layout}
}

// TestIncrementalPerUtterance: per_feature and per_utterance streams give
// the log-mel values before normalisation; NormalizeWindow over all valid
// frames gives the offline features (exactly for per_feature, to the
// float32 rounding of the clamp floor for per_utterance), and over a
// shorter window normalises by that window's own statistics.
func TestIncrementalPerUtterance(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 1))
	x := noisySpeech(2*16000+219, 4)
	for _, name := range []string{"parakeet-128", "nemo-legacy-80", "whisper-80"} {
		cfg := mustPreset(t, name)
		fe, err := NewFrontend(cfg)
		require.NoError(t, err)
		want, err := fe.Compute(context.Background(), [][]float32{x}, 2)
		require.NoError(t, err)
		for sched, next := range pieceSchedules {
			if sched == "one" {
				continue
			}
			s, err := NewIncremental(cfg)
			require.NoError(t, err)
			assert.False(t, s.Normalized())
			got, valid := streamFrames(t, s, x, func(i int) int { return next(rng, i) })
			require.Equal(t, int(want.Lengths[0]), valid)
			nm := cfg.NumMels
			computed := valid
			if cfg.Normalize == PerUtterance {
				computed = len(got) / nm
			}
			require.NoError(t, s.NormalizeWindow(got[:computed*nm]))
			w := timeMajor(want)
			if cfg.Normalize == PerFeature {
				require.Equal(t, w, got, "%s %s", name, sched)
				continue
			}
			require.Len(t, got, len(w))
			for i := range w {
				require.InDelta(t, w[i], got[i], 1e-6, "%s %s value %d", name, sched, i)
			}
		}
		// A window of 100 frames from the middle is normalised by its own statistics.
		s, err := NewIncremental(cfg)
		require.NoError(t, err)
		raw, _ := streamFrames(t, s, x, func(int) int { return 4000 })
		nm := cfg.NumMels
		win := append([]float32(nil), raw[50*nm:150*nm]...)
		require.NoError(t, s.NormalizeWindow(win))
		if cfg.Normalize == PerFeature {
			for m := 0; m < nm; m++ {
				var sum float64
				for t := 0; t < 100; t++ {
					sum += float64(win[t*nm+m])
				}
				require.InDelta(t, 0, sum/100, 1e-5, "%s mel %d: the window's mean is removed", name, m)
			}
		} else {
			mx := float32(math.Inf(-1))
			for _, v := range win {
				mx = max(mx, v)
			}
			wmx := float32(math.Inf(-1))
			for _, v := range raw[50*nm : 150*nm] {
				wmx = max(wmx, v)
			}
			require.InDelta(t, (wmx+4)/4, mx, 1e-6, "%s: the window's maximum maps to (max+4)/4", name)
		}
	}
}

// TestIncrementalErrorsAndReset: bad samples, writes after the flush, a
// stream too short for one frame and whole-clip options are clear errors;
// Reset starts an identical stream.
func TestIncrementalErrorsAndReset(t *testing.T) {
	ctx := context.Background()
	cfg := mustPreset(t, "parakeet-80")
	cfg.Normalize = None
	s, err := NewIncremental(cfg)
	require.NoError(t, err)
	x := noisySpeech(5000, 1)
	_, err = s.Write(ctx, x[:1000], nil)
	require.NoError(t, err)
	bad := append([]float32(nil), x[:10]...)
	bad[3] = float32(math.NaN())
	_, err = s.Write(ctx, bad, nil)
	require.ErrorContains(t, err, "sample 1003 is NaN")
	s.Reset()
	a, va := streamFrames(t, s, x, func(int) int { return 777 })
	_, err = s.Write(ctx, x[:1], nil)
	require.ErrorContains(t, err, "write after flush")
	_, _, err = s.Flush(ctx, nil)
	require.ErrorContains(t, err, "flushed twice")
	s.Reset()
	b, vb := streamFrames(t, s, x, func(int) int { return 5000 })
	require.Equal(t, a, b)
	require.Equal(t, va, vb)

	s.Reset()
	_, err = s.Write(ctx, x[:100], nil)
	require.NoError(t, err)
	_, _, err = s.Flush(ctx, nil)
	require.ErrorContains(t, err, "has 100 samples, want at least win_length = 400")

	c := cfg
	c.PadToSeconds = 30
	_, err = NewIncremental(c)
	require.ErrorContains(t, err, "pad_to_seconds")
	c = mustPreset(t, "whisper-80")
	c.OutFrames = 10
	_, err = NewIncremental(c)
	require.ErrorContains(t, err, "out_frames")
	_, err = NewIncrementalOp(map[string]any{"preset": "whisper-80"}, runtime.CPU)
	require.ErrorContains(t, err, "per_utterance")
	_, err = NewIncrementalOp(map[string]any{"preset": "parakeet-80", "n_fft": 1}, runtime.CPU)
	require.ErrorContains(t, err, "n_fft")

	require.ErrorContains(t, s.NormalizeWindow(make([]float32, 81)), "not whole frames")
	p, err := NewIncremental(mustPreset(t, "parakeet-80"))
	require.NoError(t, err)
	require.ErrorContains(t, p.NormalizeWindow(make([]float32, 80)), "at least 2")
}

// TestIncrementalHoldsBoundedAudio: a long stream keeps about two windows
// of samples, whatever was written.
func TestIncrementalHoldsBoundedAudio(t *testing.T) {
	cfg := mustPreset(t, "parakeet-80")
	cfg.Normalize = None
	s, err := NewIncremental(cfg)
	require.NoError(t, err)
	x := noisySpeech(16000, 2)
	var out []float32
	for range 20 {
		out, err = s.Write(context.Background(), x, out[:0])
		require.NoError(t, err)
		require.Less(t, len(s.buf), 16000+2*512+s.group*cfg.HopLength)
	}
}

// TestReadyFrames: ReadyFrames(n) is what Write has returned after n
// samples, however they were cut.
func TestReadyFrames(t *testing.T) {
	for name, cfg := range causalConfigs(t) {
		s, err := NewIncremental(cfg)
		require.NoError(t, err)
		x := noisySpeech(6000, 3)
		var out []float32
		for i := range x {
			out, err = s.Write(context.Background(), x[i:i+1], out)
			require.NoError(t, err)
			require.Equal(t, len(out)/cfg.NumMels, s.ReadyFrames(i+1), "%s after %d samples", name, i+1)
		}
	}
}
