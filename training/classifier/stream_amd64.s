//go:build amd64 && !purego

#include "textflag.h"

// Kernels of stream.go, eight auxiliary points per YMM register. Every
// float32 operation is the one the Go reference does, in the same order
// (VMULPS then VADDPS, never FMA), so the results are identical bit for
// bit; float64 sums go into lanes i mod 8 (Y8: lanes 0–3, Y9: 4–7).
//
// Registers shared by the macros: SI auxiliary block (feature 0), R8 the
// feature stride in bytes, DI z, CX d; Y15 |·| mask, Y14 c, Y13 1/b,
// Y12 the cut-off, Y0 the argument, Y7 the mask of arguments below the
// cut-off, Y1 the result, Y2–Y6 scratch.

// VEC8(name, bits) is a 32-byte constant: eight copies of a 32-bit value.
#define VEC8(name, bits) \
	DATA name<>+0(SB)/4, $bits;  \
	DATA name<>+4(SB)/4, $bits;  \
	DATA name<>+8(SB)/4, $bits;  \
	DATA name<>+12(SB)/4, $bits; \
	DATA name<>+16(SB)/4, $bits; \
	DATA name<>+20(SB)/4, $bits; \
	DATA name<>+24(SB)/4, $bits; \
	DATA name<>+28(SB)/4, $bits; \
	GLOBL name<>(SB), RODATA|NOPTR, $32

VEC8(abs, 0x7fffffff)
VEC8(log2e, 0x3fb8aa3b)
VEC8(magic, 0x4b400000)
VEC8(c1, 0x3f318000)
VEC8(c2, 0xb95e8083)
VEC8(p0, 0x3f000000)
VEC8(p1, 0x3e2aaaaa)
VEC8(p2, 0x3d2aa9c1)
VEC8(p3, 0x3c088908)
VEC8(p4, 0x3ab743ce)
VEC8(p5, 0x39506967)
VEC8(one, 0x3f800000)
VEC8(i127, 0x7f)
VEC8(probcut, 0xc2798872)
VEC8(expmin, 0xc2aeac4f)
VEC8(inf, 0x7f800000)

// DIST: Y0 = ‖z − ẑ‖₁ for the eight points at SI, features summed in
// order (labels are per function, and each function expands DIST once).
#define DIST \
	VBROADCASTSS (DI), Y1;     \
	VSUBPS       (SI), Y1, Y0; \
	VANDPS       Y15, Y0, Y0;  \
	MOVQ         SI, R9;       \
	MOVQ         DI, R10;      \
	MOVQ         CX, R11;      \
	DECQ         R11;          \
	JZ           featdone;     \
feat:                          \
	ADDQ         R8, R9;       \
	ADDQ         $4, R10;      \
	VBROADCASTSS (R10), Y1;    \
	VSUBPS       (R9), Y1, Y1; \
	VANDPS       Y15, Y1, Y1;  \
	VADDPS       Y1, Y0, Y0;   \
	DECQ         R11;          \
	JNZ          feat;         \
featdone:

// ARG: Y0 = (c − Y0)·(1/b).
#define ARG \
	VSUBPS Y0, Y14, Y0; \
	VMULPS Y13, Y0, Y0

// FEXP: Y1 = fexp(Y0) with the lanes set in Y7 cleared.
#define FEXP \
	VMULPS     log2e<>(SB), Y0, Y1; \
	VADDPS     magic<>(SB), Y1, Y1; \
	VSUBPS     magic<>(SB), Y1, Y1; \
	VMULPS     c1<>(SB), Y1, Y2;    \
	VSUBPS     Y2, Y0, Y2;          \
	VMULPS     c2<>(SB), Y1, Y3;    \
	VSUBPS     Y3, Y2, Y2;          \
	VMULPS     Y2, Y2, Y3;          \
	VMULPS     p1<>(SB), Y2, Y4;    \
	VADDPS     p0<>(SB), Y4, Y4;    \
	VMULPS     p3<>(SB), Y2, Y5;    \
	VADDPS     p2<>(SB), Y5, Y5;    \
	VMULPS     p5<>(SB), Y2, Y6;    \
	VADDPS     p4<>(SB), Y6, Y6;    \
	VMULPS     Y3, Y6, Y6;          \
	VADDPS     Y6, Y5, Y5;          \
	VMULPS     Y3, Y5, Y5;          \
	VADDPS     Y5, Y4, Y4;          \
	VMULPS     Y3, Y4, Y4;          \
	VADDPS     Y2, Y4, Y4;          \
	VADDPS     one<>(SB), Y4, Y4;   \
	VCVTTPS2DQ Y1, Y1;              \
	VPADDD     i127<>(SB), Y1, Y1;  \
	VPSLLD     $23, Y1, Y1;         \
	VMULPS     Y1, Y4, Y1;          \
	VANDNPS    Y1, Y7, Y1

