//go:build !purego

#include "go_asm.h"
#include "textflag.h"

// func copySum(s *Summer, index uint64, dst, src []byte) uint32
//
// Summer.CopySum's common case, whole: for an index in the 256 s has its
// register for, a dst at least as long as src and a CPU with SSE4.2, it
// copies src into dst and returns the checksum, computed in the same pass
// (32 bytes a step are copied with two 16-byte moves and hashed with four
// CRC32 instructions reading the same, just loaded, cache line; then 8,
// 4, 2 and 1 bytes a step; src of threeFrom bytes up to bulkSize as three
// streams, see below), for src shorter than bulkSize or of fusedFrom
// bytes or more. Anything else goes to copySumSlow, with the same
// arguments.
TEXT ·copySum(SB), NOSPLIT, $0-68
	CMPB ·haveSSE42(SB), $0
	JEQ  slow
	MOVQ s+0(FP), R11
	MOVQ index+8(FP), BX
	MOVQ src_len+48(FP), CX
	CMPQ dst_len+24(FP), CX
	JLT  slow
	CMPQ CX, $const_bulkSize
	JB   fused
	CMPQ CX, $const_fusedFrom
	JB   slow
fused:
	MOVQ BX, R8
	SHRQ $8, R8
	CMPQ R8, Summer_high(R11)
	JNE  slow
	MOVBQZX BL, BX
	MOVL Summer_reg(R11), AX
	XORL Summer_low(R11)(BX*4), AX
	MOVQ dst_base+16(FP), DI
	MOVQ src_base+40(FP), SI
	CMPQ CX, $const_threeFrom
	JB   one
	CMPQ CX, $const_bulkSize
	JAE  one
	CMPB ·haveCLMUL(SB), $0
	JNE  three

one:
	SUBQ $32, CX
	JB   short

loop32:
	MOVOU  0(SI), X0
	MOVOU  16(SI), X1
	MOVOU  X0, 0(DI)
	MOVOU  X1, 16(DI)
	CRC32Q 0(SI), AX
	CRC32Q 8(SI), AX
	CRC32Q 16(SI), AX
	CRC32Q 24(SI), AX
	ADDQ   $32, SI
	ADDQ   $32, DI
	SUBQ   $32, CX
	JAE    loop32

short:
	ADDQ $32, CX

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
	NOTL AX
	MOVL AX, ret+64(FP)
	RET

slow:
	JMP ·copySumSlow(SB)

// Three streams (src of threeFrom bytes up to bulkSize, with PCLMULQDQ):
// the first 3m bytes, m = 8*(n/24), are hashed as three runs of m bytes,
// each its own chain of CRC32 instructions, 8 bytes a step, copied as
// they are read (the chains overlap, where one chain over all of them
// waits out each instruction's latency): the first from the key's
// register, the other two from 0. The first two registers are then moved
// past the bytes that follow them by a carry-less multiplication with
// crcShift's constants and folded into the third run's last word (CRC is
// linear: the CRC32 instruction over w^t from c is its value over w from
// c xor its value over t from 0), and the rest (under 24 bytes) goes
// through the one-stream steps.
three:
	MOVQ CX, R11
	SHRQ $3, R11
	IMULQ $43691, R11
	SHRQ $17, R11             // (n/8)/3 = n/24, exact for n < 2^20
	SHLQ $3, R11              // m
	MOVQ R11, R12
	SHRQ $3, R12
	DECQ R12                  // m/8 - 1 steps before the last words
	XORL BX, BX
	XORL DX, DX

tloop:
	MOVQ   (SI), R8
	MOVQ   (SI)(R11*1), R9
	MOVQ   (SI)(R11*2), R10
	MOVQ   R8, (DI)
	MOVQ   R9, (DI)(R11*1)
	MOVQ   R10, (DI)(R11*2)
	CRC32Q R8, AX
	CRC32Q R9, BX
	CRC32Q R10, DX
	ADDQ   $8, SI
	ADDQ   $8, DI
	DECQ   R12
	JNZ    tloop

	MOVQ      (SI), R8
	MOVQ      (SI)(R11*1), R9
	MOVQ      (SI)(R11*2), R10
	MOVQ      R8, (DI)
	MOVQ      R9, (DI)(R11*1)
	MOVQ      R10, (DI)(R11*2)
	CRC32Q    R8, AX
	CRC32Q    R9, BX
	LEAQ      ·crcShift(SB), R13
	MOVQ      (R13)(R11*2), X2     // crcShift[2m/8]: past 2m bytes
	MOVQ      (R13)(R11*1), X3     // crcShift[m/8]: past m bytes
	MOVQ      AX, X0
	MOVQ      BX, X1
	PCLMULQDQ $0x00, X2, X0
	PCLMULQDQ $0x00, X3, X1
	PXOR      X1, X0
	MOVQ      X0, R8
	XORQ      R10, R8
	CRC32Q    R8, DX
	MOVL      DX, AX
	LEAQ      8(SI)(R11*2), SI
	LEAQ      8(DI)(R11*2), DI
	LEAQ      (R11)(R11*2), R11
	SUBQ      R11, CX
	JMP       words

// func update(crc uint32, p []byte) uint32
//
// Updates crc, a CRC-32C register (not inverted), over p with the CRC32
// instruction, 32 bytes a step, then 8, 4, 2 and 1: for the short keys
// and records of Checksum, without crc32.Update's dispatch. Without
// SSE4.2 it goes to updateSlow, with the same arguments.
TEXT ·update(SB), NOSPLIT, $0-36
	CMPB ·haveSSE42(SB), $0
	JEQ  uslow
	MOVL crc+0(FP), AX
	MOVQ p_base+8(FP), SI
	MOVQ p_len+16(FP), CX
	SUBQ $32, CX
	JB   ushort

uloop32:
	CRC32Q 0(SI), AX
	CRC32Q 8(SI), AX
	CRC32Q 16(SI), AX
	CRC32Q 24(SI), AX
	ADDQ   $32, SI
	SUBQ   $32, CX
	JAE    uloop32

ushort:
	ADDQ $32, CX

uwords:
	CMPQ   CX, $8
	JB     uless8
	CRC32Q (SI), AX
	ADDQ   $8, SI
	SUBQ   $8, CX
	JMP    uwords

uless8:
	CMPQ   CX, $4
	JB     uless4
	CRC32L (SI), AX
	ADDQ   $4, SI
	SUBQ   $4, CX

uless4:
	CMPQ   CX, $2
	JB     uless2
	CRC32W (SI), AX
	ADDQ   $2, SI
	SUBQ   $2, CX

uless2:
	TESTQ  CX, CX
	JZ     udone
	CRC32B (SI), AX

udone:
	MOVL AX, ret+32(FP)
	RET

uslow:
	JMP ·updateSlow(SB)
