package dpx

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"
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
	}
}
