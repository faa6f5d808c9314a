package codec

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgespeech/edge/runtime/audio"
	"github.com/edgespeech/edge/runtime/npy"
)

const (
	encodecDir    = "testdata/encodec"
	encodecGolden = "testdata/encodec_golden"
)

func openEncodec(t testing.TB) *Codec {
	t.Helper()
	c, err := Open(encodecDir, Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// loadClip reads a golden clip at the codec's rate.
func loadClip(t testing.TB, c *Codec, path string) []float32 {
	t.Helper()
	pcm, err := audio.Load(path, c.SampleRate())
	if err != nil {
		t.Fatal(err)
	}
	return pcm
}

func readNpy(t testing.TB, path string) ([]int, any) {
	t.Helper()
	x, err := npy.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return x.Shape(), x.Data()
}

// TestEncodecGolden checks edge's codes against transformers' encode() on
// the golden clips (exactly) and the decoded audio against decode() (1e-4),
// at the full bandwidth and at two codebooks.
func TestEncodecGolden(t *testing.T) {
	c := openEncodec(t)
	if c.NumStages() != 4 || c.SampleRate() != 24000 || c.Hop() != 320 {
		t.Fatalf("stages %d rate %d hop %d", c.NumStages(), c.SampleRate(), c.Hop())
	}
	testGolden(t, c, encodecGolden)
}

// testGolden runs every golden clip of dir through c: codes equal to
// transformers' (all stages for clip0..2, two for clip0_q2), decoded audio
// within 1e-4 of its decode().
func testGolden(t *testing.T, c *Codec, dir string) {
	for _, tc := range []struct {
		clip, suffix string
		q            int
	}{{"clip0", "", c.NumStages()}, {"clip1", "", c.NumStages()}, {"clip2", "", c.NumStages()}, {"clip0", "_q2", 2}} {
		t.Run(tc.clip+tc.suffix, func(t *testing.T) {
			pcm := loadClip(t, c, filepath.Join(dir, tc.clip+".wav"))
			wshape, wdata := readNpy(t, filepath.Join(dir, tc.clip+"_codes"+tc.suffix+".npy"))
			want := wdata.([]int32)
			codes, frames, err := c.Encode(context.Background(), pcm, tc.q)
			if err != nil {
				t.Fatal(err)
			}
			if wshape[0] != tc.q || wshape[1] != frames {
				t.Fatalf("golden codes %v, edge [%d, %d]", wshape, tc.q, frames)
			}
			for i := range want {
				if codes[i] != want[i] {
					t.Fatalf("code [%d, %d] = %d, transformers %d", i/frames, i%frames, codes[i], want[i])
				}
			}
			_, adata := readNpy(t, filepath.Join(dir, tc.clip+"_audio"+tc.suffix+".npy"))
			wantPCM := adata.([]float32)
			got, err := c.Decode(context.Background(), codes, tc.q, frames)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(wantPCM) {
				t.Fatalf("decoded %d samples, transformers %d", len(got), len(wantPCM))
			}
			worst := 0.0
			for i := range got {
				worst = max(worst, math.Abs(float64(got[i]-wantPCM[i])))
			}
			t.Logf("%d frames, codes equal, max |audio diff| %.3g", frames, worst)
			if worst > 1e-4 {
				t.Fatalf("max |decoded - transformers| = %g, want <= 1e-4", worst)
			}
		})
	}
}

func TestBandwidth(t *testing.T) {
	c := openEncodec(t)
	for _, tc := range []struct {
		kbps float64
		want int
	}{{1.5, 2}, {3.0, 4}} {
		if n, err := c.StagesForBandwidth(tc.kbps); err != nil || n != tc.want {
			t.Errorf("StagesForBandwidth(%g) = %d, %v; want %d", tc.kbps, n, err, tc.want)
		}
	}
	if _, err := c.StagesForBandwidth(6); err == nil {
		t.Error("bandwidth 6 accepted")
	}
}

func TestBadAudio(t *testing.T) {
	c := openEncodec(t)
	ctx := context.Background()
	if _, _, err := c.Encode(ctx, make([]float32, 100), 4); err == nil {
		t.Error("too-short audio accepted")
	} else {
		t.Log(err)
	}
	x := make([]float32, 4000)
	x[17] = float32(math.NaN())
	if _, _, err := c.Encode(ctx, x, 4); err == nil {
		t.Error("NaN audio accepted")
	} else {
		t.Log(err)
	}
	if _, _, err := c.Encode(ctx, make([]float32, 4000), 5); err == nil {
		t.Error("5 codebooks of 4 accepted")
	}
	if _, err := c.Decode(ctx, []int32{0, 1, 512, 3}, 2, 2); err == nil {
		t.Error("code 512 of K = 512 accepted")
	}
	if _, err := c.Decode(ctx, []int32{0, 1, 2}, 2, 2); err == nil {
		t.Error("3 codes for [2, 2] accepted")
	}
}

// copyDir makes a writable copy of the test codec to damage.
func copyDir(t *testing.T) string {
	dst := t.TempDir()
	for _, f := range []string{ConfigFile, WeightsFile, EncoderFile, DecoderFile} {
		b, err := os.ReadFile(filepath.Join(encodecDir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func TestBadCodecDir(t *testing.T) {
	orig, err := os.ReadFile(filepath.Join(encodecDir, WeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	st, err := parseSafetensors(orig)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		damage func(dir string) error
	}{
		{"truncated safetensors", func(d string) error { return os.WriteFile(filepath.Join(d, WeightsFile), orig[:len(orig)/2], 0o644) }},
		{"garbage safetensors", func(d string) error {
			return os.WriteFile(filepath.Join(d, WeightsFile), []byte("not a safetensors file"), 0o644)
		}},
		{"missing config", func(d string) error { return os.Remove(filepath.Join(d, ConfigFile)) }},
		{"missing encoder", func(d string) error { return os.Remove(filepath.Join(d, EncoderFile)) }},
		{"other family", func(d string) error {
			return os.WriteFile(filepath.Join(d, ConfigFile), []byte(`{"model_type": "dac"}`), 0o644)
		}},
		{"wrong codebook size", func(d string) error {
			b, _ := os.ReadFile(filepath.Join(d, ConfigFile))
			return os.WriteFile(filepath.Join(d, ConfigFile), []byte(replace(string(b), `"codebook_size": 512`, `"codebook_size": 1024`)), 0o644)
		}},
		{"missing tensors", func(d string) error {
			return os.WriteFile(filepath.Join(d, WeightsFile), []byte("\x02\x00\x00\x00\x00\x00\x00\x00{}"), 0o644)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := copyDir(t)
			if err := tc.damage(d); err != nil {
				t.Fatal(err)
			}
			c, err := Open(d, Options{})
			if err == nil {
				c.Close()
				t.Fatal("Open succeeded")
			}
			t.Log(err)
		})
	}
	if _, _, err := st.f32("quantizer.layers.0.codebook.embed", 512, 8); err == nil {
		t.Error("wrong shape accepted")
	}
	if _, _, err := st.f32("quantizer.layers.0.codebook.inited", 1); err != nil {
		t.Error(err)
	}
}

func replace(s, old, new string) string {
	for i := 0; i+len(old) <= len(s); i++ {
		if s[i:i+len(old)] == old {
			return s[:i] + new + s[i+len(old):]
		}
	}
	panic(fmt.Sprintf("%q not in config", old))
}
