package fbank

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// PadMode is how samples are supplied beyond the clip's ends.
type PadMode string

// Pad modes (seed 003's MelConfig.pad_mode).
const (
	// PadReflect mirrors n_fft/2 samples at both ends (torch.stft center=True,
	// pad_mode="reflect"). Frames: 1 + (N + 2·(n_fft/2) - n_fft)/hop.
	PadReflect PadMode = "reflect"
	// PadConstant pads n_fft/2 zeros at both ends; same frame count.
	PadConstant PadMode = "constant"
	// PadNone is torch center=False as LASR/MedASR use it: no padding, the
	// window sits at the start of the n_fft buffer, frames (N - win)/hop + 1.
	PadNone PadMode = "none"
)

// WindowType selects the analysis window when no checkpoint window is given.
type WindowType string

// Window types.
const (
	// HannSymmetric is torch.hann_window(win, periodic=False): 0.5 - 0.5cos(2πk/(win-1)).
	HannSymmetric WindowType = "hann_symmetric"
	// HannPeriodic is torch.hann_window(win, periodic=True): 0.5 - 0.5cos(2πk/win).
	HannPeriodic WindowType = "hann_periodic"
)

// Normalize is the post-log normalisation.
type Normalize string

// Normalisation modes.
const (
	// PerFeature (NeMo): ln(mel + 2⁻²⁴), then per mel bin (x - mean)/(std + 1e-5)
	// with mean and unbiased std over the valid frames; frames past the valid
	// count are 0.
	PerFeature Normalize = "per_feature"
	// PerUtterance (Whisper): log10(max(mel, 1e-10)), clamp below at the
	// utterance maximum - 8, then (x + 4)/4. Centred modes drop the last STFT frame.
	PerUtterance Normalize = "per_utterance"
	// None emits ln(mel + 2⁻²⁴), or ln(max(mel, log_clamp_min)) when
	// log_clamp_min > 0; frames past the valid count are 0.
	None Normalize = "none"
	// Global (Voxtral realtime): like PerUtterance but the clamp floor is
	// global_log_mel_max - 8, a constant, so every frame is causal.
	Global Normalize = "global"
	// Fixed (NeMo's normalize {fixed_mean, fixed_std}): ln(mel + 2⁻²⁴),
	// then per mel bin (x - fixed_mean[m]) / fixed_std[m], statistics given
	// by the model, so every frame is causal; frames past the valid count are 0.
	Fixed Normalize = "fixed"
)

// Layout is the per-item output layout.
type Layout string

// Layouts.
const (
	MelTime Layout = "mel_time" // [n_mels, T] per item (Whisper, NeMo encoders)
	TimeMel Layout = "time_mel" // [T, n_mels] per item (HF Parakeet)
)

// ValidFrames is the rule for how many frames of a clip of N samples count as
// valid (the `lengths` output, the per-feature statistics and the mask) in
// the per_feature and none modes. Frames past the valid count are 0.
type ValidFrames string

// Valid-frame rules.
const (
	// ValidSTFT: every STFT frame, N/hop + 1 when centred (NeMo < 2.5,
	// nemo128.onnx exports).
	ValidSTFT ValidFrames = "stft"
	// ValidFloor: (N + 2·(n_fft/2) - n_fft)/hop = N/hop for even n_fft (NeMo
	// >= 2.5, HF ParakeetFeatureExtractor); the last STFT frame is masked.
	ValidFloor ValidFrames = "floor"
	// ValidCeil: ceil(N/hop) (seed 003's nemo_seq_len_ceil, Sortformer).
	ValidCeil ValidFrames = "ceil"
)

// Numerical constants of the reference implementations.
const (
	logGuard   = 1.0 / (1 << 24) // NeMo/HF Parakeet ln(x + 2^-24)
	stdEpsilon = 1e-5            // NeMo/HF Parakeet (x - mean)/(std + 1e-5)
	log10Floor = 1e-10           // Whisper clamp(min=1e-10).log10()
	clampRange = 8.0             // Whisper max - 8
)

