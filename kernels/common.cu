/* Thread-local record of the last failed check in a kernel launcher (see kernels/common.h). */
#include <stdio.h>
#include <string.h>

#include "kernels/common.cuh"

static thread_local char last_failure[512];

/* "kernels/pool.cu" from the compiler's __FILE__, which the build gives as an absolute path. */
static const char *source_name(const char *file)
{
    const char *found = nullptr;
    for (const char *p = strstr(file, "kernels/"); p; p = strstr(p + 1, "kernels/"))
        found = p;
    return found ? found : file;
}

void gr_kernels_record_failure(const char *file, int line, const char *stmt, const char *what)
{
    snprintf(last_failure, sizeof last_failure, "%s:%d: %s: %s", source_name(file), line, stmt,
             what);
}

extern "C" const char *gr_kernels_last_failure(void)
{
    return last_failure;
}

extern "C" void gr_kernels_clear_failure(void)
{
    last_failure[0] = '\0';
}
