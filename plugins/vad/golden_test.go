package vad

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/edgespeech/edge/runtime/audio"
)

// goldenFile is written by scripts/golden/vad_golden.py (see its doc): the
// probabilities of Python onnxruntime running the same model with Silero's
// windowing and state logic, and the segments of Silero's rules.
const goldenFile = "testdata/golden.json"

// probTolerance is the parity bound on every probability.
const probTolerance = 1e-5

type goldenDoc struct {
	SileroCrosscheck bool                      `json:"silero_crosscheck"`
	SileroChecks     int                       `json:"silero_checks"`
	ORT              string                    `json:"onnxruntime"`
	ModelSHA256      string                    `json:"model_sha256"`
	Configs          map[string]map[string]any `json:"configs"`
	Defaults         map[string]any            `json:"defaults"`
	Clips            []goldenClip              `json:"clips"`
	Synthetic        []goldenSynthetic         `json:"synthetic"`
}

type goldenClip struct {
	Path       string             `json:"path"`
	SampleRate int                `json:"sample_rate"`
	Samples    int                `json:"samples"`
	Probs      []float64          `json:"probs"`
	Segments   map[string][][]int `json:"segments"`
}

type goldenSynthetic struct {
	Name       string         `json:"name"`
	SampleRate int            `json:"sample_rate"`
	Samples    int            `json:"samples"`
	ProbsU8    string         `json:"probs_u8"`
	Rules      map[string]any `json:"rules"`
	Segments   [][]int        `json:"segments"`
}

func loadGolden(t testing.TB) *goldenDoc {
	t.Helper()
	b, err := os.ReadFile(goldenFile)
	if err != nil {
		t.Fatalf("%v (make it with scripts/golden/vad_golden.py)", err)
	}
	var d goldenDoc
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", goldenFile, err)
	}
	return &d
}

// rulesOf maps get_speech_timestamps keywords (over the defaults) to Rules.
func rulesOf(t testing.TB, defaults, kw map[string]any) Rules {
	t.Helper()
	m := map[string]any{}
	for k, v := range defaults {
		m[k] = v
	}
	for k, v := range kw {
		m[k] = v
	}
	num := func(k string) float64 {
		v, ok := m[k].(float64)
		if !ok {
			t.Fatalf("rule %s = %v (%T), want a number", k, m[k], m[k])
		}
		return v
	}
	ms := func(k string) time.Duration { return time.Duration(num(k) * float64(time.Millisecond)) }
	r := Rules{
		Threshold:             num("threshold"),
		MinSpeech:             ms("min_speech_duration_ms"),
		MinSilence:            ms("min_silence_duration_ms"),
		SpeechPad:             ms("speech_pad_ms"),
		MinSilenceAtMaxSpeech: ms("min_silence_at_max_speech"),
		SplitAtLongestPause:   m["use_max_poss_sil_at_max_speech"] == true,
	}
	if m["neg_threshold"] != nil {
		r.NegThreshold = num("neg_threshold")
	}
	if m["max_speech_duration_s"] != nil {
		r.MaxSpeech = time.Duration(num("max_speech_duration_s") * float64(time.Second))
	}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	return r
}

func samplePairs(segs []Segment) [][]int {
	out := [][]int{}
	for _, s := range segs {
		out = append(out, []int{s.StartSample, s.EndSample})
	}
	return out
}

func normPairs(p [][]int) [][]int {
	if p == nil {
		return [][]int{}
	}
	return p
}

// segmentProbs runs the segmenter alone over probabilities of a stream of n samples.
func segmentProbs(r Rules, sampleRate, n int, probs []float32) []Segment {
	win, _, _ := Window(sampleRate)
	g := newSegmenter(r, sampleRate, win)
	var segs []Segment
	take := func() {
		for _, e := range g.takeEvents() {
			if e.Kind == SpeechEnd {
				segs = append(segs, e.Segment)
			}
		}
	}
	for i, p := range probs {
		g.step(p, (i+1)*win <= n)
		take()
	}
	g.finish(n)
	take()
	return segs
}

func TestGoldenSynthetic(t *testing.T) {
	d := loadGolden(t)
	if len(d.Synthetic) < 50 {
		t.Fatalf("%d synthetic cases, want the generator's 100", len(d.Synthetic))
	}
	kept, splits := 0, 0
	for _, c := range d.Synthetic {
		q, err := hex.DecodeString(c.ProbsU8)
		if err != nil {
			t.Fatal(err)
		}
		probs := make([]float32, len(q))
		for i, v := range q {
			probs[i] = float32(v) / 256
		}
		r := rulesOf(t, d.Defaults, c.Rules)
		got := samplePairs(segmentProbs(r, c.SampleRate, c.Samples, probs))
		if want := normPairs(c.Segments); !slices.EqualFunc(got, want, slices.Equal) {
			t.Errorf("%s (%d Hz, %d samples, rules %v):\n got %v\nwant %v", c.Name, c.SampleRate, c.Samples, c.Rules, got, want)
		}
		kept += len(c.Segments)
		if r.MaxSpeech > 0 {
			splits++
		}
	}
	t.Logf("%d synthetic cases, %d segments, %d with a maximum speech length: all equal", len(d.Synthetic), kept, splits)
}