// Config is a complete log-mel frontend: every knob of seed 003's MelConfig
// plus the output layout, the valid-frame rule and Whisper's 30 s padding.
type Config struct {
	SampleRate  int     // Hz; the pcm must already be at this rate
	NumMels     int     // mel filters
	NFFT        int     // FFT size, any value >= 2
	WinLength   int     // window length in samples, <= NFFT
	HopLength   int     // samples between frame starts
	PreEmphasis float64 // y[i] = x[i] - a·x[i-1], y[0] = x[0]; 0 disables
	FMin, FMax  float64 // Hz, the Slaney filterbank's range

	PadMode     PadMode
	WindowType  WindowType
	Normalize   Normalize
	ValidFrames ValidFrames

	// GlobalLogMelMax is the fixed log10 maximum of Normalize == Global.
	GlobalLogMelMax float64
	// LogClampMin > 0 (Normalize == None only) switches the log to ln(max(x, LogClampMin)).
	LogClampMin float64
	// Filterbank, when non-nil, replaces the Slaney filterbank: row-major
	// [NumMels, NFFT/2+1] weights from a checkpoint.
	Filterbank []float64
	// Window, when non-nil, replaces the Hann window: [WinLength] values.
	Window []float64
	// FixedMean and FixedStd are Normalize == Fixed's per-bin statistics,
	// [NumMels] each (std > 0).
	FixedMean, FixedStd []float64
	// OutFrames > 0 sets how many leading frames PerUtterance/Global emit (the
	// maximum is taken over exactly those frames); 0 keeps the mode's rule.
	OutFrames int
	// PadToSeconds > 0 zero-pads (or truncates) every clip to that many
	// seconds before the STFT, like WhisperFeatureExtractor's default
	// padding="max_length" to 30 s; lengths then count the frames that
	// overlap real samples, ceil(N/hop), as HF's attention mask does.
	PadToSeconds float64
	Layout       Layout
}

// preset is a named Config with the implementation it reproduces.
type preset struct {
	cfg    Config
	source string
}

// presets is built by a variable initialiser (not init) so that the op's
// parameter list, itself a package variable, sees every name.
var presets = buildPresets()

func buildPresets() map[string]preset {
	presets := map[string]preset{}
	whisper := Config{SampleRate: 16000, GlobalLogMelMax: 1.5, NFFT: 400, WinLength: 400, HopLength: 160, FMax: 8000,
		PadMode: PadReflect, WindowType: HannPeriodic, Normalize: PerUtterance, ValidFrames: ValidSTFT, Layout: MelTime}
	parakeet := Config{SampleRate: 16000, GlobalLogMelMax: 1.5, NFFT: 512, WinLength: 400, HopLength: 160, PreEmphasis: 0.97, FMax: 8000,
		PadMode: PadConstant, WindowType: HannSymmetric, Normalize: PerFeature, ValidFrames: ValidFloor, Layout: TimeMel}
	legacy := parakeet
	legacy.PadMode, legacy.ValidFrames = PadReflect, ValidSTFT
	for _, mels := range []int{80, 128} {
		w, p, l := whisper, parakeet, legacy
		w.NumMels, p.NumMels, l.NumMels = mels, mels, mels
		presets[fmt.Sprintf("whisper-%d", mels)] = preset{w, "HF transformers WhisperFeatureExtractor(feature_size=" +
			fmt.Sprint(mels) + "): periodic Hann 400, reflect pad 200, |X|², Slaney mel 0-8 kHz, log10 floor 1e-10, " +
			"clamp max-8, (x+4)/4, last STFT frame dropped; set pad_to_seconds=30 for its default 30 s padding"}
		presets[fmt.Sprintf("parakeet-%d", mels)] = preset{p, "HF transformers ParakeetFeatureExtractor(feature_size=" +
			fmt.Sprint(mels) + ") = NeMo >= 2.5: preemphasis 0.97, symmetric Hann 400 centred in n_fft 512, zero pad 256, " +
			"|X|², Slaney mel, ln(x+2^-24), per-feature mean/unbiased std over N/hop frames, last frame 0"}
		presets[fmt.Sprintf("nemo-legacy-%d", mels)] = preset{l, "NeMo < 2.5 FilterbankFeatures as exported in nemo128.onnx: " +
			"as parakeet but reflect pad and N/hop+1 valid frames"}
	}
	return presets
}

