package vad

import (
	"context"
	"encoding/hex"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The acceptance clips: no speech in any of them.
func TestNoSpeechClips(t *testing.T) {
	d := openTest(t, nil)
	for _, clip := range []string{"silence", "zeros", "noise", "tone"} {
		pcm, sr := readClip(t, "plugins/vad/testdata/"+clip+".wav")
		res, err := d.Detect(context.Background(), pcm, sr)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Segments) != 0 {
			t.Errorf("%s: segments %v, want none", clip, res.Segments)
		}
		t.Logf("%s: max probability %.3f over %d windows", clip, slices.Max(res.Probs), len(res.Probs))
	}
}

// The comparisons of the parity test report a probability off by more than
// the tolerance and a segment off by one sample.
func TestParityCanFail(t *testing.T) {
	want := []float64{0.25, 0.5, 0.75}
	if _, err := compareProbs([]float32{0.25, 0.5, 0.75}, want); err != nil {
		t.Fatal(err)
	}
	if _, err := compareProbs([]float32{0.25, 0.50002, 0.75}, want); err == nil {
		t.Error("a probability 2e-5 off passed")
	}
	if _, err := compareProbs([]float32{0.25, float32(math.NaN()), 0.75}, want); err == nil {
		t.Error("a NaN probability passed")
	}
	if _, err := compareProbs([]float32{0.25, 0.5}, want); err == nil {
		t.Error("a missing probability passed")
	}
	doc := loadGolden(t)
	i := slices.IndexFunc(doc.Synthetic, func(c goldenSynthetic) bool { return len(c.Segments) > 0 })
	if i < 0 {
		t.Fatal("no synthetic case has a segment")
	}
	c := doc.Synthetic[i]
	q, _ := hex.DecodeString(c.ProbsU8)
	probs := make([]float32, len(q))
	for i, v := range q {
		probs[i] = float32(v) / 256
	}
	r := rulesOf(t, doc.Defaults, c.Rules)
	got := samplePairs(segmentProbs(r, c.SampleRate, c.Samples, probs))
	if len(got) == 0 {
		t.Fatal("the case has no segment to perturb")
	}
	got[0][1]++
	if slices.EqualFunc(got, normPairs(c.Segments), slices.Equal) {
		t.Error("a segment end one sample off compared equal")
	}
}

// Events alternate SpeechStart and SpeechEnd/SpeechDropped, a SpeechEnd's
// segment starts where its SpeechStart said, and the SpeechEnd segments are
// the golden ones: on every synthetic golden case, window by window.
func TestEventsOrder(t *testing.T) {
	doc := loadGolden(t)
	dropped := 0
	for _, c := range doc.Synthetic {
		q, _ := hex.DecodeString(c.ProbsU8)
		r := rulesOf(t, doc.Defaults, c.Rules)
		win, _, _ := Window(c.SampleRate)
		g := newSegmenter(r, c.SampleRate, win)
		var events []Event
		for i, v := range q {
			g.step(float32(v)/256, (i+1)*win <= c.Samples)
			events = append(events, g.takeEvents()...)
		}
		g.finish(c.Samples)
		events = append(events, g.takeEvents()...)
		open := false
		var start Segment
		var ends [][]int
		for i, e := range events {
			switch e.Kind {
			case SpeechStart:
				if open {
					t.Fatalf("%s: event %d: a second SpeechStart (%v) before the first ended", c.Name, i, e.Segment)
				}
				open, start = true, e.Segment
			case SpeechEnd, SpeechDropped:
				if !open {
					t.Fatalf("%s: event %d: %v without a SpeechStart", c.Name, i, e.Kind)
				}
				if e.Segment.Start != start.Start {
					t.Fatalf("%s: event %d: %v starts at %v, its SpeechStart said %v", c.Name, i, e.Kind, e.Segment.Start, start.Start)
				}
				open = false
				if e.Kind == SpeechEnd {
					ends = append(ends, []int{e.Segment.StartSample, e.Segment.EndSample})
				} else {
					dropped++
				}
			}
		}
		if open {
			t.Fatalf("%s: a SpeechStart is still open after finish", c.Name)
		}
		if !slices.EqualFunc(normPairs(ends), normPairs(c.Segments), slices.Equal) {
			t.Fatalf("%s: SpeechEnd segments %v, want %v", c.Name, ends, c.Segments)
		}
	}
	if dropped == 0 {
		t.Error("no synthetic case dropped speech: the SpeechDropped path went untested")
	}
}

