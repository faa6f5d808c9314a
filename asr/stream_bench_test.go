package asr

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgespeech/edge/asr/transcript"
)

// streamLatency feeds pcm to a stream in 100 ms pieces on a simulated
// real-time clock (a piece can be written once its audio has arrived and the
// previous write has returned) and returns, for every word of the finals,
// the delay from its end in the offline alignment of its utterance to its
// final, and to the first partial that holds it (same index, same text).
func streamLatency(r *Recognizer, opt StreamOptions, pcm []float32) (final, partial []time.Duration, err error) {
	s, err := r.NewStream(opt)
	if err != nil {
		return nil, nil, err
	}
	const piece = 1600
	var clock time.Duration // simulated wall time
	type seen struct {
		words []transcript.Word
		at    []time.Duration // when each word index first appeared with its text
	}
	utt := map[int]*seen{}
	handle := func(rs []StreamResult) {
		for _, res := range rs {
			u := utt[res.Utterance]
			if u == nil {
				u = &seen{}
				utt[res.Utterance] = u
			}
			if !res.Final {
				for i, w := range res.Words {
					if i >= len(u.words) {
						u.words = append(u.words, w)
						u.at = append(u.at, clock)
					} else if u.words[i].Text != w.Text {
						u.words[i], u.at[i] = w, clock
					}
				}
				continue
			}
			for i, w := range res.Words {
				final = append(final, clock-w.End)
				if i < len(u.words) && u.words[i].Text == w.Text {
					partial = append(partial, u.at[i]-w.End)
				} else {
					partial = append(partial, clock-w.End)
				}
			}
			delete(utt, res.Utterance)
		}
	}
	ctx := context.Background()
	for i := 0; i < len(pcm); i += piece {
		end := min(i+piece, len(pcm))
		clock = max(clock, time.Duration(end)*time.Second/16000)
		t0 := time.Now()
		rs, err := s.Write(ctx, pcm[i:end])
		if err != nil {
			return nil, nil, err
		}
		clock += time.Since(t0)
		handle(rs)
	}
	t0 := time.Now()
	rs, err := s.Close(ctx)
	if err != nil {
		return nil, nil, err
	}
	clock += time.Since(t0)
	handle(rs)
	return final, partial, nil
}

func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

// BenchmarkStreamLatency: word latency of a stream fed at real time
// (simulated clock), at the default settings and two others, over the
// bundled clips with 1 s pauses (about 30 s of audio). Metrics: p50/p95 of
// the delay from a word's end to its final and to its first partial, and
// the words whose final text differs from offline recognition of the clip.
//
//	go test -run '^$' -bench StreamLatency -benchtime 1x ./asr
func BenchmarkStreamLatency(b *testing.B) {
	r, err := Open(defaultModel, Options{Threads: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	var pcm []float32
	var offline []string
	for _, name := range clipNames {
		x, truth := loadTruth(b, name)
		pcm = append(append(pcm, x...), make([]float32, 16000)...)
		offline = append(offline, truth.Text)
	}
	ms := time.Millisecond
	for _, opt := range []StreamOptions{
		{},
		{Chunk: 240 * ms, Left: 2 * time.Second, LookAhead: 240 * ms},
		{Chunk: 960 * ms, Left: 4 * time.Second, LookAhead: 960 * ms},
	} {
		name := fmt.Sprintf("chunk=%v/left=%v/ahead=%v", opt.withDefaults().Chunk, opt.withDefaults().Left, opt.withDefaults().LookAhead)
		b.Run(name, func(b *testing.B) {
			var fin, part []time.Duration
			for b.Loop() {
				var err error
				if fin, part, err = streamLatency(r, opt, pcm); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(percentile(fin, 0.5).Seconds()*1000, "final-p50-ms")
			b.ReportMetric(percentile(fin, 0.95).Seconds()*1000, "final-p95-ms")
			b.ReportMetric(percentile(part, 0.5).Seconds()*1000, "partial-p50-ms")
			b.ReportMetric(percentile(part, 0.95).Seconds()*1000, "partial-p95-ms")
			b.ReportMetric(float64(len(fin)), "words")
			want := len(strings.Fields(strings.Join(offline, " ")))
			b.ReportMetric(float64(want-len(fin)), "words-missing")
		})
	}
}

// BenchmarkStreamCapacity: N streams at once on one recogniser, each fed as
// fast as it goes, with encoder batching off and on; reports the aggregate
// real-time factor (audio seconds processed per wall second): N real-time
// streams fit while it stays above N.
//
//	go test -run '^$' -bench StreamCapacity -benchtime 1x -cpu 2 ./asr
func BenchmarkStreamCapacity(b *testing.B) {
	for _, batch := range []int{1, 8} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			streamCapacity(b, Options{Batch: batch}, []int{1, 2, 4, 8})
		})
	}
}

// streamCapacity runs BenchmarkStreamCapacity's load with n streams for
// each n on a recogniser opened with opt.
func streamCapacity(b *testing.B, opt Options, streams []int) {
	r, err := Open(defaultModel, opt)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	var pcm []float32
	for _, name := range clipNames {
		x, _ := loadTruth(b, name)
		pcm = append(append(pcm, x...), make([]float32, 16000)...)
	}
	audio := float64(len(pcm)) / 16000
	for _, n := range streams {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) {
			for b.Loop() {
				var wg sync.WaitGroup
				for range n {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if _, _, err := streamLatency(r, StreamOptions{}, pcm); err != nil {
							b.Error(err)
						}
					}()
				}
				wg.Wait()
			}
			b.ReportMetric(float64(n)*audio*float64(b.N)/b.Elapsed().Seconds(), "audio-s/s")
		})
	}
}
