//go:build amd64 && !purego

#include "textflag.h"

// ACC(bcast, c0, c1) adds bcast·Y12 to c0 and bcast·Y13 to c1, each as a float32 product rounded
// then a sum rounded (VMULPS then VADDPS, no FMA), so that every element of C is the same chain
// of roundings as gonum's Sgemm and the pure-Go kernel compute.
#define ACC(bcast, c0, c1) \
	VMULPS Y12, bcast, Y15; \
	VADDPS Y15, c0, c0;     \
	VMULPS Y13, bcast, Y15; \
	VADDPS Y15, c1, c1

// func kernel6x16(kc int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, load bool)
//
// C[0:6, 0:16] (row stride ldc) = (load ? C : 0) + A·B for A 6 × kc (row stride lda) and B
// kc × 16 (row stride ldb), the sum taken in order p = 0, 1, …, kc−1 (kc ≥ 1).
TEXT ·kernel6x16(SB), NOSPLIT, $0-57
	MOVQ kc+0(FP), CX
	MOVQ a+8(FP), AX
	MOVQ lda+16(FP), R11
	MOVQ b+24(FP), BX
	MOVQ ldb+32(FP), R10
	MOVQ c+40(FP), DI
	MOVQ ldc+48(FP), R8
	SHLQ $2, R11             // strides in bytes
	SHLQ $2, R10
	SHLQ $2, R8
	LEAQ (R11)(R11*2), R9
	LEAQ (AX)(R9*1), SI      // A's row 3
	LEAQ (R8)(R8*2), R9
	LEAQ (DI)(R9*1), DX      // C's row 3
	MOVBLZX load+56(FP), R12
	TESTL R12, R12
	JZ   zero

	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS (DI)(R8*1), Y2
	VMOVUPS 32(DI)(R8*1), Y3
	VMOVUPS (DI)(R8*2), Y4
	VMOVUPS 32(DI)(R8*2), Y5
	VMOVUPS (DX), Y6
	VMOVUPS 32(DX), Y7
	VMOVUPS (DX)(R8*1), Y8
	VMOVUPS 32(DX)(R8*1), Y9
	VMOVUPS (DX)(R8*2), Y10
	VMOVUPS 32(DX)(R8*2), Y11
	JMP  loop

zero:
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
	VMOVUPS (BX), Y12
	VMOVUPS 32(BX), Y13
	VBROADCASTSS (AX), Y14
	ACC(Y14, Y0, Y1)
	VBROADCASTSS (AX)(R11*1), Y14
	ACC(Y14, Y2, Y3)
	VBROADCASTSS (AX)(R11*2), Y14
	ACC(Y14, Y4, Y5)
	VBROADCASTSS (SI), Y14
	ACC(Y14, Y6, Y7)
	VBROADCASTSS (SI)(R11*1), Y14
	ACC(Y14, Y8, Y9)
	VBROADCASTSS (SI)(R11*2), Y14
	ACC(Y14, Y10, Y11)
	ADDQ $4, AX
	ADDQ $4, SI
	ADDQ R10, BX
	DECQ CX
	JNZ  loop

	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, (DI)(R8*1)
	VMOVUPS Y3, 32(DI)(R8*1)
	VMOVUPS Y4, (DI)(R8*2)
	VMOVUPS Y5, 32(DI)(R8*2)
	VMOVUPS Y6, (DX)
	VMOVUPS Y7, 32(DX)
	VMOVUPS Y8, (DX)(R8*1)
	VMOVUPS Y9, 32(DX)(R8*1)
	VMOVUPS Y10, (DX)(R8*2)
	VMOVUPS Y11, 32(DX)(R8*2)
	VZEROUPPER
	RET
