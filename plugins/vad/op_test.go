package vad

import (
	"context"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/edgespeech/edge/runtime"
)

func newTestOp(t *testing.T, params map[string]any) *runtime.Instance {
	t.Helper()
	inst, err := runtime.New(OpName, params, runtime.CPU)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inst.Close() })
	return inst
}

func goldenClipByPath(t *testing.T, doc *goldenDoc, path string) goldenClip {
	t.Helper()
	for _, c := range doc.Clips {
		if c.Path == path {
			return c
		}
	}
	t.Fatalf("no golden clip %s", path)
	return goldenClip{}
}

// secondsPairs converts the op's segments output row k to sample pairs.
func secondsPairs(seg, num *runtime.Tensor, k, sampleRate int) [][]int {
	s := seg.Shape()[1]
	out := [][]int{}
	for j := range int(num.I64()[k]) {
		row := seg.F64()[(k*s+j)*2:]
		out = append(out, []int{int(math.Round(row[0] * float64(sampleRate))), int(math.Round(row[1] * float64(sampleRate)))})
	}
	for j := int(num.I64()[k]); j < s; j++ {
		if row := seg.F64()[(k*s+j)*2:]; row[0] != -1 || row[1] != -1 {
			panic("segments not -1 padded")
		}
	}
	return out
}

// The op on a batch of clips of different lengths (padded, with lengths):
// each item matches its golden.
func TestOpBatchGolden(t *testing.T) {
	doc := loadGolden(t)
	paths := []string{"plugins/vad/testdata/pauses.wav", "plugins/vad/testdata/cut.wav", "models/default/testdata/demo.wav", "plugins/vad/testdata/tone.wav"}
	var pcms [][]float32
	n := 0
	for _, p := range paths {
		pcm, _ := readClip(t, p)
		pcms = append(pcms, pcm)
		n = max(n, len(pcm))
	}
	data := make([]float32, len(paths)*n)
	lengths := make([]int64, len(paths))
	for k, pcm := range pcms {
		copy(data[k*n:], pcm)
		lengths[k] = int64(len(pcm))
	}
	for _, cfg := range []string{"default", "split3s"} {
		params := map[string]any{}
		if cfg == "split3s" {
			params["max_speech_s"] = 3.0
		}
		inst := newTestOp(t, params)
		out, err := inst.Run(context.Background(), runtime.Tensors{
			"pcm":     runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{len(paths), n}, data)),
			"lengths": runtime.Must(runtime.FromSlice(runtime.I64, runtime.Shape{len(paths)}, lengths)),
		})
		if err != nil {
			t.Fatal(err)
		}
		probs := out["probs"]
		w := probs.Shape()[1]
		for k, p := range paths {
			g := goldenClipByPath(t, doc, p)
			row := probs.F32()[k*w : (k+1)*w]
			worst, err := compareProbs(row[:len(g.Probs)], g.Probs)
			if err != nil {
				t.Errorf("%s: %v", p, err)
			}
			if slices.ContainsFunc(row[len(g.Probs):], func(v float32) bool { return v != -1 }) {
				t.Errorf("%s: probabilities past its windows are not -1", p)
			}
			if got, want := secondsPairs(out["segments"], out["num_segments"], k, Rate16k), normPairs(g.Segments[cfg]); !slices.EqualFunc(got, want, slices.Equal) {
				t.Errorf("%s, %s: op segments %v, want %v", p, cfg, got, want)
			}
			if out["speech_start"].F64()[k] != -1 {
				t.Errorf("%s: speech_start %v for a whole clip", p, out["speech_start"].F64()[k])
			}
			t.Logf("%s in a batch of %d: max |prob - golden| %.3g", p, len(paths), worst)
		}
	}
}

