package asr

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"syscall"
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
	return streamFeed(r, opt, pcm, false)
}

// streamFeed is streamLatency on the simulated clock (paced false) or on
// the wall clock (paced true: each piece is written when its audio has
// arrived in real time, or when the previous write returns if that is
// later), for many streams at once.
func streamFeed(r *Recognizer, opt StreamOptions, pcm []float32, paced bool) (final, partial []time.Duration, err error) {
	s, err := r.NewStream(opt)
	if err != nil {
		return nil, nil, err
	}
	const piece = 1600
	start := time.Now()
	var clock time.Duration // wall time since start, simulated unless paced
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
		due := time.Duration(end) * time.Second / 16000
		if paced {
			time.Sleep(due - time.Since(start))
		} else {
			clock = max(clock, due)
		}
		t0 := time.Now()
		rs, err := s.Write(ctx, pcm[i:end])
		if err != nil {
			return nil, nil, err
		}
		clock += time.Since(t0)
		if paced {
			clock = time.Since(start)
		}
		handle(rs)
	}
	t0 := time.Now()
	rs, err := s.Close(ctx)
	if err != nil {
		return nil, nil, err
	}
	clock += time.Since(t0)
	if paced {
		clock = time.Since(start)
	}
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
// bundled clips with 1 s pauses (25.3 s of audio). Metrics: p50/p95 of
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
		for _, path := range streamPaths {
			name := fmt.Sprintf("chunk=%v/left=%v/ahead=%v/%s", opt.withDefaults().Chunk, opt.withDefaults().Left, opt.withDefaults().LookAhead, path)
			b.Run(name, func(b *testing.B) {
				streamAudioWindows = path == "audio"
				defer func() { streamAudioWindows = false }()
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
}

// BenchmarkStreamLoad: latency under load on the CPU. N streams at once
// on one recogniser, each fed the bundled clips with 1 s pauses (25.3 s) at
// real time on the wall clock, their starts spread over the first second;
// p50/p95 of the word delays (as BenchmarkStreamLatency's) over all
// streams' words. N real-time streams are sustained while the delays stay
// at their one-stream level; past that they grow with the audio.
//
//	go test -run '^$' -bench StreamLoad -benchtime 1x -cpu 2 ./asr
func BenchmarkStreamLoad(b *testing.B) {
	streamLoad(b, Options{}, []int{1, 8, 16, 24, 32})
}

// pausedClips is the bundled clips one after another, each followed by 1 s
// of silence.
func pausedClips(b *testing.B) []float32 {
	var pcm []float32
	for _, name := range clipNames {
		x, _ := loadTruth(b, name)
		pcm = append(append(pcm, x...), make([]float32, 16000)...)
	}
	return pcm
}

// streamLoad runs BenchmarkStreamLoad's paced load with n streams for each
// n on a recogniser opened with opt.
func streamLoad(b *testing.B, opt Options, streams []int) {
	r, err := Open(defaultModel, opt)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	pcm := pausedClips(b)
	for _, n := range streams {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) {
			var fin, part []time.Duration
			for b.Loop() {
				fin, part = nil, nil
				var mu sync.Mutex
				var wg sync.WaitGroup
				rng := rand.New(rand.NewPCG(uint64(n), 1))
				for range n {
					delay := time.Duration(rng.Int64N(int64(time.Second)))
					wg.Add(1)
					go func() {
						defer wg.Done()
						time.Sleep(delay)
						f, p, err := streamFeed(r, StreamOptions{}, pcm, true)
						if err != nil {
							b.Error(err)
							return
						}
						mu.Lock()
						fin, part = append(fin, f...), append(part, p...)
						mu.Unlock()
					}()
				}
				wg.Wait()
			}
			if len(fin) == 0 {
				b.Fatal("no finals")
			}
			b.ReportMetric(percentile(fin, 0.5).Seconds()*1000, "final-p50-ms")
			b.ReportMetric(percentile(fin, 0.95).Seconds()*1000, "final-p95-ms")
			b.ReportMetric(percentile(part, 0.5).Seconds()*1000, "partial-p50-ms")
			b.ReportMetric(percentile(part, 0.95).Seconds()*1000, "partial-p95-ms")
			b.ReportMetric(float64(len(fin))/float64(n), "words/stream")
		})
	}
}

// cpuTime is the user and system CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// streamPaths are the two ways buffered inference gets a window's
// features, benchmarked one after the other: from the stream's incremental
// frontend (computed once per sample) and from the window's audio
// (recomputed every step).
var streamPaths = []string{"features", "audio"}

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
	pcm := pausedClips(b)
	audio := float64(len(pcm)) / 16000
	for _, n := range streams {
		for _, path := range streamPaths {
			b.Run(fmt.Sprintf("streams=%d/%s", n, path), func(b *testing.B) {
				streamAudioWindows = path == "audio"
				defer func() { streamAudioWindows = false }()
				cpu0 := cpuTime()
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
				// CPU time (this process, every thread) per second of audio: less
				// sensitive to other jobs on the box than the wall-clock figure.
				b.ReportMetric((cpuTime()-cpu0).Seconds()/(float64(n)*audio*float64(b.N)), "cpu-s/audio-s")
			})
		}
	}
}

