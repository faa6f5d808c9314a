// Package fbank provides the log-mel filterbank op ("fbank") for the
// Whisper, Parakeet/NeMo and related ASR frontends.
package fbank
