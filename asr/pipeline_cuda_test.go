//go:build cuda

package asr

// GPU-host tests and benchmarks of the zero-copy pipeline. The binary is
// built with `go test -c -tags cuda` and run on the GPU host with
// $EDGE_ORT_LIB (ONNX Runtime core), $EDGE_ORT_CUDA_EP (the CUDA plugin EP,
// scripts/ort-cuda-ep.sh unpack), cuBLAS/cuDNN on LD_LIBRARY_PATH and, for
// the large model, $EDGE_LARGE_MODEL (models/scripts/export_large.py).
//
//	asr.test -test.run CUDA -test.bench PipelineGPU -test.benchtime 5x

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/cuda/cudatest"
	"github.com/edgespeech/edge/runtime/model"
)

// clip30 is the demo sentence repeated to 30 s (one chunk).
func clip30(tb testing.TB) []float32 {
	x, _ := loadTruth(tb, "demo")
	var pcm []float32
	for len(pcm) < 30*16000 {
		pcm = append(pcm, x...)
	}
	return pcm[:30*16000]
}

// TestCUDAZeroCopyTranscribe transcribes the bundled clips on the GPU
// (fbank kernels, the CUDA EP with device binding, CUDA ctc_greedy and
// ctc_align) and requires the CPU pipeline's words, and that between the
// PCM upload and the alignment download no features or emissions cross
// between host and device: the placement copies are exactly the PCM upload,
// and the backend's own copies (per-item tables, status words, targets,
// alignment) stay far below one emission matrix.
func TestCUDAZeroCopyTranscribe(t *testing.T) {
	be := cudatest.Backend(t)
	cpu, err := Open(defaultModel, Options{})
	require.NoError(t, err)
	defer cpu.Close()
	gpu, err := Open(defaultModel, Options{Backend: be, Provider: "cuda"})
	require.NoError(t, err)
	defer gpu.Close()
	require.NoError(t, gpu.EncoderFallback())
	ctx := context.Background()
	clips := []string{"demo", "words_1", "words_2", "words_3", "words_4"}
	for _, name := range clips {
		pcm, truth := loadTruth(t, name)
		want, err := cpu.Transcribe(ctx, pcm)
		require.NoError(t, err)
		var st Stats
		got, err := gpu.Transcribe(WithStats(ctx, &st), pcm)
		require.NoError(t, err, name)
		assert.Equal(t, truth.Text, got.Text, name)
		require.Len(t, got.Words, len(want.Words), name)
		for i := range want.Words {
			assert.InDelta(t, want.Words[i].Start.Seconds(), got.Words[i].Start.Seconds(), 0.0201, "%s word %d start", name, i)
			assert.InDelta(t, want.Words[i].End.Seconds(), got.Words[i].End.Seconds(), 0.0201, "%s word %d end", name, i)
		}
		T := int(got.Duration / (20 * time.Millisecond))
		V := gpu.manifest.Vocab.Len()
		up := int64(4 * gpu.paddedLen(len(pcm))) // the PCM, zero-padded to the shape bucket
		assert.Equal(t, runtime.TransferStats{HostToDevice: 1, HostToDeviceBytes: up}, st.Transfers, "%s: placement copies", name)
		require.NotNil(t, st.Copies)
		c := *st.Copies
		t.Logf("%s: T'=%d, copies %+v (emissions would be %d bytes, features %d)", name, T, c, 4*T*V, 4*128*2*T)
		// beyond the PCM: fbank's per-item geometry, greedy's lengths, ctc_align's trellis tables (4 bytes a state, 8 a frame)
		assert.LessOrEqual(t, c.HostToDeviceBytes-up, int64(16*T+1024), "%s: host-to-device beyond the PCM", name)
		assert.LessOrEqual(t, c.DeviceToHostBytes, int64(16*T+1024), "%s: device-to-host: alignment, frame scores, greedy targets, status words", name)
		assert.Less(t, c.DeviceToHostBytes, int64(4*T*V), "%s: less than one emission matrix came down", name)

		text := truth.Text + " ñandú" // letters outside the vocabulary: the wildcard column
		wantAligned, err := cpu.Align(ctx, pcm, text)
		require.NoError(t, err, name)
		aligned, err := gpu.Align(ctx, pcm, text)
		require.NoError(t, err, name)
		assert.Equal(t, wantAligned.Text, aligned.Text, name)
	}
	// 30 s in one chunk, on the device all along
	gpu30, err := Open(defaultModel, Options{Backend: be, Provider: "cuda", ChunkSeconds: 30})
	require.NoError(t, err)
	defer gpu30.Close()
	pcm := clip30(t)
	var st Stats
	_, err = gpu30.Transcribe(WithStats(ctx, &st), pcm)
	require.NoError(t, err)
	assert.Equal(t, 1, st.Chunks)
	assert.Equal(t, int64(4*gpu30.paddedLen(len(pcm))), st.Transfers.HostToDeviceBytes)
}