// readClip decodes a golden clip at its own rate (no resampling).
func readClip(t testing.TB, rel string) ([]float32, int) {
	t.Helper()
	path := filepath.Join("..", "..", rel)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	c, err := audio.Decode(f, st.Size())
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return c.Mono(), c.SampleRate
}

// compareProbs returns the largest |got - want| and an error when a value
// is off by more than probTolerance or the counts differ.
func compareProbs(got []float32, want []float64) (float64, error) {
	if len(got) != len(want) {
		return 0, fmt.Errorf("%d probabilities, want %d", len(got), len(want))
	}
	worst := 0.0
	for i := range got {
		diff := math.Abs(float64(got[i]) - want[i])
		if !(diff <= probTolerance) {
			return diff, fmt.Errorf("window %d: probability %v, want %v (|diff| %.3g > %g)", i, got[i], want[i], diff, probTolerance)
		}
		worst = max(worst, diff)
	}
	return worst, nil
}

func openTest(t testing.TB, r *Rules) *Detector {
	t.Helper()
	d, err := Open(Options{Rules: r})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// TestGoldenClips is the parity test: every probability within 1e-5 of
// Python onnxruntime's and every segment boundary equal, under every rule
// set, for whole clips (Detect) and for the same audio streamed in random
// chunks.
func TestGoldenClips(t *testing.T) {
	doc := loadGolden(t)
	if len(doc.Clips) < 8 {
		t.Fatalf("%d golden clips, want at least 8", len(doc.Clips))
	}
	if doc.ModelSHA256 != ModelSHA256 {
		t.Fatalf("goldens made with model sha256 %s, the fetched model is %s", doc.ModelSHA256, ModelSHA256)
	}
	names := make([]string, 0, len(doc.Configs))
	for n := range doc.Configs {
		names = append(names, n)
	}
	slices.Sort(names)
	dets := map[string]*Detector{}
	for _, n := range names {
		r := rulesOf(t, doc.Defaults, doc.Configs[n])
		dets[n] = openTest(t, &r)
	}
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	worst, windows, segs := 0.0, 0, 0
	for _, c := range doc.Clips {
		pcm, sr := readClip(t, c.Path)
		if sr != c.SampleRate || len(pcm) != c.Samples {
			t.Fatalf("%s: decoded %d samples at %d Hz, the golden has %d at %d Hz", c.Path, len(pcm), sr, c.Samples, c.SampleRate)
		}
		for _, n := range names {
			res, err := dets[n].Detect(ctx, pcm, sr)
			if err != nil {
				t.Fatalf("%s: %v", c.Path, err)
			}
			w, err := compareProbs(res.Probs, c.Probs)
			if err != nil {
				t.Errorf("%s: %v", c.Path, err)
			}
			worst = max(worst, w)
			want := normPairs(c.Segments[n])
			if got := samplePairs(res.Segments); !slices.EqualFunc(got, want, slices.Equal) {
				t.Errorf("%s, rules %s: segments\n got %v\nwant %v", c.Path, n, got, want)
			}
			segs += len(want)

			// The same audio in random chunks through a Stream.
			s, err := dets[n].NewStream(sr)
			if err != nil {
				t.Fatal(err)
			}
			var probs []float32
			var streamed []Segment
			collect := func(p []float32, ev []Event) {
				probs = append(probs, p...)
				for _, e := range ev {
					if e.Kind == SpeechEnd {
						streamed = append(streamed, e.Segment)
					}
				}
			}
			for off := 0; off < len(pcm); {
				m := min(len(pcm)-off, rng.IntN(3000))
				p, ev, err := s.Feed(ctx, pcm[off:off+m])
				if err != nil {
					t.Fatal(err)
				}
				collect(p, ev)
				off += m
			}
			p, ev, err := s.Flush(ctx)
			if err != nil {
				t.Fatal(err)
			}
			collect(p, ev)
			s.Close()
			if !slices.Equal(probs, res.Probs) {
				t.Errorf("%s, rules %s: streamed probabilities differ from Detect's", c.Path, n)
			}
			if got := samplePairs(streamed); !slices.EqualFunc(got, want, slices.Equal) {
				t.Errorf("%s, rules %s: streamed segments\n got %v\nwant %v", c.Path, n, got, want)
			}
		}
		windows += len(c.Probs)
	}
	t.Logf("%d clips, %d windows: max |prob - golden| = %.3g (tolerance %g); %d segments x %d rule sets equal (Silero cross-check: %v, %d checks; onnxruntime %s)",
		len(doc.Clips), windows, worst, probTolerance, segs, len(names), doc.SileroCrosscheck, doc.SileroChecks, doc.ORT)
}
