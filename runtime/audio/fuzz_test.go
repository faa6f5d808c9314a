package audio

import (
	"bytes"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzDecode feeds arbitrary bytes to Decode. Its seed corpus,
// testdata/fuzz/FuzzDecode (WAV variants from encodeWAV and sox, valid and
// lying), runs in every plain `go test`; `go test -fuzz FuzzDecode
// ./runtime/audio` explores from there.
//
// Invariants: no panic; a decoded clip is consistent (channels and rate >= 1,
// whole frames, finite samples, at most 4 float32 per input byte); the result
// does not depend on whether the input size is known; Mono has one sample per
// frame.
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		clip, err := Decode(bytes.NewReader(data), int64(len(data)))
		clip2, err2 := Decode(bytes.NewReader(data), -1)
		require.Equal(t, err == nil, err2 == nil, "known size: %v; unknown size: %v", err, err2)
		if err != nil {
			require.ErrorContains(t, err, "wav: ")
			return
		}
		require.Equal(t, clip, clip2)
		require.GreaterOrEqual(t, clip.Channels, 1)
		require.GreaterOrEqual(t, clip.SampleRate, 1)
		require.Zero(t, len(clip.Samples)%clip.Channels)
		require.LessOrEqual(t, len(clip.Samples), len(data))
		for i, v := range clip.Samples {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("sample %d is %v", i, v)
			}
		}
		require.Len(t, clip.Mono(), clip.Frames())
	})
}

// FuzzResample checks the polyphase tables for arbitrary rate pairs (rates
// come from untrusted file headers) against the direct windowed-sinc formula
// on a short input: same length, values within float32 rounding (equal rates:
// the input unchanged). Rates that
// need too large a filter bank must be refused with an error, not a panic.
func FuzzResample(f *testing.F) {
	for _, c := range [][3]int{{48000, 16000, 40}, {44100, 16000, 33}, {8000, 16000, 5}, {7, 3, 9}, {3, 7, 1}, {16000, 44100, 20}, {1, 768000, 2}} {
		f.Add(uint32(c[0]), uint32(c[1]), uint8(c[2]), int64(1))
	}
	f.Fuzz(func(t *testing.T, from, to uint32, n uint8, seed int64) {
		from, to = from%100000+1, to%100000+1
		r, err := NewResampler(int(from), int(to), QualityFast)
		if err != nil {
			require.ErrorContains(t, err, "cannot resample")
			return
		}
		x := make([]float32, int(n)%48)
		for i := range x {
			x[i] = float32(math.Sin(float64(seed) + float64(i)*1.7))
		}
		y, err := r.Resample(x)
		require.NoError(t, err)
		if from == to { // identity, as in torchaudio
			require.Equal(t, x, y)
			return
		}
		require.Len(t, y, int(math.Ceil(float64(len(x))*float64(to)/float64(from))))
		// Up to 256 output samples spread over the output, first and last included.
		step := max(1, len(y)/256)
		for j := 0; j < len(y); j += step {
			for _, k := range []int{j, len(y) - 1 - j} {
				want := directSincAt(x, int(from), int(to), QualityFast, k)
				require.InDelta(t, want, y[k], 2e-6, "%d -> %d Hz, sample %d of %d", from, to, k, len(y))
			}
		}
	})
}