// TestCUDAHostRoundTripCopies: bind=host moves the features down and the
// emissions up (the copies the zero-copy path saves), same words.
func TestCUDAHostRoundTripCopies(t *testing.T) {
	be := cudatest.Backend(t)
	gpu, err := Open(defaultModel, Options{Backend: be, Provider: "cuda", Bind: "host"})
	require.NoError(t, err)
	defer gpu.Close()
	pcm, truth := loadTruth(t, "demo")
	var st Stats
	got, err := gpu.Transcribe(WithStats(context.Background(), &st), pcm)
	require.NoError(t, err)
	assert.Equal(t, truth.Text, got.Text)
	T := int(got.Duration / (20 * time.Millisecond))
	assert.GreaterOrEqual(t, st.Copies.DeviceToHostBytes, int64(4*128*(2*T-1)), "features came down")
	assert.GreaterOrEqual(t, st.Copies.HostToDeviceBytes, int64(4*len(pcm)+4*T*29), "emissions went up")
}

// benchMode is one way of running the pipeline.
type benchMode struct {
	name     string
	backend  func(tb testing.TB) runtime.Backend
	provider string
	bind     string
}

var benchModes = []benchMode{
	{"gpu-zero-copy", func(tb testing.TB) runtime.Backend { return cudatest.Backend(tb) }, "cuda", "device"},
	{"gpu-host-round-trips", func(tb testing.TB) runtime.Backend { return cudatest.Backend(tb) }, "cuda", "host"},
	{"cpu", func(testing.TB) runtime.Backend { return runtime.CPU }, "cpu", ""},
}

// batchPipeline is the recogniser's pipeline for a batch: pcm [B, N] ->
// fbank -> encoder -> ctc_greedy -> ctc_align, returning the alignment and
// frame scores (what words are made of).
func batchPipeline(tb testing.TB, modelPath string, mode benchMode) (*runtime.Pipeline, runtime.Backend) {
	m, err := model.Load(modelPath)
	require.NoError(tb, err)
	be := mode.backend(tb)
	cfg := pipelineConfig(m, modelPath, Options{Provider: mode.provider, Bind: mode.bind})
	cfg.Steps = append(cfg.Steps,
		runtime.StepConfig{Name: "greedy", Op: "ctc_greedy", Params: map[string]any{"blank": m.BlankID},
			Inputs: map[string]string{"log_probs": "log_probs", "lengths": "frames"}},
		runtime.StepConfig{Name: "align", Op: "ctc_align", Params: map[string]any{"blank": m.BlankID},
			Inputs: map[string]string{"log_probs": "log_probs", "targets": "tokens", "lengths": "frames"}})
	cfg.Outputs = []string{"alignment", "frame_scores", "frames"}
	p, err := runtime.NewPipeline(cfg, be)
	require.NoError(tb, err)
	return p, be
}

// batchInput is B copies of pcm as the pipeline's inputs.
func batchInput(pcm []float32, B int) runtime.Tensors {
	x := make([]float32, 0, B*len(pcm))
	lens := make([]int64, B)
	for b := range B {
		x = append(x, pcm...)
		lens[b] = int64(len(pcm))
	}
	return runtime.Tensors{
		"pcm":         runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{B, len(pcm)}, x)),
		"pcm_lengths": runtime.Must(runtime.FromSlice(runtime.I64, runtime.Shape{B}, lens)),
	}
}

// runBatch runs the pipeline on a batch and brings the words' material
// (alignment, frame scores) to the host.
func runBatch(tb testing.TB, p *runtime.Pipeline, be runtime.Backend, in runtime.Tensors) runtime.PipelineStats {
	out, stats, err := p.RunStats(context.Background(), in)
	require.NoError(tb, err)
	defer out.Release()
	for _, k := range []string{"alignment", "frame_scores"} {
		h, err := be.Download(out[k])
		require.NoError(tb, err)
		require.Equal(tb, in["pcm"].Shape()[0], h.Shape()[0])
	}
	return stats
}

