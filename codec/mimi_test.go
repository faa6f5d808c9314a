package codec

import (
	"context"
	"math"
	"path/filepath"
	"testing"
)

const (
	mimiDir    = "testdata/mimi"
	mimiGolden = "testdata/mimi_golden"
)

// TestMimiQuantizer reads the tiny Mimi checkpoint's split quantizer: one
// semantic and three acoustic stages of 256 x 8 behind 16 -> 8 projections,
// codebooks embed_sum / max(cluster_usage, 1e-5) (entry 0's usage is 1e-7,
// so the clamp matters), 1920 samples a frame.
func TestMimiQuantizer(t *testing.T) {
	c, err := readQuantizer(mimiDir)
	if err != nil {
		t.Fatal(err)
	}
	if c.Family() != "mimi" || c.NumStages() != 4 || c.Hop() != 1920 || c.Dim() != 16 || c.SampleRate() != 24000 {
		t.Fatalf("family %s stages %d hop %d dim %d rate %d", c.Family(), c.NumStages(), c.Hop(), c.Dim(), c.SampleRate())
	}
	if len(c.chains) != 2 || len(c.chains[0].stages) != 1 || len(c.chains[1].stages) != 3 || c.chains[0].width != 8 ||
		len(c.chains[0].inProj) != 8*16 || len(c.chains[1].outProj) != 16*8 {
		t.Fatalf("chains %+v", c.chains)
	}
	st, err := readSafetensors(filepath.Join(mimiDir, WeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	sum, _, _ := st.f32("quantizer.semantic_residual_vector_quantizer.layers.0.codebook.embed_sum", 256, 8)
	usage, _, _ := st.f32("quantizer.semantic_residual_vector_quantizer.layers.0.codebook.cluster_usage", 256)
	if usage[0] >= 1e-5 {
		t.Fatalf("cluster_usage[0] = %g, the checkpoint should exercise the clamp", usage[0])
	}
	for k, u := range []float32{1e-5, usage[1]} {
		for j := 0; j < 8; j++ {
			if got, want := c.chains[0].stages[0][k*8+j], sum[k*8+j]/u; got != want {
				t.Fatalf("embed[%d][%d] = %v, want %v", k, j, got, want)
			}
		}
	}
	if _, err := c.StagesForBandwidth(1.1); err == nil {
		t.Error("a bandwidth accepted for Mimi")
	}
	// Quantize then Dequantize: every stage count, codes in range, both chains used.
	ctx := context.Background()
	x := make([]float32, 5*16)
	for i := range x {
		x[i] = float32(math.Sin(float64(i)))
	}
	for q := 1; q <= 4; q++ {
		codes, err := c.Quantize(ctx, x, 5, q)
		if err != nil {
			t.Fatal(err)
		}
		lat, err := c.Dequantize(ctx, codes, 5, q)
		if err != nil || len(lat) != len(x) {
			t.Fatalf("Dequantize: %v (%d values)", err, len(lat))
		}
	}
	if _, err := c.Dequantize(ctx, []int32{0, 256}, 1, 2); err == nil {
		t.Error("code 256 of K = 256 accepted")
	}
	if _, err := c.Quantize(ctx, x, 5, 5); err == nil {
		t.Error("5 stages of 4 accepted")
	}
}

// TestMimiQuantizerGolden feeds transformers' own latents (the encoder,
// encoder transformer and downsampling, saved by scripts/golden/codec.py)
// to the split quantizer: codes equal to encode()'s exactly, dequantized
// latents within 1e-5 of quantizer.decode()'s.
func TestMimiQuantizerGolden(t *testing.T) {
	testQuantizerGolden(t, mimiDir, mimiGolden)
}

// TestEncodecQuantizerGolden is TestMimiQuantizerGolden for EnCodec.
func TestEncodecQuantizerGolden(t *testing.T) {
	testQuantizerGolden(t, encodecDir, encodecGolden)
}

func testQuantizerGolden(t *testing.T, dir, golden string) {
	c, err := readQuantizer(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, clip := range []string{"clip0", "clip1", "clip2"} {
		path := filepath.Join(golden, clip+"_latents.npy")
		lshape, ldata := readNpy(t, path)
		d, frames := lshape[0], lshape[1]
		if d != c.Dim() {
			t.Fatalf("%s: latents %v, codec D = %d", path, lshape, c.Dim())
		}
		x := transpose(ldata.([]float32), d, frames)
		for _, q := range []int{c.NumStages(), 2} {
			suffix := ""
			if q != c.NumStages() {
				if clip != "clip0" {
					continue
				}
				suffix = "_q2"
			}
			wshape, wdata := readNpy(t, filepath.Join(golden, clip+"_codes"+suffix+".npy"))
			if wshape[0] != q || wshape[1] != frames {
				t.Fatalf("%s%s: golden codes %v for latents %v", clip, suffix, wshape, lshape)
			}
			codes, err := c.Quantize(ctx, x, frames, q)
			if err != nil {
				t.Fatal(err)
			}
			got := transposeI32(codes, frames, q)
			for i, w := range wdata.([]int32) {
				if got[i] != w {
					t.Fatalf("%s%s: code [%d, %d] = %d, transformers %d", clip, suffix, i/frames, i%frames, got[i], w)
				}
			}
		}
		qpath := filepath.Join(golden, clip+"_qlatents.npy")
		_, qdata := readNpy(t, qpath)
		_, cdata := readNpy(t, filepath.Join(golden, clip+"_codes.npy"))
		deq, err := c.Dequantize(ctx, transposeI32(cdata.([]int32), c.NumStages(), frames), frames, c.NumStages())
		if err != nil {
			t.Fatal(err)
		}
		want := transpose(qdata.([]float32), d, frames)
		worst := 0.0
		for i := range want {
			worst = max(worst, math.Abs(float64(deq[i]-want[i])))
		}
		t.Logf("%s: %d frames, codes equal, max |dequantized - transformers| %.3g", clip, frames, worst)
		if worst > 1e-5 {
			t.Fatalf("%s: max |dequantized - transformers| = %g, want <= 1e-5", clip, worst)
		}
	}
}

// TestMimiGolden is TestEncodecGolden for Mimi: the whole path through
// encoder.onnx and decoder.onnx.
func TestMimiGolden(t *testing.T) {
	c, err := Open(mimiDir, Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	testGolden(t, c, mimiGolden)
}
