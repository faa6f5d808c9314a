package vad

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"testing"
	"time"
)

// referenceSegments is get_speech_timestamps after its model loop, written
// the way Python runs it: the whole list of probabilities, then the whole
// list of segments padded. The streaming segmenter must agree with it.
func referenceSegments(r Rules, sampleRate, n int, probs []float32) [][]int {
	win, _, _ := Window(sampleRate)
	sr := r.samples(sampleRate, win)
	type speech struct {
		start, end int
		has        bool
	}
	var speeches []speech
	var cur speech
	triggered := false
	tempEnd, prevEnd, nextStart := 0, 0, 0
	var possible [][2]int
	for i, pf := range probs {
		p, c := float64(pf), win*i
		if p >= sr.threshold && tempEnd != 0 {
			if d := c - tempEnd; float64(d) > sr.minSilenceAtMaxSpeech {
				possible = append(possible, [2]int{tempEnd, d})
			}
			tempEnd = 0
			if nextStart < prevEnd {
				nextStart = c
			}
		}
		if p >= sr.threshold && !triggered {
			triggered, cur = true, speech{start: c, has: true}
			continue
		}
		if triggered && float64(c-cur.start) > sr.maxSpeech {
			switch {
			case sr.splitLongest && len(possible) > 0:
				best := possible[0]
				for _, e := range possible {
					if e[1] > best[1] {
						best = e
					}
				}
				speeches = append(speeches, speech{cur.start, best[0], true})
				cur = speech{}
				if ns := best[0] + best[1]; ns < best[0]+c {
					cur = speech{start: ns, has: true}
				} else {
					triggered = false
				}
				prevEnd, nextStart, tempEnd, possible = 0, 0, 0, nil
			case prevEnd != 0:
				speeches = append(speeches, speech{cur.start, prevEnd, true})
				cur = speech{}
				if nextStart < prevEnd {
					triggered = false
				} else {
					cur = speech{start: nextStart, has: true}
				}
				prevEnd, nextStart, tempEnd, possible = 0, 0, 0, nil
			default:
				speeches = append(speeches, speech{cur.start, c, true})
				cur = speech{}
				prevEnd, nextStart, tempEnd, possible, triggered = 0, 0, 0, nil, false
				continue
			}
		}
		if p < sr.negThreshold && triggered {
			if tempEnd == 0 {
				tempEnd = c
			}
			now := c - tempEnd
			if !sr.splitLongest && float64(now) > sr.minSilenceAtMaxSpeech {
				prevEnd = tempEnd
			}
			if float64(now) < sr.minSilence {
				continue
			}
			if float64(tempEnd-cur.start) > sr.minSpeech {
				speeches = append(speeches, speech{cur.start, tempEnd, true})
			}
			cur = speech{}
			prevEnd, nextStart, tempEnd, possible, triggered = 0, 0, 0, nil, false
		}
	}
	if cur.has && float64(n-cur.start) > sr.minSpeech {
		speeches = append(speeches, speech{cur.start, n, true})
	}
	out := [][]int{}
	for i := range speeches {
		s := &speeches[i]
		if i == 0 {
			s.start = int(max(0, float64(s.start)-sr.pad))
		}
		if i != len(speeches)-1 {
			gap := speeches[i+1].start - s.end
			if float64(gap) < 2*sr.pad {
				s.end += floorDiv(gap, 2)
				speeches[i+1].start = max(0, speeches[i+1].start-floorDiv(gap, 2))
			} else {
				s.end = int(min(float64(n), float64(s.end)+sr.pad))
				speeches[i+1].start = int(max(0, float64(speeches[i+1].start)-sr.pad))
			}
		} else {
			s.end = int(min(float64(n), float64(s.end)+sr.pad))
		}
		out = append(out, []int{s.start, s.end})
	}
	return out
}

// rulesFromBytes picks rules from six bytes.
func rulesFromBytes(b []byte) Rules {
	pick := func(i int, xs ...int) int { return xs[int(b[i])%len(xs)] }
	r := Rules{
		Threshold:             []float64{0.5, 0.3, 0.7, 0.9}[b[0]%4],
		MinSpeech:             time.Duration(pick(1, 0, 50, 250, 600)) * time.Millisecond,
		MinSilence:            time.Duration(pick(2, 0, 20, 100, 400)) * time.Millisecond,
		SpeechPad:             time.Duration(pick(3, 0, 10, 30, 150)) * time.Millisecond,
		MinSilenceAtMaxSpeech: time.Duration(pick(4, 98, 0, 40, 300)) * time.Millisecond,
		SplitAtLongestPause:   b[5]&1 == 0,
	}
	if b[5]&2 != 0 {
		r.NegThreshold = r.Threshold * 0.5
	}
	if m := pick(5, 0, 0, 400, 1000, 2500); m > 0 {
		r.MaxSpeech = time.Duration(m)*time.Millisecond + 2*r.SpeechPad
	}
	return r
}