// With the defaults a segment's SpeechEnd comes in the Feed call of the
// window that decides it (after MinSilence), and InSpeech follows events.
func TestStreamLatency(t *testing.T) {
	d := openTest(t, nil)
	pcm, sr := readClip(t, "plugins/vad/testdata/pauses.wav")
	s, err := d.NewStream(sr)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := d.Rules()
	win := s.Window()
	ctx := context.Background()
	ends := 0
	for off := 0; off+win <= len(pcm); off += win {
		_, ev, err := s.Feed(ctx, pcm[off:off+win])
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ev {
			switch e.Kind {
			case SpeechEnd:
				ends++
				// Decided at the window MinSilence after the raw end (end - pad).
				lag := time.Duration(s.Position()-(e.Segment.EndSample-480)) * time.Second / time.Duration(sr)
				if lag > r.MinSilence+2*windowDuration {
					t.Errorf("segment %v reported %v after its end, want within MinSilence + 2 windows", e.Segment, lag)
				}
				if s.InSpeech() {
					t.Errorf("InSpeech after %v", e.Segment)
				}
			case SpeechStart:
				if !s.InSpeech() {
					t.Errorf("not InSpeech after a SpeechStart at %v", e.Segment.Start)
				}
			}
		}
	}
	if ends < 3 {
		t.Errorf("%d segments ended while streaming, want the clip's first three", ends)
	}
}

