//go:build cuda

package fbank

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/cuda"
	"github.com/edgespeech/edge/runtime/cuda/cudatest"
)

// BenchmarkCUDAFbank times the fbank op on the GPU for 30 s clips of speech
// (speech_a.wav repeated, each item at its own gain), batch 64 and 1,
// Whisper-128 and Parakeet-128, with the pcm already on the device:
//
//   - ns/op: Instance.Run as a pipeline calls it (geometry upload, the
//     kernels, and the synchronising 8-byte-per-item error check);
//   - dev-us/op: device time of the queued work alone (CUDA events around
//     the geometry upload and the kernels), the median of the iterations
//     (as fbank_gpu.py times the torch peer);
//   - GB/s: the pcm read plus the features written, over dev-us/op (the
//     memory-traffic floor; ~4.3 TB/s is the H200's measured copy rate).
//
// scripts/bench/fbank_gpu.py runs this next to the torch peer:
//
//	plugins_fbank.test -test.run '^$' -test.bench CUDAFbank -test.benchtime 200x
func BenchmarkCUDAFbank(b *testing.B) {
	be, err := cudatest.Open()
	if err != nil {
		b.Fatal(err)
	}
	x := clip30s(b)
	for _, preset := range []string{"whisper-128", "parakeet-128"} {
		for _, batch := range []int{64, 1} {
			b.Run(fmt.Sprintf("%s/B%d", preset, batch), func(b *testing.B) {
				pcm := make([]float32, batch*len(x))
				for i := range batch {
					g := 1 - float32(i)/float32(2*batch)
					for j, v := range x {
						pcm[i*len(x)+j] = g * v
					}
				}
				host := runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{batch, len(x)}, pcm))
				dev, err := be.Upload(host)
				if err != nil {
					b.Fatal(err)
				}
				defer dev.Buffer().Free()
				inst, err := runtime.New("fbank", map[string]any{"preset": preset}, be)
				if err != nil {
					b.Fatal(err)
				}
				defer inst.Close()
				in := runtime.Tensors{"pcm": dev}
				run := func() int64 {
					out, err := inst.Run(context.Background(), in)
					if err != nil {
						b.Fatal(err)
					}
					f := out["features"]
					_ = f.Buffer().Free()
					return f.Bytes()
				}
				outBytes := run() // warm-up: module, pool, staging
				op := cudaOpOf(b, map[string]any{"preset": preset}, be)
				items, feats, frames := plannedBatch(b, be, op, batch, len(x))
				defer feats.Buffer().Free()
				pcmPtr, _ := cuda.Ptr(dev)

				var devTimes []time.Duration
				b.ResetTimer()
				for b.Loop() {
					run()
					b.StopTimer()
					devTimes = append(devTimes, enqueueTime(b, be, op, pcmPtr, int64(len(x)), items, feats, frames))
					b.StartTimer()
				}
				us := cudatest.MedianMicros(devTimes)
				b.ReportMetric(us, "dev-us/op")
				b.ReportMetric(float64(host.Bytes()+outBytes)/us/1e3, "GB/s")
			})
		}
	}
}

