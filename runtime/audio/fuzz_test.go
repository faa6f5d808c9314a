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
