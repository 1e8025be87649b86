/* Base utilities: thread-local error message, checked sizes, RNG, fp16 conversion. */
#define _POSIX_C_SOURCE 200809L /* open, fstat, fcntl, O_CLOEXEC */

#include "base/base.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define GR_ERROR_LEN 1024

static _Thread_local char last_error[GR_ERROR_LEN];

/* Store msg (n bytes) as the thread's message. One longer than the buffer loses its middle, not
 * its end: the head names the file, the tail says why (the OS reason after a long path). */
static void set_error(const char *msg, size_t n)
{
    static const char cut[] = " ... ";
    if (n < sizeof last_error) {
        memmove(last_error, msg, n + 1);
        return;
    }
    const size_t head = sizeof last_error / 4, tail = sizeof last_error - 1 - head - (sizeof cut - 1);
    memmove(last_error, msg, head);
    memcpy(last_error + head, cut, sizeof cut - 1);
    memmove(last_error + head + sizeof cut - 1, msg + n - tail, tail);
    last_error[sizeof last_error - 1] = '\0';
}

/* Format into a buffer of its own (an argument may be the current message), then store. */
static void vset_error(const char *fmt, va_list ap)
{
    char small[GR_ERROR_LEN];
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    if (n < 0) {
        small[0] = '\0';
        n = 0;
    }
    char *big = (size_t)n >= sizeof small ? malloc((size_t)n + 1) : NULL;
    if (big && vsnprintf(big, (size_t)n + 1, fmt, again) == n)
        set_error(big, (size_t)n);
    else
        set_error(small, strlen(small)); /* no memory: the head only */
    va_end(again);
    free(big);
}

gr_status gr_fail(gr_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vset_error(fmt, ap);
    va_end(ap);
    return status;
}

static void set_error_f(const char *fmt, ...) GR_PRINTF(1, 2);
static void set_error_f(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vset_error(fmt, ap);
    va_end(ap);
}

gr_status gr_fail_prefix(gr_status status, const char *fmt, ...)
{
    char prefix[GR_ERROR_LEN];
    char old[GR_ERROR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, last_error, sizeof old);
    set_error_f("%s%s", prefix, old);
    return status;
}

void gr_clear_error(void) { last_error[0] = '\0'; }

const char *gr_last_error(void) { return last_error; }

const char *gr_version(void) { return "0.1.0"; }

const char *gr_status_str(gr_status status)
{
    switch (status) {
    case GR_OK: return "ok";
    case GR_ERR_INVALID_ARGUMENT: return "invalid argument";
    case GR_ERR_IO: return "I/O error";
    case GR_ERR_PARSE: return "parse error";
    case GR_ERR_UNSUPPORTED: return "unsupported";
    case GR_ERR_LIMIT: return "limit exceeded";
    case GR_ERR_OUT_OF_MEMORY: return "out of memory";
    case GR_ERR_NO_DEVICE: return "no CUDA device";
    case GR_ERR_CUDA: return "CUDA error";
    case GR_ERR_CUBLAS: return "cuBLAS error";
    case GR_ERR_STATE: return "invalid state";
    case GR_ERR_BUSY: return "engine busy";
    case GR_ERR_INTERNAL: return "internal error";
    case GR_ERR_NUMERIC: return "non-finite output";
    }
    return "unknown status";
}

const char *gr_precision_name(gr_precision p)
{
    switch (p) {
    case GR_PREC_FP32: return "fp32";
    case GR_PREC_FP16: return "fp16";
    case GR_PREC_INT8: return "int8";
    case GR_PREC_AUTO: return "auto";
    }
    return "?";
}

gr_status gr_precision_parse(const char *name, gr_precision *out)
{
    static const gr_precision all[] = {GR_PREC_FP32, GR_PREC_FP16, GR_PREC_INT8, GR_PREC_AUTO};
    if (!name || !out)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_precision_parse: NULL argument");
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (strcmp(name, gr_precision_name(all[i])) == 0) {
            *out = all[i];
            return GR_OK;
        }
    }
    return gr_fail(GR_ERR_INVALID_ARGUMENT, "unknown precision '%s' (expected fp32, fp16, int8 or auto)",
                   name);
}

bool gr_mul_size(size_t a, size_t b, size_t *out)
{
    if (a != 0 && b > SIZE_MAX / a)
        return false;
    *out = a * b;
    return true;
}

bool gr_add_size(size_t a, size_t b, size_t *out)
{
    if (b > SIZE_MAX - a)
        return false;
    *out = a + b;
    return true;
}

void *gr_malloc(size_t bytes, const char *what)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p)
        gr_fail(GR_ERR_OUT_OF_MEMORY, "out of memory allocating %zu bytes for %s", bytes, what);
    return p;
}

