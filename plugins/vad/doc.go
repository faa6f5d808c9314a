// Package vad is voice activity detection with Silero VAD v5
// (github.com/snakers4/silero-vad, MIT licence) run by ONNX Runtime: speech
// probabilities per 32 ms window and speech segments, for a whole clip
// (Detector.Detect, Detector.Segments), for streams fed chunk by chunk
// (Stream), and as the registered op "vad".
//
// # Model
//
// Silero VAD v5 is fetched by scripts/fetch-silero-vad.sh (make deps runs
// it) from the npm package @ricky0123/vad-web 0.0.31 (dist/silero_vad_v5.onnx,
// sha256 ModelSHA256, byte-identical to silero-vad's own silero_vad.onnx of
// v5.1) into the cache FindModel searches. Its interface, checked by Open:
// input f32 [B, 64+512] (the previous window's last 64 samples, then 512
// new ones, at 16 kHz; 32+256 at 8 kHz), state f32 [2, B, 128] carried from
// window to window (zeros at the start), sr i64 scalar; outputs output
// f32 [B, 1] (the speech probability) and stateN (the next state).
//
// # Windowing and rules
//
// Both follow silero-vad's src/silero_vad/utils_vad.py (read at commit
// 806dcba, 2026-08-18): OnnxWrapper.__call__ for the context and state
// (the context starts as zeros and is the last 64 samples of each model
// input), and get_speech_timestamps for the windows (512 samples from the
// start of the clip, the last zero-padded) and for the rules, transliterated
// in segmenter.go: speech starts at a window whose probability is >=
// Threshold and ends after MinSilence of windows below NegThreshold; speech
// no longer than MinSpeech is dropped; speech longer than MaxSpeech is split
// at its longest internal pause (or by the legacy rule); each segment is
// padded by SpeechPad, or by half the gap to its neighbour when they are
// closer than 2·SpeechPad. Every rule is a field of Rules with Silero's
// default (DefaultRules). Silero's other rates (multiples of 16 kHz, which
// it decimates without filtering) are left to the caller to resample.
//
// Parity: scripts/golden/vad_golden.py runs the same model file with Python
// onnxruntime and a re-implementation of that logic (checked against
// Silero's own get_speech_timestamps where its source is at hand) on the
// clips in testdata/; golden_test.go requires every probability to match
// within 1e-5 and every segment boundary exactly.
//
// # Concurrency and state
//
// A Detector holds one ONNX Runtime session and is safe for concurrent
// use. A Stream owns its tensors (input, state, output: Go memory that ONNX
// Runtime reads and writes in place) and its segmentation state, and is
// for one goroutine at a time; any number of Streams of one Detector run at
// once. Feeding a stream in chunks of any size gives the probabilities and
// segments that Detect gives for the whole audio.
package vad