// BenchmarkCUDAFbankGeometry times the queued work of a batch of 64 and of
// one 30 s clip (dev-us/op, as BenchmarkCUDAFbank) for launch geometries of
// fbank_logmel (warps per block, steps of 4 frames per warp) with the op's
// choice of launches (knobsFor), and for the default shape each way: the
// normalisation in fbank_logmel (/fused: its tiles interleaved about a wave
// of items behind the transforms; /fused2, /fused3: two, three waves;
// /fusedall: after all of them), the fbank_normalize launch (/separate),
// the op's choice with one stage of rows (/1stage), the rows of two steps
// written together (/wide, /fusedall-wide, /fused2-wide), the
// normalisation tiles after the transforms in reverse item order
// (/fusedall-rev, /fusedall-rev-wide, /fused2-rev), the window and
// column twiddles in shared memory (/tabs, /fusedall-tabs), for the batch
// /fusedall and /fusedall-wide at w4s4 and w4s16 too, and, for Parakeet,
// the fbank_stats launch (/stats).
//
//	plugins_fbank.test -test.run '^$' -test.bench CUDAFbankGeometry -test.benchtime 100x
func BenchmarkCUDAFbankGeometry(b *testing.B) {
	be, err := cudatest.Open()
	if err != nil {
		b.Fatal(err)
	}
	x := clip30s(b)
	shapes := map[int][]launchGeom{64: {{4, 1}, {4, 2}, {4, 4}, {4, 8}, {4, 16}}, 1: {{1, 1}, {2, 1}, {4, 1}}}
	for _, batch := range []int{64, 1} {
		dev, pcmPtr := uploadCopies(b, be, x, batch)
		for _, preset := range []string{"whisper-128", "parakeet-128"} {
			op := cudaOpOf(b, map[string]any{"preset": preset}, be)
			items, feats, frames := plannedBatch(b, be, op, batch, len(x))
			type variant struct {
				g      launchGeom
				knobs  *launchKnobs // nil: the op's choice
				suffix string
			}
			var variants []variant
			for _, g := range shapes[batch] {
				variants = append(variants, variant{g, nil, ""})
			}
			def := op.geometryFor(batch, frames)
			one := op.knobsFor(batch, ceilDiv(frames, def.frames())) // the op's choice, one stage
			one.oneStage = true
			variants = append(variants, variant{def, &launchKnobs{fused: true}, "/fused"},
				variant{def, &launchKnobs{}, "/separate"}, variant{def, &one, "/1stage"},
				variant{def, &launchKnobs{fused: true, lagAll: true}, "/fusedall"},
				variant{def, &launchKnobs{fused: true, lagWaves: 2}, "/fused2"},
				variant{def, &launchKnobs{fused: true, lagWaves: 3}, "/fused3"},
				variant{def, &launchKnobs{wide: true}, "/wide"},
				variant{def, &launchKnobs{fused: true, lagAll: true, wide: true}, "/fusedall-wide"},
				variant{def, &launchKnobs{fused: true, lagWaves: 2, wide: true}, "/fused2-wide"},
				variant{def, &launchKnobs{fused: true, lagAll: true, rev: true}, "/fusedall-rev"},
				variant{def, &launchKnobs{fused: true, lagAll: true, rev: true, wide: true}, "/fusedall-rev-wide"},
				variant{def, &launchKnobs{fused: true, lagWaves: 2, rev: true}, "/fused2-rev"},
				variant{def, &launchKnobs{tabs: true}, "/tabs"},
				variant{def, &launchKnobs{tabs: true, fused: true, lagAll: true}, "/fusedall-tabs"})
			if batch > 1 {
				for _, g := range []launchGeom{{4, 4}, {4, 16}} {
					variants = append(variants, variant{g, &launchKnobs{fused: true, lagAll: true}, "/fusedall"},
						variant{g, &launchKnobs{fused: true, lagAll: true, wide: true}, "/fusedall-wide"})
				}
			}
			if preset == "parakeet-128" {
				variants = append(variants, variant{def, &launchKnobs{statsKernel: true}, "/stats"})
			}
			for _, v := range variants {
				g := v.g
				if op.shared(g) > op.sharedLimit {
					continue
				}
				b.Run(fmt.Sprintf("%s/B%d/w%ds%d%s", preset, batch, g.warps, g.steps, v.suffix), func(b *testing.B) {
					op.fixed, op.knobs = g, v.knobs
					reportDeviceTime(b, be, op, pcmPtr, int64(len(x)), items, feats, frames)
				})
			}
			_ = feats.Buffer().Free()
		}
		_ = dev.Buffer().Free()
	}
}

// BenchmarkCUDAFbankOdd times (dev-us/op, as BenchmarkCUDAFbank) batches of
// 64 x 30 s whose mel_time rows are not a multiple of 4 frames (3001:
// normalize=none keeps the last STFT frame), so that the feature rows start
// off 16-byte boundaries (the transform's scalar write-out; for Parakeet
// also the normalisation's element-wise ends): Whisper-128 raw log-mel and
// Parakeet-128 in NeMo's [B, M, T] layout, with the op's launches;
// Whisper-128's default (3000 frames) for reference.
//
//	plugins_fbank.test -test.run '^$' -test.bench CUDAFbankOdd -test.benchtime 100x
func BenchmarkCUDAFbankOdd(b *testing.B) {
	be, err := cudatest.Open()
	if err != nil {
		b.Fatal(err)
	}
	const batch = 64
	x := clip30s(b)
	dev, pcmPtr := uploadCopies(b, be, x, batch)
	defer dev.Buffer().Free()
	for _, c := range []struct {
		name string
		cfg  map[string]any
	}{
		{"whisper-128", map[string]any{"preset": "whisper-128"}},
		{"whisper-128-raw", map[string]any{"preset": "whisper-128", "normalize": "none"}},
		{"parakeet-128-mel_time", map[string]any{"preset": "parakeet-128", "layout": "mel_time"}},
	} {
		op := cudaOpOf(b, c.cfg, be)
		items, feats, frames := plannedBatch(b, be, op, batch, len(x))
		b.Run(fmt.Sprintf("%s/B%d/T%d", c.name, batch, frames), func(b *testing.B) {
			reportDeviceTime(b, be, op, pcmPtr, int64(len(x)), items, feats, frames)
		})
		_ = feats.Buffer().Free()
	}
}