// Presets lists the preset names, sorted.
func Presets() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Preset returns a copy of a named preset's Config.
func Preset(name string) (Config, error) {
	p, ok := presets[name]
	if !ok {
		return Config{}, fmt.Errorf("unknown fbank preset %q (want one of %s)", name, strings.Join(Presets(), ", "))
	}
	return p.cfg, nil
}

// maxNFFT bounds the FFT size (and so the per-worker scratch) a config may ask for.
const maxNFFT = 1 << 16

// validate reports the first inconsistent field, naming its parameter.
func (c *Config) validate() error {
	switch {
	case c.SampleRate <= 0:
		return fmt.Errorf("sample_rate %d: want > 0", c.SampleRate)
	case c.NumMels <= 0 || c.NumMels > 4096:
		return fmt.Errorf("num_mels %d: want 1..4096", c.NumMels)
	case c.NFFT < 2 || c.NFFT > maxNFFT:
		return fmt.Errorf("n_fft %d: want 2..%d", c.NFFT, maxNFFT)
	case c.WinLength < 1 || c.WinLength > c.NFFT:
		return fmt.Errorf("win_length %d: want 1..n_fft (%d)", c.WinLength, c.NFFT)
	case c.HopLength < 1:
		return fmt.Errorf("hop_length %d: want >= 1", c.HopLength)
	case !(c.PreEmphasis >= 0 && c.PreEmphasis < 1):
		return fmt.Errorf("pre_emphasis %v: want 0 <= a < 1", c.PreEmphasis)
	case !(c.FMin >= 0 && c.FMin < c.FMax && c.FMax <= float64(c.SampleRate)/2):
		return fmt.Errorf("f_min %v, f_max %v: want 0 <= f_min < f_max <= sample_rate/2 (%v)", c.FMin, c.FMax, float64(c.SampleRate)/2)
	case math.IsNaN(c.GlobalLogMelMax) || math.IsInf(c.GlobalLogMelMax, 0):
		return fmt.Errorf("global_log_mel_max %v: want a finite number", c.GlobalLogMelMax)
	case !(c.LogClampMin >= 0) || math.IsInf(c.LogClampMin, 0):
		return fmt.Errorf("log_clamp_min %v: want a finite value >= 0", c.LogClampMin)
	case c.LogClampMin > 0 && c.Normalize != None:
		return fmt.Errorf("log_clamp_min %v applies only to normalize=none (normalize is %s)", c.LogClampMin, c.Normalize)
	case c.OutFrames < 0:
		return fmt.Errorf("out_frames %d: want >= 0", c.OutFrames)
	case c.OutFrames > 0 && c.Normalize != PerUtterance && c.Normalize != Global:
		return fmt.Errorf("out_frames applies only to normalize=per_utterance|global (normalize is %s)", c.Normalize)
	case !(c.PadToSeconds >= 0 && c.PadToSeconds <= 3600):
		return fmt.Errorf("pad_to_seconds %v: want 0..3600", c.PadToSeconds)
	}
	if err := oneOf("pad_mode", c.PadMode, PadReflect, PadConstant, PadNone); err != nil {
		return err
	}
	if err := oneOf("window_type", c.WindowType, HannSymmetric, HannPeriodic); err != nil {
		return err
	}
	if err := oneOf("normalize", c.Normalize, PerFeature, PerUtterance, None, Global, Fixed); err != nil {
		return err
	}
	if c.Normalize == Fixed {
		if len(c.FixedMean) != c.NumMels || len(c.FixedStd) != c.NumMels {
			return fmt.Errorf("normalize=fixed needs fixed_mean and fixed_std of num_mels = %d values each (have %d and %d)", c.NumMels, len(c.FixedMean), len(c.FixedStd))
		}
		for m := range c.FixedMean {
			if mu, sd := c.FixedMean[m], c.FixedStd[m]; math.IsNaN(mu) || math.IsInf(mu, 0) || !(sd > 0) || math.IsInf(sd, 0) {
				return fmt.Errorf("fixed_mean[%d] = %v, fixed_std[%d] = %v: want a finite mean and a finite std > 0", m, mu, m, sd)
			}
		}
	} else if c.FixedMean != nil || c.FixedStd != nil {
		return fmt.Errorf("fixed_mean/fixed_std apply only to normalize=fixed (normalize is %s)", c.Normalize)
	}
	if err := oneOf("valid_frames", c.ValidFrames, ValidSTFT, ValidFloor, ValidCeil); err != nil {
		return err
	}
	if err := oneOf("layout", c.Layout, MelTime, TimeMel); err != nil {
		return err
	}
	if c.Window != nil && len(c.Window) != c.WinLength {
		return fmt.Errorf("window has %d values, want win_length = %d", len(c.Window), c.WinLength)
	}
	for i, v := range c.Window {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("window[%d] is %v, want a finite value", i, v)
		}
	}
	return nil
}

