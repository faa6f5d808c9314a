package fbank

import (
	"path/filepath"
	"testing"

	"github.com/edgespeech/edge/runtime/audio"
)

// loadWAV reads testdata/NAME.wav as 16 kHz mono samples.
func loadWAV(tb testing.TB, name string) []float32 {
	tb.Helper()
	x, err := audio.Load(filepath.Join("testdata", name+".wav"), 16000)
	if err != nil {
		tb.Fatal(err)
	}
	return x
}
