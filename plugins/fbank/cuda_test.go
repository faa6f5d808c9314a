//go:build cuda

package fbank

// Parity of the CUDA kernels (kernels/fbank.cu) with the CPU Frontend, the
// numerical reference. These tests run on a GPU host only: the binary is
// built with `go test -c -tags cuda` (make test-cuda-bin) and run there, with
// $EDGE_KERNELS_FATBIN pointing at a freshly built fatbin when the sources
// changed in the same session.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/cuda/cudatest"
)

// Gates from issue 7.
const (
	cudaWhisperCos  = 0.99999 // cos_sim over all frames
	cudaWhisperDiff = 5e-3    // max |diff| over all frames
	cudaNeMoDiff    = 1e-2    // max |diff| over valid frames (per_feature, none)
)

// batchInput packs clips into a [B, N] pcm (or [N] for one clip) with lengths.
func batchInput(clips [][]float32) runtime.Tensors {
	n := 0
	for _, c := range clips {
		n = max(n, len(c))
	}
	if len(clips) == 1 {
		return runtime.Tensors{"pcm": runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{n}, clips[0]))}
	}
	pcm := make([]float32, len(clips)*n)
	lengths := make([]int64, len(clips))
	for b, c := range clips {
		copy(pcm[b*n:], c)
		lengths[b] = int64(len(c))
	}
	return runtime.Tensors{
		"pcm":     runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{len(clips), n}, pcm)),
		"lengths": runtime.Must(runtime.FromSlice(runtime.I64, runtime.Shape{len(clips)}, lengths)),
	}
}

// runCUDA runs the fbank op on the GPU and returns its features on the host.
func runCUDA(t *testing.T, cfg map[string]any, clips ...[]float32) (*runtime.Tensor, []int64) {
	t.Helper()
	be := cudatest.Backend(t)
	inst, err := runtime.New("fbank", cfg, be)
	require.NoError(t, err)
	defer inst.Close()
	out, err := inst.Run(context.Background(), batchInput(clips))
	require.NoError(t, err)
	feats := out["features"]
	require.False(t, feats.OnHost(), "features stay on the device")
	h, err := be.Download(feats)
	require.NoError(t, err)
	require.NoError(t, feats.Buffer().Free())
	return h, out["lengths"].I64()
}

// parity is the agreement of one CUDA result with the CPU reference.
type parity struct {
	cos, maxDiff float64
}

// compare runs cfg on the CPU and the GPU and checks the gates:
// per_utterance/global (Whisper) cos_sim and max |diff| over every frame;
// per_feature/none (Parakeet) max |diff| over valid frames. Everywhere the
// CPU output is exactly 0 (frames past an item's own) the GPU's must be too,
// and every GPU value must be finite.
func compare(t *testing.T, cfg map[string]any, clips ...[]float32) parity {
	t.Helper()
	return compareWith(t, cfg, func() (*runtime.Tensor, []int64) { return runCUDA(t, cfg, clips...) }, clips...)
}

// compareWith is compare with the GPU result from gpu().
func compareWith(t *testing.T, cfg map[string]any, gpu func() (*runtime.Tensor, []int64), clips ...[]float32) parity {
	t.Helper()
	want, wantLen := runOp(t, cfg, clips...)
	return compareTo(t, cfg, want, wantLen, gpu)
}

