package vad

import (
	"fmt"
	"time"
)

// Segment is one stretch of speech. Start and End count from the start of
// the audio (or stream); End is exclusive, so pcm[StartSample:EndSample] is
// the speech. Both rates the model takes (8 and 16 kHz) divide a second into
// whole nanoseconds, so the times are exact.
type Segment struct {
	Start, End             time.Duration
	StartSample, EndSample int
}

// Seconds returns Start and End in seconds, computed from the samples
// (StartSample / sampleRate: the nearest float64, 7.262 rather than
// time.Duration.Seconds' 7.2620000000000005).
func (s Segment) Seconds(sampleRate int) (start, end float64) {
	return float64(s.StartSample) / float64(sampleRate), float64(s.EndSample) / float64(sampleRate)
}

func (s Segment) String() string {
	return fmt.Sprintf("%.3f-%.3fs", s.Start.Seconds(), s.End.Seconds())
}

func segmentAt(start, end, sampleRate int) Segment {
	return Segment{
		Start: samplesToDuration(start, sampleRate), End: samplesToDuration(end, sampleRate),
		StartSample: start, EndSample: end,
	}
}

// samplesToDuration is exact for the model's rates and does not overflow
// for any stream shorter than time.Duration's 292 years.
func samplesToDuration(n, sampleRate int) time.Duration {
	sr := int64(sampleRate)
	return time.Duration(int64(n)/sr)*time.Second + time.Duration(int64(n)%sr*int64(time.Second)/sr)
}

// EventKind says what an Event reports.
type EventKind uint8

// Event kinds, in the order a stream reports them for one segment: a
// SpeechStart, then either its SpeechEnd or (when the speech turns out to
// be no longer than Rules.MinSpeech) a SpeechDropped.
const (
	// SpeechStart: speech began; Event.Segment.Start is where the segment
	// will start (padding included) if it is kept. End equals Start.
	SpeechStart EventKind = iota + 1
	// SpeechEnd: Event.Segment is final, one of the segments that
	// Detector.Segments returns for the same audio.
	SpeechEnd
	// SpeechDropped: the speech of the last SpeechStart was too short and
	// is no segment. Event.Segment is the SpeechStart's.
	SpeechDropped
)

