//go:build !purego

#include "textflag.h"

// func copyCastagnoliSSE42(crc uint32, dst, src []byte) uint32
//
// Copies src into dst (at least as long) and updates crc, a CRC-32C
// register (not inverted), over the bytes: each 8-byte word is loaded
// once, stored and hashed, so that the copy costs nothing beside the
// CRC32 instructions, 4 words a step.
TEXT ·copyCastagnoliSSE42(SB), NOSPLIT, $0-60
	MOVL crc+0(FP), AX
	MOVQ dst_base+8(FP), DI
	MOVQ src_base+32(FP), SI
	MOVQ src_len+40(FP), CX
	CMPQ CX, $32
	JB   words

loop32:
	MOVQ   0(SI), R8
	MOVQ   8(SI), R9
	MOVQ   16(SI), R10
	MOVQ   24(SI), R11
	MOVQ   R8, 0(DI)
	MOVQ   R9, 8(DI)
	MOVQ   R10, 16(DI)
	MOVQ   R11, 24(DI)
	CRC32Q R8, AX
	CRC32Q R9, AX
	CRC32Q R10, AX
	CRC32Q R11, AX
	ADDQ   $32, SI
	ADDQ   $32, DI
	SUBQ   $32, CX
	CMPQ   CX, $32
	JAE    loop32

words:
	CMPQ   CX, $8
	JB     less8
	MOVQ   (SI), R8
	MOVQ   R8, (DI)
	CRC32Q R8, AX
	ADDQ   $8, SI
	ADDQ   $8, DI
	SUBQ   $8, CX
	JMP    words

less8:
	CMPQ   CX, $4
	JB     less4
	MOVL   (SI), R8
	MOVL   R8, (DI)
	CRC32L R8, AX
	ADDQ   $4, SI
	ADDQ   $4, DI
	SUBQ   $4, CX

less4:
	CMPQ   CX, $2
	JB     less2
	MOVW   (SI), R8
	MOVW   R8, (DI)
	CRC32W R8, AX
	ADDQ   $2, SI
	ADDQ   $2, DI
	SUBQ   $2, CX

less2:
	TESTQ  CX, CX
	JZ     done
	MOVB   (SI), R8
	MOVB   R8, (DI)
	CRC32B R8, AX

done:
	MOVL AX, ret+56(FP)
	RET