// compareTo is compareWith against the CPU result of the same clips
// computed before (runOp: want, wantLen), for many GPU launches of them.
func compareTo(t *testing.T, cfg map[string]any, want *runtime.Tensor, wantLen []int64, gpu func() (*runtime.Tensor, []int64)) parity {
	t.Helper()
	got, gotLen := gpu()
	require.Equal(t, want.Shape(), got.Shape())
	require.Equal(t, wantLen, gotLen, "lengths")
	inst, err := runtime.New("fbank", cfg, runtime.CPU)
	require.NoError(t, err)
	c, err := ConfigFromParams(inst.Params)
	require.NoError(t, err)

	g, w := got.F32(), want.F32()
	frames, mels := want.Shape()[2], want.Shape()[1]
	if c.Layout == TimeMel {
		frames, mels = want.Shape()[1], want.Shape()[2]
	}
	whisper := c.Normalize == PerUtterance || c.Normalize == Global
	var dot, gg, ww, worst float64
	for i := range w {
		require.False(t, math.IsNaN(float64(g[i])) || math.IsInf(float64(g[i]), 0), "element %d is %v", i, g[i])
		if w[i] == 0 && !whisper {
			require.Zero(t, g[i], "element %d: the CPU writes 0 here", i)
		}
		b, r := i/(frames*mels), i%(frames*mels)
		t0 := r % frames
		if c.Layout == TimeMel {
			t0 = r / mels
		}
		if !whisper && t0 >= int(wantLen[b]) {
			require.Zero(t, g[i], "item %d frame %d is past the valid frames", b, t0)
			continue
		}
		a, e := float64(g[i]), float64(w[i])
		dot, gg, ww = dot+a*e, gg+a*a, ww+e*e
		worst = math.Max(worst, math.Abs(a-e))
	}
	p := parity{cos: 1, maxDiff: worst}
	if gg > 0 || ww > 0 {
		p.cos = dot / math.Sqrt(gg*ww)
	}
	if whisper {
		assert.GreaterOrEqual(t, p.cos, cudaWhisperCos, "cos_sim")
		assert.LessOrEqual(t, p.maxDiff, cudaWhisperDiff, "max |diff|")
	} else {
		assert.LessOrEqual(t, p.maxDiff, cudaNeMoDiff, "max |diff| on valid frames")
	}
	return p
}

// worstOf logs and keeps the worst parity of a family.
type worstOf map[string]parity

func (w worstOf) add(family string, p parity) {
	cur, ok := w[family]
	if !ok {
		cur = parity{cos: 1}
	}
	w[family] = parity{cos: math.Min(cur.cos, p.cos), maxDiff: math.Max(cur.maxDiff, p.maxDiff)}
}

func (w worstOf) log(t *testing.T) {
	for f, p := range w {
		t.Logf("%-28s worst cos_sim %.8f  max |diff| %.3g", f, p.cos, p.maxDiff)
	}
}

func TestCUDAParityClips(t *testing.T) {
	m := readManifest(t)
	worst := worstOf{}
	for _, preset := range []string{"whisper-80", "whisper-128", "parakeet-80", "parakeet-128", "nemo-legacy-128"} {
		for clip := range m.Clips {
			t.Run(preset+"/"+clip, func(t *testing.T) {
				worst.add(preset, compare(t, map[string]any{"preset": preset}, loadWAV(t, clip)))
			})
		}
	}
	for _, clip := range []string{"speech_a", "speech_b"} {
		t.Run("whisper-128-pad30/"+clip, func(t *testing.T) {
			worst.add("whisper-128-pad30", compare(t, map[string]any{"preset": "whisper-128", "pad_to_seconds": 30}, loadWAV(t, clip)))
		})
	}
	worst.log(t)
}

// TestCUDAParityKnobs covers the configuration space the kernels take
// beyond the presets: layouts, log and normalisation modes, pad modes,
// windows, hops and frame counts.
func TestCUDAParityKnobs(t *testing.T) {
	x := loadWAV(t, "speech_a")
	worst := worstOf{}
	for _, tc := range []map[string]any{
		{"preset": "whisper-128", "layout": "time_mel"},
		{"preset": "whisper-128", "normalize": "global"},
		{"preset": "whisper-80", "window_type": "hann_symmetric", "hop_length": 128},
		{"preset": "whisper-128", "out_frames": 50},
		{"preset": "whisper-128", "pad_mode": "constant", "f_min": 20, "f_max": 7600},
		{"preset": "parakeet-128", "layout": "mel_time"},
		{"preset": "parakeet-128", "normalize": "none"},
		{"preset": "parakeet-128", "normalize": "none", "log_clamp_min": 1e-5},
		{"preset": "parakeet-128", "valid_frames": "ceil"},
		{"preset": "parakeet-80", "pad_mode": "none", "win_length": 320},
		{"preset": "parakeet-128", "pre_emphasis": 0, "window_type": "hann_periodic", "win_length": 512},
		{"preset": "nemo-legacy-128", "hop_length": 100},
	} {
		name := fmt.Sprint(tc)
		t.Run(name, func(t *testing.T) { worst.add(name, compare(t, tc, x)) })
	}
	worst.log(t)
}

