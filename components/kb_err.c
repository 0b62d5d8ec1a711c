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
