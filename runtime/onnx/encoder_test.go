package onnx

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/model"
	"github.com/edgespeech/edge/runtime/npy"
)

// The golden values come from scripts/gen_test_models.py, which computes
// them with numpy (float64) independently of ONNX Runtime and cross-checks
// them against torch. ORT computes in float32.
const tol = 2e-4

func load(t testing.TB, name string) *runtime.Tensor {
	t.Helper()
	x, err := npy.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return x
}

func newEncoder(t testing.TB, params map[string]any) *runtime.Instance {
	t.Helper()
	inst, err := runtime.New("encoder", params, runtime.CPU)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, inst.Close()) })
	return inst
}

func assertClose(t *testing.T, want, got *runtime.Tensor, tol float64) {
	t.Helper()
	require.Equal(t, want.Shape(), got.Shape())
	w, g := want.F32(), got.F32()
	worst, at := 0.0, 0
	for i := range w {
		if d := math.Abs(float64(w[i]) - float64(g[i])); d > worst || math.IsNaN(d) {
			worst, at = d, i
		}
	}
	assert.LessOrEqual(t, worst, tol, "max |diff| at flat index %d: want %v, got %v", at, w[at], g[at])
}

func TestNemoGolden(t *testing.T) {
	enc := newEncoder(t, map[string]any{"model": "testdata/nemo", "threads": 1})
	out, err := enc.Run(context.Background(), runtime.Tensors{
		"features": load(t, "nemo_features.npy"),
		"lengths":  load(t, "nemo_lengths.npy"),
	})
	require.NoError(t, err)
	assertClose(t, load(t, "nemo_log_probs.npy"), out["log_probs"], tol)
	assert.Equal(t, load(t, "nemo_out_lengths.npy").I64(), out["lengths"].I64())
	assert.Equal(t, []int64{13, 10}, out["lengths"].I64()) // floor((T-1)/2)+1, twice: 50->25->13, 37->19->10
}

func TestW2VGolden(t *testing.T) {
	enc := newEncoder(t, map[string]any{"model": "testdata/w2v/model.yaml"})
	pcm := load(t, "w2v_pcm.npy")
	before := append([]float32(nil), pcm.F32()...)
	out, err := enc.Run(context.Background(), runtime.Tensors{"pcm": pcm, "lengths": load(t, "w2v_lengths.npy")})
	require.NoError(t, err)
	assertClose(t, load(t, "w2v_log_probs.npy"), out["log_probs"], tol)
	// No lengths output: ceil(len*T'/N) with T' = floor((16000-400)/320)+1 = 49.
	assert.Equal(t, []int64{49, 34}, out["lengths"].I64())
	assert.Equal(t, before, pcm.F32(), "the caller's pcm must not be modified")
}

// The attention mask is built from the lengths (the model shifts what it
// masks, so a wrong mask shows).
func TestW2VAttentionMask(t *testing.T) {
	enc := newEncoder(t, map[string]any{"model": "testdata/w2v_mask"})
	out, err := enc.Run(context.Background(), runtime.Tensors{"pcm": load(t, "w2v_pcm.npy"), "lengths": load(t, "w2v_lengths.npy")})
	require.NoError(t, err)
	assertClose(t, load(t, "w2v_mask_log_probs.npy"), out["log_probs"], tol)
}

func TestW2VNormalizeOverride(t *testing.T) {
	// Already normalised input with normalize=none gives the same result.
	enc := newEncoder(t, map[string]any{"model": "testdata/w2v", "normalize": "none"})
	out, err := enc.Run(context.Background(), runtime.Tensors{"pcm": load(t, "w2v_normalized.npy")})
	require.NoError(t, err)
	assertClose(t, load(t, "w2v_log_probs.npy"), out["log_probs"], tol)
	assert.Equal(t, []int64{49, 49}, out["lengths"].I64())
}

