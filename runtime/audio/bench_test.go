package audio

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	goruntime "runtime"
	"testing"
)

// benchSeconds of audio per benchmark iteration.
const benchSeconds = 60

func noise(n int) []float32 {
	rng := rand.New(rand.NewPCG(5, 6))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * 0.2)
	}
	return x
}

// BenchmarkResample: one minute of audio to 16 kHz per op, on one core and
// on all of them; x_realtime is audio seconds per wall second. GOMAXPROCS is
// set inside each sub-benchmark because -cpu lists are applied late to
// sub-benchmarks.
func BenchmarkResample(b *testing.B) {
	procs := []int{1}
	if n := goruntime.NumCPU(); n > 1 {
		procs = append(procs, n)
	}
	for _, qc := range qualities {
		for _, from := range []int{8000, 22050, 44100, 48000} {
			for _, p := range procs {
				b.Run(fmt.Sprintf("%s/%d/procs=%d", qc.name, from, p), func(b *testing.B) {
					defer goruntime.GOMAXPROCS(goruntime.GOMAXPROCS(p))
					r, err := NewResampler(from, 16000, qc.q)
					if err != nil {
						b.Fatal(err)
					}
					x := noise(benchSeconds * from)
					b.SetBytes(int64(4 * len(x)))
					b.ReportAllocs()
					for b.Loop() {
						if _, err := r.Resample(x); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(benchSeconds*float64(b.N)/b.Elapsed().Seconds(), "x_realtime")
				})
			}
		}
	}
}

// BenchmarkNewResampler: filter design cost, paid once per Resample call.
func BenchmarkNewResampler(b *testing.B) {
	for _, from := range []int{44100, 48000} {
		b.Run(fmt.Sprint(from), func(b *testing.B) {
			for b.Loop() {
				if _, err := NewResampler(from, 16000, QualityBest); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecode: one minute of 44.1 kHz stereo, 16-bit and 24-bit.
func BenchmarkDecode(b *testing.B) {
	for _, bits := range []int{16, 24} {
		b.Run(fmt.Sprintf("s%d_44k_stereo", bits), func(b *testing.B) {
			s := pcm(bits, 2)
			s.rate = 44100
			x := make([]float64, 2*44100*benchSeconds)
			for i, v := range noise(len(x)) {
				x[i] = float64(v)
			}
			file := encodeWAV(s, x)
			b.SetBytes(int64(len(file)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Decode(bytes.NewReader(file), int64(len(file))); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(benchSeconds*float64(b.N)/b.Elapsed().Seconds(), "x_realtime")
		})
	}
}
