// Package fbank provides the log-mel filterbank op ("fbank") for the
// Whisper, Parakeet/NeMo and related ASR frontends. Its CPU implementation
// is the numerical reference for the CUDA kernels.
//
// # Contract
//
// Op "fbank": input pcm f32 [N] or [B, N] (mono, at sample_rate, nominally
// in [-1, 1], finite) and optional lengths i64 [B] (samples per item,
// 0..N). Outputs features f32 [B, n_mels, T] (layout mel_time) or
// [B, T, n_mels] (time_mel) and lengths i64 [B], the valid frames per item.
// Items are framed and normalised independently: item b is its first
// lengths[b] samples, padded at its own ends by pad_mode; T is the largest
// item's frame count and the rows past an item's own frames are 0.
//
// # Presets
//
// Each preset reproduces one implementation; any knob can be overridden.
//
//   - whisper-80, whisper-128: HF WhisperFeatureExtractor. n_fft 400, hop 160,
//     periodic Hann 400, reflect pad 200, |X|², Slaney mel 0-8 kHz, log10 with a
//     1e-10 floor, clamp to max-8, (x+4)/4, last STFT frame dropped: N/hop frames,
//     [n_mels, T]. pad_to_seconds=30 gives its default 30 s form (3000 frames;
//     lengths = ceil(N/hop), its attention mask).
//   - parakeet-80, parakeet-128: HF ParakeetFeatureExtractor = NeMo >= 2.5.
//     Pre-emphasis 0.97, n_fft 512, symmetric Hann 400 centred in 512, zero
//     centre pad, |X|², Slaney mel, ln(x + 2⁻²⁴), per-feature mean and unbiased
//     std over the N/hop valid frames, (x - mean)/(std + 1e-5); N/hop + 1 frames
//     with the last set to 0; [T, n_mels].
//   - nemo-legacy-80, nemo-legacy-128: NeMo < 2.5 as exported in nemo128.onnx:
//     as parakeet but reflect pad and N/hop + 1 valid frames (none masked).
//
// # Pipeline and numerics
//
// Per frame: window · (pre-emphasised) samples, with the padding resolved
// virtually (no padded copy of the signal); a real-input FFT (even n_fft:
// one n_fft/2-point complex transform of the packed even/odd samples, so 512
// runs as 256 = 4·4·4·4 and 400 as 200 = 4·2·5·5; other sizes: mixed radix
// 2/3/4/5 with a generic O(p²) butterfly for larger prime factors; twiddles
// precomputed); the power spectrum; the sparse filterbank (each filter's
// non-zero band only); the log. Everything up to the log runs in float64,
// so the result tracks HF's float64 numpy path to ~1e-7 and its float32
// torch path to its own rounding (3e-5 Whisper, 2e-4 Parakeet on the
// goldens). Features are stored as float32 and normalised in a second pass
// (statistics in float64).
//
// Frames are computed in chunks of 32 spread over goroutines, so one long
// clip uses every core; normalisation is spread over chunks of mel bins.
// Scratch is allocated once per goroutine per call; nothing per frame.
//
// # SIMD
//
// Built with GOEXPERIMENT=simd (Go 1.26's experimental simd/archsimd) on
// amd64, frames run in groups of four (AVX2+FMA) or, with -tags
// fbank_avx512, eight (AVX-512): one frame per float64 lane, so the same
// Stockham stages, real-FFT split, sparse filterbank and a vector log run
// lane-wise without shuffles (simd_amd64.go). It covers even n_fft whose
// half factors into 8, 5, 4 and 2 (every preset); anything else, and CPUs
// without the features, take the scalar path, which is always built. Both
// paths agree to float64 rounding (TestBatchPathMatchesScalar); the goldens
// pass on every build.
//
// # Streams
//
// Incremental (NewIncremental on the CPU, NewIncrementalOp through the op on
// any backend, the CUDA one included) takes samples in pieces and returns
// each frame once its samples are in, carrying the window's overlap: for
// normalize none and global its frames and lengths equal the offline op's
// exactly, for any piece sizes (normalize=fixed, NeMo's fixed_mean/fixed_std,
// given as npy files, is per frame too; CPU only); for per_feature and per_utterance it returns
// the log-mel values before normalisation, and NormalizeWindow normalises a
// window of them by that window's statistics (NeMo's buffered inference).
//
// Errors: empty items, items shorter than one window (or too short for the
// pad mode or for two valid per_feature frames), NaN/Inf samples, bad
// lengths, an inconsistent configuration and checkpoint files of the wrong
// shape or with non-finite values are reported with the item, index or
// parameter. All-zero audio gives finite features (0 for per_feature).
package fbank
