package vad

import (
	"fmt"
	"math"
	"time"
)

// Rules are the hysteresis rules that turn per-window speech probabilities
// into speech segments: those of Silero's get_speech_timestamps (see the
// package doc), each one a field. DefaultRules returns Silero's defaults.
type Rules struct {
	// Threshold: a window whose probability is >= Threshold is speech
	// (Silero threshold, 0.5). In (0, 1].
	Threshold float64
	// NegThreshold: once in speech, a window whose probability is below
	// NegThreshold is silence (Silero neg_threshold). 0 means Silero's
	// default, max(Threshold-0.15, 0.01). In [0, Threshold].
	NegThreshold float64
	// MinSpeech: speech that ends after lasting MinSpeech or less (before
	// padding) is dropped (Silero min_speech_duration_ms, 250 ms).
	MinSpeech time.Duration
	// MinSilence: speech ends only after this much silence (Silero
	// min_silence_duration_ms, 100 ms).
	MinSilence time.Duration
	// SpeechPad widens each segment by this much on each side, or by half
	// the gap when two segments are closer than twice this (Silero
	// speech_pad_ms, 30 ms).
	SpeechPad time.Duration
	// MaxSpeech splits speech that runs longer than MaxSpeech (Silero
	// max_speech_duration_s; 0 means no limit, Silero's inf). It must then
	// exceed one window (32 ms) plus twice SpeechPad.
	MaxSpeech time.Duration
	// MinSilenceAtMaxSpeech: the pauses inside a too-long segment that are
	// candidates for its split point must last longer than this (Silero
	// min_silence_at_max_speech, 98 ms).
	MinSilenceAtMaxSpeech time.Duration
	// SplitAtLongestPause splits a too-long segment at its longest
	// candidate pause (Silero use_max_poss_sil_at_max_speech, true); false
	// is Silero's legacy rule (the last such pause, else right at the limit).
	SplitAtLongestPause bool
}

// DefaultRules returns Silero's defaults: threshold 0.5, negative threshold
// 0.35, minimum speech 250 ms, minimum silence 100 ms, speech pad 30 ms, no
// maximum segment length (98 ms candidate pauses, split at the longest).
func DefaultRules() Rules {
	return Rules{
		Threshold:             0.5,
		MinSpeech:             250 * time.Millisecond,
		MinSilence:            100 * time.Millisecond,
		SpeechPad:             30 * time.Millisecond,
		MinSilenceAtMaxSpeech: 98 * time.Millisecond,
		SplitAtLongestPause:   true,
	}
}

// EffectiveNegThreshold is NegThreshold, or Silero's default for 0.
func (r Rules) EffectiveNegThreshold() float64 {
	if r.NegThreshold == 0 {
		return math.Max(r.Threshold-0.15, 0.01)
	}
	return r.NegThreshold
}

// Validate reports the first rule out of range.
func (r Rules) Validate() error {
	if !(r.Threshold > 0 && r.Threshold <= 1) {
		return fmt.Errorf("vad: threshold %v is outside (0, 1]", r.Threshold)
	}
	if !(r.NegThreshold >= 0 && r.NegThreshold <= r.Threshold) {
		return fmt.Errorf("vad: negative threshold %v is outside [0, threshold %v] (0 means max(threshold-0.15, 0.01))", r.NegThreshold, r.Threshold)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"minimum speech", r.MinSpeech}, {"minimum silence", r.MinSilence}, {"speech pad", r.SpeechPad},
		{"maximum speech", r.MaxSpeech}, {"minimum silence at maximum speech", r.MinSilenceAtMaxSpeech}} {
		if d.v < 0 {
			return fmt.Errorf("vad: %s %v is negative", d.name, d.v)
		}
	}
	if lo := windowDuration + 2*r.SpeechPad; r.MaxSpeech != 0 && r.MaxSpeech <= lo {
		return fmt.Errorf("vad: maximum speech %v must exceed one window (%v) plus twice the speech pad (%v), or be 0 (no limit)", r.MaxSpeech, windowDuration, 2*r.SpeechPad)
	}
	return nil
}

// windowDuration is the model's window at both of its rates (512 / 16 kHz, 256 / 8 kHz).
const windowDuration = 32 * time.Millisecond

// sampleRules are Rules in samples at one rate, computed in float64 the
// way get_speech_timestamps computes them (sampling_rate * ms / 1000), so
// that every comparison matches Python's int-versus-float ones.
type sampleRules struct {
	threshold, negThreshold float64
	minSpeech, minSilence   float64
	pad                     float64
	maxSpeech               float64 // +Inf without a limit
	minSilenceAtMaxSpeech   float64
	splitLongest            bool
}

func (r Rules) samples(sampleRate, window int) sampleRules {
	sr := float64(sampleRate)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	pad := sr * ms(r.SpeechPad) / 1000
	maxSpeech := math.Inf(1)
	if r.MaxSpeech > 0 {
		maxSpeech = sr*r.MaxSpeech.Seconds() - float64(window) - 2*pad
	}
	return sampleRules{
		threshold:             r.Threshold,
		negThreshold:          r.EffectiveNegThreshold(),
		minSpeech:             sr * ms(r.MinSpeech) / 1000,
		minSilence:            sr * ms(r.MinSilence) / 1000,
		pad:                   pad,
		maxSpeech:             maxSpeech,
		minSilenceAtMaxSpeech: sr * ms(r.MinSilenceAtMaxSpeech) / 1000,
		splitLongest:          r.SplitAtLongestPause,
	}
}
