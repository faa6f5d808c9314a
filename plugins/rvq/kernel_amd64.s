#include "textflag.h"

// FOLD turns the accumulator acc (8 lanes of dot products) into scores
// hn - acc and folds them into the running minimum at off(AX) (best) and
// off(BX) (bidx): lanes where score < best (strictly) take the score and the
// index at idxoff(R10).
#define FOLD(acc, hn, off, idxoff) \
	VSUBPS acc, hn, acc; \
	VMOVUPS off(AX), Y14; \
	VCMPPS $1, Y14, acc, Y15; \
	VBLENDVPS Y15, acc, Y14, Y14; \
	VMOVUPS Y14, off(AX); \
	VMOVUPS off(BX), Y14; \
	VBLENDVPS Y15, idxoff(R10), Y14, Y14; \
	VMOVUPS Y14, off(BX)

// func dot6x16(res *float32, dim int, panel, halfNorm, best *float32, bidx *int32, idx *[16]int32)
//
// Rows i = 0..5 of res start at res + i*dim*4 bytes; the panel is dim rows of
// 16 float32. Accumulators: row i, lanes 0-7 in Y(2i), lanes 8-15 in Y(2i+1).
TEXT ·dot6x16(SB), NOSPLIT, $0-56
	MOVQ res+0(FP), SI
	MOVQ dim+8(FP), CX
	MOVQ panel+16(FP), DI
	MOVQ CX, DX
	SHLQ $2, DX
	LEAQ (DX)(DX*2), R8
	LEAQ (DX)(DX*4), R9
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11

loop:
	VMOVUPS (DI), Y12
	VMOVUPS 32(DI), Y13
	VBROADCASTSS (SI), Y14
	VFMADD231PS Y12, Y14, Y0
	VFMADD231PS Y13, Y14, Y1
	VBROADCASTSS (SI)(DX*1), Y15
	VFMADD231PS Y12, Y15, Y2
	VFMADD231PS Y13, Y15, Y3
	VBROADCASTSS (SI)(DX*2), Y14
	VFMADD231PS Y12, Y14, Y4
	VFMADD231PS Y13, Y14, Y5
	VBROADCASTSS (SI)(R8*1), Y15
	VFMADD231PS Y12, Y15, Y6
	VFMADD231PS Y13, Y15, Y7
	VBROADCASTSS (SI)(DX*4), Y14
	VFMADD231PS Y12, Y14, Y8
	VFMADD231PS Y13, Y14, Y9
	VBROADCASTSS (SI)(R9*1), Y15
	VFMADD231PS Y12, Y15, Y10
	VFMADD231PS Y13, Y15, Y11
	ADDQ $4, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  loop

	MOVQ halfNorm+24(FP), R11
	MOVQ best+32(FP), AX
	MOVQ bidx+40(FP), BX
	MOVQ idx+48(FP), R10
	VMOVUPS (R11), Y12
	VMOVUPS 32(R11), Y13
	FOLD(Y0, Y12, 0, 0)
	FOLD(Y1, Y13, 32, 32)
	FOLD(Y2, Y12, 64, 0)
	FOLD(Y3, Y13, 96, 32)
	FOLD(Y4, Y12, 128, 0)
	FOLD(Y5, Y13, 160, 32)
	FOLD(Y6, Y12, 192, 0)
	FOLD(Y7, Y13, 224, 32)
	FOLD(Y8, Y12, 256, 0)
	FOLD(Y9, Y13, 288, 32)
	FOLD(Y10, Y12, 320, 0)
	FOLD(Y11, Y13, 352, 32)
	VZEROUPPER
	RET

// FOLD512 turns accumulator acc (16 lanes of dot products) of row i into
// scores Z12 - acc (Z12: halfNorm) and stores, where score < best (strictly),
// the score into off(AX) and the index (Z13) into off(BX), by mask K1.
#define FOLD512(acc, off) \
	VSUBPS acc, Z12, acc; \
	VCMPPS $1, off(AX), acc, K1; \
	VMOVUPS acc, K1, off(AX); \
	VMOVDQU32 Z13, K1, off(BX)

// func dot12x16(res *float32, dim int, panel, halfNorm, best *float32, bidx *int32, idx *[16]int32)
//
// Rows 0-5 of res are addressed from SI, rows 6-11 from R13 = SI + 6 rows.
// Accumulator of row i: Zi.
TEXT ·dot12x16(SB), NOSPLIT, $0-56
	MOVQ res+0(FP), SI
	MOVQ dim+8(FP), CX
	MOVQ panel+16(FP), DI
	MOVQ CX, DX
	SHLQ $2, DX
	LEAQ (DX)(DX*2), R8
	LEAQ (DX)(DX*4), R9
	LEAQ (SI)(R8*2), R13
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11

loop512:
	VMOVUPS (DI), Z12
	VFMADD231PS.BCST (SI), Z12, Z0
	VFMADD231PS.BCST (SI)(DX*1), Z12, Z1
	VFMADD231PS.BCST (SI)(DX*2), Z12, Z2
	VFMADD231PS.BCST (SI)(R8*1), Z12, Z3
	VFMADD231PS.BCST (SI)(DX*4), Z12, Z4
	VFMADD231PS.BCST (SI)(R9*1), Z12, Z5
	VFMADD231PS.BCST (R13), Z12, Z6
	VFMADD231PS.BCST (R13)(DX*1), Z12, Z7
	VFMADD231PS.BCST (R13)(DX*2), Z12, Z8
	VFMADD231PS.BCST (R13)(R8*1), Z12, Z9
	VFMADD231PS.BCST (R13)(DX*4), Z12, Z10
	VFMADD231PS.BCST (R13)(R9*1), Z12, Z11
	ADDQ $4, SI
	ADDQ $4, R13
	ADDQ $64, DI
	DECQ CX
	JNZ  loop512

	MOVQ halfNorm+24(FP), R11
	MOVQ best+32(FP), AX
	MOVQ bidx+40(FP), BX
	MOVQ idx+48(FP), R10
	VMOVUPS (R11), Z12
	VMOVDQU32 (R10), Z13
	FOLD512(Z0, 0)
	FOLD512(Z1, 64)
	FOLD512(Z2, 128)
	FOLD512(Z3, 192)
	FOLD512(Z4, 256)
	FOLD512(Z5, 320)
	FOLD512(Z6, 384)
	FOLD512(Z7, 448)
	FOLD512(Z8, 512)
	FOLD512(Z9, 576)
	FOLD512(Z10, 640)
	FOLD512(Z11, 704)
	VZEROUPPER
	RET
