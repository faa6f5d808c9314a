package serve

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the server's Prometheus series (GET /metrics), on a registry
// of their own with the Go runtime and process collectors beside them.
//
//	edge_serve_requests_total{route,code}            answered requests ("499": the client went away)
//	edge_serve_request_duration_seconds{route}       first byte to answer, every outcome (/v1/audio/stream: the whole session)
//	edge_serve_queue_wait_seconds                    submit to start of work
//	edge_serve_stage_seconds{stage}                  audio (file decoding), then asr's: fbank, encoder, decode (CTC)
//	edge_serve_queue_depth                           queued, not started
//	edge_serve_admitted_requests                     admitted: uploading, queued or running
//	edge_serve_batches_running                       batches being run
//	edge_serve_batch_size                            requests per batch
//	edge_serve_encoder_batch_items                   audio chunks per encoder run (Server.EncoderRun)
//	edge_serve_audio_seconds_total{route}            audio recognised
//	edge_serve_processing_seconds_total{route}       wall time of recognition (decoding the file included)
//	edge_serve_real_time_factor{route}               processing time / audio time, per request
//	edge_serve_dropped_total{reason}                 queued jobs dropped unstarted (cancelled, timeout)
//	edge_serve_device_memory_bytes{device,kind}      the backend allocator's device memory, in_use and cached, where it reports it
//	edge_serve_ready                                 1 when serving, 0 while loading or draining
//	edge_serve_streams_active                        open /v1/audio/stream sessions
//	edge_serve_streams_total{outcome}                ended sessions: end, idle_timeout, max_duration, shutting_down, client_gone, invalid_audio, invalid_message, frame_too_large, internal_error
//	edge_serve_stream_audio_seconds_total            audio received by streams
//	edge_serve_stream_final_latency_seconds          arrival of the audio that ended an utterance (or of end) to its final being sent
type metrics struct {
	reg        *prometheus.Registry
	requests   *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	queueWait  prometheus.Histogram
	stages     *prometheus.HistogramVec
	batchSize  prometheus.Histogram
	encoder    prometheus.Histogram
	audio      *prometheus.CounterVec
	processing *prometheus.CounterVec
	rtf        *prometheus.HistogramVec
	dropped    *prometheus.CounterVec

	streamsActive      prometheus.Gauge
	streams            *prometheus.CounterVec
	streamAudio        prometheus.Counter
	streamFinalLatency prometheus.Histogram
}

func newMetrics(s *Server) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	latencyBuckets := []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "edge_serve_requests_total", Help: "Requests answered, by route and HTTP status (499: the client went away first).",
	}, []string{"route", "code"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "edge_serve_request_duration_seconds", Help: "Time from a request's arrival to its answer, upload included.",
		Buckets: latencyBuckets,
	}, []string{"route"})
	m.queueWait = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "edge_serve_queue_wait_seconds", Help: "Time a request waited in the queue before its batch started.",
		Buckets: latencyBuckets,
	})
	m.stages = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "edge_serve_stage_seconds", Help: "Time per request in each stage: audio (decoding the file), then the recogniser's fbank, encoder and decode (CTC decoding and alignment).",
		Buckets: latencyBuckets,
	}, []string{"stage"})
	m.batchSize = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "edge_serve_batch_size", Help: "Requests per batch.",
		Buckets: []float64{1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64},
	})
	m.encoder = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "edge_serve_encoder_batch_items", Help: "Audio chunks per encoder run: the recogniser's batches across requests (1: encoded alone).",
		Buckets: []float64{1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64},
	})
	m.audio = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "edge_serve_audio_seconds_total", Help: "Seconds of audio recognised.",
	}, []string{"route"})
	m.processing = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "edge_serve_processing_seconds_total", Help: "Wall seconds spent recognising (file decoding included); divided by edge_serve_audio_seconds_total it is the real-time factor.",
	}, []string{"route"})
	m.rtf = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "edge_serve_real_time_factor", Help: "Processing time over audio time, per request (lower is faster; 1/x is RTFx).",
		Buckets: []float64{.001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 2, 5},
	}, []string{"route"})
	m.dropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "edge_serve_dropped_total", Help: "Queued requests dropped before they started, by reason (cancelled: the client went away; timeout).",
	}, []string{"reason"})
	m.streamsActive = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "edge_serve_streams_active", Help: "Open streaming sessions (GET /v1/audio/stream).",
	})
	m.streams = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "edge_serve_streams_total", Help: "Streaming sessions ended, by outcome (end, idle_timeout, max_duration, shutting_down, client_gone, invalid_audio, invalid_message, frame_too_large, internal_error).",
	}, []string{"outcome"})
	m.streamAudio = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "edge_serve_stream_audio_seconds_total", Help: "Seconds of audio received by streaming sessions.",
	})
	m.streamFinalLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "edge_serve_stream_final_latency_seconds", Help: "Time from the arrival of the audio that ended an utterance (or of the end message) to its final result being sent.",
		Buckets: latencyBuckets,
	})
	m.reg.MustRegister(m.streamsActive, m.streams, m.streamAudio, m.streamFinalLatency)
	m.reg.MustRegister(m.requests, m.latency, m.queueWait, m.stages, m.batchSize, m.encoder, m.audio, m.processing, m.rtf, m.dropped,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "edge_serve_queue_depth", Help: "Requests queued and not yet started."},
			func() float64 { return float64(s.sched.queued.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "edge_serve_admitted_requests", Help: "Requests admitted: uploading, queued or running."},
			func() float64 { return float64(s.sched.admitted.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "edge_serve_batches_running", Help: "Batches being run."},
			func() float64 { return float64(s.sched.running.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "edge_serve_ready", Help: "1 when the server takes requests; 0 while the model loads or the server drains."},
			func() float64 {
				if s.state.Load() == stateReady {
					return 1
				}
				return 0
			}),
		&memoryCollector{s: s},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// memorySample is one device-memory figure.
type memorySample struct {
	device, kind string // kind: in_use or cached
	bytes        int64
}

// memoryCollector reports the loaded backend's device memory at scrape time.
type memoryCollector struct{ s *Server }

var deviceMemoryDesc = prometheus.NewDesc("edge_serve_device_memory_bytes",
	"Device memory held by the backend's allocator: in_use (handed out) and cached (freed, kept for reuse), where the backend reports it.",
	[]string{"device", "kind"}, nil)

func (c *memoryCollector) Describe(ch chan<- *prometheus.Desc) { ch <- deviceMemoryDesc }

func (c *memoryCollector) Collect(ch chan<- prometheus.Metric) {
	r := c.s.engine()
	if r == nil || r.memory == nil {
		return
	}
	for _, m := range r.memory() {
		ch <- prometheus.MustNewConstMetric(deviceMemoryDesc, prometheus.GaugeValue, float64(m.bytes), m.device, m.kind)
	}
}

// EncoderRun counts one encoder run of items audio chunks in
// edge_serve_encoder_batch_items; it is asr.Options.OnEncode for the
// recogniser the server answers with. Safe for concurrent use.
func (s *Server) EncoderRun(items int) { s.m.encoder.Observe(float64(items)) }
