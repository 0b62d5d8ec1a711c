/* coro_switch_aarch64.S — coroutine context switch for aarch64 (AAPCS64) */
#if defined(__aarch64__) && !defined(KBSIM_CORO_UCONTEXT)

/* void coro__swap(void **save_sp, void *load_sp)
 *
 * Stores the callee-saved registers x19-x30 and d8-d15 and FPCR (rounding
 * mode: each coroutine keeps its own, as with ucontext) in a 176-byte frame
 * on the current stack, stores sp in *save_sp, switches to load_sp and
 * loads the same frame from there; ret jumps to the restored x30. A new
 * coroutine's stack is prepared by coro_init in this exact layout, with
 * the trampoline as x30.
 *
 *   sp+0   x19 x20 ... x29 x30   sp+96  d8 ... d15   sp+160 FPCR
 */
    .text
    .globl  coro__swap
    .hidden coro__swap
    .type   coro__swap, %function
    .p2align 4
coro__swap:
    sub     sp, sp, #176
    stp     x19, x20, [sp, #0]
    stp     x21, x22, [sp, #16]
    stp     x23, x24, [sp, #32]
    stp     x25, x26, [sp, #48]
    stp     x27, x28, [sp, #64]
    stp     x29, x30, [sp, #80]
    stp     d8,  d9,  [sp, #96]
    stp     d10, d11, [sp, #112]
    stp     d12, d13, [sp, #128]
    stp     d14, d15, [sp, #144]
    mrs     x9, fpcr
    str     x9, [sp, #160]
    mov     x10, sp
    str     x10, [x0]
    mov     sp, x1
    ldp     x19, x20, [sp, #0]
    ldp     x21, x22, [sp, #16]
    ldp     x23, x24, [sp, #32]
    ldp     x25, x26, [sp, #48]
    ldp     x27, x28, [sp, #64]
    ldp     x29, x30, [sp, #80]
    ldp     d8,  d9,  [sp, #96]
    ldp     d10, d11, [sp, #112]
    ldp     d12, d13, [sp, #128]
    ldp     d14, d15, [sp, #144]
    /* writing FPCR can stall the pipeline; skip it when nothing changes */
    ldr     x10, [sp, #160]
    cmp     x9, x10
    b.eq    1f
    msr     fpcr, x10
1:  add     sp, sp, #176
    ret
    .size   coro__swap, .-coro__swap

#endif

#if defined(__ELF__)
    .section .note.GNU-stack,"",%progbits
#endif
