#include "textflag.h"

// func ctcStepF32AVX2(prev, pen *float32, lab *int32, e, cur *float32, plane1, plane2 *byte, n int)
TEXT ·ctcStepF32AVX2(SB), NOSPLIT, $0-64
	MOVQ prev+0(FP), SI
	MOVQ pen+8(FP), R8
	MOVQ lab+16(FP), R9
	MOVQ e+24(FP), R10
	MOVQ cur+32(FP), DI
	MOVQ plane1+40(FP), R11
	MOVQ plane2+48(FP), R12
	MOVQ n+56(FP), CX
	TESTQ CX, CX
	JLE done

loop:
	VMOVUPS (SI), Y2              // prev[s-2]
	VMOVUPS 4(SI), Y1             // x1 = prev[s-1]
	VMOVUPS 8(SI), Y0             // x0 = prev[s]
	VADDPS (R8), Y2, Y2           // x2 = prev[s-2] + pen[s]
	VCMPPS $0x1e, Y1, Y2, Y3      // x2 > x1 (GT_OQ)
	VCMPPS $0x1e, Y0, Y2, Y4      // x2 > x0
	VANDPS Y4, Y3, Y3             // c2
	VCMPPS $0x1e, Y0, Y1, Y4      // x1 > x0
	VCMPPS $0x1e, Y2, Y1, Y5      // x1 > x2
	VANDPS Y5, Y4, Y4             // c1
	VBLENDVPS Y4, Y1, Y0, Y0      // r = c1 ? x1 : x0
	VBLENDVPS Y3, Y2, Y0, Y0      // r = c2 ? x2 : r
	VMOVDQU (R9), Y6              // lab[s]
	VPCMPEQD Y7, Y7, Y7           // gather mask: all lanes
	VGATHERDPS Y7, (R10)(Y6*4), Y8 // e[lab[s]]
	VADDPS Y8, Y0, Y0
	VMOVUPS Y0, (DI)
	VMOVMSKPS Y4, AX
	MOVB AX, (R11)
	VMOVMSKPS Y3, AX
	MOVB AX, (R12)
	ADDQ $32, SI
	ADDQ $32, R8
	ADDQ $32, R9
	ADDQ $32, DI
	INCQ R11
	INCQ R12
	DECQ CX
	JNZ loop
	VZEROUPPER

done:
	RET
