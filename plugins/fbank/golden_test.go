package fbank

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/npy"
)

// The goldens in testdata/golden come from scripts/golden/fbank.py, run on
// the GPU host with transformers 5.17 / torch 2.11 (see manifest.json):
// HF WhisperFeatureExtractor (torch and numpy paths), HF
// ParakeetFeatureExtractor, and a float64 torch reference for nemo-legacy.

// Gates from issue 3.
const (
	whisperGate  = 1e-4 // every frame
	parakeetGate = 1e-3 // every valid frame; masked frames exactly 0
	legacyGate   = 1e-4 // our float64 torch reference: tighter than the HF gates
)

type goldenManifest struct {
	Transformers string            `json:"transformers"`
	Clips        map[string]int    `json:"clips"`
	Goldens      map[string]golden `json:"goldens"`
}

type golden struct {
	Shape   []int `json:"shape"`
	Frames  int   `json:"frames"`
	Head    int   `json:"head"`
	Valid   any   `json:"valid"` // int, or []int for the batch
	Samples []int `json:"samples"`
}

func readManifest(t *testing.T) goldenManifest {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "golden", "manifest.json"))
	require.NoError(t, err)
	var m goldenManifest
	require.NoError(t, json.Unmarshal(raw, &m))
	require.NotEmpty(t, m.Goldens)
	return m
}

func readGolden(t *testing.T, name string) *runtime.Tensor {
	t.Helper()
	g, err := npy.ReadFile(filepath.Join("testdata", "golden", name+".npy"))
	require.NoError(t, err)
	return g
}

// runOp runs the registered fbank op on one or more clips (a [B, N] batch
// with lengths when there are several).
func runOp(t *testing.T, cfg map[string]any, clips ...[]float32) (*runtime.Tensor, []int64) {
	t.Helper()
	inst, err := runtime.New("fbank", cfg, runtime.CPU)
	require.NoError(t, err)
	n := 0
	for _, c := range clips {
		n = max(n, len(c))
	}
	pcm := make([]float32, len(clips)*n)
	lengths := make([]int64, len(clips))
	for b, c := range clips {
		copy(pcm[b*n:], c)
		lengths[b] = int64(len(c))
	}
	var in runtime.Tensors
	if len(clips) == 1 {
		in = runtime.Tensors{"pcm": runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{n}, pcm))}
	} else {
		in = runtime.Tensors{
			"pcm":     runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{len(clips), n}, pcm)),
			"lengths": runtime.Must(runtime.FromSlice(runtime.I64, runtime.Shape{len(clips)}, lengths)),
		}
	}
	out, err := inst.Run(context.Background(), in)
	require.NoError(t, err)
	return out["features"], out["lengths"].I64()
}

// maxAbsDiff is max |a-b| over the elements selected by keep(index).
func maxAbsDiff(a, b []float32, keep func(i int) bool) float64 {
	var d float64
	for i := range a {
		if keep == nil || keep(i) {
			d = math.Max(d, math.Abs(float64(a[i])-float64(b[i])))
		}
	}
	return d
}

func TestGoldenWhisper(t *testing.T) {
	m := readManifest(t)
	worst := map[string]float64{}
	for _, mels := range []int{80, 128} {
		preset := fmt.Sprintf("whisper-%d", mels)
		for clip, n := range m.Clips {
			t.Run(preset+"/"+clip, func(t *testing.T) {
				got, lengths := runOp(t, map[string]any{"preset": preset}, loadWAV(t, clip))
				require.Equal(t, runtime.Shape{1, mels, n / 160}, got.Shape(), "frame count")
				require.Equal(t, []int64{int64(n / 160)}, lengths)
				for _, path := range []string{"", "__np"} {
					want := readGolden(t, preset+"__"+clip+path)
					require.Equal(t, got.Shape()[1:], want.Shape())
					d := maxAbsDiff(got.F32(), want.F32(), nil)
					worst["torch"+path] = math.Max(worst["torch"+path], d)
					require.LessOrEqual(t, d, whisperGate, "max |diff| vs HF%s", path)
				}
			})
		}
	}
	t.Logf("whisper max |diff| vs HF torch path %.3g, numpy path %.3g (gate %g)", worst["torch"], worst["torch__np"], whisperGate)
}

func TestGoldenWhisperPadded30s(t *testing.T) {
	m := readManifest(t)
	for _, clip := range []string{"speech_a", "speech_b"} {
		t.Run(clip, func(t *testing.T) {
			name := "whisper-128-pad30__" + clip
			meta := m.Goldens[name]
			head, tail := readGolden(t, name), readGolden(t, name+"__tail").F32()
			got, lengths := runOp(t, map[string]any{"preset": "whisper-128", "pad_to_seconds": 30}, loadWAV(t, clip))
			require.Equal(t, runtime.Shape{1, 128, 3000}, got.Shape())
			require.Equal(t, 3000, meta.Frames)
			require.Equal(t, []int64{int64(ceilDiv(m.Clips[clip], 160))}, lengths)
			g := got.F32()
			var dHead, dTail float64
			for mel := range 128 {
				row := g[mel*3000 : (mel+1)*3000]
				for tt, v := range row {
					var want float32
					if tt < meta.Head {
						want = head.F32()[mel*meta.Head+tt]
					} else {
						want = tail[mel]
					}
					d := math.Abs(float64(v - want))
					if tt < meta.Head {
						dHead = math.Max(dHead, d)
					} else {
						dTail = math.Max(dTail, d)
					}
				}
			}
			t.Logf("%s: max |diff| first %d frames %.3g, remaining frames %.3g", clip, meta.Head, dHead, dTail)
			require.LessOrEqual(t, dHead, whisperGate)
			require.LessOrEqual(t, dTail, whisperGate)
		})
	}
}

