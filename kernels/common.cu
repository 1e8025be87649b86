/* Thread-local record of the last failed check in a kernel launcher (see kernels/common.h). */
#include <stdio.h>

#include "kernels/common.cuh"

static thread_local char last_failure[512];

void gr_kernels_record_failure(const char *file, int line, const char *stmt, const char *what)
{
    snprintf(last_failure, sizeof last_failure, "%s:%d: %s: %s", file, line, stmt, what);
}

extern "C" const char *gr_kernels_last_failure(void)
{
    return last_failure;
}

extern "C" void gr_kernels_clear_failure(void)
{
    last_failure[0] = '\0';
}
