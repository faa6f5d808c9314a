package fbank

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/npy"
)

func f32(shape runtime.Shape, data []float32) *runtime.Tensor {
	return runtime.Must(runtime.FromSlice(runtime.F32, shape, data))
}

func i64(data ...int64) *runtime.Tensor {
	return runtime.Must(runtime.FromSlice(runtime.I64, runtime.Shape{len(data)}, data))
}

func writeNpy(t *testing.T, name string, tensor *runtime.Tensor) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, npy.WriteFile(path, tensor))
	return path
}

func withValue(n, at int, v float32) []float32 {
	x := noisySpeech(n, 1)
	x[at] = v
	return x
}

func TestOpRejectsBadInput(t *testing.T) {
	whisper := map[string]any{"preset": "whisper-80"}
	fb80 := writeNpy(t, "fb.npy", f32(runtime.Shape{80, 201}, make([]float32, 80*201)))
	nanFB := make([]float64, 128*201)
	nanFB[7] = math.NaN()
	nanFBPath := writeNpy(t, "nan.npy", runtime.Must(runtime.FromSlice(runtime.F64, runtime.Shape{128, 201}, nanFB)))
	win := writeNpy(t, "win.npy", f32(runtime.Shape{512}, make([]float32, 512)))
	for _, tc := range []struct {
		name string
		cfg  map[string]any
		in   runtime.Tensors
		want string // error substring; at New time when in is nil
	}{
		{"no preset", map[string]any{}, nil, "set preset="},
		{"unknown preset", map[string]any{"preset": "whisper-99"}, nil, `"whisper-99" is not one of`},
		{"unknown knob", map[string]any{"preset": "whisper-80", "nfft": 400}, nil, `unknown parameter "nfft"`},
		{"n_fft too small", map[string]any{"preset": "whisper-80", "n_fft": 1, "win_length": 1}, nil, "n_fft 1: want 2..65536"},
		{"window longer than n_fft", map[string]any{"preset": "whisper-80", "win_length": 401}, nil, "win_length 401: want 1..n_fft (400)"},
		{"f_max above Nyquist", map[string]any{"preset": "parakeet-80", "sample_rate": 8000}, nil, "f_max 8000"},
		{"hop 0", map[string]any{"preset": "parakeet-80", "hop_length": 0}, nil, "hop_length 0"},
		{"pre_emphasis 1.5", map[string]any{"preset": "parakeet-80", "pre_emphasis": 1.5}, nil, "pre_emphasis 1.5"},
		{"log_clamp_min with per_feature", map[string]any{"preset": "parakeet-80", "log_clamp_min": 1e-5}, nil, "applies only to normalize=none"},
		{"out_frames with per_feature", map[string]any{"preset": "parakeet-80", "out_frames": 10}, nil, "out_frames applies only"},
		{"negative threads", map[string]any{"preset": "parakeet-80", "threads": -1}, nil, "threads -1"},
		{"ceil vs floor", map[string]any{"preset": "parakeet-80", "nemo_seq_len_ceil": true, "valid_frames": "floor"}, nil, "contradicts"},
		{"filterbank wrong shape", map[string]any{"preset": "whisper-128", "filterbank": fb80}, nil, "has shape [80,201], want [128,201]"},
		{"filterbank NaN", map[string]any{"preset": "whisper-128", "filterbank": nanFBPath}, nil, "filterbank[0,7] is NaN"},
		{"filterbank missing", map[string]any{"preset": "whisper-128", "filterbank": "/nonexistent.npy"}, nil, "no such file"},
		{"window wrong shape", map[string]any{"preset": "parakeet-80", "window": win}, nil, "has shape [512], want [400]"},

		{"empty pcm", whisper, runtime.Tensors{"pcm": f32(runtime.Shape{0}, nil)}, "pcm item 0 is empty"},
		{"no items", whisper, runtime.Tensors{"pcm": f32(runtime.Shape{0, 400}, nil)}, "want at least one item"},
		{"shorter than a window", whisper, runtime.Tensors{"pcm": f32(runtime.Shape{399}, make([]float32, 399))},
			"pcm item 0 has 399 samples, want at least win_length = 400 (one 25.0 ms window)"},
		{"NaN sample", whisper, runtime.Tensors{"pcm": f32(runtime.Shape{2000}, withValue(2000, 1234, float32(math.NaN())))},
			"pcm item 0 sample 1234 is NaN"},
		{"Inf sample in item 1", whisper, runtime.Tensors{"pcm": f32(runtime.Shape{2, 1000}, withValue(2000, 1999, float32(math.Inf(-1))))},
			"pcm item 1 sample 999 is -Inf"},
		{"lengths of wrong size", whisper, runtime.Tensors{"pcm": f32(runtime.Shape{2, 1000}, make([]float32, 2000)), "lengths": i64(1000)},
			`input "lengths" has shape [1], want [2]`},
		{"length past the row", whisper, runtime.Tensors{"pcm": f32(runtime.Shape{2, 1000}, make([]float32, 2000)), "lengths": i64(1000, 1001)},
			`"lengths"[1] = 1001, want 0..1000`},
		{"negative length", whisper, runtime.Tensors{"pcm": f32(runtime.Shape{1, 1000}, make([]float32, 1000)), "lengths": i64(-1)},
			`"lengths"[0] = -1`},
		{"too few frames to normalise", map[string]any{"preset": "parakeet-80", "hop_length": 400},
			runtime.Tensors{"pcm": f32(runtime.Shape{500}, make([]float32, 500))}, "per_feature normalisation needs at least 2"},
		{"reflect pad longer than the clip", map[string]any{"preset": "nemo-legacy-80", "n_fft": 2048},
			runtime.Tensors{"pcm": f32(runtime.Shape{600}, make([]float32, 600))}, "reflect padding by n_fft/2 = 1024 needs more"},
		{"out_frames past the clip", map[string]any{"preset": "whisper-80", "out_frames": 50},
			runtime.Tensors{"pcm": f32(runtime.Shape{1600}, make([]float32, 1600))}, "fewer than out_frames = 50"},
		{"wrong dtype", whisper, runtime.Tensors{"pcm": runtime.Must(runtime.FromSlice(runtime.F64, runtime.Shape{800}, make([]float64, 800)))},
			`input "pcm" is f64`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inst, err := runtime.New("fbank", tc.cfg, runtime.CPU)
			if tc.in == nil {
				require.ErrorContains(t, err, tc.want)
				return
			}
			require.NoError(t, err)
			_, err = inst.Run(context.Background(), tc.in)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestClipErrorNamesItem(t *testing.T) {
	fe, err := NewFrontend(mustPreset(t, "whisper-80"))
	require.NoError(t, err)
	_, err = fe.Compute(context.Background(), [][]float32{noisySpeech(1000, 1), nil}, 1)
	var ce *ClipError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, 1, ce.Item)
}

func mustPreset(t testing.TB, name string) Config {
	c, err := Preset(name)
	require.NoError(t, err)
	return c
}

// TestSilenceIsFinite: all-zero audio gives finite features in every preset
// and normalisation mode (no NaN from 0/0, no -Inf from log 0).
func TestSilenceIsFinite(t *testing.T) {
	for _, name := range Presets() {
		for _, norm := range []Normalize{"", None, Global} {
			cfg := mustPreset(t, name)
			if norm != "" {
				cfg.Normalize = norm
			}
			fe, err := NewFrontend(cfg)
			require.NoError(t, err)
			out, err := fe.Compute(context.Background(), [][]float32{make([]float32, 16000)}, 2)
			require.NoError(t, err, "%s %s", name, norm)
			for i, v := range out.Data {
				require.False(t, math.IsNaN(float64(v)) || math.IsInf(float64(v), 0), "%s %s: value %d is %v", name, norm, i, v)
			}
		}
	}
}

// TestBatchMatchesSingles: items of a batch are computed independently, so
// each equals its single-clip result, zero-padded to the longest item.
func TestBatchMatchesSingles(t *testing.T) {
	clips := [][]float32{noisySpeech(8000, 1), noisySpeech(5123, 2), noisySpeech(400, 3)}
	for _, name := range Presets() {
		t.Run(name, func(t *testing.T) {
			fe, err := NewFrontend(mustPreset(t, name))
			require.NoError(t, err)
			batch, err := fe.Compute(context.Background(), clips, 4)
			require.NoError(t, err)
			require.Equal(t, 3, batch.Batch)
			for b, clip := range clips {
				one, err := fe.Compute(context.Background(), [][]float32{clip}, 1)
				require.NoError(t, err)
				require.Equal(t, one.Lengths[0], batch.Lengths[b])
				require.Equal(t, one.Frames, batch.ItemFrames[b])
				item := batch.Data[b*batch.Frames*batch.Mels : (b+1)*batch.Frames*batch.Mels]
				for m := 0; m < one.Mels; m++ {
					for tt := 0; tt < batch.Frames; tt++ {
						var want float32
						if tt < one.Frames {
							want = one.Data[at(one, m, tt)]
						}
						require.Equal(t, want, item[at(batch, m, tt)], "item %d mel %d frame %d", b, m, tt)
					}
				}
			}
		})
	}
}

// at is the index of (mel, frame) inside one item of f.
func at(f *Features, m, t int) int {
	if f.Layout == TimeMel {
		return t*f.Mels + m
	}
	return m*f.Frames + t
}

func TestThreadCountDoesNotChangeResults(t *testing.T) {
	x := noisySpeech(3*16000+77, 9)
	for _, name := range Presets() {
		fe, err := NewFrontend(mustPreset(t, name))
		require.NoError(t, err)
		one, err := fe.Compute(context.Background(), [][]float32{x}, 1)
		require.NoError(t, err)
		many, err := fe.Compute(context.Background(), [][]float32{x}, 7)
		require.NoError(t, err)
		require.Equal(t, one.Data, many.Data, name)
	}
}

func TestLayoutOverrideTransposes(t *testing.T) {
	x := noisySpeech(4000, 4)
	run := func(layout string) *runtime.Tensor {
		inst, err := runtime.New("fbank", map[string]any{"preset": "parakeet-80", "layout": layout}, runtime.CPU)
		require.NoError(t, err)
		out, err := inst.Run(context.Background(), runtime.Tensors{"pcm": f32(runtime.Shape{len(x)}, x)})
		require.NoError(t, err)
		return out["features"]
	}
	tm, mt := run("time_mel"), run("mel_time")
	frames, mels := tm.Shape()[1], tm.Shape()[2]
	require.Equal(t, runtime.Shape{1, mels, frames}, mt.Shape())
	for tt := 0; tt < frames; tt++ {
		for m := 0; m < mels; m++ {
			require.Equal(t, tm.F32()[tt*mels+m], mt.F32()[m*frames+tt])
		}
	}
}

// TestCheckpointFilesReproduceDefaults: the Slaney bank and Hann window given
// as npy files give the same features as the built-in ones.
func TestCheckpointFilesReproduceDefaults(t *testing.T) {
	cfg := mustPreset(t, "parakeet-128")
	dense := slaneyFilterbank(cfg.SampleRate, cfg.NFFT, cfg.NumMels, cfg.FMin, cfg.FMax)
	flat := make([]float32, 0, cfg.NumMels*(cfg.NFFT/2+1))
	for _, row := range dense {
		for _, v := range row {
			flat = append(flat, float32(v))
		}
	}
	fbPath := writeNpy(t, "fb.npy", f32(runtime.Shape{cfg.NumMels, cfg.NFFT/2 + 1}, flat))
	winPath := writeNpy(t, "win.npy", runtime.Must(runtime.FromSlice(runtime.F64, runtime.Shape{400}, hann(400, false))))
	x := noisySpeech(6000, 5)
	run := func(extra map[string]any) []float32 {
		p := map[string]any{"preset": "parakeet-128"}
		for k, v := range extra {
			p[k] = v
		}
		inst, err := runtime.New("fbank", p, runtime.CPU)
		require.NoError(t, err)
		out, err := inst.Run(context.Background(), runtime.Tensors{"pcm": f32(runtime.Shape{len(x)}, x)})
		require.NoError(t, err)
		return out["features"].F32()
	}
	base := run(nil)
	require.Equal(t, base, run(map[string]any{"window": winPath}), "window file")
	withFB := run(map[string]any{"filterbank": fbPath})
	require.InDeltaSlice(t, base, withFB, 1e-4, "f32 filterbank file")
}

func TestPresetsAreValidAndDocumented(t *testing.T) {
	require.Len(t, Presets(), 6)
	for _, name := range Presets() {
		cfg := mustPreset(t, name)
		require.NoError(t, cfg.validate(), name)
		require.NotEmpty(t, presets[name].source, name)
	}
	_, err := Preset("nope")
	require.ErrorContains(t, err, "unknown fbank preset")
}

func TestNonCPUBackendIsRefused(t *testing.T) {
	_, err := runtime.New("fbank", map[string]any{"preset": "whisper-80"}, fakeBackend{runtime.CPU})
	require.ErrorContains(t, err, "no fake implementation")
}

type fakeBackend struct{ runtime.Backend }

func (fakeBackend) Name() string { return "fake" }

func TestComputeHonoursCancellation(t *testing.T) {
	fe, err := NewFrontend(mustPreset(t, "whisper-80"))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = fe.Compute(ctx, [][]float32{noisySpeech(16000, 1)}, 2)
	require.True(t, errors.Is(err, context.Canceled), "got %v", err)
}
