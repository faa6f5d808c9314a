//go:build goexperiment.simd && amd64 && fbank_avx512

package fbank

import "simd/archsimd"

// Eight lanes: AVX-512 (build with -tags fbank_avx512; CPUs without AVX-512
// then run the scalar path).

const lanes = 8

// f32lanes float32 values per vector, for the normalisation pass.
const f32lanes = 16

type f32vec = archsimd.Float32x16

func ldF32(s []float32) f32vec { return archsimd.LoadFloat32x16Slice(s) }

type (
	vec  = archsimd.Float64x8
	uvec = archsimd.Uint64x8
)

func cpuSupported() bool { return archsimd.X86.AVX512() }

func ld4(a *rep4) vec           { return archsimd.LoadFloat64x8(a) }
func ldU(a *[lanes]uint64) uvec { return archsimd.LoadUint64x8(a) }
func ldSlice(s []float64) vec   { return archsimd.LoadFloat64x8Slice(s) }
func asU(x vec) uvec            { return x.AsUint64x8() }
func asF(x uvec) vec            { return x.AsFloat64x8() }

// setGroup puts frames 4·grp..4·grp+3 (one position) into half grp of v.
func setGroup(v vec, grp int, c archsimd.Float64x4) vec {
	if grp == 0 {
		return v.SetLo(c)
	}
	return v.SetHi(c)
}