// BenchmarkPipelineGPU: one 30 s clip (latency) and a batch of 30 s clips
// (throughput) through fbank -> encoder -> ctc_greedy -> ctc_align -> words'
// material on the host, for the bundled model and the large random export,
// GPU zero-copy vs GPU with host round trips vs CPU, in one run. Metrics:
// ms per clip, clips/s, host<->device bytes per batch (the backend's own
// counts plus, for bind=host, the copies ONNX Runtime makes itself), and
// the wall time of each stage (device work queued by a stage may finish in
// a later one: on the zero-copy path the host waits only in ctc_greedy).
func BenchmarkPipelineGPU(b *testing.B) {
	models := []string{defaultModel}
	if large := os.Getenv("EDGE_LARGE_MODEL"); large != "" {
		models = append(models, large)
	}
	pcm := clip30(b)
	for _, mp := range models {
		for _, batch := range []int{1, 16} {
			for _, mode := range benchModes {
				b.Run(fmt.Sprintf("model=%s/B=%d/%s", modelName(b, mp), batch, mode.name), func(b *testing.B) {
					if mode.provider == "cpu" && batch > 1 && mp != defaultModel {
						b.Skip("the large model's CPU batch takes longer than the GPU host's time slot; its B=1 row stands for it")
					}
					p, be := batchPipeline(b, mp, mode)
					defer p.Close()
					in := batchInput(pcm, batch)
					runBatch(b, p, be, in) // warm-up: sessions, pools, kernels
					counter, _ := be.(copyCounter)
					ortCounter, _ := p.Step("encoder").Op().(interface{ ORTTransfers() runtime.TransferStats })
					var before, ortBefore runtime.TransferStats
					if counter != nil {
						before = counter.Stats()
					}
					if ortCounter != nil {
						ortBefore = ortCounter.ORTTransfers()
					}
					stages := map[string]time.Duration{}
					b.ResetTimer()
					for b.Loop() {
						stats := runBatch(b, p, be, in)
						for _, s := range stats.Steps {
							stages[s.Name] += s.Duration
						}
					}
					n := float64(b.N)
					b.ReportMetric(b.Elapsed().Seconds()*1000/n/float64(batch), "ms/clip")
					b.ReportMetric(float64(batch)*n/b.Elapsed().Seconds(), "clips/s")
					for k, v := range stages {
						b.ReportMetric(v.Seconds()*1000/n, k+"-ms")
					}
					if counter != nil {
						c := counter.Stats().Since(before)
						if ortCounter != nil { // on the host path ORT moves the features up and the emissions down itself
							c.Add(ortCounter.ORTTransfers().Since(ortBefore))
						}
						h2d, d2h := float64(c.HostToDeviceBytes)/n, float64(c.DeviceToHostBytes)/n
						b.ReportMetric(h2d, "h2d-B/batch")
						b.ReportMetric(d2h, "d2h-B/batch")
					}
				})
			}
		}
	}
}

func modelName(tb testing.TB, path string) string {
	m, err := model.Load(path)
	require.NoError(tb, err)
	return m.Name
}

// TestCUDALongAudio: audio over several chunks is stitched on the device
// (device-to-device copies) and gives the CPU pipeline's words; still only
// the PCM goes up as a placement copy.
func TestCUDALongAudio(t *testing.T) {
	be := cudatest.Backend(t)
	opt := Options{ChunkSeconds: 10, OverlapSeconds: 2}
	cpu, err := Open(defaultModel, opt)
	require.NoError(t, err)
	defer cpu.Close()
	opt.Backend, opt.Provider = be, "cuda"
	gpu, err := Open(defaultModel, opt)
	require.NoError(t, err)
	defer gpu.Close()
	x, _ := loadTruth(t, "demo")
	var pcm []float32
	for range 5 {
		pcm = append(pcm, x...)
	}
	want, err := cpu.Transcribe(context.Background(), pcm)
	require.NoError(t, err)
	var st Stats
	got, err := gpu.Transcribe(WithStats(context.Background(), &st), pcm)
	require.NoError(t, err)
	assert.Equal(t, want.Text, got.Text)
	assert.Greater(t, st.Chunks, 3)
	assert.Equal(t, st.Chunks, st.Transfers.HostToDevice, "one PCM upload per chunk")
	assert.Equal(t, 0, st.Transfers.DeviceToHost)
	T := int(got.Duration / (20 * time.Millisecond))
	assert.Less(t, st.Copies.DeviceToHostBytes, int64(4*T*29), "less than one emission matrix came down")
}