// randomClip is length n of speech, noise, a chirp or a mix, at a random gain.
func randomClip(rng *rand.Rand, speech []float32, n int) []float32 {
	x := make([]float32, n)
	gain := float32(math.Pow(10, -3*rng.Float64()))
	kind := rng.IntN(4)
	off := rng.IntN(len(speech))
	for i := range x {
		s := speech[(off+i)%len(speech)]
		noise := float32(rng.NormFloat64()) * 0.1
		chirp := float32(math.Sin(2 * math.Pi * (100 + 3000*float64(i)/float64(n)) * float64(i) / 16000))
		switch kind {
		case 0:
			x[i] = s
		case 1:
			x[i] = noise
		case 2:
			x[i] = chirp
		default:
			x[i] = 0.5*s + noise + 0.2*chirp
		}
		x[i] *= gain
	}
	return x
}

func TestCUDAParityRandomBatches(t *testing.T) {
	speech := loadWAV(t, "speech_b")
	worst := worstOf{}
	for seed := range uint64(3) {
		rng := rand.New(rand.NewPCG(7, seed))
		clips := make([][]float32, 2+rng.IntN(9))
		for b := range clips {
			n := 480 + rng.IntN(80000)
			if b == 0 {
				n = 480 + rng.IntN(200) // a few frames only
			}
			clips[b] = randomClip(rng, speech, n)
		}
		for _, preset := range []string{"whisper-128", "parakeet-128", "whisper-80", "nemo-legacy-128"} {
			t.Run(fmt.Sprintf("seed%d/%s/B%d", seed, preset, len(clips)), func(t *testing.T) {
				worst.add(preset, compare(t, map[string]any{"preset": preset}, clips...))
			})
		}
	}
	worst.log(t)
}

// TestCUDASilenceAndClipping: all-zero audio and full-scale clipped audio
// give finite features that match the CPU.
func TestCUDASilenceAndClipping(t *testing.T) {
	n := 16000
	silence := make([]float32, n)
	square, clipped := make([]float32, n), make([]float32, n)
	for i := range n {
		square[i] = 1
		if (i/40)%2 == 1 {
			square[i] = -1
		}
		clipped[i] = float32(max(-1, min(1, 10*math.Sin(2*math.Pi*440*float64(i)/16000))))
	}
	for _, preset := range []string{"whisper-128", "parakeet-128"} {
		for name, x := range map[string][]float32{"silence": silence, "square": square, "clipped_sine": clipped} {
			t.Run(preset+"/"+name, func(t *testing.T) {
				p := compare(t, map[string]any{"preset": preset}, x)
				t.Logf("cos_sim %.8f max |diff| %.3g", p.cos, p.maxDiff)
			})
		}
		t.Run(preset+"/batch", func(t *testing.T) { compare(t, map[string]any{"preset": preset}, silence, square, clipped) })
	}
}