// stream=true: two op instances (two streams, sharing one session) fed in
// chunks from two goroutines give the golden segments; final ends them and
// the instance starts over.
func TestOpStream(t *testing.T) {
	doc := loadGolden(t)
	paths := []string{"plugins/vad/testdata/pauses.wav", "models/default/testdata/demo.wav"}
	insts := []*runtime.Instance{newTestOp(t, map[string]any{"stream": true}), newTestOp(t, map[string]any{"stream": "true"})}
	if a, b := insts[0], insts[1]; a == b {
		t.Fatal("one instance")
	}
	shared.Lock()
	sessions := len(shared.m)
	shared.Unlock()
	if sessions != 1 {
		t.Errorf("%d shared sessions for two instances of one model, want 1", sessions)
	}
	var wg sync.WaitGroup
	errs := make([]string, len(paths))
	for i, p := range paths {
		pcm, _ := readClip(t, p)
		g := goldenClipByPath(t, doc, p)
		wg.Go(func() {
			for round := range 2 {
				var probs []float32
				var segs [][]int
				sawStart := false
				for off, chunk := 0, 700+300*i; off < len(pcm); off += chunk {
					end := min(off+chunk, len(pcm))
					in := runtime.Tensors{"pcm": runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{1, end - off}, pcm[off:end]))}
					if end == len(pcm) {
						in["final"] = runtime.Must(runtime.FromSlice(runtime.Bool, runtime.Shape{1}, []bool{true}))
					}
					out, err := insts[i].Run(context.Background(), in)
					if err != nil {
						errs[i] = err.Error()
						return
					}
					probs = append(probs, out["probs"].F32()...)
					segs = append(segs, secondsPairs(out["segments"], out["num_segments"], 0, Rate16k)...)
					sawStart = sawStart || out["speech_start"].F64()[0] >= 0
				}
				if _, err := compareProbs(probs, g.Probs); err != nil {
					errs[i] = p + ": " + err.Error()
				} else if !slices.EqualFunc(normPairs(segs), normPairs(g.Segments["default"]), slices.Equal) {
					errs[i] = p + ": streamed op segments differ from the golden ones"
				} else if !sawStart {
					errs[i] = p + ": speech_start never showed speech in progress"
				}
				if errs[i] != "" {
					errs[i] += " (round " + strconv.Itoa(round) + ")"
					return
				}
			}
		})
	}
	wg.Wait()
	for _, e := range errs {
		if e != "" {
			t.Error(e)
		}
	}
	insts[0].Close()
	insts[1].Close()
	shared.Lock()
	sessions = len(shared.m)
	shared.Unlock()
	if sessions != 0 {
		t.Errorf("%d shared sessions left after both instances closed", sessions)
	}
}

func TestOpErrors(t *testing.T) {
	for _, c := range []struct {
		params map[string]any
		msg    string
	}{
		{map[string]any{"sample_rate": 44100}, "44100 Hz"},
		{map[string]any{"neg_threshold": 0}, "neg_threshold = 0"},
		{map[string]any{"max_speech_s": -1}, "max_speech_s = -1"},
		{map[string]any{"min_speech_ms": -5}, "min_speech_ms = -5"},
		{map[string]any{"threshold": 0}, "threshold 0"},
		{map[string]any{"bogus": 1}, "unknown parameter"},
		{map[string]any{"model": "/nonexistent.onnx"}, "no such file"},
	} {
		_, err := runtime.New(OpName, c.params, runtime.CPU)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%v: %v, want an error mentioning %q", c.params, err, c.msg)
		}
	}
	pcm := func(shape runtime.Shape) *runtime.Tensor {
		return runtime.Must(runtime.NewTensor(runtime.F32, shape))
	}
	clip := newTestOp(t, nil)
	stream := newTestOp(t, map[string]any{"stream": true})
	ctx := context.Background()
	yes := runtime.Must(runtime.FromSlice(runtime.Bool, runtime.Shape{1}, []bool{true}))
	nan := pcm(runtime.Shape{2, 1000})
	nan.F32()[1500] = float32(math.NaN())
	for _, c := range []struct {
		inst *runtime.Instance
		in   runtime.Tensors
		msg  string
	}{
		{clip, runtime.Tensors{"pcm": pcm(runtime.Shape{100})}, "item 0: vad: audio shorter than one window"},
		{clip, runtime.Tensors{"pcm": pcm(runtime.Shape{0, 100})}, "no items"},
		{clip, runtime.Tensors{"pcm": nan}, "item 1: vad: non-finite sample: sample 500 is NaN"},
		{clip, runtime.Tensors{"pcm": pcm(runtime.Shape{2, 1000}), "lengths": runtime.Must(runtime.FromSlice(runtime.I64, runtime.Shape{2}, []int64{1000, 1001}))}, "outside 0..1000"},
		{clip, runtime.Tensors{"pcm": pcm(runtime.Shape{2, 1000}), "lengths": runtime.Must(runtime.FromSlice(runtime.I64, runtime.Shape{2}, []int64{1000, 0}))}, "item 1: vad: empty audio"},
		{clip, runtime.Tensors{"pcm": pcm(runtime.Shape{1, 1000}), "final": yes}, "for stream=true"},
		{stream, runtime.Tensors{"pcm": pcm(runtime.Shape{1, 1000}), "lengths": runtime.Must(runtime.FromSlice(runtime.I64, runtime.Shape{1}, []int64{5}))}, "for whole clips"},
		{stream, runtime.Tensors{"pcm": pcm(runtime.Shape{1, 1000})}, ""},
		{stream, runtime.Tensors{"pcm": pcm(runtime.Shape{2, 1000})}, "has 2 streams; this op's streams are 1"},
	} {
		_, err := c.inst.Run(ctx, c.in)
		switch {
		case c.msg == "" && err != nil:
			t.Errorf("%v: %v", c.in, err)
		case c.msg != "" && (err == nil || !strings.Contains(err.Error(), c.msg)):
			t.Errorf("%v: %v, want an error mentioning %q", c.in, err, c.msg)
		}
	}
}
