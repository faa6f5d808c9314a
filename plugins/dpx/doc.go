// Package dpx provides the dynamic-programming decoders of the speech
// pipeline on the CPU: CTC forced alignment, CTC greedy decoding, Viterbi
// and DTW. They are the numerical reference for the CUDA (DPX) kernels.
//
// Plain Go functions do the work, so callers need not build tensors:
//
//	Align / Aligner.Align   CTC forced alignment of targets to [T, C] log-probs
//	Greedy, Spans           best-path tokens with frame spans; spans of an alignment
//	NewHMM + HMM.Decode     max-plus Viterbi
//	DTW                     min-plus dynamic time warping
//
// The ops registered in init() wrap them (batch dimension optional, ragged
// items through lengths, items spread over GOMAXPROCS workers):
//
//	ctc_align   log_probs f32 [B,T,C], targets i64|i32 [B,L] (-1 padded), lengths?
//	            -> alignment i32 [B,T], frame_scores f32 [B,T], score f32 [B]
//	            params blank, star, star_logprob, max_memory, precision, scale
//	ctc_greedy  log_probs f32 [B,T,C], lengths? -> tokens i64 [B,N], spans i32 [B,N,2], token_lengths i64 [B]
//	viterbi     emissions f32 [B,T,S], transitions f32 [S,S], priors f32 [S], lengths?
//	            -> path i32 [B,T], score f32 [B]
//	dtw         cost f32 [B,N,M], lengths i64 [B,2]? -> path i32 [B,N+M,2], path_len i32 [B], cost_total f32 [B]
//
// Frames beyond an item's length are -1 in alignment and path outputs.
//
// # Numerics
//
// Float32 paths compute exactly what the references do: ctc_align is
// torchaudio.functional.forced_align (CPU) frame for frame, ties included
// (see Aligner for the rule, including torchaudio's fallback to "stay" when
// the advance and skip predecessors tie above it); viterbi and dtw match
// the numpy loops of scripts/golden/dpx.py bit for bit. Every argmax tie
// goes to the lowest index (Viterbi), DTW backtrace ties go diagonal, up,
// left.
//
// Int32 paths (precision=i32) quantise log-domain values to
// round(x*scale) (scale quanta per unit, default 1024, |q| <= 2^24) and run
// the recurrences on int32 as the DPX kernels do (max/min of three,
// renormalisation per frame for CTC and Viterbi; see Aligner, HMM and DTW
// for each contract). Inputs that are exact multiples of 1/scale give the
// float32 results exactly; others give the same path whenever the best path
// wins by more than the accumulated quantisation error.
//
// All paths are deterministic: same input, same bits, whatever the number
// of workers.
//
// # Memory and speed
//
// CTC backpointers take 2 bits per trellis state and frame, as two bit
// planes. When they exceed AlignOptions.MaxMemory (default 256 MiB) the
// forward pass keeps a score row every K frames and the backtrace
// recomputes one segment at a time; one hour of audio (T = 180000 frames,
// L = 50000 tokens: 4.5 GB of plain 2-bit backpointers) aligns in about
// 85 MiB of working memory, with the same path. On amd64 CPUs with AVX2 the
// CTC step runs 8 states per instruction (ctc_amd64.s), tested bit for bit
// against the pure Go step. docs/bench/dpx.md has the measurements.
package dpx
