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

DATA abs<>+0(SB)/4, $0x7fffffff
DATA abs<>+4(SB)/4, $0x7fffffff
DATA abs<>+8(SB)/4, $0x7fffffff
DATA abs<>+12(SB)/4, $0x7fffffff
DATA abs<>+16(SB)/4, $0x7fffffff
DATA abs<>+20(SB)/4, $0x7fffffff
DATA abs<>+24(SB)/4, $0x7fffffff
DATA abs<>+28(SB)/4, $0x7fffffff
GLOBL abs<>(SB), RODATA|NOPTR, $32

DATA log2e<>+0(SB)/4, $0x3fb8aa3b
DATA log2e<>+4(SB)/4, $0x3fb8aa3b
DATA log2e<>+8(SB)/4, $0x3fb8aa3b
DATA log2e<>+12(SB)/4, $0x3fb8aa3b
DATA log2e<>+16(SB)/4, $0x3fb8aa3b
DATA log2e<>+20(SB)/4, $0x3fb8aa3b
DATA log2e<>+24(SB)/4, $0x3fb8aa3b
DATA log2e<>+28(SB)/4, $0x3fb8aa3b
GLOBL log2e<>(SB), RODATA|NOPTR, $32

DATA magic<>+0(SB)/4, $0x4b400000
DATA magic<>+4(SB)/4, $0x4b400000
DATA magic<>+8(SB)/4, $0x4b400000
DATA magic<>+12(SB)/4, $0x4b400000
DATA magic<>+16(SB)/4, $0x4b400000
DATA magic<>+20(SB)/4, $0x4b400000
DATA magic<>+24(SB)/4, $0x4b400000
DATA magic<>+28(SB)/4, $0x4b400000
GLOBL magic<>(SB), RODATA|NOPTR, $32

DATA c1<>+0(SB)/4, $0x3f318000
DATA c1<>+4(SB)/4, $0x3f318000
DATA c1<>+8(SB)/4, $0x3f318000
DATA c1<>+12(SB)/4, $0x3f318000
DATA c1<>+16(SB)/4, $0x3f318000
DATA c1<>+20(SB)/4, $0x3f318000
DATA c1<>+24(SB)/4, $0x3f318000
DATA c1<>+28(SB)/4, $0x3f318000
GLOBL c1<>(SB), RODATA|NOPTR, $32

DATA c2<>+0(SB)/4, $0xb95e8083
DATA c2<>+4(SB)/4, $0xb95e8083
DATA c2<>+8(SB)/4, $0xb95e8083
DATA c2<>+12(SB)/4, $0xb95e8083
DATA c2<>+16(SB)/4, $0xb95e8083
DATA c2<>+20(SB)/4, $0xb95e8083
DATA c2<>+24(SB)/4, $0xb95e8083
DATA c2<>+28(SB)/4, $0xb95e8083
GLOBL c2<>(SB), RODATA|NOPTR, $32

DATA p0<>+0(SB)/4, $0x3f000000
DATA p0<>+4(SB)/4, $0x3f000000
DATA p0<>+8(SB)/4, $0x3f000000
DATA p0<>+12(SB)/4, $0x3f000000
DATA p0<>+16(SB)/4, $0x3f000000
DATA p0<>+20(SB)/4, $0x3f000000
DATA p0<>+24(SB)/4, $0x3f000000
DATA p0<>+28(SB)/4, $0x3f000000
GLOBL p0<>(SB), RODATA|NOPTR, $32

DATA p1<>+0(SB)/4, $0x3e2aaaaa
DATA p1<>+4(SB)/4, $0x3e2aaaaa
DATA p1<>+8(SB)/4, $0x3e2aaaaa
DATA p1<>+12(SB)/4, $0x3e2aaaaa
DATA p1<>+16(SB)/4, $0x3e2aaaaa
DATA p1<>+20(SB)/4, $0x3e2aaaaa
DATA p1<>+24(SB)/4, $0x3e2aaaaa
DATA p1<>+28(SB)/4, $0x3e2aaaaa
GLOBL p1<>(SB), RODATA|NOPTR, $32

DATA p2<>+0(SB)/4, $0x3d2aa9c1
DATA p2<>+4(SB)/4, $0x3d2aa9c1
DATA p2<>+8(SB)/4, $0x3d2aa9c1
DATA p2<>+12(SB)/4, $0x3d2aa9c1
DATA p2<>+16(SB)/4, $0x3d2aa9c1
DATA p2<>+20(SB)/4, $0x3d2aa9c1
DATA p2<>+24(SB)/4, $0x3d2aa9c1
DATA p2<>+28(SB)/4, $0x3d2aa9c1
GLOBL p2<>(SB), RODATA|NOPTR, $32

DATA p3<>+0(SB)/4, $0x3c088908
DATA p3<>+4(SB)/4, $0x3c088908
DATA p3<>+8(SB)/4, $0x3c088908
DATA p3<>+12(SB)/4, $0x3c088908
DATA p3<>+16(SB)/4, $0x3c088908
DATA p3<>+20(SB)/4, $0x3c088908
DATA p3<>+24(SB)/4, $0x3c088908
DATA p3<>+28(SB)/4, $0x3c088908
GLOBL p3<>(SB), RODATA|NOPTR, $32

