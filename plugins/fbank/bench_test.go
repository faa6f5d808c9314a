package fbank

import (
	"context"
	"fmt"
	goruntime "runtime"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// clip30s is 30 s of speech: the committed 2 s clip speech_a.wav repeated.
func clip30s(b *testing.B) []float32 {
	b.Helper()
	x := loadWAV(b, "speech_a")
	out := make([]float32, 0, 30*16000)
	for len(out) < 30*16000 {
		out = append(out, x[:min(len(x), 30*16000-len(out))]...)
	}
	return out
}

// BenchmarkFbank30s computes one 30 s clip per iteration, on one goroutine
// and on all cores (GOMAXPROCS). Run with:
//
//	go test -run '^$' -bench Fbank30s -benchtime 3s ./plugins/fbank
func BenchmarkFbank30s(b *testing.B) {
	x := clip30s(b)
	for _, name := range []string{"whisper-80", "whisper-128", "parakeet-128"} {
		cfg, err := Preset(name)
		if err != nil {
			b.Fatal(err)
		}
		fe, err := NewFrontend(cfg)
		if err != nil {
			b.Fatal(err)
		}
		for _, threads := range []int{1, goruntime.GOMAXPROCS(0)} {
			b.Run(fmt.Sprintf("%s/threads=%d", name, threads), func(b *testing.B) {
				b.ReportAllocs()
				cpu0 := cpuTime()
				for b.Loop() {
					if _, err := fe.Compute(context.Background(), [][]float32{x}, threads); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(30*float64(b.N)/b.Elapsed().Seconds(), "x_realtime")
				// CPU time per op (all threads): on a shared machine it is
				// steadier than wall time.
				b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// BenchmarkRealPower is one frame's power spectrum at the preset sizes.
func BenchmarkRealPower(b *testing.B) {
	for _, n := range []int{400, 512} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			pl, err := newRFFTPlan(n)
			if err != nil {
				b.Fatal(err)
			}
			x := make([]float64, n)
			for i := range x {
				x[i] = float64(i%17) - 8
			}
			out := make([]float64, n/2+1)
			sc := pl.newScratch()
			for b.Loop() {
				pl.power(x, out, sc)
			}
		})
	}
}