// checkTimeMel compares [T, mels] features with a golden: valid frames within
// gate, the rest exactly 0; it returns the max |diff| over valid frames.
func checkTimeMel(t *testing.T, got, want []float32, mels, valid int, gate float64) float64 {
	t.Helper()
	require.Equal(t, len(want), len(got))
	d := maxAbsDiff(got, want, func(i int) bool { return i/mels < valid })
	require.LessOrEqual(t, d, gate, "valid frames")
	for i := valid * mels; i < len(got); i++ {
		require.Zero(t, got[i], "masked frame %d must be exactly 0", i/mels)
		require.Zero(t, want[i], "golden masked frame %d", i/mels)
	}
	return d
}

func TestGoldenNeMo(t *testing.T) {
	m := readManifest(t)
	for _, family := range []string{"parakeet", "nemo-legacy"} {
		var worst float64
		gate := parakeetGate
		if family == "nemo-legacy" {
			gate = legacyGate
		}
		for _, mels := range []int{80, 128} {
			preset := fmt.Sprintf("%s-%d", family, mels)
			for clip, n := range m.Clips {
				t.Run(preset+"/"+clip, func(t *testing.T) {
					name := preset + "__" + clip
					meta, ok := m.Goldens[name]
					require.True(t, ok, "no golden %s", name)
					valid := int(meta.Valid.(float64))
					got, lengths := runOp(t, map[string]any{"preset": preset}, loadWAV(t, clip))
					require.Equal(t, runtime.Shape{1, n/160 + 1, mels}, got.Shape(), "frame count")
					require.Equal(t, []int64{int64(valid)}, lengths, "valid frames")
					want := readGolden(t, name).F32()
					if clip == "silence" && family == "parakeet" {
						checkSilence(t, got.F32(), want, mels, valid)
						return
					}
					worst = math.Max(worst, checkTimeMel(t, got.F32(), want, mels, valid, gate))
				})
			}
		}
		t.Logf("%s max |diff| on valid frames %.3g (gate %g)", family, worst, gate)
	}
}

// checkSilence: on all-zero audio every log-mel value is ln(2^-24), so the
// exact per-feature normalisation is 0/(0 + 1e-5) = 0, which is what we and
// the float64 reference give. HF computes the mean in float32, one ulp off
// ln(2^-24) (1.9e-6), and divides that by std + 1e-5 = 1.2e-5: its golden
// holds the constant -0.16. The test pins both facts rather than the noise.
func checkSilence(t *testing.T, got, want []float32, mels, valid int) {
	t.Helper()
	for i, v := range got {
		require.Zero(t, v, "silence features must be exactly 0 (index %d)", i)
	}
	ulp := float64(math.Nextafter32(16.635532, 17) - 16.635532)
	n := float64(valid)
	hfNoise := ulp / (ulp*math.Sqrt(n/(n-1)) + stdEpsilon)
	for i := 0; i < valid*mels; i++ {
		require.InDelta(t, hfNoise, math.Abs(float64(want[i])), 0.02, "HF silence golden is one-ulp mean noise")
	}
}

func TestGoldenParakeetBatch(t *testing.T) {
	m := readManifest(t)
	meta := m.Goldens["parakeet-128__batch"]
	want := readGolden(t, "parakeet-128__batch")
	got, lengths := runOp(t, map[string]any{"preset": "parakeet-128"}, loadWAV(t, "speech_a"), loadWAV(t, "speech_b"))
	require.Equal(t, want.Shape(), got.Shape())
	valid := meta.Valid.([]any)
	frames, mels := got.Shape()[1], got.Shape()[2]
	for b := range 2 {
		require.Equal(t, int64(valid[b].(float64)), lengths[b])
		item := func(x []float32) []float32 { return x[b*frames*mels : (b+1)*frames*mels] }
		d := checkTimeMel(t, item(got.F32()), item(want.F32()), mels, int(lengths[b]), parakeetGate)
		t.Logf("batch item %d: max |diff| %.3g over %d valid frames", b, d, lengths[b])
	}
}

func TestGoldenFilterbanks(t *testing.T) {
	for _, name := range []string{"whisper-128", "parakeet-128"} {
		t.Run(name, func(t *testing.T) {
			cfg, err := Preset(name)
			require.NoError(t, err)
			want := readGolden(t, "melfb__"+name)
			dense := slaneyFilterbank(cfg.SampleRate, cfg.NFFT, cfg.NumMels, cfg.FMin, cfg.FMax)
			require.Equal(t, runtime.Shape{len(dense), len(dense[0])}, want.Shape())
			w := want.F32()
			for i, row := range dense {
				for k, v := range row {
					require.InDelta(t, float64(w[i*len(row)+k]), v, 1e-7*math.Max(1, math.Abs(v)), "filter %d bin %d", i, k)
				}
			}
			// The sparse form holds every non-zero weight.
			bank := newMelBank(dense)
			nz := 0
			for _, row := range dense {
				for _, v := range row {
					if v != 0 {
						nz++
					}
				}
			}
			require.LessOrEqual(t, nz, len(bank.w))
			require.Less(t, len(bank.w), 3*len(dense[0]), "sparse bank keeps only the filter bands")
		})
	}
}

func TestGoldenManifestCoversClips(t *testing.T) {
	m := readManifest(t)
	entries, err := os.ReadDir("testdata")
	require.NoError(t, err)
	for _, e := range entries {
		if clip, ok := strings.CutSuffix(e.Name(), ".wav"); ok {
			require.Equal(t, len(loadWAV(t, clip)), m.Clips[clip], "clip %s", clip)
		}
	}
}