func TestCUDAErrors(t *testing.T) {
	be := cudatest.Backend(t)
	good := loadWAV(t, "speech_a")[:8000]
	withBad := func(i int, v float32) []float32 {
		x := append([]float32(nil), good...)
		x[i] = v
		return x
	}
	for _, tc := range []struct {
		name  string
		in    runtime.Tensors
		item  int
		wants string
	}{
		{"nan", batchInput([][]float32{good, withBad(1234, float32(math.NaN()))}), 1, "pcm item 1 sample 1234 is NaN"},
		{"inf at the end", batchInput([][]float32{withBad(7999, float32(math.Inf(1))), good}), 0, "pcm item 0 sample 7999 is +Inf"},
		{"inf at the start", batchInput([][]float32{withBad(0, float32(math.Inf(-1)))}), 0, "pcm item 0 sample 0 is -Inf"},
		{"too short", batchInput([][]float32{good, good[:100]}), 1, "pcm item 1 has 100 samples, want at least win_length = 400"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inst, err := runtime.New("fbank", map[string]any{"preset": "whisper-128"}, be)
			require.NoError(t, err)
			_, err = inst.Run(context.Background(), tc.in)
			require.Error(t, err)
			var ce *ClipError
			require.True(t, errors.As(err, &ce), "%v", err)
			assert.Equal(t, tc.item, ce.Item)
			assert.ErrorContains(t, err, tc.wants)
		})
	}
	t.Run("nan past lengths is ignored", func(t *testing.T) {
		x := withBad(7000, float32(math.NaN()))
		in := runtime.Tensors{
			"pcm":     runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{1, len(x)}, x)),
			"lengths": runtime.Must(runtime.FromSlice(runtime.I64, runtime.Shape{1}, []int64{6000})),
		}
		inst, err := runtime.New("fbank", map[string]any{"preset": "parakeet-128"}, be)
		require.NoError(t, err)
		out, err := inst.Run(context.Background(), in)
		require.NoError(t, err)
		require.NoError(t, out["features"].Buffer().Free())
	})
	t.Run("lengths out of range", func(t *testing.T) {
		in := runtime.Tensors{
			"pcm":     runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{1, len(good)}, good)),
			"lengths": runtime.Must(runtime.FromSlice(runtime.I64, runtime.Shape{1}, []int64{9000})),
		}
		inst, err := runtime.New("fbank", map[string]any{"preset": "parakeet-128"}, be)
		require.NoError(t, err)
		_, err = inst.Run(context.Background(), in)
		assert.ErrorContains(t, err, `input "lengths"[0] = 9000, want 0..8000`)
	})
	for _, tc := range []struct {
		cfg   map[string]any
		wants string
	}{
		{map[string]any{"preset": "whisper-128", "n_fft": 256, "win_length": 256}, "n_fft 256: the cuda kernels support 400 and 512"},
		{map[string]any{"preset": "parakeet-128", "num_mels": 2000}, "num_mels 2000: the cuda kernels support at most"},
		{map[string]any{"preset": "whisper-128", "hop_length": 0}, "hop_length 0"},
	} {
		_, err := runtime.New("fbank", tc.cfg, be)
		assert.ErrorContains(t, err, tc.wants)
	}
}

