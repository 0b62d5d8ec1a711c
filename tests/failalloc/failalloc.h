/* failalloc.h — allocation-failure injection for the C tests
 *
 * A test linked with failalloc (kb_failalloc in tests/CMakeLists.txt)
 * has malloc, calloc, realloc and aligned_alloc of every object it links
 * (the test's own, the engine's, the components') wrapped (ld --wrap):
 * after failalloc_arm(n) the n-th allocation from then on returns NULL,
 * once. failalloc_fired() says whether it came; a test loops n = 1, 2, ...
 * until a run of its scenario no longer reaches the n-th allocation, and
 * checks that every injected failure was reported as an error. Leaks show
 * under ASan (or valgrind) at exit. test.h builds its --failalloc mode on this; see
 * README.md here. */
#ifndef KBSIM_FAILALLOC_H
#define KBSIM_FAILALLOC_H

#include <stdbool.h>

/* Fail the n-th allocation from now (0: none); resets the count. */
void failalloc_arm(unsigned long n);
/* Whether the armed failure happened. */
bool failalloc_fired(void);
/* Allocations counted since the last failalloc_arm. */
unsigned long failalloc_count(void);

/* From now on, note which code called each of the first `max`
 * allocations (0: stop noting); also disarms. */
void failalloc_record(unsigned long max);
/* The caller of the n-th allocation since the last failalloc_arm, as
 * noted by failalloc_record (NULL if not noted). */
const void *failalloc_site(unsigned long n);

/* run(ud) with the n-th of its allocations failing; *fired says whether
 * the run reached it. Returns what run returned. */
int failalloc_run(unsigned long n, int (*run)(void *ud), void *ud,
                  bool *fired);

#endif
