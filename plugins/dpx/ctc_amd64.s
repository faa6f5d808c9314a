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

// func ctcStepI32AVX2(prev, mask, lab, e, cur *int32, plane1, plane2 *byte, n int, m int32) int32
TEXT ·ctcStepI32AVX2(SB), NOSPLIT, $0-76
	MOVQ prev+0(FP), SI
	MOVQ mask+8(FP), R8
	MOVQ lab+16(FP), R9
	MOVQ e+24(FP), R10
	MOVQ cur+32(FP), DI
	MOVQ plane1+40(FP), R11
	MOVQ plane2+48(FP), R12
	MOVQ n+56(FP), CX
	MOVL m+64(FP), AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14         // m
	MOVL $0xE0000000, AX          // ctcNeg = -(1<<29)
	VMOVD AX, X10
	VPBROADCASTD X10, Y10
	MOVL $0xF0000000, AX          // ctcFloor = -(1<<28)
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	VMOVDQU Y10, Y9               // running max, from ctcNeg
	VMOVDQU Y10, Y11
	TESTQ CX, CX
	JLE idone

iloop:
	VMOVDQU (SI), Y2              // prev[s-2]
	VMOVDQU 4(SI), Y1             // x1 = prev[s-1]
	VMOVDQU 8(SI), Y0             // x0 = prev[s]
	VMOVDQU (R8), Y5              // skip mask
	VPAND Y5, Y2, Y2
	VPANDN Y10, Y5, Y5            // ~mask & neg
	VPOR Y5, Y2, Y2               // x2
	VPCMPGTD Y1, Y2, Y3           // x2 > x1
	VPCMPGTD Y0, Y2, Y4           // x2 > x0
	VPAND Y4, Y3, Y3              // c2
	VPCMPGTD Y0, Y1, Y4           // x1 > x0
	VPCMPGTD Y2, Y1, Y5           // x1 > x2
	VPAND Y5, Y4, Y4              // c1
	VPBLENDVB Y4, Y1, Y0, Y0      // r = c1 ? x1 : x0
	VPBLENDVB Y3, Y2, Y0, Y0      // r = c2 ? x2 : r
	VMOVDQU (R9), Y6              // lab[s]
	VPCMPEQD Y7, Y7, Y7
	VPGATHERDD Y7, (R10)(Y6*4), Y8 // e[lab[s]]
	VPSUBD Y14, Y0, Y12           // r - m
	VPADDD Y8, Y12, Y12           // + e
	VPMAXSD Y15, Y12, Y12         // saturate at the floor
	VPCMPEQD Y10, Y0, Y13         // r unreachable?
	VPBLENDVB Y13, Y10, Y12, Y12  // stays unreachable
	VMOVDQU Y12, (DI)
	VPMAXSD Y12, Y9, Y9
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
	JNZ iloop

idone:
	VEXTRACTI128 $1, Y9, X11      // horizontal max of the 8 lanes
	VPMAXSD X11, X9, X9
	VPSHUFD $0x4e, X9, X11
	VPMAXSD X11, X9, X9
	VPSHUFD $0xb1, X9, X11
	VPMAXSD X11, X9, X9
	VMOVD X9, AX
	MOVL AX, ret+72(FP)
	VZEROUPPER
	RET
