package corpus

import (
	"sync"

	"github.com/edgespeech/edge/runtime/audio"
)

// pcmCache keeps the last few decoded files, so the segments of one long
// file (consecutive manifest lines with offsets) decode it once rather
// than once per segment. A file is decoded by one goroutine while the
// others asking for it wait; entries are shared read-only.
type pcmCache struct {
	mu      sync.Mutex
	max     int
	entries []*pcmEntry // most recent last
}

type pcmEntry struct {
	path  string
	ready chan struct{}
	pcm   []float32
	err   error
}

func newPCMCache(n int) *pcmCache { return &pcmCache{max: max(n, 1)} }

// load returns the file's samples at rate (mono); callers must not modify them.
func (c *pcmCache) load(path string, rate int) ([]float32, error) {
	c.mu.Lock()
	for i, e := range c.entries {
		if e.path == path {
			c.entries = append(append(c.entries[:i:i], c.entries[i+1:]...), e)
			c.mu.Unlock()
			<-e.ready
			return e.pcm, e.err
		}
	}
	e := &pcmEntry{path: path, ready: make(chan struct{})}
	c.entries = append(c.entries, e)
	if len(c.entries) > c.max {
		c.entries = c.entries[1:]
	}
	c.mu.Unlock()
	e.pcm, e.err = audio.Load(path, rate)
	close(e.ready)
	return e.pcm, e.err
}