func TestBareONNX(t *testing.T) {
	t.Run("nemo", func(t *testing.T) {
		e, err := Open("testdata/nemo_ctc.onnx", Options{Threads: 1})
		require.NoError(t, err)
		defer e.Close()
		assert.Equal(t, model.InputFeatures, e.InputName())
		assert.Equal(t, map[string]string{"features": "audio_signal", "lengths": "length"}, e.Manifest().Encoder.Inputs)
		assert.Equal(t, map[string]string{"log_probs": "logprobs", "lengths": "encoded_lengths"}, e.Manifest().Encoder.Outputs)
		out, err := e.Run(context.Background(), runtime.Tensors{"features": load(t, "nemo_features.npy")})
		require.NoError(t, err)
		// Lengths default to the full T: item 0 fills the batch anyway.
		want := load(t, "nemo_log_probs.npy")
		assertClose(t, sliceItem(t, want, 0), sliceItem(t, out["log_probs"], 0), tol)
		assert.Equal(t, []int64{13, 13}, out["lengths"].I64())
	})
	t.Run("wav2vec2", func(t *testing.T) {
		e, err := Open("testdata/w2v_ctc.onnx", Options{})
		require.NoError(t, err)
		defer e.Close()
		assert.Equal(t, map[string]string{"logits": "logits"}, e.Manifest().Encoder.Outputs)
		out, err := e.Run(context.Background(), runtime.Tensors{"pcm": load(t, "w2v_normalized.npy")})
		require.NoError(t, err)
		assertClose(t, load(t, "w2v_log_probs.npy"), out["log_probs"], tol)
	})
}

// sliceItem returns batch item b of a [B, ...] f32 tensor as [1, ...].
func sliceItem(t *testing.T, x *runtime.Tensor, b int) *runtime.Tensor {
	s := x.Shape()
	n := s.NumElements() / s[0]
	shape := append(runtime.Shape{1}, s[1:]...)
	return runtime.Must(runtime.FromSlice(runtime.F32, shape, append([]float32(nil), x.F32()[b*n:(b+1)*n]...)))
}

// An item run alone gives what it gives inside a batch.
func TestBatchItemsIndependent(t *testing.T) {
	enc := newEncoder(t, map[string]any{"model": "testdata/nemo"})
	feats := load(t, "nemo_features.npy")
	batch, err := enc.Run(context.Background(), runtime.Tensors{"features": feats})
	require.NoError(t, err)
	one, err := enc.Run(context.Background(), runtime.Tensors{"features": sliceItem(t, feats, 0)})
	require.NoError(t, err)
	assertClose(t, sliceItem(t, batch["log_probs"], 0), one["log_probs"], 1e-6)
	// Dynamic time axis: a shorter clip runs in the same session.
	short := runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{1, 128, 7}, feats.F32()[:128*7]))
	out, err := enc.Run(context.Background(), runtime.Tensors{"features": short})
	require.NoError(t, err)
	assert.Equal(t, runtime.Shape{1, 2, 29}, out["log_probs"].Shape())
}

func f32(shape runtime.Shape, fill func(i int) float32) *runtime.Tensor {
	x := runtime.Must(runtime.NewTensor(runtime.F32, shape))
	for i := range x.F32() {
		x.F32()[i] = fill(i)
	}
	return x
}

func i64(v ...int64) *runtime.Tensor {
	return runtime.Must(runtime.FromSlice(runtime.I64, runtime.Shape{len(v)}, v))
}

