package fbank

import (
	"context"
	"math"
	"math/cmplx"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// naiveFbank is a deliberately plain second implementation of the same
// contract, written the way the reference libraries describe it: an
// explicitly padded float64 signal, frames sliced out of it, an O(n²) DFT,
// the dense filterbank, math.Log and the textbook statistics. It returns
// [T][n_mels] features and the valid-frame count.
func naiveFbank(cfg Config, x []float32) ([][]float64, int) {
	n, realN := len(x), len(x)
	if p := cfg.padSamples(); p > 0 {
		n, realN = p, min(len(x), p)
	}
	// Pre-emphasis over the real samples; zeros after them.
	s := make([]float64, n)
	for i := 0; i < realN; i++ {
		s[i] = float64(x[i])
		if i > 0 {
			s[i] -= cfg.PreEmphasis * float64(x[i-1])
		}
	}
	win := cfg.Window
	if win == nil {
		win = make([]float64, cfg.WinLength)
		den := float64(cfg.WinLength - 1)
		if cfg.WindowType == HannPeriodic {
			den = float64(cfg.WinLength)
		}
		for k := range win {
			win[k] = 0.5 * (1 - math.Cos(2*math.Pi*float64(k)/den))
		}
	}
	buf := make([]float64, cfg.NFFT) // the window inside the n_fft frame
	var signal []float64
	var frames int
	if cfg.PadMode == PadNone {
		copy(buf, win)
		signal = s
		frames = 1 + (n-cfg.WinLength)/cfg.HopLength
	} else {
		copy(buf[(cfg.NFFT-cfg.WinLength)/2:], win)
		pad := cfg.NFFT / 2
		signal = make([]float64, n+2*pad)
		for j := range signal {
			i := j - pad
			switch {
			case i >= 0 && i < n:
				signal[j] = s[i]
			case cfg.PadMode == PadReflect && i < 0:
				signal[j] = s[-i]
			case cfg.PadMode == PadReflect:
				signal[j] = s[2*(n-1)-i]
			}
		}
		frames = 1 + (len(signal)-cfg.NFFT)/cfg.HopLength
	}
	bank := slaneyFilterbank(cfg.SampleRate, cfg.NFFT, cfg.NumMels, cfg.FMin, cfg.FMax)
	if cfg.Filterbank != nil {
		nf := cfg.NFFT/2 + 1
		for i := range bank {
			bank[i] = cfg.Filterbank[i*nf : (i+1)*nf]
		}
	}
	logMel := func(t int) []float64 {
		power := make([]float64, cfg.NFFT/2+1)
		for k := range power {
			var acc complex128
			for j := 0; j < cfg.NFFT; j++ {
				v := 0.0
				if idx := t*cfg.HopLength + j; idx < len(signal) {
					v = signal[idx] * buf[j]
				}
				acc += complex(v, 0) * cmplx.Exp(complex(0, -2*math.Pi*float64(j*k%cfg.NFFT)/float64(cfg.NFFT)))
			}
			power[k] = real(acc)*real(acc) + imag(acc)*imag(acc)
		}
		out := make([]float64, cfg.NumMels)
		for m, row := range bank {
			var e float64
			for k, w := range row {
				e += w * power[k]
			}
			switch {
			case cfg.Normalize == PerUtterance || cfg.Normalize == Global:
				out[m] = math.Log10(math.Max(e, 1e-10))
			case cfg.LogClampMin > 0:
				out[m] = math.Log(math.Max(e, cfg.LogClampMin))
			default:
				out[m] = math.Log(e + math.Pow(2, -24))
			}
		}
		return out
	}
	switch cfg.Normalize {
	case PerUtterance, Global:
		t := frames
		if cfg.PadMode != PadNone {
			t--
		}
		if cfg.OutFrames > 0 {
			t = cfg.OutFrames
		}
		feats := make([][]float64, t)
		top := math.Inf(-1)
		for i := range feats {
			feats[i] = logMel(i)
			for _, v := range feats[i] {
				top = math.Max(top, v)
			}
		}
		if cfg.Normalize == Global {
			top = cfg.GlobalLogMelMax
		}
		for _, row := range feats {
			for m, v := range row {
				row[m] = (math.Max(v, top-8) + 4) / 4
			}
		}
		return feats, min(t, (realN+cfg.HopLength-1)/cfg.HopLength)
	}
	valid := frames
	switch cfg.ValidFrames {
	case ValidFloor:
		if cfg.PadMode != PadNone {
			valid = (n + 2*(cfg.NFFT/2) - cfg.NFFT) / cfg.HopLength
		}
	case ValidCeil:
		valid = min(frames, (n+cfg.HopLength-1)/cfg.HopLength)
	}
	feats := make([][]float64, frames)
	for i := range feats {
		feats[i] = make([]float64, cfg.NumMels)
		if i < valid {
			feats[i] = logMel(i)
		}
	}
	if cfg.Normalize == PerFeature {
		for m := 0; m < cfg.NumMels; m++ {
			var mean, ss float64
			for t := 0; t < valid; t++ {
				mean += feats[t][m] / float64(valid)
			}
			for t := 0; t < valid; t++ {
				ss += (feats[t][m] - mean) * (feats[t][m] - mean)
			}
			std := math.Sqrt(ss / float64(valid-1))
			for t := 0; t < valid; t++ {
				feats[t][m] = (feats[t][m] - mean) / (std + 1e-5)
			}
		}
	}
	return feats, valid
}

// noisySpeech is a deterministic test signal: a tone, a chirp and noise.
func noisySpeech(n int, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 7))
	x := make([]float32, n)
	for i := range x {
		t := float64(i) / 16000
		x[i] = float32(0.3*math.Sin(2*math.Pi*220*t) + 0.2*math.Sin(2*math.Pi*(500+3000*t)*t) + 0.05*rng.NormFloat64())
	}
	return x
}

