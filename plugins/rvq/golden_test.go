package rvq

import (
	"archive/zip"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/npy"
)

// goldenDir holds the output of scripts/golden/rvq.py: inputs from seed 001's
// generator and outputs of its torch reference, made on the GPU host.
const goldenDir = "testdata/golden"

type goldenCase struct {
	Name      string  `json:"name"`
	B         int     `json:"B"`
	T         int     `json:"T"`
	Q         int     `json:"Q"`
	K         int     `json:"K"`
	D         int     `json:"D"`
	Seed      int     `json:"seed"`
	File      string  `json:"file"`
	Codebooks string  `json:"codebooks"`
	MinMargin float64 `json:"min_margin"`
}

type goldenManifest struct {
	Torch  string       `json:"torch"`
	Device string       `json:"device"`
	Cases  []goldenCase `json:"cases"`
}

func loadManifest(t testing.TB) goldenManifest {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(goldenDir, "manifest.json"))
	require.NoError(t, err)
	var m goldenManifest
	require.NoError(t, json.Unmarshal(raw, &m))
	require.NotEmpty(t, m.Cases)
	return m
}

// readNPZ reads every array of an .npz archive (numpy.savez_compressed).
func readNPZ(t testing.TB, path string) map[string]*runtime.Tensor {
	t.Helper()
	z, err := zip.OpenReader(path)
	require.NoError(t, err)
	defer z.Close()
	out := map[string]*runtime.Tensor{}
	for _, f := range z.File {
		rc, err := f.Open()
		require.NoError(t, err)
		ten, err := npy.Read(rc, int64(f.UncompressedSize64))
		rc.Close()
		require.NoError(t, err, "%s: %s", path, f.Name)
		out[strings.TrimSuffix(f.Name, ".npy")] = ten
	}
	return out
}

func relFrobenius(got, want []float32) float64 {
	var num, den float64
	for i := range got {
		d := float64(got[i]) - float64(want[i])
		num += d * d
		den += float64(want[i]) * float64(want[i])
	}
	return math.Sqrt(num / den)
}

// TestGolden runs rvq_encode and rvq_decode through the op registry on the
// seed's correctness shapes and a graded shape with B reduced, with every
// micro-kernel: codes must equal torch's exactly, quantized within 1e-6
// relative Frobenius (it is in fact bit-identical), and decoding the codes
// must give quantized bit for bit.
func TestGolden(t *testing.T) {
	m := loadManifest(t)
	t.Logf("goldens from torch %s on %s", m.Torch, m.Device)
	enc, err := runtime.New("rvq_encode", nil, runtime.CPU)
	require.NoError(t, err)
	dec, err := runtime.New("rvq_decode", nil, runtime.CPU)
	require.NoError(t, err)
	for _, c := range m.Cases {
		data := readNPZ(t, filepath.Join(goldenDir, c.File))
		cb := readNPZ(t, filepath.Join(goldenDir, c.Codebooks))["codebooks"]
		require.Equal(t, runtime.Shape{c.Q, c.K, c.D}, cb.Shape(), c.Name)
		require.Equal(t, runtime.Shape{c.B, c.T, c.D}, data["x"].Shape(), c.Name)
		wantCodes, wantQ := data["codes"].I32(), data["quantized"].F32()
		for name, k := range kernels {
			t.Run(c.Name+"/"+name, func(t *testing.T) {
				if raceEnabled && name == "go" && len(kernels) > 1 && c.B*c.T*c.Q > 2000 {
					// The race detector checks the concurrent driver, which is
					// the same for every kernel; the instrumented portable
					// kernel would take minutes here. `make test` also runs
					// the golden tests without -race, where it runs.
					t.Skip("portable kernel on a large case under -race: make test runs it without -race")
				}
				withKernel(t, k)
				out, err := enc.Run(context.Background(), runtime.Tensors{"x": data["x"], "codebooks": cb})
				require.NoError(t, err)
				codes := out["codes"].I32()
				mismatch := 0
				for i := range codes {
					if codes[i] != wantCodes[i] {
						mismatch++
					}
				}
				require.Zero(t, mismatch, "%d of %d codes differ from torch (B,T,Q,K,D = %d,%d,%d,%d,%d; min margin %.3f)",
					mismatch, len(codes), c.B, c.T, c.Q, c.K, c.D, c.MinMargin)
				rel := relFrobenius(out["quantized"].F32(), wantQ)
				assert.LessOrEqual(t, rel, 1e-6, "quantized relative Frobenius error")
				t.Logf("codes exact, quantized rel. Frobenius %.3g", rel)

				back, err := dec.Run(context.Background(), runtime.Tensors{"codes": out["codes"], "codebooks": cb})
				require.NoError(t, err)
				assert.Equal(t, out["quantized"].F32(), back["quantized"].F32(), "decode(encode(x)) != quantized")
			})
		}
	}
}
