//go:build unix

package vad

import (
	"context"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the CPU time (user + system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDetect measures the VAD's cost per hour of 16 kHz audio on one
// core: one stream, ONNX Runtime with one intra-op thread (the default),
// GOMAXPROCS 1. The clip is the speech-with-pauses fixture repeated to
// 60 s. Metrics: "s/h" is the wall time one hour of audio takes, "cpu-s/h"
// the CPU time the process spent on it (the cost on a loaded machine);
// run with `taskset -c 0` to pin it to a single core.
func BenchmarkDetect(b *testing.B) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	d := openTest(b, nil)
	clip, sr := readClip(b, "plugins/vad/testdata/pauses.wav")
	var pcm []float32
	for len(pcm) < 60*sr {
		pcm = append(pcm, clip...)
	}
	pcm = pcm[:60*sr]
	ctx := context.Background()
	if _, err := d.Detect(ctx, pcm, sr); err != nil { // warm up
		b.Fatal(err)
	}
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	for b.Loop() {
		if _, err := d.Detect(ctx, pcm, sr); err != nil {
			b.Fatal(err)
		}
	}
	per := time.Since(start).Seconds() / float64(b.N)
	cpuPer := (cpuTime() - cpu0).Seconds() / float64(b.N)
	audio := float64(len(pcm)) / float64(sr)
	b.ReportMetric(per*3600/audio, "s/h")
	b.ReportMetric(cpuPer*3600/audio, "cpu-s/h")
	b.ReportMetric(per/float64((len(pcm)+511)/512)*1e6, "us/window")
	b.ReportMetric(audio/per, "x_realtime")
}

// BenchmarkSegmenter measures the rules alone, per window.
func BenchmarkSegmenter(b *testing.B) {
	probs := make([]float32, 112500) // one hour of windows
	for i := range probs {
		if (i/50)%3 == 0 {
			probs[i] = 0.9
		} else {
			probs[i] = 0.1
		}
	}
	r := DefaultRules()
	b.ResetTimer()
	for b.Loop() {
		segmentProbs(r, Rate16k, len(probs)*512, probs)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(probs)), "ns/window")
}

// BenchmarkDetectBatch is BenchmarkDetect for 16 clips of 30 s at once
// (DetectBatch: one model run per window for all 16); the metrics are per
// hour of audio, all clips counted.
func BenchmarkDetectBatch(b *testing.B) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	d := openTest(b, nil)
	clip, sr := readClip(b, "plugins/vad/testdata/pauses.wav")
	clips := make([][]float32, 16)
	for k := range clips {
		x := make([]float32, 30*sr)
		for i := range x {
			x[i] = clip[(i+k*7919)%len(clip)]
		}
		clips[k] = x
	}
	ctx := context.Background()
	if _, err := d.DetectBatch(ctx, clips, sr); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	for b.Loop() {
		if _, err := d.DetectBatch(ctx, clips, sr); err != nil {
			b.Fatal(err)
		}
	}
	audio := float64(len(clips)*len(clips[0])) / float64(sr)
	b.ReportMetric(time.Since(start).Seconds()/float64(b.N)*3600/audio, "s/h")
	b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N)*3600/audio, "cpu-s/h")
}