// PROB_E: Y1 = E for the eight points at SI (0 where the argument is
// below probCut, in Y12).
#define PROB_E \
	DIST; \
	ARG;  \
	VCMPPS $1, Y12, Y0, Y7; \
	FEXP

// LOG_E: Y1 = e for the eight points at SI, with A at BX and the shift in
// Y11 (0 where the argument is below expMin, in Y12).
#define LOG_E \
	DIST; \
	ARG;  \
	VADDPS (BX), Y0, Y0; \
	VSUBPS Y11, Y0, Y0;  \
	VCMPPS $1, Y12, Y0, Y7; \
	FEXP

// WIDEN: Y2, Y3 = Y1's low and high four values as float64.
#define WIDEN \
	VCVTPS2PD    X1, Y2;     \
	VEXTRACTF128 $1, Y1, X3; \
	VCVTPS2PD    X3, Y3

// AXPY(h): h[0:8] += Y10·Y1 (product rounded, then the sum).
#define AXPY(h) \
	VMULPS  Y10, Y1, Y1; \
	VADDPS  (h), Y1, Y1; \
	VMOVUPS Y1, (h)

// LOAD_ACC and STORE_ACC move the eight lanes at AX to and from Y8, Y9.
#define LOAD_ACC \
	VMOVUPD (AX), Y8; \
	VMOVUPD 32(AX), Y9

#define STORE_ACC \
	VMOVUPD Y8, (AX); \
	VMOVUPD Y9, 32(AX)

// SETUP loads the arguments common to all four kernels.
#define SETUP \
	MOVQ         aux+0(FP), SI;    \
	MOVQ         stride+8(FP), R8; \
	SHLQ         $2, R8;           \
	MOVQ         z+16(FP), DI;     \
	MOVQ         d+24(FP), CX;     \
	VMOVUPS      abs<>(SB), Y15;   \
	VBROADCASTSS c+32(FP), Y14;    \
	VBROADCASTSS invb+36(FP), Y13

// func probSumAVX2(aux *float32, stride int, z *float32, d int, c, invb float32, q *float32, n int, acc *[8]float64)
TEXT ·probSumAVX2(SB), NOSPLIT, $0-64
	SETUP
	MOVQ    q+40(FP), BX
	MOVQ    n+48(FP), DX
	MOVQ    acc+56(FP), AX
	VMOVUPS probcut<>(SB), Y12
	LOAD_ACC
	SHRQ    $3, DX
	JZ      psdone
psloop:
	PROB_E
	WIDEN
	VCVTPS2PD    (BX), Y4
	VCVTPS2PD    16(BX), Y5
	VMULPD       Y4, Y2, Y2
	VADDPD       Y2, Y8, Y8
	VMULPD       Y5, Y3, Y3
	VADDPD       Y3, Y9, Y9
	ADDQ         $32, SI
	ADDQ         $32, BX
	DECQ         DX
	JNZ          psloop
psdone:
	STORE_ACC
	VZEROUPPER
	RET

// func probAxpyAVX2(aux *float32, stride int, z *float32, d int, c, invb, f float32, h *float32, n int)
TEXT ·probAxpyAVX2(SB), NOSPLIT, $0-64
	SETUP
	VBROADCASTSS f+40(FP), Y10
	MOVQ         h+48(FP), BX
	MOVQ         n+56(FP), DX
	VMOVUPS      probcut<>(SB), Y12
	SHRQ         $3, DX
	JZ           padone
paloop:
	PROB_E
	AXPY(BX)
	ADDQ    $32, SI
	ADDQ    $32, BX
	DECQ    DX
	JNZ     paloop
padone:
	VZEROUPPER
	RET

// func logSumAVX2(aux *float32, stride int, z *float32, d int, c, invb float32, a *float32, shift float32, n int, acc *[8]float64)
TEXT ·logSumAVX2(SB), NOSPLIT, $0-72
	SETUP
	MOVQ         a+40(FP), BX
	VBROADCASTSS shift+48(FP), Y11
	MOVQ         n+56(FP), DX
	MOVQ         acc+64(FP), AX
	VMOVUPS      expmin<>(SB), Y12
	LOAD_ACC
	SHRQ         $3, DX
	JZ           lsdone
