// Package dpx provides the dynamic-programming decoders: CTC forced
// alignment, CTC greedy decoding, Viterbi and DTW.
package dpx
