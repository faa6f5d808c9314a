package dpx

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/npy"
)

// goldenDir holds the files written by scripts/golden/dpx.py.
const goldenDir = "testdata/golden"

type goldenManifest struct {
	Torchaudio string `json:"torchaudio"`
	CTC        []struct {
		Name        string  `json:"name"`
		Blank       int     `json:"blank"`
		Star        bool    `json:"star"`
		StarLogProb float32 `json:"star_logprob"`
		T, L, C     int
	} `json:"ctc"`
	Viterbi []struct{ Name string } `json:"viterbi"`
	DTW     []struct{ Name string } `json:"dtw"`
	// Fixed lists the int32 fixed-point goldens (scripts/golden/dpx.py
	// integer loops) at Scale quanta per unit.
	Fixed struct {
		Scale float64 `json:"scale"`
		CTC   []struct {
			Name  string `json:"name"`
			Blank int    `json:"blank"`
		} `json:"ctc"`
		Viterbi []struct{ Name string } `json:"viterbi"`
		DTW     []struct{ Name string } `json:"dtw"`
	} `json:"fixed"`
}

func readManifest(t *testing.T) goldenManifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(goldenDir, "cases.json"))
	require.NoError(t, err)
	var m goldenManifest
	require.NoError(t, json.Unmarshal(b, &m))
	require.NotEmpty(t, m.CTC, "no CTC goldens: regenerate with scripts/golden/dpx.py on a host with torchaudio")
	require.Regexp(t, `^2\.\d+`, m.Torchaudio, "CTC goldens must come from a real torchaudio")
	require.NotEmpty(t, m.Viterbi)
	require.NotEmpty(t, m.DTW)
	return m
}

func readGolden(t *testing.T, name string) *runtime.Tensor {
	t.Helper()
	x, err := npy.ReadFile(filepath.Join(goldenDir, name+".npy"))
	require.NoError(t, err)
	return x
}

func toInts(x []int64) []int {
	out := make([]int, len(x))
	for i, v := range x {
		out[i] = int(v)
	}
	return out
}