// BenchmarkCUDAFbankClamp times Whisper-128 on a batch of 64 x 30 s (dev-us/op,
// as BenchmarkCUDAFbank) for the speech clip and for the same clip with
// 40 ms of digital silence every second (/gaps): then every tile of the
// default launch shape holds values under the item's floor (max - 8, checked
// on the CPU features), so the normalisation clamps them all instead of
// skipping most: the worst case of its tile skip. Both ways of normalising
// (/fused: in fbank_logmel).
//
//	plugins_fbank.test -test.run '^$' -test.bench CUDAFbankClamp -test.benchtime 100x
func BenchmarkCUDAFbankClamp(b *testing.B) {
	be, err := cudatest.Open()
	if err != nil {
		b.Fatal(err)
	}
	const batch, preset = 64, "whisper-128"
	x := clip30s(b)
	gaps := append([]float32(nil), x...)
	for s := 0; s < len(gaps); s += 16000 {
		clear(gaps[s+8000 : s+8000+640])
	}
	op := cudaOpOf(b, map[string]any{"preset": preset}, be)
	g := op.geometryFor(batch, 3000)
	cpu, err := op.fe.Compute(context.Background(), [][]float32{gaps}, 0)
	if err != nil {
		b.Fatal(err)
	}
	if n := tilesUnderFloor(cpu, g.frames()); n != ceilDiv(cpu.Frames, g.frames()) {
		b.Fatalf("/gaps: %d of %d tiles hold values under the floor, want all", n, ceilDiv(cpu.Frames, g.frames()))
	}
	for name, clip := range map[string][]float32{"speech": x, "gaps": gaps} {
		dev, pcmPtr := uploadCopies(b, be, clip, batch)
		items, feats, frames := plannedBatch(b, be, op, batch, len(clip))
		for _, fused := range []bool{false, true} {
			suffix := ""
			if fused {
				suffix = "/fused"
			}
			b.Run(fmt.Sprintf("%s/B%d/%s%s", preset, batch, name, suffix), func(b *testing.B) {
				op.knobs = &launchKnobs{fused: fused}
				reportDeviceTime(b, be, op, pcmPtr, int64(len(clip)), items, feats, frames)
			})
		}
		_ = feats.Buffer().Free()
		_ = dev.Buffer().Free()
	}
}

// plannedBatch plans op for batch items of n samples each and allocates
// their features on the device: the launch inputs of enqueueTime (the
// caller frees feats).
func plannedBatch(b *testing.B, be *cuda.Backend, op *cudaOp, batch, n int) (items []int64, feats *runtime.Tensor, frames int) {
	lens := make([]int, batch)
	for i := range lens {
		lens[i] = n
	}
	items, _, shape, frames, err := op.plan(lens)
	if err != nil {
		b.Fatal(err)
	}
	if feats, err = be.Empty(runtime.F32, shape); err != nil {
		b.Fatal(err)
	}
	return items, feats, frames
}

// tilesUnderFloor counts the tiles (of `tile` frames) of the first item of
// Whisper features f ([B, M, T], normalised: the floor is their minimum)
// that hold a value at the floor.
func tilesUnderFloor(f *Features, tile int) int {
	T := f.Frames
	item := f.Data[:f.Mels*T]
	floor := item[0]
	for _, v := range item {
		floor = min(floor, v)
	}
	n := 0
	for t0 := 0; t0 < T; t0 += tile {
		for m := range f.Mels {
			if slices.Contains(item[m*T+t0:m*T+min(T, t0+tile)], floor) {
				n++
				break
			}
		}
	}
	return n
}

// enqueueTime is the device time of op.enqueue for one batch (CUDA events).
func enqueueTime(b *testing.B, be *cuda.Backend, op *cudaOp, pcm cuda.DevicePtr, stride int64, items []int64, feats *runtime.Tensor, frames int) time.Duration {
	d, err := be.Time(func() error {
		sc := be.NewScratch()
		defer sc.Free()
		_, err := op.enqueue(pcm, stride, items, feats, frames, sc)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// uploadCopies uploads a [batch, len(clip)] pcm of batch copies of clip and
// returns it with its device address (the caller frees it).
func uploadCopies(b *testing.B, be *cuda.Backend, clip []float32, batch int) (*runtime.Tensor, cuda.DevicePtr) {
	pcm := make([]float32, batch*len(clip))
	for i := range batch {
		copy(pcm[i*len(clip):], clip)
	}
	dev, err := be.Upload(runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{batch, len(clip)}, pcm)))
	if err != nil {
		b.Fatal(err)
	}
	ptr, _ := cuda.Ptr(dev)
	return dev, ptr
}

// reportDeviceTime reports the median device time of op's queued work over
// the benchmark's iterations (dev-us/op), after one warm-up.
func reportDeviceTime(b *testing.B, be *cuda.Backend, op *cudaOp, pcm cuda.DevicePtr, stride int64, items []int64, feats *runtime.Tensor, frames int) {
	enqueueTime(b, be, op, pcm, stride, items, feats, frames) // warm-up
	var devTimes []time.Duration
	for b.Loop() {
		devTimes = append(devTimes, enqueueTime(b, be, op, pcm, stride, items, feats, frames))
	}
	b.ReportMetric(cudatest.MedianMicros(devTimes), "dev-us/op")
}

// cudaOpOf builds the op's CUDA implementation of cfg directly, for timing
// its enqueue step alone or fixing its launch shape.
func cudaOpOf(b testing.TB, cfg map[string]any, be *cuda.Backend) *cudaOp {
	spec, err := runtime.Lookup("fbank")
	if err != nil {
		b.Fatal(err)
	}
	p, err := runtime.ResolveParams("fbank", spec.Params, cfg)
	if err != nil {
		b.Fatal(err)
	}
	op, err := newCUDAOp(p, be)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = op.(*cudaOp).Close() })
	return op.(*cudaOp)
}
