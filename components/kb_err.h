/* kb_err.h — the error-message helper the components share */
#ifndef KBSIM_KB_ERR_H
#define KBSIM_KB_ERR_H

#include <stddef.h>

/* Formats into err[0..errlen) (truncated); nothing when err is NULL or
 * errlen is 0, so callers may pass an optional buffer straight through. */
void kb_errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