func oneOf[T ~string](name string, v T, allowed ...T) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	s := make([]string, len(allowed))
	for i, a := range allowed {
		s[i] = string(a)
	}
	return fmt.Errorf("%s %q: want one of %s", name, string(v), strings.Join(s, " | "))
}

// centred reports whether frames are centred on t·hop (reflect/constant padding).
func (c *Config) centred() bool { return c.PadMode != PadNone }

// padSamples is the number of samples a clip is padded or cut to (0: as is).
func (c *Config) padSamples() int {
	return int(math.Round(c.PadToSeconds * float64(c.SampleRate)))
}

// geometry is the frame bookkeeping of one clip.
type geometry struct {
	n        int // samples the STFT sees (after pad_to_seconds)
	real     int // samples taken from the clip (the rest are zeros)
	stft     int // STFT frames
	emit     int // frames in this item's output rows (before batch padding)
	computed int // leading frames with features; the rest are 0
	valid    int // the lengths output
}

// geometry computes the frame counts for a clip of n samples, or says why
// the clip is too short.
func (c *Config) geometry(n int) (geometry, error) {
	g := geometry{n: n, real: n}
	if p := c.padSamples(); p > 0 {
		g.n, g.real = p, min(n, p)
	}
	if n == 0 {
		return g, fmt.Errorf("is empty, want at least win_length = %d samples", c.WinLength)
	}
	if g.n < c.WinLength {
		return g, fmt.Errorf("has %d samples, want at least win_length = %d (one %.1f ms window)",
			n, c.WinLength, 1000*float64(c.WinLength)/float64(c.SampleRate))
	}
	pad := 0
	if c.centred() {
		pad = c.NFFT / 2
		if c.PadMode == PadReflect && pad >= g.n {
			return g, fmt.Errorf("has %d samples, reflect padding by n_fft/2 = %d needs more", g.n, pad)
		}
		g.stft = 1 + (g.n+2*pad-c.NFFT)/c.HopLength
	} else {
		g.stft = 1 + (g.n-c.WinLength)/c.HopLength
	}
	switch c.Normalize {
	case PerUtterance, Global:
		g.emit = g.stft
		if c.centred() {
			g.emit--
		}
		if c.OutFrames > 0 {
			if c.OutFrames > g.stft {
				return g, fmt.Errorf("gives %d STFT frames, fewer than out_frames = %d", g.stft, c.OutFrames)
			}
			g.emit = c.OutFrames
		}
		if g.emit < 1 {
			return g, fmt.Errorf("has %d samples, too few for one output frame", n)
		}
		g.computed = g.emit
		g.valid = min(g.emit, ceilDiv(g.real, c.HopLength))
	default:
		g.emit = g.stft
		switch c.ValidFrames {
		case ValidSTFT:
			g.valid = g.stft
		case ValidFloor:
			g.valid = (g.n + 2*pad - c.NFFT) / c.HopLength
			if !c.centred() {
				g.valid = g.stft
			}
		case ValidCeil:
			g.valid = ceilDiv(g.n, c.HopLength)
		}
		g.valid = min(g.valid, g.stft)
		if c.Normalize == PerFeature && g.valid < 2 {
			return g, fmt.Errorf("has %d samples, %d valid frame(s); per_feature normalisation needs at least 2", n, g.valid)
		}
		if g.valid < 1 {
			return g, fmt.Errorf("has %d samples, too few for one valid frame", n)
		}
		g.computed = g.valid
	}
	return g, nil
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