void *gr_calloc(size_t count, size_t size, const char *what)
{
    size_t bytes;
    if (!gr_mul_size(count, size, &bytes)) {
        gr_fail(GR_ERR_LIMIT, "size overflow allocating %zu x %zu bytes for %s", count, size, what);
        return NULL;
    }
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p)
        gr_fail(GR_ERR_OUT_OF_MEMORY, "out of memory allocating %zu bytes for %s", bytes, what);
    return p;
}

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void gr_rng_seed(gr_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t gr_rng_u64(gr_rng *r)
{
    /* xoshiro256** */
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

float gr_rng_uniform(gr_rng *r) { return (float)(gr_rng_u64(r) >> 40) * (1.0f / 16777216.0f); }

float gr_rng_normal(gr_rng *r)
{
    /* Box-Muller in double so the sequence is the same on every libm that rounds correctly. */
    double u1 = ((double)(gr_rng_u64(r) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
    double u2 = (double)(gr_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

uint16_t gr_f32_to_f16_any(float x)
{
    uint32_t f;
    memcpy(&f, &x, sizeof f);
    uint32_t sign = (f >> 16) & 0x8000u;
    uint32_t exp = (f >> 23) & 0xffu;
    uint32_t mant = f & 0x7fffffu;
    if (exp == 0xffu) /* inf / nan */
        return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0u));
    int e = (int)exp - 127 + 15;
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) {
        if (e < -10)
            return (uint16_t)sign;
        mant |= 0x800000u;
        int shift = 14 - e;
        uint32_t half = mant >> shift;
        uint32_t rem = mant & ((1u << shift) - 1u);
        uint32_t halfway = 1u << (shift - 1);
        if (rem > halfway || (rem == halfway && (half & 1u)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = ((uint32_t)e << 10) | (mant >> 13);
    uint32_t rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (half & 1u)))
        half++; /* may carry into the exponent, which is the correct rounding */
    return (uint16_t)(sign | half);
}

float gr_f16_to_f32_any(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t f;
    if (exp == 0) {
        if (mant == 0) {
            f = sign;
        } else {
            int e = -1;
            do {
                e++;
                mant <<= 1;
            } while (!(mant & 0x400u));
            f = sign | ((uint32_t)(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        f = sign | 0x7f800000u | (mant << 13);
    } else {
        f = sign | ((exp - 15 + 127) << 23) | (mant << 13);
    }
    float x;
    memcpy(&x, &f, sizeof x);
    return x;
}

size_t gr_dtype_size(gr_dtype t)
{
    switch (t) {
    case GR_DTYPE_F32: return 4;
    case GR_DTYPE_F16: return 2;
    case GR_DTYPE_I8: return 1;
    case GR_DTYPE_U8: return 1;
    case GR_DTYPE_I32: return 4;
    }
    return 0;
}

const char *gr_dtype_name(gr_dtype t)
{
    switch (t) {
    case GR_DTYPE_F32: return "f32";
    case GR_DTYPE_F16: return "f16";
    case GR_DTYPE_I8: return "i8";
    case GR_DTYPE_U8: return "u8";
    case GR_DTYPE_I32: return "i32";
    }
    return "?";
}

/* The whole file in a malloc'd, NUL-terminated buffer (the NUL not counted in *len). A file over
 * max_bytes is refused after reading at most one chunk past the limit; works on pipes (no seeking).
 * Messages name the file and `what` ("cfg", "image", ...). */
const char *gr_file_kind(mode_t mode)
{
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    return S_ISSOCK(mode) ? "a socket" : "an unknown kind of file";
}

gr_status gr_open_regular_file(const char *path, size_t max_bytes, const char *what, int *fd_out,
                               size_t *size)
{
    *fd_out = -1;
    *size = 0;
    /* O_NONBLOCK: opening a FIFO without a writer would block; cleared once fstat said "regular". */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return gr_fail(GR_ERR_IO, "%s: cannot open %s file: %s", path, what, strerror(errno));
    struct stat st;
    gr_status status = GR_OK;
    int flags;
    if (fstat(fd, &st) != 0)
        status = gr_fail(GR_ERR_IO, "%s: cannot stat %s file: %s", path, what, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        status = gr_fail(GR_ERR_IO, "%s: not a regular file (%s)", path, gr_file_kind(st.st_mode));
    else if ((uintmax_t)st.st_size > max_bytes)
        status = gr_fail(GR_ERR_LIMIT, "%s: %jd bytes is larger than the %zu-byte %s file limit",
                         path, (intmax_t)st.st_size, max_bytes, what);
    else if ((flags = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0)
        status = gr_fail(GR_ERR_IO, "%s: fcntl: %s", path, strerror(errno));
    if (status != GR_OK) {
        close(fd);
        return status;
    }
    *fd_out = fd;
    *size = (size_t)st.st_size;
    return GR_OK;
}

/* Read from fd into buf until `want` bytes or the end of the file; *got says how many came (the
 * end came first when *got < want). `done` is what the file gave before, for the message. */
static gr_status read_upto(int fd, const char *path, size_t done, uint8_t *buf, size_t want,
                           size_t *got)
{
    *got = 0;
    while (*got < want) {
        ssize_t n = read(fd, buf + *got, want - *got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return gr_fail(GR_ERR_IO, "%s: read error after %zu bytes: %s", path, done + *got,
                           strerror(errno));
        if (n == 0)
            break;
        *got += (size_t)n;
    }
    return GR_OK;
}

gr_status gr_read_fd(int fd, const char *path, size_t size, const char *what, uint8_t **buf,
                     size_t *cap, size_t *len)
{
    *len = 0;
    /* One byte more than fstat said (and a NUL after it), so that a file growing while it is read
     * is noticed and text readers get a terminated string. */
    if (size + 2 > *cap) {
        uint8_t *bigger = realloc(*buf, size + 2);
        if (!bigger)
            return gr_fail(GR_ERR_OUT_OF_MEMORY, "%s: out of memory reading the %s file", path,
                           what);
        *buf = bigger;
        *cap = size + 2;
    }
    size_t used = 0;
    GR_TRY(read_upto(fd, path, 0, *buf, size + 1, &used));
    if (used > size)
        return gr_fail(GR_ERR_IO, "%s: the %s file grew while it was read (%zu bytes)", path, what,
                       size);
    (*buf)[used] = '\0';
    *len = used;
    return GR_OK;
}

/* A stream (a pipe, `--input-list <(ls)`, a FIFO or device named explicitly): read in doubling
 * chunks up to max_bytes. */
static gr_status read_stream(int fd, const char *path, size_t max_bytes, const char *what,
                             uint8_t **buf, size_t *len)
{
    size_t cap = 0, used = 0;
    for (;;) {
        if (cap > max_bytes)
            return gr_fail(GR_ERR_LIMIT, "%s: larger than %zu bytes (the %s file limit)", path,
                           max_bytes, what);
        size_t bigger_cap = cap ? 2 * cap : 64 * 1024;
        uint8_t *bigger = realloc(*buf, bigger_cap + 1);
        if (!bigger)
            return gr_fail(GR_ERR_OUT_OF_MEMORY, "%s: out of memory reading the %s file", path,
                           what);
        *buf = bigger;
        cap = bigger_cap;
        size_t got;
        GR_TRY(read_upto(fd, path, used, *buf + used, cap - used, &got));
        used += got;
        if (used < cap)
            break; /* the end of the stream */
    }
    if (used > max_bytes)
        return gr_fail(GR_ERR_LIMIT, "%s: larger than %zu bytes (the %s file limit)", path,
                       max_bytes, what);
    (*buf)[used] = '\0';
    *len = used;
    return GR_OK;
}

gr_status gr_read_file(const char *path, size_t max_bytes, const char *what, char **text,
                       size_t *len)
{
    *text = NULL;
    *len = 0;
    /* A file named explicitly may be a pipe or FIFO (process substitution); only a directory is
     * refused by kind, and a regular file's size is checked before reading. */
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return gr_fail(GR_ERR_IO, "%s: cannot open %s file: %s", path, what, strerror(errno));
    struct stat sb;
    uint8_t *buf = NULL;
    size_t cap = 0;
    gr_status st;
    if (fstat(fd, &sb) != 0)
        st = gr_fail(GR_ERR_IO, "%s: cannot stat %s file: %s", path, what, strerror(errno));
    else if (S_ISDIR(sb.st_mode) || S_ISBLK(sb.st_mode) || (S_ISCHR(sb.st_mode) && !isatty(fd)))
        st = gr_fail(GR_ERR_IO, "%s: not a regular file (%s): the %s is read from a regular "
                     "file or a stream (a pipe, a FIFO, a terminal)", path,
                     gr_file_kind(sb.st_mode), what);
    else if (!S_ISREG(sb.st_mode))
        st = read_stream(fd, path, max_bytes, what, &buf, len);
    else if ((uintmax_t)sb.st_size > max_bytes)
        st = gr_fail(GR_ERR_LIMIT, "%s: %jd bytes is larger than the %zu-byte %s file limit",
                     path, (intmax_t)sb.st_size, max_bytes, what);
    else
        st = gr_read_fd(fd, path, (size_t)sb.st_size, what, &buf, &cap, len);
    close(fd);
    if (st != GR_OK) {
        free(buf);
        *len = 0;
        return st;
    }
    *text = (char *)buf;
    return GR_OK;
}

gr_status gr_read_regular_file(const char *path, size_t max_bytes, const char *what, char **text,
                               size_t *len)
{
    *text = NULL;
    *len = 0;
    int fd;
    size_t size, cap = 0;
    uint8_t *buf = NULL;
    GR_TRY(gr_open_regular_file(path, max_bytes, what, &fd, &size));
    gr_status st = gr_read_fd(fd, path, size, what, &buf, &cap, len);
    close(fd);
    if (st != GR_OK) {
        free(buf);
        *len = 0;
        return st;
    }
    *text = (char *)buf;
    return GR_OK;
}
