// Package rvq provides residual vector quantisation ops (rvq_encode,
// rvq_decode) for neural audio codecs.
package rvq
