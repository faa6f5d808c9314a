//go:build cuda

package codec

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgespeech/edge/runtime/cuda/cudatest"
)

// TestCUDAGolden checks the CUDA quantizer on the golden clips: the latents
// (the golden file where there is one, else encoder.onnx's on the CPU)
// quantised on the GPU give transformers' codes exactly, at every stage
// count the goldens hold.
func TestCUDAGolden(t *testing.T) {
	be := cudatest.Backend(t)
	for _, fam := range []struct{ dir, golden string }{{encodecDir, encodecGolden}, {mimiDir, mimiGolden}} {
		t.Run(filepath.Base(fam.dir), func(t *testing.T) {
			var c *Codec
			var err error
			if _, serr := os.Stat(filepath.Join(fam.dir, EncoderFile)); serr == nil {
				c, err = Open(fam.dir, Options{Threads: 1})
			} else {
				c, err = readQuantizer(fam.dir)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// the quantizer on the GPU, as Options{Backend: be} sets it
			cq, release, err := deviceQuantizer(be)
			if err != nil || cq == nil {
				t.Fatalf("deviceQuantizer(cuda) = %v, %v", cq != nil, err)
			}
			defer release()
			ctx := context.Background()
			for _, tc := range []struct {
				clip, suffix string
				q            int
			}{{"clip0", "", c.NumStages()}, {"clip1", "", c.NumStages()}, {"clip2", "", c.NumStages()}, {"clip0", "_q2", 2}} {
				x, frames := goldenLatents(t, fam.golden, tc.clip)
				got, err := c.quantize(ctx, x, frames, tc.q, cq)
				if err != nil {
					t.Fatal(err)
				}
				cpu, err := c.quantize(ctx, x, frames, tc.q, cpuEncode)
				if err != nil {
					t.Fatal(err)
				}
				wshape, wdata := readNpy(t, filepath.Join(fam.golden, tc.clip+"_codes"+tc.suffix+".npy"))
				if wshape[0] != tc.q || wshape[1] != frames {
					t.Fatalf("%s%s: golden codes %v, latents of %d frames", tc.clip, tc.suffix, wshape, frames)
				}
				want := wdata.([]int32)
				g := transposeI32(got, frames, tc.q)
				for i := range want {
					if g[i] != want[i] || got[i] != cpu[i] {
						t.Fatalf("%s%s: code [%d, %d]: CUDA %d, CPU %d, transformers %d", tc.clip, tc.suffix, i/frames, i%frames, g[i], transposeI32(cpu, frames, tc.q)[i], want[i])
					}
				}
				t.Logf("%s%s: %d frames x %d codebooks: CUDA = CPU = transformers", tc.clip, tc.suffix, frames, tc.q)
			}
		})
	}
}

// goldenLatents reads clip's encoder latents golden ([D, T] npy) as
// frame-major [T, D] and T.
func goldenLatents(t *testing.T, golden, clip string) ([]float32, int) {
	t.Helper()
	shape, data := readNpy(t, filepath.Join(golden, clip+"_latents.npy"))
	return transpose(data.([]float32), shape[0], shape[1]), shape[1]
}

// TestCUDAProvider runs the codec's graphs on ONNX Runtime's CUDA EP (the
// plugin EP runs their Slice nodes rewritten), the quantizer on the CPU.
// In fp32 (the default) the codes are transformers' exactly and the
// decoded audio of its codes within 1e-4 of its decode(). With TF32 the
// latents move by ~1e-3, so near-tie codes may change (the tiny seeded
// models' codewords are closer than a trained codec's): the audio must be
// within 1e-2 and at most a fifth of the codes may differ.
func TestCUDAProvider(t *testing.T) {
	for _, fam := range []struct{ dir, golden string }{{encodecDir, encodecGolden}, {mimiDir, mimiGolden}} {
		for _, tf32 := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/tf32=%v", filepath.Base(fam.dir), tf32), func(t *testing.T) {
				testCUDAProvider(t, fam.dir, fam.golden, tf32)
			})
		}
	}
}

func testCUDAProvider(t *testing.T, dir, golden string, tf32 bool) {
	c, err := Open(dir, Options{Threads: 1, Provider: "cuda", TF32: tf32})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	audioTol, codesFrac := 1e-4, 0.0
	if tf32 {
		audioTol, codesFrac = 1e-2, 0.2
	}
	ctx := context.Background()
	for _, clip := range []string{"clip0", "clip1", "clip2"} {
		pcm := loadClip(t, c, filepath.Join(golden, clip+".wav"))
		wshape, wdata := readNpy(t, filepath.Join(golden, clip+"_codes.npy"))
		want := wdata.([]int32)
		codes, frames, err := c.Encode(ctx, pcm, c.NumStages())
		if err != nil {
			t.Fatal(err)
		}
		if wshape[0] != c.NumStages() || wshape[1] != frames {
			t.Fatalf("%s: golden codes %v, edge [%d, %d]", clip, wshape, c.NumStages(), frames)
		}
		differ := 0
		for i := range want {
			if codes[i] != want[i] {
				differ++
			}
		}
		_, adata := readNpy(t, filepath.Join(golden, clip+"_audio.npy"))
		got, err := c.Decode(ctx, want, c.NumStages(), frames)
		if err != nil {
			t.Fatal(err)
		}
		worst := 0.0
		for i, v := range adata.([]float32) {
			worst = max(worst, math.Abs(float64(got[i]-v)))
		}
		t.Logf("%s: %d of %d codes differ from transformers'; decoded max |diff| %.3g", clip, differ, len(want), worst)
		if float64(differ) > codesFrac*float64(len(want)) {
			t.Errorf("%s: %d of %d codes differ", clip, differ, len(want))
		}
		if worst > audioTol {
			t.Errorf("%s: max |decoded - transformers| = %g, want <= %g", clip, worst, audioTol)
		}
	}
}
