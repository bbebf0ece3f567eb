//go:build amd64 && !purego

#include "textflag.h"

// ACC(bcast, b0, b1, c0, c1) adds bcast·b0 to c0 and bcast·b1 to c1, each as a
// float32 product rounded then a sum rounded (VMULPS then VADDPS, no FMA), so
// that every element of C is the same chain of roundings as gonum's Sgemm and
// the pure-Go kernel compute.
#define ACC(bcast, c0, c1) \
	VMULPS Y12, bcast, Y15; \
	VADDPS Y15, c0, c0;     \
	VMULPS Y13, bcast, Y15; \
	VADDPS Y15, c1, c1

// ACCF is ACC with fused multiply-adds (one rounding), for comparison only.
#define ACCF(bcast, c0, c1) \
	VFMADD231PS Y12, bcast, c0; \
	VFMADD231PS Y13, bcast, c1

// func kernel6x16(kc int, a *float32, b *float32, c *float32, ldc int, load bool)
//
// C[0:6, 0:16] (row stride ldc floats) = (load ? C : 0) + A·B, where A is a
// packed 6×kc panel (a[p*6+r]) and B a packed kc×16 panel (b[p*16+j]), the sum
// taken in order p = 0, 1, …, kc−1.
TEXT ·kernel6x16(SB), NOSPLIT, $0-41
	MOVQ kc+0(FP), CX
	MOVQ a+8(FP), AX
	MOVQ b+16(FP), BX
	MOVQ c+24(FP), DI
	MOVQ ldc+32(FP), R8
	SHLQ $2, R8              // row stride in bytes
	LEAQ (R8)(R8*2), R9      // 3 rows
	LEAQ (DI)(R9*1), SI      // row 3
	MOVBLZX load+40(FP), DX
	TESTL DX, DX
	JZ   zero

	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS (DI)(R8*1), Y2
	VMOVUPS 32(DI)(R8*1), Y3
	VMOVUPS (DI)(R8*2), Y4
	VMOVUPS 32(DI)(R8*2), Y5
	VMOVUPS (SI), Y6
	VMOVUPS 32(SI), Y7
	VMOVUPS (SI)(R8*1), Y8
	VMOVUPS 32(SI)(R8*1), Y9
	VMOVUPS (SI)(R8*2), Y10
	VMOVUPS 32(SI)(R8*2), Y11
	JMP  check

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

check:
	TESTQ CX, CX
	JLE  store

loop:
	VMOVUPS (BX), Y12
	VMOVUPS 32(BX), Y13
	VBROADCASTSS (AX), Y14
	ACC(Y14, Y0, Y1)
	VBROADCASTSS 4(AX), Y14
	ACC(Y14, Y2, Y3)
	VBROADCASTSS 8(AX), Y14
	ACC(Y14, Y4, Y5)
	VBROADCASTSS 12(AX), Y14
	ACC(Y14, Y6, Y7)
	VBROADCASTSS 16(AX), Y14
	ACC(Y14, Y8, Y9)
	VBROADCASTSS 20(AX), Y14
	ACC(Y14, Y10, Y11)
	ADDQ $24, AX
	ADDQ $64, BX
	DECQ CX
	JNZ  loop

store:
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, (DI)(R8*1)
	VMOVUPS Y3, 32(DI)(R8*1)
	VMOVUPS Y4, (DI)(R8*2)
	VMOVUPS Y5, 32(DI)(R8*2)
	VMOVUPS Y6, (SI)
	VMOVUPS Y7, 32(SI)
	VMOVUPS Y8, (SI)(R8*1)
	VMOVUPS Y9, 32(SI)(R8*1)
	VMOVUPS Y10, (SI)(R8*2)
	VMOVUPS Y11, 32(SI)(R8*2)
	VZEROUPPER
	RET

// func kernel6x16fma(kc int, a *float32, b *float32, c *float32, ldc int, load bool)
//
// C[0:6, 0:16] (row stride ldc floats) = (load ? C : 0) + A·B, where A is a
// packed 6×kc panel (a[p*6+r]) and B a packed kc×16 panel (b[p*16+j]), the sum
// taken in order p = 0, 1, …, kc−1.
TEXT ·kernel6x16fma(SB), NOSPLIT, $0-41
	MOVQ kc+0(FP), CX
	MOVQ a+8(FP), AX
	MOVQ b+16(FP), BX
	MOVQ c+24(FP), DI
	MOVQ ldc+32(FP), R8
	SHLQ $2, R8              // row stride in bytes
	LEAQ (R8)(R8*2), R9      // 3 rows
	LEAQ (DI)(R9*1), SI      // row 3
	MOVBLZX load+40(FP), DX
	TESTL DX, DX
	JZ   zerof

	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS (DI)(R8*1), Y2
	VMOVUPS 32(DI)(R8*1), Y3
	VMOVUPS (DI)(R8*2), Y4
	VMOVUPS 32(DI)(R8*2), Y5
	VMOVUPS (SI), Y6
	VMOVUPS 32(SI), Y7
	VMOVUPS (SI)(R8*1), Y8
	VMOVUPS 32(SI)(R8*1), Y9
	VMOVUPS (SI)(R8*2), Y10
	VMOVUPS 32(SI)(R8*2), Y11
	JMP  checkf

zerof:
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

checkf:
	TESTQ CX, CX
	JLE  storef

loopf:
	VMOVUPS (BX), Y12
	VMOVUPS 32(BX), Y13
	VBROADCASTSS (AX), Y14
	ACCF(Y14, Y0, Y1)
	VBROADCASTSS 4(AX), Y14
	ACCF(Y14, Y2, Y3)
	VBROADCASTSS 8(AX), Y14
	ACCF(Y14, Y4, Y5)
	VBROADCASTSS 12(AX), Y14
	ACCF(Y14, Y6, Y7)
	VBROADCASTSS 16(AX), Y14
	ACCF(Y14, Y8, Y9)
	VBROADCASTSS 20(AX), Y14
	ACCF(Y14, Y10, Y11)
	ADDQ $24, AX
	ADDQ $64, BX
	DECQ CX
	JNZ  loopf

storef:
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, (DI)(R8*1)
	VMOVUPS Y3, 32(DI)(R8*1)
	VMOVUPS Y4, (DI)(R8*2)
	VMOVUPS Y5, 32(DI)(R8*2)
	VMOVUPS Y6, (SI)
	VMOVUPS Y7, 32(SI)
	VMOVUPS Y8, (SI)(R8*1)
	VMOVUPS Y9, 32(SI)(R8*1)
	VMOVUPS Y10, (SI)(R8*2)
	VMOVUPS Y11, 32(SI)(R8*2)
	VZEROUPPER
	RET