// matchedWords pairs the words of hyp with equal words of ref along a
// minimum edit alignment and returns the pairs' indices.
func matchedWords(ref, hyp []transcript.Word) [][2]int {
	n, m := len(ref), len(hyp)
	d := make([][]int, n+1)
	for i := range d {
		d[i] = make([]int, m+1)
		d[i][0] = i
	}
	for j := range m + 1 {
		d[0][j] = j
	}
	for i := 1; i <= n; i++ {
		for j := 1; j <= m; j++ {
			sub := d[i-1][j-1]
			if ref[i-1].Text != hyp[j-1].Text {
				sub++
			}
			d[i][j] = min(sub, d[i-1][j]+1, d[i][j-1]+1)
		}
	}
	var pairs [][2]int
	for i, j := n, m; i > 0 && j > 0; {
		switch {
		case ref[i-1].Text == hyp[j-1].Text && d[i][j] == d[i-1][j-1]:
			pairs = append(pairs, [2]int{i - 1, j - 1})
			i, j = i-1, j-1
		case d[i][j] == d[i-1][j-1]+1:
			i, j = i-1, j-1
		case d[i][j] == d[i-1][j]+1:
			i--
		default:
			j--
		}
	}
	slices.Reverse(pairs)
	return pairs
}

// BenchmarkStreamAccuracy: streaming WER (the finals' texts joined) against
// offline WER (Transcribe of the whole audio) on the bundled clips one by
// one and on a 10-minute concatenation of them with seeded pauses of
// 0.3-3 s, without and with VAD, and the finals' word times against each
// clip's offline recognition placed where the clip starts (p50, p95 and
// max of |start| and |end| differences over the words both give).
//
//	go test -run '^$' -bench StreamAccuracy -benchtime 1x -timeout 30m ./asr
func BenchmarkStreamAccuracy(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	type set struct {
		name   string
		pcm    []float32
		texts  []string
		clips  []string
		starts []int
	}
	var sets []set
	for _, name := range clipNames {
		x, truth := loadTruth(b, name)
		sets = append(sets, set{name: name, pcm: x, texts: []string{truth.Text}, clips: []string{name}, starts: []int{0}})
	}
	long := set{name: "10min"}
	for len(long.pcm) < 600*16000 {
		name := clipNames[rng.IntN(len(clipNames))]
		x, truth := loadTruth(b, name)
		long.starts = append(long.starts, len(long.pcm))
		long.clips = append(long.clips, name)
		long.texts = append(long.texts, truth.Text)
		long.pcm = append(append(long.pcm, x...), make([]float32, 4800+rng.IntN(43200))...)
	}
	sets = append(sets, long)
	for _, vadOn := range []bool{false, true} {
		opt := Options{Threads: 1}
		label := "novad"
		if vadOn {
			opt.VAD, label = defaultVADRules(30*time.Second), "vad"
		}
		b.Run(label, func(b *testing.B) {
			r, err := Open(defaultModel, opt)
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			offClip := map[string][]transcript.Word{}
			for _, name := range clipNames {
				x, _ := loadTruth(b, name)
				tr, err := r.Transcribe(context.Background(), x)
				if err != nil {
					b.Fatal(err)
				}
				offClip[name] = tr.Words
			}
			for b.Loop() {
				var clipRef, clipOff, clipStream, clipWords int
				for _, st := range sets {
					ref := strings.Join(st.texts, " ")
					off, err := r.Transcribe(context.Background(), st.pcm)
					if err != nil {
						b.Fatal(err)
					}
					s, err := r.NewStream(StreamOptions{})
					if err != nil {
						b.Fatal(err)
					}
					var res []StreamResult
					for i := 0; i < len(st.pcm); i += 1600 {
						rs, err := s.Write(context.Background(), st.pcm[i:min(i+1600, len(st.pcm))])
						if err != nil {
							b.Fatal(err)
						}
						res = append(res, rs...)
					}
					rs, err := s.Close(context.Background())
					if err != nil {
						b.Fatal(err)
					}
					var texts []string
					var got []transcript.Word
					for _, f := range finals(append(res, rs...)) {
						texts = append(texts, f.Text)
						got = append(got, f.Words...)
					}
					var want []transcript.Word
					for k, name := range st.clips {
						for _, w := range offClip[name] {
							off := time.Duration(st.starts[k]) * time.Second / 16000
							w.Start, w.End = w.Start+off, w.End+off
							want = append(want, w)
						}
					}
					var diffs []time.Duration
					for _, p := range matchedWords(want, got) {
						diffs = append(diffs, (want[p[0]].Start - got[p[1]].Start).Abs(), (want[p[0]].End - got[p[1]].End).Abs())
					}
					words := len(strings.Fields(ref))
					eo, es := wordErrors(ref, off.Text), wordErrors(ref, strings.Join(texts, " "))
					if st.name == "10min" {
						fmt.Printf("%s %s: %.1f min, %d words: offline WER %.2f %%, streaming WER %.2f %%; word times |diff| p50 %v p95 %v max %v (%d words matched)\n",
							label, st.name, float64(len(st.pcm))/16000/60, words, 100*float64(eo)/float64(words), 100*float64(es)/float64(words),
							percentile(diffs, 0.5), percentile(diffs, 0.95), slices.Max(diffs), len(diffs)/2)
						b.ReportMetric(100*float64(eo)/float64(words), "10min-offline-WER-%")
						b.ReportMetric(100*float64(es)/float64(words), "10min-stream-WER-%")
						b.ReportMetric(slices.Max(diffs).Seconds()*1000, "10min-max-time-diff-ms")
						continue
					}
					clipRef += words
					clipOff += eo
					clipStream += es
					clipWords += len(diffs) / 2
					fmt.Printf("%s %s: %d words: offline %d errors, streaming %d; word times |diff| max %v\n", label, st.name, words, eo, es, slices.Max(append(diffs, 0)))
				}
				b.ReportMetric(100*float64(clipOff)/float64(clipRef), "clips-offline-WER-%")
				b.ReportMetric(100*float64(clipStream)/float64(clipRef), "clips-stream-WER-%")
			}
		})
	}
}
