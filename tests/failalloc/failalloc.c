/* failalloc.c — the wrapped allocators of failalloc.h */
#include "failalloc.h"

#include <stdatomic.h>
#include <stddef.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);

static atomic_ulong count, fail_at;
static atomic_bool armed_fired;

void failalloc_arm(unsigned long n)
{
    atomic_store(&count, 0);
    atomic_store(&armed_fired, false);
    atomic_store(&fail_at, n);
}

bool failalloc_fired(void) { return atomic_load(&armed_fired); }
unsigned long failalloc_count(void) { return atomic_load(&count); }

int failalloc_run(unsigned long n, int (*run)(void *ud), void *ud,
                  bool *fired)
{
    failalloc_arm(n);
    int rc = run(ud);
    *fired = failalloc_fired();
    failalloc_arm(0);
    return rc;
}

static bool fail_now(void)
{
    unsigned long n = atomic_fetch_add(&count, 1) + 1;
    if (n != atomic_load(&fail_at))
        return false;
    atomic_store(&armed_fired, true);
    return true;
}

void *__wrap_malloc(size_t n) { return fail_now() ? NULL : __real_malloc(n); }

void *__wrap_calloc(size_t n, size_t size)
{
    return fail_now() ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n)
{
    return fail_now() ? NULL : __real_realloc(p, n);
}

void *__wrap_aligned_alloc(size_t align, size_t n)
{
    return fail_now() ? NULL : __real_aligned_alloc(align, n);
}