// TestCUDADeviceResident: the op takes and returns device tensors; the only
// copies are the explicit ones, and they are counted.
func TestCUDADeviceResident(t *testing.T) {
	be := cudatest.Backend(t)
	x := loadWAV(t, "speech_a")
	inst, err := runtime.New("fbank", map[string]any{"preset": "parakeet-128"}, be)
	require.NoError(t, err)
	defer inst.Close()
	host := runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{2, len(x) / 2}, x[:len(x)/2*2]))

	before := be.Stats()
	out, copies, err := inst.RunStats(context.Background(), runtime.Tensors{"pcm": host})
	require.NoError(t, err)
	assert.Equal(t, runtime.TransferStats{HostToDevice: 1, HostToDeviceBytes: host.Bytes()}, copies,
		"the instance uploads the host pcm once")
	assert.Equal(t, "cuda:0", out["features"].Device())
	assert.True(t, out["lengths"].OnHost())
	d := be.Stats().Since(before)
	// pcm, then the op's own: item rows, preset error words, tickets and
	// ready words up (48 B/item and two counters, the first Run only), error
	// words down (8 B/item).
	assert.Equal(t, runtime.TransferStats{HostToDevice: 2, HostToDeviceBytes: host.Bytes() + 2*48 + 16,
		DeviceToHost: 1, DeviceToHostBytes: 2 * 8}, d)
	require.NoError(t, out["features"].Buffer().Free())

	dev, err := be.Upload(host)
	require.NoError(t, err)
	before = be.Stats()
	out, copies, err = inst.RunStats(context.Background(), runtime.Tensors{"pcm": dev})
	require.NoError(t, err)
	assert.Equal(t, runtime.TransferStats{}, copies, "device input: no copy by the instance")
	assert.Equal(t, runtime.TransferStats{DeviceToHost: 1, DeviceToHostBytes: 2 * 8}, be.Stats().Since(before),
		"same geometry: only the error words come back")
	require.NoError(t, out["features"].Buffer().Free())

	before = be.Stats()
	lengths := runtime.Must(runtime.FromSlice(runtime.I64, runtime.Shape{2}, []int64{int64(len(x) / 2), 9000}))
	out, err = inst.Run(context.Background(), runtime.Tensors{"pcm": dev, "lengths": lengths})
	require.NoError(t, err)
	assert.Equal(t, runtime.TransferStats{HostToDevice: 1, HostToDeviceBytes: 2 * 24, DeviceToHost: 1,
		DeviceToHostBytes: 2 * 8}, be.Stats().Since(before), "new lengths: the item rows go up (24 B/item)")
	require.NoError(t, out["features"].Buffer().Free())
	require.NoError(t, dev.Buffer().Free())
}

// TestCUDARepeatedRuns: one op runs batches of other sizes and lengths, and
// one with a NaN sample, one after another; each result equals the CPU's
// (the per-item words it keeps between Runs, the reduction tickets, error
// words, ready words and block counters, are reset) and the NaN is reported
// in its Run only. Both ways of normalising, and the launches the op picks
// for batches (fused after every transform, wide for Whisper, tabs for
// Parakeet).
func TestCUDARepeatedRuns(t *testing.T) {
	be := cudatest.Backend(t)
	speech := loadWAV(t, "speech_b")
	rng := rand.New(rand.NewPCG(5, 9))
	a := [][]float32{randomClip(rng, speech, 48000), randomClip(rng, speech, 30000)}
	b := [][]float32{randomClip(rng, speech, 20000), randomClip(rng, speech, 64000), randomClip(rng, speech, 9000)}
	bad := append([]float32(nil), a[1]...)
	bad[777] = float32(math.NaN())
	for _, preset := range []string{"whisper-128", "parakeet-128"} {
		for _, kn := range []launchKnobs{{}, {fused: true}, {fused: true, lagAll: true, wide: true},
			{fused: true, lagAll: true, tabs: true}} {
			cfg := map[string]any{"preset": preset}
			o := cudaOpOf(t, cfg, be)
			o.knobs = &kn
			run := func(clips ...[]float32) (runtime.Tensors, error) {
				in := batchInput(clips)
				dev, err := be.Upload(in["pcm"])
				require.NoError(t, err)
				defer dev.Buffer().Free()
				in["pcm"] = dev
				return o.Run(context.Background(), in)
			}
			for i, clips := range [][][]float32{a, b, a, nil, a, b} {
				t.Run(fmt.Sprintf("%s/%+v/run%d", preset, kn, i), func(t *testing.T) {
					if clips == nil {
						_, err := run(a[0], bad)
						assert.ErrorContains(t, err, "pcm item 1 sample 777 is NaN")
						return
					}
					compareWith(t, cfg, func() (*runtime.Tensor, []int64) {
						out, err := run(clips...)
						require.NoError(t, err)
						h, err := be.Download(out["features"])
						require.NoError(t, err)
						require.NoError(t, out["features"].Buffer().Free())
						return h, out["lengths"].I64()
					}, clips...)
				})
			}
		}
	}
}