// FuzzSegmenter checks the streaming segmenter against referenceSegments
// on arbitrary probabilities and rules, and the segments' invariants.
func FuzzSegmenter(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 200, 200, 200, 10, 10, 10, 10, 10, 200, 200}, uint16(100))
	f.Add([]byte{1, 2, 3, 3, 1, 4, 255, 255, 0, 255, 0, 255, 0, 0, 0, 0, 0, 255, 255, 255}, uint16(7))
	f.Add([]byte{2, 1, 0, 2, 2, 2, 140, 150, 160, 60, 60, 200, 200, 200, 200, 60, 60, 60, 60, 60, 200}, uint16(511))
	f.Fuzz(func(t *testing.T, data []byte, tail uint16) {
		if len(data) < 7 {
			return
		}
		r := rulesFromBytes(data[:6])
		if r.Validate() != nil {
			t.Fatalf("rulesFromBytes gave invalid rules %+v", r)
		}
		sampleRate := Rate16k
		if data[0]&8 != 0 {
			sampleRate = Rate8k
		}
		win, _, _ := Window(sampleRate)
		probs := make([]float32, 0, len(data)-6)
		for _, v := range data[6:] {
			probs = append(probs, float32(v)/255)
		}
		n := (len(probs)-1)*win + 1 + int(tail)%win
		got := samplePairs(segmentProbs(r, sampleRate, n, probs))
		want := referenceSegments(r, sampleRate, n, probs)
		if !slices.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("rules %+v, %d Hz, n %d:\n segmenter %v\n reference %v", r, sampleRate, n, got, want)
		}
		last := 0
		for _, s := range got {
			if s[0] < last || s[0] >= s[1] || s[1] > n {
				t.Fatalf("segments %v: %v is out of order, empty or past the end %d", got, s, n)
			}
			last = s[1]
		}
	})
}

// FuzzStream feeds arbitrary 16-bit audio in arbitrary chunks: nothing
// panics, non-finite samples are rejected, and the stream agrees with Detect.
func FuzzStream(f *testing.F) {
	tone := make([]byte, 4000)
	for i := 0; i+1 < len(tone); i += 2 {
		binary.LittleEndian.PutUint16(tone[i:], uint16(int16(8000*math.Sin(float64(i)*0.05))))
	}
	f.Add(tone, uint16(333), false)
	f.Add([]byte{1, 2, 3}, uint16(1), false)
	f.Add(make([]byte, 1100), uint16(512), true)
	d, err := Open(Options{})
	if err != nil {
		f.Fatal(err)
	}
	defer d.Close()
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, raw []byte, chunk uint16, poison bool) {
		raw = raw[:min(len(raw), 2*12000)]
		pcm := make([]float32, len(raw)/2)
		for i := range pcm {
			pcm[i] = float32(int16(binary.LittleEndian.Uint16(raw[2*i:]))) / 32768
		}
		if poison && len(pcm) > 0 {
			pcm[int(chunk)%len(pcm)] = float32(math.Inf(1))
		}
		res, err := d.Detect(ctx, pcm, Rate16k)
		switch {
		case len(pcm) == 0:
			if !errors.Is(err, ErrEmpty) {
				t.Fatalf("empty: %v", err)
			}
			return
		case len(pcm) < 512:
			if !errors.Is(err, ErrTooShort) {
				t.Fatalf("%d samples: %v", len(pcm), err)
			}
			return
		case poison:
			if !errors.Is(err, ErrNonFinite) {
				t.Fatalf("an infinity: %v", err)
			}
			return
		case err != nil:
			t.Fatal(err)
		}
		s, err := d.NewStream(Rate16k)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		step := 1 + int(chunk)%2000
		var probs []float32
		var segs []Segment
		for off := 0; off < len(pcm); off += step {
			p, ev, err := s.Feed(ctx, pcm[off:min(off+step, len(pcm))])
			if err != nil {
				t.Fatal(err)
			}
			probs, segs = append(probs, p...), appendEnds(segs, ev)
		}
		p, ev, err := s.Flush(ctx)
		if err != nil {
			t.Fatal(err)
		}
		probs, segs = append(probs, p...), appendEnds(segs, ev)
		if !slices.Equal(probs, res.Probs) || !slices.Equal(segs, res.Segments) {
			t.Fatalf("chunks of %d: the stream gives %d probabilities and %v, Detect %d and %v", step, len(probs), segs, len(res.Probs), res.Segments)
		}
	})
}
