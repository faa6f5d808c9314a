//go:build goexperiment.simd && amd64 && !fbank_avx512

package fbank

import "simd/archsimd"

// Four lanes: AVX2 and FMA (Haswell and later).

const lanes = 4

// f32lanes float32 values per vector, for the normalisation pass.
const f32lanes = 8

type f32vec = archsimd.Float32x8

func ldF32(s []float32) f32vec { return archsimd.LoadFloat32x8Slice(s) }

type (
	vec  = archsimd.Float64x4
	uvec = archsimd.Uint64x4
)

func cpuSupported() bool { return archsimd.X86.AVX2() && archsimd.X86.FMA() }

func ld4(a *rep4) vec           { return archsimd.LoadFloat64x4(a) }
func ldU(a *[lanes]uint64) uvec { return archsimd.LoadUint64x4(a) }
func ldSlice(s []float64) vec   { return archsimd.LoadFloat64x4Slice(s) }
func asU(x vec) uvec            { return x.AsUint64x4() }
func asF(x uvec) vec            { return x.AsFloat64x4() }

// setGroup puts frames 4·grp..4·grp+3 (one position) into v: here the whole vector.
func setGroup(_ vec, _ int, c archsimd.Float64x4) vec { return c }