// TestCUDALaunchGeometry: the default block shape fits in the shared memory
// the op opted in to, with the filterbank, for the presets, a batch gets 8
// steps of 4 frames a warp and a single clip 1 (to spread over the GPU), and
// the launches each gets (knobsFor).
func TestCUDALaunchGeometry(t *testing.T) {
	be := cudatest.Backend(t)
	for _, preset := range []string{"whisper-80", "whisper-128", "parakeet-80", "parakeet-128", "nemo-legacy-128"} {
		t.Run(preset, func(t *testing.T) {
			op := cudaOpOf(t, map[string]any{"preset": preset}, be)
			assert.Positive(t, op.sharedW, "filterbank weights in shared memory")
			assert.Equal(t, op.fe.cfg.NFFT == 400, op.logmelWide != nil, "fbank_logmel_n400_wide for n_fft 400")
			assert.LessOrEqual(t, op.shared(launchGeom{cudaWarps, 8}), op.sharedLimit)
			g := launchGeom{cudaWarps, 8}
			assert.LessOrEqual(t, op.sharedFor(g, op.stagesFor(g, 0)), op.sharedLimit, "%d stages", op.stagesFor(g, 0))
			assert.LessOrEqual(t, op.sharedFor(g, op.stagesFor(g, op.tabsBytes()))+op.tabsBytes(), op.sharedLimit, "_tabs")
			t.Logf("%s: %d stages, %d B of shared memory a block", preset, op.stagesFor(g, 0), op.sharedFor(g, op.stagesFor(g, 0)))
			assert.Equal(t, launchGeom{cudaWarps, 8}, op.geometryFor(64, 3000))
			assert.Equal(t, launchGeom{cudaWarps, 2}, op.geometryFor(8, 3000))
			assert.Equal(t, launchGeom{cudaWarps, 1}, op.geometryFor(1, 3000))
			// 64 x 30 s: in-kernel statistics, the normalisation in the
			// same launch after the transforms, Whisper's with two steps'
			// rows written at once, Parakeet's with its tables in shared
			// memory; one 30 s clip (188 tiles): the fbank_stats launch.
			batch := launchKnobs{fused: true, lagAll: true, tabs: true}
			if op.statsMode == statsMax {
				batch = launchKnobs{fused: true, lagAll: true, wide: true}
			}
			assert.Equal(t, batch, op.knobsFor(64, ceilDiv(3000, launchGeom{cudaWarps, 8}.frames())))
			assert.Equal(t, launchKnobs{statsKernel: true}, op.knobsFor(1, ceilDiv(3000, launchGeom{cudaWarps, 1}.frames())))
		})
	}
}