func TestRunErrors(t *testing.T) {
	nemo := newEncoder(t, map[string]any{"model": "testdata/nemo"})
	w2v := newEncoder(t, map[string]any{"model": "testdata/w2v"})
	zero := func(int) float32 { return 0 }
	nanAt := func(k int, v float32) func(int) float32 {
		return func(i int) float32 {
			if i == k {
				return v
			}
			return 0.5
		}
	}
	tests := []struct {
		name    string
		enc     *runtime.Instance
		in      runtime.Tensors
		wantErr string
	}{
		{"nan", nemo, runtime.Tensors{"features": f32(runtime.Shape{1, 128, 10}, nanAt(17, float32(math.NaN())))},
			`input "features" holds NaN at flat index 17; want finite values`},
		{"inf", w2v, runtime.Tensors{"pcm": f32(runtime.Shape{1, 800}, nanAt(3, float32(math.Inf(-1))))},
			`input "pcm" holds -Inf at flat index 3`},
		{"wrong mels", nemo, runtime.Tensors{"features": f32(runtime.Shape{1, 80, 10}, zero)},
			`input "features" has shape [1,80,10], the model's audio_signal wants [?,128,?] (axis 1 must be 128); with frontend layout mel_time the mels are on axis 1`},
		{"wrong layout", nemo, runtime.Tensors{"features": f32(runtime.Shape{1, 10, 128}, zero)},
			`input "features" has shape [1,10,128]`},
		{"empty", nemo, runtime.Tensors{"features": f32(runtime.Shape{1, 128, 0}, zero)},
			`input "features" has shape [1,128,0]: empty (axis 2 is 0)`},
		{"empty batch", w2v, runtime.Tensors{"pcm": f32(runtime.Shape{0, 16000}, zero)},
			`input "pcm" has shape [0,16000]: empty`},
		{"pcm to a features model", nemo, runtime.Tensors{"pcm": f32(runtime.Shape{1, 1600}, zero)},
			`input "pcm" given, but the model takes "features" (ONNX input audio_signal [?,128,?])`},
		{"features to a pcm model", w2v, runtime.Tensors{"features": f32(runtime.Shape{1, 128, 10}, zero)},
			`input "features" given, but the model takes "pcm"`},
		{"nothing", nemo, runtime.Tensors{}, `missing input "features"`},
		{"lengths too long", nemo, runtime.Tensors{"features": f32(runtime.Shape{2, 128, 10}, zero), "lengths": i64(10, 11)},
			`input "lengths"[1] = 11 is out of range: features has 10 frames per item, want 1..10`},
		{"zero length", w2v, runtime.Tensors{"pcm": f32(runtime.Shape{1, 800}, zero), "lengths": i64(0)},
			`input "lengths"[0] = 0 is out of range`},
		{"lengths batch", nemo, runtime.Tensors{"features": f32(runtime.Shape{2, 128, 10}, zero), "lengths": i64(10)},
			`input "lengths" is i64[1]@cpu, want i64 [2]`},
		{"lengths rank", nemo, runtime.Tensors{"features": f32(runtime.Shape{1, 128, 10}, zero),
			"lengths": runtime.Must(runtime.NewTensor(runtime.I64, runtime.Shape{1, 1}))}, `input "lengths" has shape [1,1] (rank 2)`},
		{"rank", w2v, runtime.Tensors{"pcm": f32(runtime.Shape{2, 1, 800}, zero)}, `input "pcm" has shape [2,1,800] (rank 3)`},
		{"dtype", w2v, runtime.Tensors{"pcm": runtime.Must(runtime.NewTensor(runtime.F64, runtime.Shape{1, 800}))}, `input "pcm" is f64`},
		{"too short for the model", w2v, runtime.Tensors{"pcm": f32(runtime.Shape{1, 100}, func(i int) float32 { return float32(i % 7) })},
			`running the model on pcm [1,100]`},
		{"unknown input", nemo, runtime.Tensors{"features": f32(runtime.Shape{1, 128, 10}, zero), "mask": i64(1)}, `unexpected input "mask"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.enc.Run(context.Background(), tc.in)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
		})
	}
}

// writeManifest writes a manifest next to nothing else; its paths point at
// the testdata models by absolute path.
func writeManifest(t *testing.T, text string) string {
	t.Helper()
	abs, err := filepath.Abs("testdata")
	require.NoError(t, err)
	dir := t.TempDir()
	text = strings.ReplaceAll(text, "TESTDATA", abs)
	require.NoError(t, os.WriteFile(filepath.Join(dir, model.FileName), []byte(text), 0o644))
	return dir
}

const nemoYAML = `name: t
sample_rate: 16000
frontend: {preset: parakeet-128, layout: mel_time}
encoder:
  file: TESTDATA/nemo_ctc.onnx
  inputs:  {features: audio_signal, lengths: length}
  outputs: {log_probs: logprobs, lengths: encoded_lengths}
vocabulary: TESTDATA/tokens29.txt
frame_stride: 0.04
`

func TestOpenMismatch(t *testing.T) {
	edit := func(old, new string) string {
		require.Contains(t, nemoYAML, old)
		return strings.Replace(nemoYAML, old, new, 1)
	}
	tests := []struct {
		name     string
		manifest string
		wantErr  []string
	}{
		{"unknown input name", edit("features: audio_signal", "features: mel"), []string{
			`encoder.inputs.features names ONNX input "mel", which the model does not have (its inputs: audio_signal f32 [?,128,?], length i64 [?])`,
			`the model's input "audio_signal" (f32 [?,128,?]) is not mapped in encoder.inputs`}},
		{"unknown output name", edit("log_probs: logprobs", "log_probs: log_probs"), []string{
			`encoder.outputs.log_probs names ONNX output "log_probs", which the model does not have (its outputs: logprobs f32 [?,?,29], encoded_lengths i64 [?])`}},
		{"unmapped input", edit("features: audio_signal, lengths: length", "features: audio_signal"), []string{
			`the model's input "length" (i64 [?]) is not mapped in encoder.inputs, so the encoder cannot feed it`}},
		{"wrong dtype", edit("nemo_ctc.onnx", "f64_ctc.onnx"), []string{
			`encoder.inputs.features: the model's "audio_signal" is f64 [?,128,?], want a rank-3 f32 or f16 tensor`}},
		{"wrong rank", edit("lengths: length}", "lengths: audio_signal}"), []string{
			`encoder.inputs.lengths: the model's "audio_signal" is f32 [?,128,?], want a rank-1 i64 or i32 tensor`}},
		{"lengths as scores", edit("log_probs: logprobs", "log_probs: encoded_lengths"), []string{
			`encoder.outputs.log_probs: the model's "encoded_lengths" is i64 [?], want a rank-3 f32 or f16 tensor`}},
		{"vocabulary size", edit("tokens29.txt", "tokens32.txt"), []string{
			`tokens32.txt has 32 tokens, but the model's "logprobs" [?,?,29] has V=29`}},
		{"layout", edit("layout: mel_time", "layout: time_mel"), []string{
			`frontend.layout time_mel puts the mels on axis 2, but the model's "audio_signal" [?,128,?] fixes only axis 1: is the layout mel_time?`}},
		{"missing onnx", edit("nemo_ctc.onnx", "nope.onnx"), []string{"encoder.file", "nope.onnx"}},
		{"not onnx", edit("nemo_ctc.onnx", "tokens29.txt"), []string{"reading the ONNX model", "tokens29.txt"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Open(writeManifest(t, tc.manifest), Options{})
			if e != nil {
				e.Close()
			}
			require.Error(t, err)
			for _, w := range tc.wantErr {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	tests := []struct {
		name    string
		params  map[string]any
		wantErr string
	}{
		{"no model", map[string]any{}, "parameter model is required"},
		{"missing model dir", map[string]any{"model": "testdata/nope"}, "model manifest testdata/nope does not exist (want a model directory holding model.yaml, or the manifest file)"},
		{"missing onnx", map[string]any{"model": "testdata/nope.onnx"}, "encoder model: stat testdata/nope.onnx"},
		{"ambiguous bare onnx", map[string]any{"model": "testdata/f64_ctc.onnx"}, `input "audio_signal" (f64 [?,128,?]) fits no encoder input`},
		{"per_utterance on features", map[string]any{"model": "testdata/nemo", "normalize": "per_utterance"}, "applies to raw-waveform models"},
		{"bad provider", map[string]any{"model": "testdata/nemo", "execution_provider": "tpu"}, `"tpu" is not one of cpu | cuda | tensorrt`},
		{"negative threads", map[string]any{"model": "testdata/nemo", "threads": -2}, "threads -2 is negative"},
		{"negative device", map[string]any{"model": "testdata/nemo", "device": -1}, "device -1 is negative"},
		{"other library", map[string]any{"model": "testdata/nemo", "ort_lib": "testdata/tokens29.txt"}, "ONNX Runtime is already loaded from"},
		{"bad fallback", map[string]any{"model": "testdata/nemo", "fallback": "gpu"}, `"gpu" is not one of`},
		{"bad bind", map[string]any{"model": "testdata/nemo", "bind": "shared"}, `"shared" is not one of`},
		{"missing cuda ep", map[string]any{"model": "testdata/nemo", "execution_provider": "cuda", "ort_cuda_ep": "/no/ep.so"}, "CUDA execution provider library /no/ep.so (from config key ort_cuda_ep)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inst, err := runtime.New("encoder", tc.params, runtime.CPU)
			if inst != nil {
				inst.Close()
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
		})
	}
}

// The fetched CPU build has no GPU providers: asking for one is a clear
// error, never a silent CPU fallback.
func TestGPUProvidersMissing(t *testing.T) {
	for _, p := range []string{ProviderCUDA, ProviderTensorRT} {
		t.Run(p, func(t *testing.T) {
			e, err := Open("testdata/nemo", Options{Provider: p})
			if e != nil {
				e.Close()
			}
			require.Error(t, err)
			t.Log(err)
			assert.Contains(t, err.Error(), "execution_provider="+p+": the ONNX Runtime library "+Library())
			assert.Contains(t, err.Error(), "use execution_provider=cpu")
		})
	}
}

func TestCloseAndCancel(t *testing.T) {
	e, err := Open("testdata/nemo", Options{})
	require.NoError(t, err)
	in := runtime.Tensors{"features": f32(runtime.Shape{1, 128, 20}, func(i int) float32 { return 0.1 })}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = e.Run(ctx, in)
	assert.ErrorIs(t, err, context.Canceled)
	_, err = e.Run(context.Background(), in)
	require.NoError(t, err, "a cancelled run leaves the encoder usable")
	require.NoError(t, e.Close())
	require.NoError(t, e.Close(), "Close twice is fine")
	_, err = e.Run(context.Background(), in)
	assert.EqualError(t, err, "encoder is closed")
}

// A context cancelled during a run terminates it, and the next run works.
// Cancellation races with the run, so the batch grows until a run is caught
// in flight (a run that finishes first returns its results).
func TestCancelDuringRun(t *testing.T) {
	e, err := Open("testdata/w2v", Options{Threads: 1, Normalize: model.NormalizeNone})
	require.NoError(t, err)
	defer e.Close()
	cancelled := false
	for _, b := range []int{2, 4, 8, 16} {
		big := runtime.Tensors{"pcm": runtime.Must(runtime.NewTensor(runtime.F32, runtime.Shape{b, benchSamples}))}
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(500*time.Microsecond, cancel)
		_, err = e.Run(ctx, big)
		cancel()
		if err == nil {
			continue
		}
		require.ErrorIs(t, err, context.Canceled)
		t.Logf("batch %d: %v", b, err)
		cancelled = true
		break
	}
	require.True(t, cancelled, "no run was cancelled")
	out, err := e.Run(context.Background(), runtime.Tensors{"pcm": load(t, "w2v_normalized.npy")})
	require.NoError(t, err, "the terminate flag must be cleared after a cancelled run")
	assert.Equal(t, runtime.Shape{2, 49, 32}, out["log_probs"].Shape())
}

func TestLogSoftmaxRows(t *testing.T) {
	row := []float32{1, 2, 3, -1000, 1000, 1000}
	logSoftmaxRows(row, 3)
	lse := math.Log(math.Exp(1) + math.Exp(2) + math.Exp(3))
	assert.InDeltaSlice(t, []float64{1 - lse, 2 - lse, 3 - lse}, []float64{float64(row[0]), float64(row[1]), float64(row[2])}, 1e-6)
	// Large magnitudes stay finite (the max is subtracted first).
	assert.InDeltaSlice(t, []float64{-2000 - math.Ln2, -math.Ln2, -math.Ln2}, []float64{float64(row[3]), float64(row[4]), float64(row[5])}, 1e-4)
}

func TestFirstNonFinite(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, n := range []int{0, 1, 3, 4, 5, 1023, 1024, 1025, 5000} {
		xs := make([]float32, n)
		for i := range xs {
			xs[i] = float32(i%13) - 6 + 1e30*float32(i%2) // large but finite
		}
		_, ok := firstNonFinite(xs)
		assert.False(t, ok, "n=%d all finite", n)
		for _, at := range []int{0, n / 2, n - 1} {
			if n == 0 {
				continue
			}
			for _, bad := range []float32{nan, inf, -inf} {
				ys := append([]float32(nil), xs...)
				ys[at] = bad
				if at+1 < n {
					ys[n-1] = nan // a later one must not win
				}
				i, ok := firstNonFinite(ys)
				assert.True(t, ok)
				assert.Equal(t, at, i, "n=%d at=%d bad=%v", n, at, bad)
			}
		}
	}
}

func BenchmarkFirstNonFinite(b *testing.B) {
	xs := randomF32(runtime.Shape{128 * benchFrames}, 4).F32()
	b.SetBytes(int64(4 * len(xs)))
	for b.Loop() {
		if _, ok := firstNonFinite(xs); ok {
			b.Fatal("finite input")
		}
	}
}

// normalizeUtterance against the two-pass float64 definition, also for a
// large DC offset under a tiny signal (where a naive one-pass variance
// loses every digit).
func TestNormalizeUtterance(t *testing.T) {
	tests := []struct {
		name     string
		n        int
		dc, gain float64
	}{
		{"one sample", 1, 0.3, 0},
		{"short", 5, 0, 0.5},
		{"offset", 16003, 0.25, 0.1},
		{"big offset tiny signal", 48000, 0.9, 1e-3},
		{"silence", 1000, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := make([]float32, tc.n)
			for i := range src {
				src[i] = float32(tc.dc + tc.gain*math.Sin(float64(i)*0.37)*math.Cos(float64(i)*0.011))
			}
			var mean, ss float64
			for _, v := range src {
				mean += float64(v)
			}
			mean /= float64(tc.n)
			for _, v := range src {
				ss += (float64(v) - mean) * (float64(v) - mean)
			}
			inv := 1 / math.Sqrt(ss/float64(tc.n)+1e-7)
			dst := make([]float32, tc.n+3)
			for i := range dst {
				dst[i] = 7 // the padding must be zeroed
			}
			normalizeUtterance(dst, src)
			for i, v := range src {
				want := (float64(v) - mean) * inv
				require.InDelta(t, want, float64(dst[i]), 1e-5*max(1, math.Abs(want)), "sample %d", i)
			}
			assert.Equal(t, []float32{0, 0, 0}, dst[tc.n:])
		})
	}
}

func BenchmarkNormalizeUtterance(b *testing.B) {
	src := randomF32(runtime.Shape{benchSamples}, 5).F32()
	dst := make([]float32, len(src))
	b.SetBytes(int64(4 * len(src)))
	for b.Loop() {
		normalizeUtterance(dst, src)
	}
}

func BenchmarkLogSoftmaxRows(b *testing.B) {
	const frames, vocab = 1500, 32 // 30 s at 20 ms frames
	src := randomF32(runtime.Shape{frames * vocab}, 6).F32()
	row := make([]float32, len(src))
	b.SetBytes(int64(4 * len(src)))
	for b.Loop() {
		copy(row, src)
		logSoftmaxRows(row, vocab)
	}
}

func TestSignatureNeedsInputAndOutput(t *testing.T) {
	ins, outs, err := readIO("testdata/nemo_ctc.onnx")
	require.NoError(t, err)
	m := &model.Manifest{Encoder: model.Encoder{
		Inputs:  map[string]string{"lengths": "length"},
		Outputs: map[string]string{"log_probs": "logprobs"},
	}}
	_, err = newSignature(m, ins[1:], outs)
	assert.ErrorContains(t, err, "maps no encoder input")
}

func TestSpinOption(t *testing.T) {
	for _, spin := range []bool{false, true} {
		so, _, err := sessionOptions(Options{Spin: spin})
		require.NoError(t, err)
		want := map[bool]string{false: "0", true: "1"}[spin]
		for _, key := range []string{"session.intra_op.allow_spinning", "session.inter_op.allow_spinning"} {
			got, err := so.GetSessionConfigEntry(key)
			require.NoError(t, err)
			assert.Equal(t, want, got, key)
		}
		require.NoError(t, so.Destroy())
	}
}

// TestProfile: with ort_profile set, closing the encoder leaves ONNX
// Runtime's profile of its runs: a JSON trace holding a model_run event and
// the nodes' kernel times.
func TestProfile(t *testing.T) {
	prefix := filepath.Join(t.TempDir(), "enc")
	inst, err := runtime.New("encoder", map[string]any{"model": "testdata/nemo", "threads": 1, "ort_profile": prefix}, runtime.CPU)
	require.NoError(t, err)
	_, err = inst.Run(context.Background(), runtime.Tensors{
		"features": load(t, "nemo_features.npy"),
		"lengths":  load(t, "nemo_lengths.npy"),
	})
	require.NoError(t, err)
	require.NoError(t, inst.Close())
	files, err := filepath.Glob(prefix + "_*.json")
	require.NoError(t, err)
	require.Len(t, files, 1)
	data, err := os.ReadFile(files[0])
	require.NoError(t, err)
	var events []struct {
		Cat  string `json:"cat"`
		Name string `json:"name"`
	}
	require.NoError(t, json.Unmarshal(data, &events))
	var runs, nodes int
	for _, e := range events {
		if e.Cat == "Session" && e.Name == "model_run" {
			runs++
		}
		if e.Cat == "Node" && strings.HasSuffix(e.Name, "_kernel_time") {
			nodes++
		}
	}
	assert.Equal(t, 1, runs)
	assert.Positive(t, nodes)
}
