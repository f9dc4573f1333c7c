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
// 4, 2 and 1 bytes a step), for src shorter than bulkSize or of fusedFrom
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