// TestCUDAParityGeometry checks the launch shapes (steps of 4 frames a warp,
// blocks of 1 to 4 warps) on a batch of ragged clips, in both layouts, the
// normalisation both ways (the fbank_normalize launch, or fbank_logmel's own
// tiles: fused), Parakeet's moments both ways (fbank_logmel's last block of
// an item, or the fbank_stats launch), one or two stages of rows, the fused
// normalisation tiles after every transform tile (lagAll) or two waves
// behind (lagWaves), in item order or reversed (rev), the rows of two
// steps written together (wide) and the tables in shared memory (tabs).
// Whisper pads the short clips to 30 s, so some of their tiles fall under
// the floor and are clamped, others are skipped; its raw log-mel
// (normalize=none) keeps 3001 frames, so the mel_time rows of most features
// start off 16-byte boundaries (the transform's scalar write-out), as
// Parakeet's mel_time rows of an odd frame count do for its normalisation
// (norm_rows_by_warp's element-wise ends).
func TestCUDAParityGeometry(t *testing.T) {
	be := cudatest.Backend(t)
	speech := loadWAV(t, "speech_b")
	rng := rand.New(rand.NewPCG(11, 3))
	clips := [][]float32{randomClip(rng, speech, 160000), randomClip(rng, speech, 123457), randomClip(rng, speech, 900)}
	worst := worstOf{}
	for _, cfg := range []map[string]any{
		{"preset": "whisper-128"},
		{"preset": "parakeet-128"},
		{"preset": "parakeet-128", "layout": "mel_time"},
		{"preset": "whisper-80", "layout": "time_mel"},
		{"preset": "whisper-128", "normalize": "none"}, // 3001 frames: rows off 16-byte boundaries
	} {
		want, wantLen := runOp(t, cfg, clips...) // once per configuration
		for _, tc := range []struct {
			g  launchGeom
			kn launchKnobs
		}{
			{launchGeom{4, 16}, launchKnobs{fused: true}}, {launchGeom{4, 8}, launchKnobs{}},
			{launchGeom{4, 4}, launchKnobs{}}, {launchGeom{4, 2}, launchKnobs{}}, {launchGeom{4, 1}, launchKnobs{}},
			{launchGeom{2, 1}, launchKnobs{}}, {launchGeom{1, 1}, launchKnobs{}},
			{launchGeom{4, 8}, launchKnobs{fused: true}}, {launchGeom{4, 4}, launchKnobs{fused: true}},
			{launchGeom{4, 1}, launchKnobs{fused: true}}, {launchGeom{1, 1}, launchKnobs{fused: true}},
			{launchGeom{4, 4}, launchKnobs{statsKernel: true}}, {launchGeom{4, 1}, launchKnobs{statsKernel: true}},
			{launchGeom{4, 4}, launchKnobs{oneStage: true}}, {launchGeom{4, 8}, launchKnobs{fused: true, oneStage: true}},
			{launchGeom{4, 8}, launchKnobs{fused: true, lagAll: true}}, {launchGeom{4, 8}, launchKnobs{wide: true}},
			{launchGeom{4, 8}, launchKnobs{fused: true, lagAll: true, wide: true}}, {launchGeom{4, 1}, launchKnobs{wide: true}},
			{launchGeom{2, 16}, launchKnobs{fused: true, lagWaves: 2, wide: true}}, {launchGeom{1, 1}, launchKnobs{wide: true}},
			{launchGeom{4, 8}, launchKnobs{fused: true, lagAll: true, rev: true}},
			{launchGeom{4, 2}, launchKnobs{fused: true, lagWaves: 2, rev: true}},
			{launchGeom{4, 8}, launchKnobs{tabs: true}}, {launchGeom{4, 8}, launchKnobs{tabs: true, fused: true, lagAll: true}},
			{launchGeom{1, 1}, launchKnobs{tabs: true}},
		} {
			g := tc.g
			if tc.kn.statsKernel && cfg["preset"] != "parakeet-128" {
				continue // fbank_stats computes per-feature moments only
			}
			name := fmt.Sprintf("%v/w%ds%d/%+v", cfg, g.warps, g.steps, tc.kn)
			t.Run(name, func(t *testing.T) {
				gpu := func() (*runtime.Tensor, []int64) {
					o := cudaOpOf(t, cfg, be)
					kn := tc.kn
					o.fixed, o.knobs = g, &kn
					in := batchInput(clips)
					dev, err := be.Upload(in["pcm"])
					require.NoError(t, err)
					defer dev.Buffer().Free()
					in["pcm"] = dev
					out, err := o.Run(context.Background(), in)
					require.NoError(t, err)
					h, err := be.Download(out["features"])
					require.NoError(t, err)
					require.NoError(t, out["features"].Buffer().Free())
					return h, out["lengths"].I64()
				}
				worst.add(fmt.Sprint(cfg), compareTo(t, cfg, want, wantLen, gpu))
			})
		}
	}
	worst.log(t)
}
