// Package rvq provides greedy residual vector quantisation (RVQ) for neural
// audio codecs (EnCodec, DAC, Mimi, SNAC): the rvq_encode and rvq_decode ops
// and the plain Go functions they wrap (Codebooks.Encode, Codebooks.Decode).
//
// # Contract (seed 001, audio-codec-rvq-quantize)
//
// Encode takes latents x f32 [B, T, D] and Q codebooks of K_q entries of
// width D, and returns codes i32 [B, T, Q] and quantized f32 [B, T, D].
// Per frame, starting from r = x and quantized = 0, for q = 0 .. Q-1:
//
//	j         = argmin_e ||r - C_q[e]||^2   (ties: the lowest e)
//	codes[q]  = j
//	r         = r - C_q[j]
//	quantized = quantized + C_q[j]
//
// Decode sums the selected codewords in the same order, so
// Decode(Encode(x).codes) reproduces Encode's quantized bit for bit.
//
// Options real codecs need:
//   - per-stage codebook sizes: stage q has its own K_q (NewCodebooks takes
//     one [K_q, D] slice per stage);
//   - Mimi's split RVQ (Codebooks.WithSplit): the first n stages (Mimi: one
//     semantic quantiser) and the remaining stages (the acoustic chain) are
//     two independent chains both fed x; codes are concatenated in stage
//     order and quantized is the first chain's sum plus the second's. Any
//     per-branch input/output projections belong to the surrounding model;
//   - ragged T: Batch.Lengths gives the valid frames per item; padded frames
//     get code -1 and quantized 0, and are ignored by Decode.
//
// Limits (shared with the CUDA kernel): 1 <= Q <= MaxStages, 1 <= K_q <=
// MaxEntries, 1 <= D <= MaxDim.
//
// # Numerics
//
// Codebooks are bfloat16: given as bf16 bit patterns, or as float32 values
// that are exactly representable in bf16 (anything else is an error, never a
// silent rounding). The residual, the distances and the accumulation of
// quantized are float32. The residual update and the accumulation are the
// same IEEE operations in the same order as the seed's torch reference, so
// quantized equals the reference bit for bit whenever the codes agree.
//
// The distance drops ||r||^2 (the same for every entry) and keeps the
// per-entry ||C_e||^2, precomputed once per codebook: the kernel minimises
// ||C_e||^2/2 - dot(r, C_e), which orders entries exactly as
// ||C_e||^2 - 2 dot(r, C_e) does (halving is exact). Each dot product is
// summed over dimensions in increasing order, with fused multiply-adds in the
// amd64 assembly kernels and whatever the compiler emits in the portable one,
// so distances differ from torch's GEMM in the last bits; codes are identical
// wherever the winner is clear of the runner-up by more than rounding, which
// the seed's inputs guarantee (smallest relative margin 0.13 in the seed,
// 0.08 in our goldens). Exact ties (e.g. duplicate codewords) go to the
// lowest index on every path.
//
// fp32 codebooks (NewCodebooksF32), as published codecs store them, run the
// same kernel with the codewords used exactly as given in the residual
// update and in Decode (Codebooks.F32 reports them). On CUDA they run
// rvq_encode_f32 (kernels/rvq.cu), an fp32 SIMT kernel whose every score is
// the CPU's bit for bit (the same fused multiply-adds over dimensions in
// increasing order from +0, the same ||C_e||^2/2 - dot), so its codes equal
// the CPU's exactly, near ties included, with no guard; the bf16 tensor-core
// kernels never see fp32 codewords.
//
// To keep every distance finite, each frame of x and each codeword must have
// a squared L2 norm of at most MaxSquaredNorm; x must be finite.
//
// # Performance
//
// Frames are independent, so Encode splits the valid frames into blocks of
// up to blockFrames frames spread over all cores (GOMAXPROCS). A block's
// residuals stay resident in cache across all Q stages; each stage streams
// the codebook, packed at preparation time into panels of panelWidth
// codewords stored dimension-major, through a register-blocked micro-kernel
// (AVX-512 or AVX2+FMA assembly on amd64, chosen at init; portable Go
// elsewhere) that keeps a running (min, argmin) per lane so that no distance
// row is ever written out. Work buffers are allocated once per worker per
// call, never per frame.
package rvq