// TestMatchesNaiveReference checks every knob against naiveFbank.
func TestMatchesNaiveReference(t *testing.T) {
	with := func(preset string, edit func(c *Config)) Config {
		c, err := Preset(preset)
		require.NoError(t, err)
		edit(&c)
		return c
	}
	ones := make([]float64, 300)
	for i := range ones {
		ones[i] = 1
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		n    int
	}{
		{"whisper-80", with("whisper-80", func(*Config) {}), 4000},
		{"whisper odd length", with("whisper-80", func(*Config) {}), 4001},
		{"whisper out_frames", with("whisper-80", func(c *Config) { c.OutFrames = 20 }), 4000},
		{"whisper pad_to_seconds", with("whisper-80", func(c *Config) { c.PadToSeconds = 0.4 }), 3000},
		{"whisper truncated by pad_to_seconds", with("whisper-80", func(c *Config) { c.PadToSeconds = 0.2 }), 4000},
		{"global", with("whisper-80", func(c *Config) { c.Normalize, c.GlobalLogMelMax = Global, 0.5 }), 4000},
		{"parakeet-128", with("parakeet-128", func(*Config) {}), 4000},
		{"parakeet odd length", with("parakeet-80", func(*Config) {}), 4011},
		{"nemo-legacy-80", with("nemo-legacy-80", func(*Config) {}), 4000},
		{"valid ceil", with("parakeet-80", func(c *Config) { c.ValidFrames = ValidCeil }), 4011},
		{"valid ceil exact multiple", with("parakeet-80", func(c *Config) { c.ValidFrames = ValidCeil }), 4000},
		{"normalize none", with("parakeet-80", func(c *Config) { c.Normalize = None }), 4000},
		{"log_clamp_min", with("parakeet-80", func(c *Config) { c.Normalize, c.LogClampMin = None, 1e-5 }), 4000},
		{"pad none (LASR)", with("parakeet-80", func(c *Config) { c.PadMode = PadNone }), 4000},
		{"pad none per_utterance", with("whisper-80", func(c *Config) { c.PadMode = PadNone }), 4000},
		{"periodic window, no preemphasis", with("parakeet-80", func(c *Config) {
			c.WindowType, c.PreEmphasis = HannPeriodic, 0
		}), 4000},
		{"odd n_fft 401", with("whisper-80", func(c *Config) { c.NFFT, c.WinLength = 401, 401 }), 4000},
		{"n_fft 480 (16·15·2)", with("parakeet-80", func(c *Config) { c.NFFT, c.WinLength = 480, 480 }), 4000},
		{"prime half n_fft 2·97", with("parakeet-80", func(c *Config) { c.NFFT, c.WinLength, c.NumMels = 194, 150, 40 }), 4000},
		{"8 kHz, 20-3800 Hz", with("parakeet-80", func(c *Config) {
			c.SampleRate, c.NFFT, c.WinLength, c.HopLength, c.NumMels, c.FMin, c.FMax = 8000, 256, 200, 80, 40, 20, 3800
		}), 2000},
		{"checkpoint window", with("parakeet-80", func(c *Config) { c.WinLength, c.Window = 300, ones }), 4000},
		{"time_mel whisper", with("whisper-128", func(c *Config) { c.Layout = TimeMel }), 4000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := noisySpeech(tc.n, uint64(tc.n))
			fe, err := NewFrontend(tc.cfg)
			require.NoError(t, err)
			got, err := fe.Compute(context.Background(), [][]float32{x}, 3)
			require.NoError(t, err)
			want, valid := naiveFbank(tc.cfg, x)
			require.Equal(t, len(want), got.Frames, "frames")
			require.Equal(t, []int64{int64(valid)}, got.Lengths, "valid frames")
			var worst float64
			for tt, row := range want {
				for m, w := range row {
					i := m*got.Frames + tt
					if tc.cfg.Layout == TimeMel {
						i = tt*got.Mels + m
					}
					worst = math.Max(worst, math.Abs(float64(got.Data[i])-w)/math.Max(1, math.Abs(w)))
				}
			}
			require.Less(t, worst, 2e-5, "max relative diff vs the naive reference")
		})
	}
}
