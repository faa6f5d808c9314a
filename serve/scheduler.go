package serve

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// job is one admitted request's work. The scheduler owns it from submit
// until finish: finish runs exactly once, also for a job dropped unstarted
// (its context ended, or the scheduler stopped), and the handler that
// submitted it reads the outcome from done whenever it still waits.
type job struct {
	ctx      context.Context
	enqueued time.Time
	// run does the work; it is called at most once, on a batch's goroutine.
	run func(ctx context.Context) outcome
	// cleanup, when set, runs once when the job finishes, run or dropped
	// (it removes the spooled upload).
	cleanup func()
	done    chan outcome // buffered 1
	once    sync.Once
}

func (j *job) finish(o outcome) {
	j.once.Do(func() {
		if j.cleanup != nil {
			j.cleanup()
		}
		j.done <- o
	})
}

// errStopped is the outcome of a job still queued when the scheduler stops.
var errStopped = errors.New("serve: the server is shutting down")

// scheduler is a bounded queue in front of the recogniser. Admission is a
// counting limit (admit/release) of queue+parallel*maxBatch requests, so the
// queue channel, sized to match, never blocks a submit. A dispatcher takes
// the queued jobs in order and hands them to runBatch in batches of at most
// maxBatch, at most parallel batches at a time: a batch takes every job
// already queued and, while another batch is running and it is not full,
// waits up to wait for more; an idle scheduler starts a job at once. Jobs
// whose context ended while queued are dropped unstarted.
type scheduler struct {
	queue    chan *job
	slots    chan struct{} // one per running batch
	admitted atomic.Int64
	queued   atomic.Int64 // submitted, not yet started or dropped
	running  atomic.Int64 // batches running
	limit    int64
	maxBatch int
	wait     time.Duration
	runBatch func(batch []*job)
	onDrop   func(j *job)

	mu      sync.RWMutex // submit (read) against close (write)
	stopped bool
	stop    chan struct{}
	wg      sync.WaitGroup // the dispatcher and running batches
}

func newScheduler(cfg *Config, runBatch func([]*job), onDrop func(*job)) *scheduler {
	inflight := cfg.Parallel * cfg.MaxBatch
	s := &scheduler{
		queue:    make(chan *job, cfg.QueueSize+inflight),
		slots:    make(chan struct{}, cfg.Parallel),
		limit:    int64(cfg.QueueSize + inflight),
		maxBatch: cfg.MaxBatch,
		wait:     cfg.BatchWait,
		runBatch: runBatch,
		onDrop:   onDrop,
		stop:     make(chan struct{}),
	}
	s.wg.Add(1)
	go s.dispatch()
	return s
}

// admit reserves room for one request; false when the server is full. Every
// true must be matched by one release.
func (s *scheduler) admit() bool {
	if s.admitted.Add(1) > s.limit {
		s.admitted.Add(-1)
		return false
	}
	return true
}

func (s *scheduler) release() { s.admitted.Add(-1) }

// submit queues j, which must hold an admission. After stop it finishes j
// with errStopped.
func (s *scheduler) submit(j *job) {
	j.enqueued = time.Now()
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.stopped {
		j.finish(outcome{err: errStopped})
		return
	}
	s.queued.Add(1)
	s.queue <- j // never blocks: admissions bound the queue
}

func (s *scheduler) dispatch() {
	defer s.wg.Done()
	for {
		select {
		case s.slots <- struct{}{}:
		case <-s.stop:
			s.drainQueue()
			return
		}
		var first *job
		select {
		case first = <-s.queue:
		case <-s.stop:
			<-s.slots
			s.drainQueue()
			return
		}
		batch := s.gather(first)
		live := batch[:0]
		for _, j := range batch {
			s.queued.Add(-1)
			if j.ctx.Err() != nil {
				s.onDrop(j)
				j.finish(outcome{err: j.ctx.Err()})
				continue
			}
			live = append(live, j)
		}
		if len(live) == 0 {
			<-s.slots
			continue
		}
		s.running.Add(1)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { s.running.Add(-1); <-s.slots }()
			s.runBatch(live)
		}()
	}
}

// gather makes a batch starting with first: every job already queued, then,
// while another batch runs and this one is not full, jobs arriving within
// s.wait.
func (s *scheduler) gather(first *job) []*job {
	batch := []*job{first}
	for len(batch) < s.maxBatch {
		select {
		case j := <-s.queue:
			batch = append(batch, j)
			continue
		default:
		}
		break
	}
	if len(batch) == s.maxBatch || s.wait <= 0 || s.running.Load() == 0 {
		return batch
	}
	timer := time.NewTimer(s.wait)
	defer timer.Stop()
	for len(batch) < s.maxBatch {
		select {
		case j := <-s.queue:
			batch = append(batch, j)
		case <-timer.C:
			return batch
		case <-s.stop:
			return batch
		}
	}
	return batch
}

// drainQueue finishes every queued job with errStopped.
func (s *scheduler) drainQueue() {
	for {
		select {
		case j := <-s.queue:
			s.queued.Add(-1)
			j.finish(outcome{err: errStopped})
		default:
			return
		}
	}
}

// close stops the dispatcher, finishes queued jobs (and any submitted
// later) with errStopped and waits for running batches to return.
func (s *scheduler) close() {
	s.mu.Lock()
	if !s.stopped {
		s.stopped = true
		close(s.stop)
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.drainQueue() // jobs submitted while the dispatcher was stopping
}
