/* huge_pages.h — the transparent-huge-page hint for large tables the
 * components read at random (decision 0054); private to components/. */
#ifndef KB_HUGE_PAGES_H
#define KB_HUGE_PAGES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

#define KB_HUGE_PAGE ((size_t)2 << 20)

/* Marks the whole 2 MiB pages inside [p, p + bytes) for transparent huge
 * pages. A hint: where it is refused (or THP is off), the bytes keep small
 * pages and nothing else changes. */
static inline void kb_huge_hint(void *p, size_t bytes)
{
#ifdef MADV_HUGEPAGE
    uintptr_t a = ((uintptr_t)p + KB_HUGE_PAGE - 1) & ~(uintptr_t)(KB_HUGE_PAGE - 1);
    uintptr_t e = ((uintptr_t)p + bytes) & ~(uintptr_t)(KB_HUGE_PAGE - 1);
    if (e > a)
        (void)madvise((void *)a, e - a, MADV_HUGEPAGE);
#else
    (void)p;
    (void)bytes;
#endif
}

#endif
