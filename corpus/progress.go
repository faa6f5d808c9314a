package corpus

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"
)

// progress reports a shard's advance: items, hours of audio, speed and ETA.
// The ETA extrapolates the audio rate when every item's duration is known
// from the manifest, else the item rate.
type progress struct {
	cfg   *Config
	start time.Time

	mu              sync.Mutex
	items, finished int
	failed, skipped int
	total           time.Duration // audio in the shard, from the manifest
	known           bool          // every item has a duration
	audio           time.Duration // processed now
	skippedAudio    time.Duration
	quit            chan struct{}
	wg              sync.WaitGroup
}

func newProgress(cfg *Config, items []*Item) *progress {
	p := &progress{cfg: cfg, start: time.Now(), items: len(items), known: true, quit: make(chan struct{})}
	for _, it := range items {
		if it.Duration > 0 {
			p.total += seconds(it.Duration)
		} else {
			p.known = false
		}
	}
	if cfg.Progress == nil {
		return p
	}
	every := cfg.ProgressEvery
	if cfg.ProgressTTY {
		every = 250 * time.Millisecond
	}
	p.wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.quit:
				return
			case <-t.C:
				p.report(false)
			}
		}
	})
	return p
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func (p *progress) skip(it *Item) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.finished++
	p.skipped++
	p.skippedAudio += seconds(it.Duration)
}

func (p *progress) done(_ *Item, audio time.Duration, failed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.finished++
	p.audio += audio
	if failed {
		p.failed++
	}
}

// stop ends the reports with a last one.
func (p *progress) stop() {
	close(p.quit)
	p.wg.Wait()
	if p.cfg.Progress != nil {
		p.report(true)
	}
}

// Progress is one JSON progress line (unattended runs).
type Progress struct {
	Shard      string  `json:"shard"`
	Mode       Mode    `json:"mode"`
	Items      int     `json:"items"`
	Finished   int     `json:"finished"`
	Failed     int     `json:"failed"`
	Skipped    int     `json:"skipped"`
	AudioHours float64 `json:"audio_hours"`  // processed by this run
	TotalHours float64 `json:"total_hours"`  // of the shard, when the manifest gives every duration
	Speed      float64 `json:"speed_x_real"` // audio seconds per wall second
	ElapsedS   float64 `json:"elapsed_s"`
	ETAS       float64 `json:"eta_s"` // -1 unknown
	Final      bool    `json:"final,omitempty"`
}

func (p *progress) snapshot(final bool) Progress {
	p.mu.Lock()
	defer p.mu.Unlock()
	el := time.Since(p.start)
	s := Progress{Shard: p.cfg.Shard.name(), Mode: p.cfg.Mode, Items: p.items, Finished: p.finished,
		Failed: p.failed, Skipped: p.skipped, AudioHours: p.audio.Hours(), ElapsedS: el.Seconds(),
		Speed: p.audio.Seconds() / max(el.Seconds(), 1e-9), ETAS: -1, Final: final}
	if p.known {
		s.TotalHours = p.total.Hours()
	}
	processed := p.finished - p.skipped
	switch {
	case p.finished == p.items:
		s.ETAS = 0
	case p.known && p.audio > 0:
		left := p.total - p.skippedAudio - p.audio
		s.ETAS = max(left.Seconds(), 0) / s.Speed
	case processed > 0:
		s.ETAS = el.Seconds() / float64(processed) * float64(p.items-p.finished)
	}
	return s
}

func (p *progress) report(final bool) {
	s := p.snapshot(final)
	w := p.cfg.Progress
	if !p.cfg.ProgressTTY {
		b, _ := json.Marshal(s)
		fmt.Fprintln(w, string(b))
		return
	}
	const width = 30
	fill := width
	if s.Items > 0 {
		fill = width * s.Finished / s.Items
	}
	eta := "?"
	if s.ETAS >= 0 {
		eta = time.Duration(s.ETAS * float64(time.Second)).Round(time.Second).String()
	}
	hours := fmt.Sprintf("%.2f h", s.AudioHours)
	if s.TotalHours > 0 {
		hours = fmt.Sprintf("%.2f/%.2f h", s.AudioHours, s.TotalHours)
	}
	end := ""
	if final {
		end = "\n"
	}
	fmt.Fprintf(w, "\r%s [%s%s] %d/%d items (%d failed, %d skipped), %s audio, %.0fx real time, ETA %s\033[K%s",
		s.Mode, strings.Repeat("#", fill), strings.Repeat(".", width-fill), s.Finished, s.Items, s.Failed, s.Skipped,
		hours, s.Speed, eta, end)
}
