/* coro_switch_x86_64.S — coroutine context switch for x86-64 (System V) */
#if defined(__x86_64__) && !defined(KBSIM_CORO_UCONTEXT)

/* void coro__swap(void **save_sp, void *load_sp)
 *
 * Pushes the callee-saved registers on the current stack, stores sp in
 * *save_sp, switches to load_sp and pops the same frame from there. A new
 * coroutine's stack is prepared by coro_init in this exact layout, with the
 * trampoline as the return address.
 *
 *   sp+0  r15  r14  r13  r12  rbx  rbp
 *   sp+48 return address
 *
 * MXCSR and the x87 control word are not switched: saving and restoring
 * them was the larger part of a switch (ldmxcsr/fldcw stall the pipeline),
 * so the floating-point environment belongs to the OS thread and is shared
 * by its coroutines (docs/decisions/0001-context-switch.md).
 */
    .text
    .globl  coro__swap
    .hidden coro__swap
    .type   coro__swap, @function
    .p2align 4
coro__swap:
    pushq   %rbp
    pushq   %rbx
    pushq   %r12
    pushq   %r13
    pushq   %r14
    pushq   %r15
    movq    %rsp, (%rdi)
    movq    %rsi, %rsp
    popq    %r15
    popq    %r14
    popq    %r13
    popq    %r12
    popq    %rbx
    popq    %rbp
    /* An indirect jump instead of `ret`: the return-stack predictor holds
     * the other context's return addresses, and a mispredicted `ret` costs
     * several times the whole switch on these machines. rcx is
     * caller-saved, so it is free here. */
    popq    %rcx
    jmpq    *%rcx
    .size   coro__swap, .-coro__swap

#endif

#if defined(__ELF__)
    .section .note.GNU-stack,"",%progbits
#endif