func (k EventKind) String() string {
	switch k {
	case SpeechStart:
		return "speech_start"
	case SpeechEnd:
		return "speech_end"
	case SpeechDropped:
		return "speech_dropped"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is a change in a stream's speech state, reported by Stream.Feed
// and Stream.Flush as soon as the rules decide it.
type Event struct {
	Kind    EventKind
	Segment Segment
}

// segmenter applies get_speech_timestamps' rules to one stream's
// probabilities, one window at a time, and reports each segment as soon as
// it is final. It has two stages:
//
//   - step is get_speech_timestamps' loop over speech_probs, transliterated
//     statement by statement (same names, same int-versus-float
//     comparisons); where Python appends to speeches it calls keep, where it
//     sets current_speech['start'] it calls begin, and where it discards a
//     too-short current_speech it calls drop.
//   - keep/finalize apply the padding loop that Python runs over the whole
//     list afterwards. A segment's padded end depends on the start of the
//     next kept segment (half the gap when the gap is under 2·pad), so the
//     last kept segment waits (pend) until the next one is kept, or until
//     no later kept segment can start closer than 2·pad (then its end is
//     end+pad), or until the stream ends.
//
// A SpeechStart is reported only once the previous segment's SpeechEnd is,
// so events stay in order; with MinSilence >= 2·SpeechPad (the defaults) a
// segment's end is final when step decides it and neither waits.
type segmenter struct {
	r          sampleRules
	sampleRate int
	window     int

	// get_speech_timestamps' loop state.
	i                           int // windows seen
	triggered                   bool
	hasStart                    bool // current_speech holds a 'start'
	start                       int  // current_speech['start']
	tempEnd, prevEnd, nextStart int
	possibleEnds                []possibleEnd

	// Padding stage.
	pend      bool // a kept segment waits for its padded end
	pendStart int  // its padded start (final)
	pendEnd   int  // its raw end
	announced bool // the current speech's SpeechStart was reported
	events    []Event
}

type possibleEnd struct{ end, dur int }

func newSegmenter(r Rules, sampleRate, window int) *segmenter {
	return &segmenter{r: r.samples(sampleRate, window), sampleRate: sampleRate, window: window}
}

func (g *segmenter) reset() {
	*g = segmenter{r: g.r, sampleRate: g.sampleRate, window: g.window, possibleEnds: g.possibleEnds[:0], events: g.events[:0]}
}

// step consumes the probability of the next window. full is false only for
// the zero-padded last window of a stream, after which the caller calls
// finish.
func (g *segmenter) step(prob float32, full bool) {
	g.loop(float64(prob)) // Python's .item() widens the float32 exactly
	g.i++
	if full {
		g.settle()
	}
}

// loop is the body of get_speech_timestamps' `for i, speech_prob in
// enumerate(speech_probs)` (silero-vad utils_vad.py at commit 806dcba,
// 2026-08-18); each `continue` is a return.
func (g *segmenter) loop(p float64) {
	r := &g.r
	cur := g.window * g.i

	// If speech returns after a temp_end, record candidate silence if long enough and clear temp_end.
	if p >= r.threshold && g.tempEnd != 0 {
		silDur := cur - g.tempEnd
		if float64(silDur) > r.minSilenceAtMaxSpeech {
			g.possibleEnds = append(g.possibleEnds, possibleEnd{g.tempEnd, silDur})
		}
		g.tempEnd = 0
		if g.nextStart < g.prevEnd {
			g.nextStart = cur
		}
	}

	// Start of speech.
	if p >= r.threshold && !g.triggered {
		g.triggered = true
		g.begin(cur)
		return
	}

	// Max speech length reached: decide where to cut.
	if g.triggered && float64(cur-g.start) > r.maxSpeech {
		if r.splitLongest && len(g.possibleEnds) > 0 {
			best := g.possibleEnds[0] // max() keeps the first of equal maxima
			for _, e := range g.possibleEnds[1:] {
				if e.dur > best.dur {
					best = e
				}
			}
			g.prevEnd = best.end
			g.keep(g.start, g.prevEnd)
			g.nextStart = g.prevEnd + best.dur
			if g.nextStart < g.prevEnd+cur {
				g.begin(g.nextStart)
			} else {
				g.triggered = false
			}
			g.prevEnd, g.nextStart, g.tempEnd = 0, 0, 0
			g.possibleEnds = g.possibleEnds[:0]
		} else if g.prevEnd != 0 {
			g.keep(g.start, g.prevEnd)
			if g.nextStart < g.prevEnd {
				g.triggered = false
			} else {
				g.begin(g.nextStart)
			}
			g.prevEnd, g.nextStart, g.tempEnd = 0, 0, 0
			g.possibleEnds = g.possibleEnds[:0]
		} else {
			g.keep(g.start, cur)
			g.prevEnd, g.nextStart, g.tempEnd = 0, 0, 0
			g.triggered = false
			g.possibleEnds = g.possibleEnds[:0]
			return
		}
	}

	// Silence detection while in speech.
	if p < r.negThreshold && g.triggered {
		if g.tempEnd == 0 {
			g.tempEnd = cur
		}
		silNow := cur - g.tempEnd
		if !r.splitLongest && float64(silNow) > r.minSilenceAtMaxSpeech {
			g.prevEnd = g.tempEnd
		}
		if float64(silNow) < r.minSilence {
			return
		}
		if float64(g.tempEnd-g.start) > r.minSpeech {
			g.keep(g.start, g.tempEnd)
		} else {
			g.drop()
		}
		g.prevEnd, g.nextStart, g.tempEnd = 0, 0, 0
		g.triggered = false
		g.possibleEnds = g.possibleEnds[:0]
	}
}

// begin is current_speech['start'] = s.
func (g *segmenter) begin(s int) {
	g.hasStart, g.start, g.announced = true, s, false
	g.announce()
}

// drop discards the current speech (too short).
func (g *segmenter) drop() {
	if g.announced {
		g.events = append(g.events, Event{Kind: SpeechDropped, Segment: g.startSegment()})
	}
	g.hasStart, g.announced = false, false
}

// keep is speeches.append({'start': s, 'end': e}) for the current speech,
// which it clears (current_speech = {}).
func (g *segmenter) keep(s, e int) {
	var padded int
	if g.pend {
		// The padding loop at the previous segment: its end and this start.
		gap := s - g.pendEnd
		if float64(gap) < 2*g.r.pad {
			half := floorDiv(gap, 2)
			g.emitEnd(g.pendStart, g.pendEnd+half)
			padded = max(0, s-half)
		} else {
			g.emitEnd(g.pendStart, int(float64(g.pendEnd)+g.r.pad))
			padded = g.padStart(s)
		}
	} else {
		padded = g.padStart(s)
	}
	if g.hasStart && !g.announced {
		g.events = append(g.events, Event{Kind: SpeechStart, Segment: segmentAt(padded, padded, g.sampleRate)})
	}
	g.pend, g.pendStart, g.pendEnd = true, padded, e
	g.hasStart, g.announced = false, false
}

// settle ends the wait of the pending segment once no kept segment can
// start closer to it than 2·pad: the current speech's start or, without
// one, the next window bounds every later start. Only for full windows:
// then the audio runs at least to that bound, so min(len, end+pad) = end+pad.
func (g *segmenter) settle() {
	if g.pend {
		bound := g.window * g.i
		if g.hasStart {
			bound = g.start
		}
		if !(float64(bound-g.pendEnd) < 2*g.r.pad) {
			g.emitEnd(g.pendStart, int(float64(g.pendEnd)+g.r.pad))
			g.pend = false
		}
	}
	g.announce()
}

// announce reports the current speech's SpeechStart unless it was, or a
// segment before it still waits.
func (g *segmenter) announce() {
	if g.hasStart && !g.announced && !g.pend {
		g.events = append(g.events, Event{Kind: SpeechStart, Segment: g.startSegment()})
		g.announced = true
	}
}

// startSegment is the current speech's start as padded when nothing waits
// before it (the gap to a settled segment is at least 2·pad).
func (g *segmenter) startSegment() Segment {
	s := g.padStart(g.start)
	return segmentAt(s, s, g.sampleRate)
}

// padStart is int(max(0, start - speech_pad_samples)).
func (g *segmenter) padStart(s int) int {
	return int(max(0, float64(s)-g.r.pad))
}

func (g *segmenter) emitEnd(start, end int) {
	g.events = append(g.events, Event{Kind: SpeechEnd, Segment: segmentAt(start, end, g.sampleRate)})
}

// finish ends the stream after n samples: the tail after the loop (the
// current speech runs to the end if long enough) and the padding of the
// last segment, clamped to the audio.
func (g *segmenter) finish(n int) {
	if g.hasStart {
		if float64(n-g.start) > g.r.minSpeech {
			g.keep(g.start, n)
		} else {
			g.drop()
		}
	}
	if g.pend {
		g.emitEnd(g.pendStart, int(min(float64(n), float64(g.pendEnd)+g.r.pad)))
		g.pend = false
	}
}

// takeEvents returns the events reported since the last call; the slice
// is the caller's.
func (g *segmenter) takeEvents() []Event {
	if len(g.events) == 0 {
		return nil
	}
	out := append([]Event(nil), g.events...)
	g.events = g.events[:0]
	return out
}

// floorDiv is Python's a // b for b > 0.
func floorDiv(a, b int) int {
	q := a / b
	if (a%b != 0) && (a < 0) {
		q--
	}
	return q
}
