package rvq

// Host-side layouts of the device codebooks for kernels/rvq.cu
// (DeviceCodebooks, cuda builds), kept out of the cuda build tag so that the
// CPU tests check them.

// rowAlign pads every stage of the device codebooks to a multiple of this
// many rows (the largest N-tile), dimAlign every row to a multiple of this
// many values (the kernel's k-chunk).
const (
	rowAlign = 256
	dimAlign = 64
)

// swizzleTiles lays out row-major [rows][dp] bf16 words (rows a multiple of
// 128, dp of 64) as kernels/rvq.cu's bulk path reads them: block (b, kc) =
// rows 128b..128b+127, values 64kc..64kc+63 is 16 KiB at
// ((b*dp/64 + kc)*128*64), row n of it at n*64, its 16-byte chunk c at
// ((c ^ n) & 7)*8: the 128-byte swizzle of the shared-memory tile.
func swizzleTiles(words []uint16, dp int) []uint16 {
	rows, kcs := len(words)/dp, dp/dimAlign
	out := make([]uint16, len(words))
	for b := 0; b < rows/128; b++ {
		for kc := 0; kc < kcs; kc++ {
			blk := out[(b*kcs+kc)*128*dimAlign:]
			for n := 0; n < 128; n++ {
				src := words[(b*128+n)*dp+kc*dimAlign:]
				for c := 0; c < 8; c++ {
					copy(blk[n*dimAlign+((c^n)&7)*8:n*dimAlign+((c^n)&7)*8+8], src[c*8:c*8+8])
				}
			}
		}
	}
	return out
}

// fragDp is the padded width the f kernels are compiled for.
const fragDp = 256

// fragDim is the f kernels' dimension order: the tensor cores' column c =
// 16s + w of k16 step s (w < 16) is dimension 32(s/2) + 8t + 4(s%2) + e with
// t = (w%8)/2 and e = 2(w/8) + w%2, so that the A-fragment elements a lane
// holds (mma's columns 2t, 2t+1, 2t+8 and 2t+9 of every step) are four
// consecutive dimensions of its rows, and lane t's are the 16-byte pieces t
// of every 64-byte group of a bf16 row (kernels/rvq.cu, kFrag and fragDim0).
func fragDim(c int) int {
	s, w := c/16, c%16
	return 32*(s/2) + 8*((w%8)/2) + 4*(s%2) + 2*(w/8) + w%2
}

// permuteRows returns words ([rows][dp]) with row n's value perm(c) at
// column c.
func permuteRows(words []uint16, dp int, perm func(int) int) []uint16 {
	out := make([]uint16, len(words))
	for n := 0; n < len(words)/dp; n++ {
		for c := 0; c < dp; c++ {
			out[n*dp+c] = words[n*dp+perm(c)]
		}
	}
	return out
}

func u16Bytes(v []uint16) []byte {
	if len(v) == 0 {
		return nil
	}
	b := make([]byte, 2*len(v))
	for i, w := range v {
		b[2*i], b[2*i+1] = byte(w), byte(w>>8)
	}
	return b
}
