package dpx

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	rt "github.com/edgespeech/edge/runtime"
)

// cpuTime is the process's user+system CPU time: on a loaded machine it
// measures the work better than wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAlign measures single-threaded CTC forced alignment at the
// issue's shapes (C = 32), float32 and int32 paths.
func BenchmarkAlign(b *testing.B) {
	for _, sh := range []struct{ T, L int }{{1500, 300}, {15000, 3000}} {
		rng := rand.New(rand.NewPCG(uint64(sh.T), 1))
		lp, tg := randomProblem(rng, sh.T, sh.L, 32, 0, 2)
		for _, p := range []Precision{Float32, Int32} {
			b.Run(fmt.Sprintf("T=%d/L=%d/%v", sh.T, sh.L, p), func(b *testing.B) {
				a, err := NewAligner(AlignOptions{Precision: p})
				if err != nil {
					b.Fatal(err)
				}
				var out Alignment
				b.ReportAllocs()
				c0 := cpuTime()
				for b.Loop() {
					if err := a.Align(&out, lp, 32, tg); err != nil {
						b.Fatal(err)
					}
				}
				cpu := float64((cpuTime() - c0).Nanoseconds()) / float64(b.N)
				b.ReportMetric(cpu, "cpu-ns/op")
				b.ReportMetric(cpu/float64(sh.T*(2*sh.L+1)), "cpu-ns/cell")
			})
		}
		// The portable step (no AVX2), as on arm64.
		b.Run(fmt.Sprintf("T=%d/L=%d/f32-go", sh.T, sh.L), func(b *testing.B) {
			avx2 := useAVX2
			useAVX2 = false
			defer func() { useAVX2 = avx2 }()
			a, _ := NewAligner(AlignOptions{})
			var out Alignment
			c0 := cpuTime()
			for b.Loop() {
				if err := a.Align(&out, lp, 32, tg); err != nil {
					b.Fatal(err)
				}
			}
			cpu := float64((cpuTime() - c0).Nanoseconds()) / float64(b.N)
			b.ReportMetric(cpu/float64(sh.T*(2*sh.L+1)), "cpu-ns/cell")
		})
	}
}

// BenchmarkAlignBatch aligns a batch of 32 items (T=1500, L=300, C=32)
// through the ctc_align op, which spreads items over GOMAXPROCS workers.
func BenchmarkAlignBatch(b *testing.B) {
	const B, T, L, C = 32, 1500, 300, 32
	rng := rand.New(rand.NewPCG(9, 9))
	lp := make([]float32, 0, B*T*C)
	tg := make([]int64, 0, B*L)
	for range B {
		x, y := randomProblem(rng, T, L, C, 0, 2)
		lp = append(lp, x...)
		for _, v := range y {
			tg = append(tg, int64(v))
		}
	}
	op, err := rt.New("ctc_align", nil, rt.CPU)
	if err != nil {
		b.Fatal(err)
	}
	in := rt.Tensors{
		"log_probs": rt.Must(rt.FromSlice(rt.F32, rt.Shape{B, T, C}, lp)),
		"targets":   rt.Must(rt.FromSlice(rt.I64, rt.Shape{B, L}, tg)),
	}
	for b.Loop() {
		if _, err := op.Run(context.Background(), in); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(B*b.N)/b.Elapsed().Seconds(), "items/s")
}

// BenchmarkAlignHour aligns one hour of audio: T = 180000 frames (20 ms),
// L = 50000 tokens, C = 32, with the default 256 MiB backtrace budget
// (checkpointed recomputation). It reports the aligner's working memory
// the memory the Go runtime obtained from the OS (go-sys) and the process's
// peak resident memory (both include the 23 MB input).
func BenchmarkAlignHour(b *testing.B) {
	const T, L, C = 180000, 50000, 32
	rng := rand.New(rand.NewPCG(7, 7))
	lp, tg := randomProblem(rng, T, L, C, 0, 2)
	a, err := NewAligner(AlignOptions{})
	if err != nil {
		b.Fatal(err)
	}
	var out Alignment
	for b.Loop() {
		if err := a.Align(&out, lp, C, tg); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(a.workingBytes())/(1<<20), "work-MiB")
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.Sys)/(1<<20), "go-sys-MiB")
	if hwm, ok := peakRSS(); ok {
		b.ReportMetric(float64(hwm)/(1<<20), "peak-rss-MiB")
	}
}

// peakRSS reads this process's resident-set high-water mark (VmHWM) from
// /proc (Linux). Unlike getrusage's maxrss it is not inherited across exec,
// so a fat parent (python with torch) does not inflate it.
func peakRSS() (int64, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmHWM:" && f[2] == "kB" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

// BenchmarkViterbi decodes T=1000 frames of S=64 states.
func BenchmarkViterbi(b *testing.B) {
	const T, S = 1000, 64
	rng := rand.New(rand.NewPCG(3, 3))
	em, _ := randomProblem(rng, T, 0, S, 0, 2)
	tr, _ := randomProblem(rng, S, 0, S, 0, 1)
	pr, _ := randomProblem(rng, 1, 0, S, 0, 1)
	for _, p := range []Precision{Float32, Int32} {
		b.Run(p.String(), func(b *testing.B) {
			h, err := NewHMM(tr, pr, S, p, 0)
			if err != nil {
				b.Fatal(err)
			}
			path := make([]int32, T)
			for b.Loop() {
				if _, _, err := h.Decode(path, em); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDTW warps two sequences of 1000 steps.
func BenchmarkDTW(b *testing.B) {
	const N, M = 1000, 1000
	rng := rand.New(rand.NewPCG(4, 4))
	cost := make([]float32, N*M)
	for i := range cost {
		cost[i] = float32(rng.Float64())
	}
	for _, p := range []Precision{Float32, Int32} {
		b.Run(p.String(), func(b *testing.B) {
			for b.Loop() {
				if _, err := DTW(cost, N, M, p, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
