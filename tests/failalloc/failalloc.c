/* failalloc.c — the wrapped allocators of failalloc.h */
#include "failalloc.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);

static atomic_ulong count, fail_at;
static atomic_bool armed_fired;
/* while recording: the caller of allocation n is sites[n - 1] */
static const void **sites;
static unsigned long sites_cap;

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

void failalloc_record(unsigned long max)
{
    free((void *)sites); /* free is not wrapped */
    sites = NULL;
    sites_cap = 0;
    if (max && (sites = __real_calloc(max, sizeof *sites)))
        sites_cap = max;
    failalloc_arm(0);
}

const void *failalloc_site(unsigned long n)
{
    return n >= 1 && n <= sites_cap ? sites[n - 1] : NULL;
}

static bool fail_now(const void *site)
{
    unsigned long n = atomic_fetch_add(&count, 1) + 1;
    if (n <= sites_cap)
        sites[n - 1] = site;
    if (n != atomic_load(&fail_at))
        return false;
    atomic_store(&armed_fired, true);
    return true;
}

#define SITE __builtin_return_address(0)

void *__wrap_malloc(size_t n)
{
    return fail_now(SITE) ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size)
{
    return fail_now(SITE) ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n)
{
    return fail_now(SITE) ? NULL : __real_realloc(p, n);
}

void *__wrap_aligned_alloc(size_t align, size_t n)
{
    return fail_now(SITE) ? NULL : __real_aligned_alloc(align, n);
}
