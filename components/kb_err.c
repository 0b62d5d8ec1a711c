/* kb_err.c — the error-message helper the components share */
#include "kb_err.h"

#include <stdarg.h>
#include <stdio.h>

void kb_errf(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

int kb_verrc(char *err, size_t errlen, int code, const char *fmt, va_list ap)
{
    if (err && errlen)
        vsnprintf(err, errlen, fmt, ap);
    return code;
}

int kb_errc(char *err, size_t errlen, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    kb_verrc(err, errlen, code, fmt, ap);
    va_end(ap);
    return code;
}