// TestCUDAPipelineCPUEncoder runs the cuda backend with the encoder on ONNX
// Runtime's CPU provider (features come down, emissions go up: the encoder's
// host path), with CUDA fbank, ctc_greedy, ctc_align and device stitching
// around it, and requires the CPU pipeline's words. It needs no CUDA EP.
func TestCUDAPipelineCPUEncoder(t *testing.T) {
	be := cudatest.Backend(t)
	for _, chunk := range []float64{30, 10} {
		opt := Options{ChunkSeconds: chunk, OverlapSeconds: 2}
		cpu, err := Open(defaultModel, opt)
		require.NoError(t, err)
		defer cpu.Close()
		opt.Backend = be
		gpu, err := Open(defaultModel, opt)
		require.NoError(t, err)
		defer gpu.Close()
		for _, name := range []string{"demo", "words_1", "words_4"} {
			pcm, truth := loadTruth(t, name)
			if chunk == 10 {
				for range 3 {
					pcm = append(pcm, pcm[:len(pcm)/3]...)
				}
			}
			want, err := cpu.Transcribe(context.Background(), pcm)
			require.NoError(t, err)
			var st Stats
			got, err := gpu.Transcribe(WithStats(context.Background(), &st), pcm)
			require.NoError(t, err, name)
			assert.Equal(t, want.Text, got.Text, name)
			if chunk == 30 {
				assert.Equal(t, truth.Text, got.Text, name)
			}
			require.Len(t, got.Words, len(want.Words))
			for i := range want.Words {
				assert.InDelta(t, want.Words[i].Start.Seconds(), got.Words[i].Start.Seconds(), 0.0201, "%s word %d", name, i)
			}
			aligned, err := gpu.Align(context.Background(), pcm, want.Text)
			require.NoError(t, err)
			assert.Equal(t, want.Text, aligned.Text)
			t.Logf("%s (chunk %gs): chunks %d, placement %+v, backend copies %+v", name, chunk, st.Chunks, st.Transfers, *st.Copies)
		}
	}
}

// cudaModes are the two ways the recogniser runs on the cuda backend: the
// encoder on ONNX Runtime's CPU provider (features down, emissions up) and
// on its CUDA EP with device binding (zero-copy).
var cudaModes = []struct {
	name     string
	provider string
}{{"cpu-encoder", ""}, {"cuda-ep", "cuda"}}

// TestCUDANoLeak transcribes a clip 1000 times in each mode and requires
// the device pool's bytes in use to come back to where they were after the
// warm-up: every upload, intermediate and output is released.
func TestCUDANoLeak(t *testing.T) {
	be := cudatest.Backend(t)
	pcm, _ := loadTruth(t, "words_1")
	for _, mode := range cudaModes {
		t.Run(mode.name, func(t *testing.T) {
			r, err := Open(defaultModel, Options{Backend: be, Provider: mode.provider})
			require.NoError(t, err)
			defer r.Close()
			checkFlat(t, r, pcm, 1000, "device pool in use", func() int64 { return be.PoolStats().InUse }, 0)
		})
	}
}

// TestCUDAConcurrent: 16 goroutines over one recogniser on the cuda
// backend, in each mode, give the sequential results.
func TestCUDAConcurrent(t *testing.T) {
	be := cudatest.Backend(t)
	for _, mode := range cudaModes {
		t.Run(mode.name, func(t *testing.T) {
			r, err := Open(defaultModel, Options{Backend: be, Provider: mode.provider})
			require.NoError(t, err)
			defer r.Close()
			for _, name := range clipNames { // the ops' own tables reach their size
				pcm, truth := loadTruth(t, name)
				_, err := r.Align(context.Background(), pcm, truth.Text)
				require.NoError(t, err)
				_, err = r.Transcribe(context.Background(), pcm)
				require.NoError(t, err)
			}
			before := be.PoolStats().InUse
			checkConcurrent(t, r)
			assert.Equal(t, before, be.PoolStats().InUse, "device pool in use after the concurrent calls")
		})
	}
}
