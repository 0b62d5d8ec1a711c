/* kb_err.h — the error-message helper the components share */
#ifndef KBSIM_KB_ERR_H
#define KBSIM_KB_ERR_H

#include <stdarg.h>
#include <stddef.h>

/* Formats into err[0..errlen) (truncated); nothing when err is NULL or
 * errlen is 0, so callers may pass an optional buffer straight through. */
void kb_errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* kb_errf that returns `code`, for `return KB_SETERR(x, SIM_EINVAL, ...)`;
 * and its va_list form for components that prefix or allocate first. */
int kb_errc(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int kb_verrc(char *err, size_t errlen, int code, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

/* The usual case: an object with a `char err[N]` member. */
#define KB_SETERR(obj, code, ...) kb_errc((obj)->err, sizeof (obj)->err, (code), __VA_ARGS__)

#endif