// Many streams on one Detector at once (run with -race): each gets what
// Detect gives for its clip.
func TestConcurrentStreams(t *testing.T) {
	d := openTest(t, nil)
	ctx := context.Background()
	clips := []string{"pauses", "cut", "noise", "tone"}
	want := map[string]*Result{}
	pcms := map[string][]float32{}
	for _, c := range clips {
		pcm, sr := readClip(t, "plugins/vad/testdata/"+c+".wav")
		res, err := d.Detect(ctx, pcm, sr)
		if err != nil {
			t.Fatal(err)
		}
		want[c], pcms[c] = res, pcm
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 8 {
		wg.Go(func() {
			c := clips[g%len(clips)]
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			s, err := d.NewStream(Rate16k)
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			for round := range 2 { // Flush restarts the stream: the second round repeats the first
				var probs []float32
				var segs []Segment
				pcm := pcms[c]
				for off := 0; off < len(pcm); {
					m := min(len(pcm)-off, 1+rng.IntN(2000))
					p, ev, err := s.Feed(ctx, pcm[off:off+m])
					if err != nil {
						errs <- err
						return
					}
					probs = append(probs, p...)
					segs = appendEnds(segs, ev)
					off += m
				}
				p, ev, err := s.Flush(ctx)
				if err != nil {
					errs <- err
					return
				}
				probs, segs = append(probs, p...), appendEnds(segs, ev)
				if !slices.Equal(probs, want[c].Probs) || !slices.Equal(segs, want[c].Segments) {
					errs <- errors.New(c + ": a concurrent stream differs from Detect (round " + string(rune('0'+round)) + ")")
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func appendEnds(segs []Segment, ev []Event) []Segment {
	for _, e := range ev {
		if e.Kind == SpeechEnd {
			segs = append(segs, e.Segment)
		}
	}
	return segs
}

func TestBadInput(t *testing.T) {
	d := openTest(t, nil)
	ctx := context.Background()
	tone := make([]float32, 4000)
	for i := range tone {
		tone[i] = float32(math.Sin(float64(i) * 0.1))
	}
	nan, inf := slices.Clone(tone), slices.Clone(tone)
	nan[1234], inf[77] = float32(math.NaN()), float32(math.Inf(-1))
	for _, c := range []struct {
		name string
		pcm  []float32
		sr   int
		want error
		msg  string
	}{
		{"empty", nil, Rate16k, ErrEmpty, "empty"},
		{"too short", tone[:511], Rate16k, ErrTooShort, "511 samples"},
		{"too short 8k", tone[:255], Rate8k, ErrTooShort, "a window is 256"},
		{"NaN", nan, Rate16k, ErrNonFinite, "sample 1234 is NaN"},
		{"Inf", inf, Rate16k, ErrNonFinite, "sample 77 is -Inf"},
		{"44.1 kHz", tone, 44100, ErrSampleRate, "44100 Hz"},
		{"48 kHz", tone, 48000, ErrSampleRate, "resample"},
		{"0 Hz", tone, 0, ErrSampleRate, "0 Hz"},
		{"negative rate", tone, -16000, ErrSampleRate, "-16000"},
	} {
		_, err := d.Detect(ctx, c.pcm, c.sr)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: error %v, want %v mentioning %q", c.name, err, c.want, c.msg)
		}
	}
	// Exactly one window is enough.
	if _, err := d.Detect(ctx, tone[:512], Rate16k); err != nil {
		t.Errorf("one window: %v", err)
	}
	if _, err := d.NewStream(22050); !errors.Is(err, ErrSampleRate) {
		t.Errorf("NewStream(22050): %v, want ErrSampleRate", err)
	}

	// A stream rejects a bad chunk without consuming it, and goes on.
	s, err := d.NewStream(Rate16k)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Feed(ctx, tone[:1000]); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Feed(ctx, nan); !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), "sample 2234") {
		t.Errorf("NaN chunk: %v, want ErrNonFinite at stream sample 2234", err)
	}
	if s.Position() != 1000 {
		t.Errorf("position %d after a rejected chunk, want 1000", s.Position())
	}
	if p, ev, err := s.Feed(ctx, nil); err != nil || len(p) != 0 || len(ev) != 0 {
		t.Errorf("empty chunk: %v %v %v", p, ev, err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := s.Feed(done, tone); !errors.Is(err, context.Canceled) || s.Position() != 1000 {
		t.Errorf("done context: %v at %d, want context.Canceled with nothing consumed", err, s.Position())
	}
	if _, _, err := s.Feed(ctx, tone[1000:]); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, _, err := s.Feed(ctx, tone); !errors.Is(err, ErrClosed) {
		t.Errorf("Feed after Close: %v, want ErrClosed", err)
	}
	if _, _, err := s.Flush(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Flush after Close: %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	// An empty stream flushes to nothing.
	s2, _ := d.NewStream(Rate8k)
	if p, ev, err := s2.Flush(ctx); err != nil || len(p) != 0 || len(ev) != 0 {
		t.Errorf("empty stream Flush: %v %v %v", p, ev, err)
	}
	s2.Close()
}

func TestClosedDetector(t *testing.T) {
	d, err := Open(Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.NewStream(Rate16k)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	pcm := make([]float32, 2048)
	if _, err := d.Detect(context.Background(), pcm, Rate16k); !errors.Is(err, ErrClosed) {
		t.Errorf("Detect after Close: %v, want ErrClosed", err)
	}
	if _, _, err := s.Feed(context.Background(), pcm); !errors.Is(err, ErrClosed) {
		t.Errorf("Feed after the Detector's Close: %v, want ErrClosed", err)
	}
	// The stream stays failed until Reset; Reset clears the failure, not the closed session.
	if _, _, err := s.Feed(context.Background(), pcm[:10]); !errors.Is(err, ErrClosed) {
		t.Errorf("failed stream: %v", err)
	}
	s.Reset()
	if _, _, err := s.Feed(context.Background(), pcm); !errors.Is(err, ErrClosed) {
		t.Errorf("after Reset on a closed Detector: %v, want ErrClosed", err)
	}
}

func TestOpenErrors(t *testing.T) {
	bad := []struct {
		name string
		opts Options
		msg  string
	}{
		{"missing model", Options{Model: "/nonexistent/silero.onnx"}, "no such file"},
		{"directory", Options{Model: "testdata"}, "is a directory"},
		{"not a VAD", Options{Model: "../../models/default/model.onnx"}, "not a Silero VAD v5 model"},
		{"threads", Options{Threads: -1}, "threads -1"},
		{"threshold", Options{Rules: &Rules{Threshold: 1.5}}, "threshold 1.5"},
		{"neg threshold", Options{Rules: &Rules{Threshold: 0.5, NegThreshold: 0.6}}, "negative threshold 0.6"},
		{"negative pad", Options{Rules: &Rules{Threshold: 0.5, SpeechPad: -time.Millisecond}}, "speech pad -1ms is negative"},
		{"max speech", Options{Rules: &Rules{Threshold: 0.5, SpeechPad: 30 * time.Millisecond, MaxSpeech: 50 * time.Millisecond}}, "must exceed one window"},
	}
	for _, c := range bad {
		d, err := Open(c.opts)
		if err == nil {
			d.Close()
			t.Errorf("%s: no error", c.name)
		} else if !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v, want it to mention %q", c.name, err, c.msg)
		}
	}
	t.Setenv(EnvModel, "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	if _, err := FindModel(""); !errors.Is(err, ErrModelNotFound) || !strings.Contains(err.Error(), FetchCommand) {
		t.Errorf("empty cache: %v, want ErrModelNotFound naming %s", err, FetchCommand)
	}
}

func TestDetectBatch(t *testing.T) {
	r := DefaultRules()
	r.MaxSpeech = 2 * time.Second
	d := openTest(t, &r)
	ctx := context.Background()
	var clips [][]float32
	for _, c := range []string{"pauses", "cut_exact", "silence", "cut"} {
		pcm, _ := readClip(t, "plugins/vad/testdata/"+c+".wav")
		clips = append(clips, pcm)
	}
	res, err := d.DetectBatch(ctx, clips, Rate16k)
	if err != nil {
		t.Fatal(err)
	}
	for k, pcm := range clips {
		want, err := d.Detect(ctx, pcm, Rate16k)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := compareProbs(res[k].Probs, float64s(want.Probs)); err != nil {
			t.Errorf("clip %d: %v", k, err)
		}
		if !slices.Equal(res[k].Segments, want.Segments) {
			t.Errorf("clip %d: DetectBatch %v, Detect %v", k, res[k].Segments, want.Segments)
		}
	}
	if _, err := d.DetectBatch(ctx, [][]float32{clips[0], clips[1][:100]}, Rate16k); !errors.Is(err, ErrTooShort) || !strings.Contains(err.Error(), "clip 1") {
		t.Errorf("a short clip in a batch: %v", err)
	}
}

func float64s(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// A stream with its own rules segments as a Detector opened with them.
func TestNewStreamWith(t *testing.T) {
	r := DefaultRules()
	r.MinSilence = 700 * time.Millisecond
	d, other := openTest(t, nil), openTest(t, &r)
	pcm, sr := readClip(t, "plugins/vad/testdata/pauses.wav")
	ctx := context.Background()
	want, err := other.Segments(ctx, pcm, sr)
	if err != nil {
		t.Fatal(err)
	}
	def, _ := d.Segments(ctx, pcm, sr)
	if len(want) >= len(def) {
		t.Fatalf("700 ms of minimum silence gives %d segments, the default %d: want fewer", len(want), len(def))
	}
	s, err := d.NewStreamWith(sr, r)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, ev, err := s.Feed(ctx, pcm)
	if err != nil {
		t.Fatal(err)
	}
	_, ev2, err := s.Flush(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := appendEnds(appendEnds(nil, ev), ev2); !slices.Equal(got, want) {
		t.Errorf("NewStreamWith: %v, want %v", got, want)
	}
	if _, err := d.NewStreamWith(sr, Rules{}); err == nil {
		t.Error("NewStreamWith(zero Rules) did not fail")
	}
}