DATA p4<>+0(SB)/4, $0x3ab743ce
DATA p4<>+4(SB)/4, $0x3ab743ce
DATA p4<>+8(SB)/4, $0x3ab743ce
DATA p4<>+12(SB)/4, $0x3ab743ce
DATA p4<>+16(SB)/4, $0x3ab743ce
DATA p4<>+20(SB)/4, $0x3ab743ce
DATA p4<>+24(SB)/4, $0x3ab743ce
DATA p4<>+28(SB)/4, $0x3ab743ce
GLOBL p4<>(SB), RODATA|NOPTR, $32

DATA p5<>+0(SB)/4, $0x39506967
DATA p5<>+4(SB)/4, $0x39506967
DATA p5<>+8(SB)/4, $0x39506967
DATA p5<>+12(SB)/4, $0x39506967
DATA p5<>+16(SB)/4, $0x39506967
DATA p5<>+20(SB)/4, $0x39506967
DATA p5<>+24(SB)/4, $0x39506967
DATA p5<>+28(SB)/4, $0x39506967
GLOBL p5<>(SB), RODATA|NOPTR, $32

DATA one<>+0(SB)/4, $0x3f800000
DATA one<>+4(SB)/4, $0x3f800000
DATA one<>+8(SB)/4, $0x3f800000
DATA one<>+12(SB)/4, $0x3f800000
DATA one<>+16(SB)/4, $0x3f800000
DATA one<>+20(SB)/4, $0x3f800000
DATA one<>+24(SB)/4, $0x3f800000
DATA one<>+28(SB)/4, $0x3f800000
GLOBL one<>(SB), RODATA|NOPTR, $32

DATA i127<>+0(SB)/4, $0x7f
DATA i127<>+4(SB)/4, $0x7f
DATA i127<>+8(SB)/4, $0x7f
DATA i127<>+12(SB)/4, $0x7f
DATA i127<>+16(SB)/4, $0x7f
DATA i127<>+20(SB)/4, $0x7f
DATA i127<>+24(SB)/4, $0x7f
DATA i127<>+28(SB)/4, $0x7f
GLOBL i127<>(SB), RODATA|NOPTR, $32

DATA probcut<>+0(SB)/4, $0xc2798872
DATA probcut<>+4(SB)/4, $0xc2798872
DATA probcut<>+8(SB)/4, $0xc2798872
DATA probcut<>+12(SB)/4, $0xc2798872
DATA probcut<>+16(SB)/4, $0xc2798872
DATA probcut<>+20(SB)/4, $0xc2798872
DATA probcut<>+24(SB)/4, $0xc2798872
DATA probcut<>+28(SB)/4, $0xc2798872
GLOBL probcut<>(SB), RODATA|NOPTR, $32

DATA expmin<>+0(SB)/4, $0xc2aeac4f
DATA expmin<>+4(SB)/4, $0xc2aeac4f
DATA expmin<>+8(SB)/4, $0xc2aeac4f
DATA expmin<>+12(SB)/4, $0xc2aeac4f
DATA expmin<>+16(SB)/4, $0xc2aeac4f
DATA expmin<>+20(SB)/4, $0xc2aeac4f
DATA expmin<>+24(SB)/4, $0xc2aeac4f
DATA expmin<>+28(SB)/4, $0xc2aeac4f
GLOBL expmin<>(SB), RODATA|NOPTR, $32


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
	VMOVUPD (AX), Y8
	VMOVUPD 32(AX), Y9
	SHRQ    $3, DX
	JZ      psdone
psloop:
	DIST
	ARG
	VCMPPS       $1, Y12, Y0, Y7
	FEXP
	VCVTPS2PD    X1, Y2
	VEXTRACTF128 $1, Y1, X3
	VCVTPS2PD    X3, Y3
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
	VMOVUPD Y8, (AX)
	VMOVUPD Y9, 32(AX)
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
	DIST
	ARG
	VCMPPS  $1, Y12, Y0, Y7
	FEXP
	VMULPS  Y10, Y1, Y1
	VADDPS  (BX), Y1, Y1
	VMOVUPS Y1, (BX)
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
	VMOVUPD      (AX), Y8
	VMOVUPD      32(AX), Y9
	SHRQ         $3, DX
	JZ           lsdone
lsloop:
	DIST
	ARG
	VADDPS       (BX), Y0, Y0
	VSUBPS       Y11, Y0, Y0
	VCMPPS       $1, Y12, Y0, Y7
	FEXP
	VCVTPS2PD    X1, Y2
	VEXTRACTF128 $1, Y1, X3
	VCVTPS2PD    X3, Y3
	VADDPD       Y2, Y8, Y8
	VADDPD       Y3, Y9, Y9
	ADDQ         $32, SI
	ADDQ         $32, BX
	DECQ         DX
	JNZ          lsloop
lsdone:
	VMOVUPD Y8, (AX)
	VMOVUPD Y9, 32(AX)
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
	DIST
	ARG
	VADDPS  (BX), Y0, Y0
	VSUBPS  Y11, Y0, Y0
	VCMPPS  $1, Y12, Y0, Y7
	FEXP
	VMULPS  Y10, Y1, Y1
	VADDPS  (AX), Y1, Y1
	VMOVUPS Y1, (AX)
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
	VMOVUPD (AX), Y8
	VMOVUPD 32(AX), Y9
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
	VMOVUPD Y8, (AX)
	VMOVUPD Y9, 32(AX)
	VZEROUPPER
	RET