lsloop:
	LOG_E
	WIDEN
	VADDPD       Y2, Y8, Y8
	VADDPD       Y3, Y9, Y9
	ADDQ         $32, SI
	ADDQ         $32, BX
	DECQ         DX
	JNZ          lsloop
lsdone:
	STORE_ACC
	VZEROUPPER
	RET

// func logAxpyAVX2(aux *float32, stride int, z *float32, d int, c, invb float32, a *float32, shift, f float32, h *float32, n int)
TEXT ·logAxpyAVX2(SB), NOSPLIT, $0-72
	SETUP
	MOVQ         a+40(FP), BX
	VBROADCASTSS shift+48(FP), Y11
	VBROADCASTSS f+52(FP), Y10
	MOVQ         h+56(FP), AX
	MOVQ         n+64(FP), DX
	VMOVUPS      expmin<>(SB), Y12
	SHRQ         $3, DX
	JZ           ladone
laloop:
	LOG_E
	AXPY(AX)
	ADDQ    $32, SI
	ADDQ    $32, BX
	ADDQ    $32, AX
	DECQ    DX
	JNZ     laloop
ladone:
	VZEROUPPER
	RET

// func dot8AVX2(x, y *float32, n int, acc *[8]float64)
TEXT ·dot8AVX2(SB), NOSPLIT, $0-32
	MOVQ    x+0(FP), SI
	MOVQ    y+8(FP), DI
	MOVQ    n+16(FP), DX
	MOVQ    acc+24(FP), AX
	LOAD_ACC
	SHRQ    $3, DX
	JZ      ddone
dloop:
	VCVTPS2PD (SI), Y2
	VCVTPS2PD 16(SI), Y3
	VCVTPS2PD (DI), Y4
	VCVTPS2PD 16(DI), Y5
	VMULPD    Y4, Y2, Y2
	VADDPD    Y2, Y8, Y8
	VMULPD    Y5, Y3, Y3
	VADDPD    Y3, Y9, Y9
	ADDQ      $32, SI
	ADDQ      $32, DI
	DECQ      DX
	JNZ       dloop
ddone:
	STORE_ACC
	VZEROUPPER
	RET

// func distMinAVX2(aux *float32, stride int, z *float32, d int, dst *float32, n int) float32
TEXT ·distMinAVX2(SB), NOSPLIT, $0-52
	MOVQ         aux+0(FP), SI
	MOVQ         stride+8(FP), R8
	SHLQ         $2, R8
	MOVQ         z+16(FP), DI
	MOVQ         d+24(FP), CX
	MOVQ         dst+32(FP), BX
	MOVQ         n+40(FP), DX
	VMOVUPS      abs<>(SB), Y15
	VMOVUPS      inf<>(SB), Y9
	SHRQ         $3, DX
	JZ           dmdone
dmloop:
	DIST
	VMOVUPS      Y0, (BX)
	VMINPS       Y0, Y9, Y9
	ADDQ         $32, SI
	ADDQ         $32, BX
	DECQ         DX
	JNZ          dmloop
dmdone:
	VEXTRACTF128 $1, Y9, X1
	VMINPS       X1, X9, X9
	VMOVHLPS     X9, X9, X1
	VMINPS       X1, X9, X9
	VPSHUFD      $1, X9, X1
	VMINSS       X1, X9, X9
	VMOVSS       X9, ret+48(FP)
	VZEROUPPER
	RET

// func logTableAVX2(w, a *float32, shift float32, dst *float32, n int, acc *[8]float64)
TEXT ·logTableAVX2(SB), NOSPLIT, $0-48
	MOVQ         w+0(FP), SI
	MOVQ         a+8(FP), BX
	VBROADCASTSS shift+16(FP), Y11
	MOVQ         dst+24(FP), DI
	MOVQ         n+32(FP), DX
	MOVQ         acc+40(FP), AX
	VMOVUPS      expmin<>(SB), Y12
	LOAD_ACC
	SHRQ         $3, DX
	JZ           ltdone
ltloop:
	VMOVUPS      (SI), Y0
	VADDPS       (BX), Y0, Y0
	VSUBPS       Y11, Y0, Y0
	VCMPPS       $1, Y12, Y0, Y7
	FEXP
	VMOVUPS      Y1, (DI)
	WIDEN
	VADDPD       Y2, Y8, Y8
	VADDPD       Y3, Y9, Y9
	ADDQ         $32, SI
	ADDQ         $32, BX
	ADDQ         $32, DI
	DECQ         DX
	JNZ          ltloop
ltdone:
	STORE_ACC
	VZEROUPPER
	RET
