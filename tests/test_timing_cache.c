/* Check suite for runtime/timing_cache.c (the conv tactic search's cache; no GPU needed): round
 * trips through the file, and every way a file can be wrong - another device or version,
 * truncation at every byte, garbage, huge or non-finite numbers - leaves an empty cache and one
 * notice line, never a crash or a partly trusted cache. */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <glob.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "runtime/timing_cache.h"

static const char device[] = "NVIDIA H100 80GB HBM3; sm_90; 132 SMs; CUDA runtime 13000; "
                             "driver 13000; cuBLASLt 130000";

static void temp_path(char *out, size_t cap)
{
    static int counter;
    snprintf(out, cap, "/tmp/gr_test_tcache_%d_%d.txt", (int)getpid(), counter++);
}

static void write_text(const char *path, const char *text, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(text, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

/* A cache with three entries, serialized. */
static char *sample_text(size_t *len)
{
    gr_timing_cache c;
    gr_timing_cache_init(&c, device);
    ck_assert_int_eq(gr_timing_cache_put(&c, "i8:n1:in13x13x512", 1, 4, 12.5, 20.25), GR_OK);
    ck_assert_int_eq(gr_timing_cache_put(&c, "f16:n1:in26x26x256", 2, 1, 7.125, 7.125), GR_OK);
    ck_assert_int_eq(gr_timing_cache_put(&c, "i8:n8:in52x52x128", 0, 0, 300.0, 300.0), GR_OK);
    char *text = NULL;
    ck_assert_int_eq(gr_timing_cache_serialize(&c, &text, len), GR_OK);
    ck_assert_uint_eq(strlen(text), *len);
    gr_timing_cache_free(&c);
    return text;
}

/* Parse `text` for `dev`; returns the entry count, the notice in `notice`. */
static int parse_count(const char *dev, const char *text, size_t len, char *notice, size_t cap)
{
    gr_timing_cache c;
    gr_timing_cache_init(&c, dev);
    gr_timing_cache_parse(&c, text, len, "cache.txt", notice, cap);
    int n = c.n;
    ck_assert_int_eq(c.dirty, 0);
    gr_timing_cache_free(&c);
    return n;
}

START_TEST(test_round_trip)
{
    size_t len = 0;
    char *text = sample_text(&len);
    char path[128];
    temp_path(path, sizeof path);
    gr_timing_cache c;
    gr_timing_cache_init(&c, device);
    ck_assert_int_eq(gr_timing_cache_put(&c, "a:b", 3, 2, 1.5, 2.5), GR_OK);
    ck_assert_int_eq(c.dirty, 1);
    gr_timing_cache_parse(&c, text, len, path, (char[256]){0}, 256);
    ck_assert_int_eq(c.n, 3); /* replaced, not merged */
    ck_assert_ptr_null(gr_timing_cache_find(&c, "a:b"));
    ck_assert_int_eq(gr_timing_cache_save(&c, path), GR_OK);
    gr_timing_cache d;
    gr_timing_cache_init(&d, device);
    char notice[256];
    gr_timing_cache_load(&d, path, notice, sizeof notice);
    ck_assert_str_eq(notice, "");
    ck_assert_int_eq(d.n, 3);
    const gr_tcache_entry *e = gr_timing_cache_find(&d, "i8:n1:in13x13x512");
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(e->tile, 1);
    ck_assert_int_eq(e->split, 4);
    ck_assert(e->us == 12.5 && e->auto_us == 20.25); /* exact in binary and in %.9g */
    e = gr_timing_cache_find(&d, "f16:n1:in26x26x256");
    ck_assert(e && e->tile == 2 && e->split == 1);
    ck_assert_ptr_null(gr_timing_cache_find(&d, "i8:n2:in13x13x512"));
    /* The same bytes again: saving is deterministic. */
    char *again = NULL;
    size_t again_len = 0;
    ck_assert_int_eq(gr_timing_cache_serialize(&d, &again, &again_len), GR_OK);
    ck_assert_uint_eq(again_len, len);
    ck_assert_int_eq(memcmp(again, text, len), 0);
    /* Replacing an entry keeps the count. */
    ck_assert_int_eq(gr_timing_cache_put(&d, "i8:n1:in13x13x512", 4, 8, 9.0, 20.0), GR_OK);
    ck_assert_int_eq(d.n, 3);
    ck_assert_int_eq(gr_timing_cache_find(&d, "i8:n1:in13x13x512")->split, 8);
    /* No temporary file is left behind. */
    char pattern[160];
    snprintf(pattern, sizeof pattern, "%s.tmp*", path);
    glob_t found;
    ck_assert_int_eq(glob(pattern, 0, NULL, &found), GLOB_NOMATCH);
    remove(path);
    free(again);
    free(text);
    gr_timing_cache_free(&c);
    gr_timing_cache_free(&d);
}
END_TEST

START_TEST(test_missing_file_is_empty_without_notice)
{
    gr_timing_cache c;
    gr_timing_cache_init(&c, device);
    char notice[256] = "x";
    gr_timing_cache_load(&c, "/tmp/gr_test_tcache_does_not_exist.txt", notice, sizeof notice);
    ck_assert_str_eq(notice, "");
    ck_assert_int_eq(c.n, 0);
    gr_timing_cache_free(&c);
}
END_TEST

START_TEST(test_other_device_ignored)
{
    size_t len = 0;
    char *text = sample_text(&len);
    char notice[256];
    ck_assert_int_eq(parse_count(device, text, len, notice, sizeof notice), 3);
    ck_assert_str_eq(notice, "");
    /* Another GPU, another driver: ignored, one line naming the file and why. */
    const char *others[] = {
        "NVIDIA A100-SXM4-80GB; sm_80; 108 SMs; CUDA runtime 13000; driver 13000; cuBLASLt 130000",
        "NVIDIA H100 80GB HBM3; sm_90; 132 SMs; CUDA runtime 13000; driver 12080; cuBLASLt 130000",
        "NVIDIA H100 80GB HBM3; sm_90; 66 SMs; CUDA runtime 13000; driver 13000; cuBLASLt 130000"};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        ck_assert_int_eq(parse_count(others[i], text, len, notice, sizeof notice), 0);
        ck_assert_ptr_nonnull(strstr(notice, "cache.txt"));
        ck_assert_ptr_nonnull(strstr(notice, "another GPU"));
        ck_assert_ptr_null(strchr(notice, '\n'));
    }
    free(text);
}
END_TEST

START_TEST(test_other_version_ignored)
{
    size_t len = 0;
    char *text = sample_text(&len);
    char notice[256];
    /* Another format version (the next one, and the previous), and another graphrun version,
     * in the first line. */
    char *edited = malloc(len + 32);
    const char *rest = strchr(text, '\n');
    int n = snprintf(edited, len + 32, "graphrun-timing-cache %d %s%s", GR_TCACHE_VERSION + 1,
                     gr_version(), rest);
    ck_assert_int_eq(parse_count(device, edited, (size_t)n, notice, sizeof notice), 0);
    ck_assert_ptr_nonnull(strstr(notice, "version"));
    n = snprintf(edited, len + 32, "graphrun-timing-cache %d %s%s", GR_TCACHE_VERSION - 1,
                 gr_version(), rest);
    ck_assert_int_eq(parse_count(device, edited, (size_t)n, notice, sizeof notice), 0);
    ck_assert_ptr_nonnull(strstr(notice, "version"));
    n = snprintf(edited, len + 32, "graphrun-timing-cache %d 0.0.0-other%s", GR_TCACHE_VERSION,
                 rest);
    ck_assert_int_eq(parse_count(device, edited, (size_t)n, notice, sizeof notice), 0);
    ck_assert_ptr_nonnull(strstr(notice, "version"));
    free(edited);
    free(text);
}
END_TEST

START_TEST(test_every_truncation_ignored)
{
    size_t len = 0;
    char *text = sample_text(&len);
    char notice[256];
    /* Every prefix (the last complete one minus its final '\n' included) is rejected as a whole:
     * the "entries" count and the "end" line catch a cut between lines. */
    for (size_t cut = 0; cut + 1 < len; cut++) {
        ck_assert_msg(parse_count(device, text, cut, notice, sizeof notice) == 0,
                      "prefix of %zu bytes accepted", cut);
        ck_assert_msg(notice[0] != '\0', "no notice for a prefix of %zu bytes", cut);
    }
    /* Without the final newline the text is still complete. */
    ck_assert_int_eq(parse_count(device, text, len - 1, notice, sizeof notice), 3);
    free(text);
}
END_TEST

static uint64_t fnv1a(const char *text, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)text[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* Rewrites the checksum line (if the text has one) to match the edited text before it, so that
 * what rejects an edited entry is the entry's own check. */
static void resign(char *text)
{
    char *sum = strstr(text, "\nchecksum ");
    if (!sum)
        return;
    char hex[17];
    snprintf(hex, sizeof hex, "%016" PRIx64, fnv1a(text, (size_t)(sum + 1 - text)));
    if (strlen(sum) >= 10 + 16)
        memcpy(sum + 10, hex, 16);
}

/* The sample with line `line` (0-based) replaced by `with`, the checksum rewritten. */
static char *replace_line(const char *text, int line, const char *with, size_t *len)
{
    char *out = malloc(strlen(text) + strlen(with) + 2);
    size_t used = 0;
    const char *p = text;
    for (int i = 0; *p; i++) {
        const char *nl = strchr(p, '\n');
        size_t l = nl ? (size_t)(nl - p) + 1 : strlen(p);
        if (i == line) {
            used += (size_t)sprintf(out + used, "%s\n", with);
        } else {
            memcpy(out + used, p, l);
            used += l;
        }
        p += l;
    }
    out[used] = '\0';
    *len = used;
    resign(out);
    return out;
}

START_TEST(test_bad_entries_ignored)
{
    size_t len = 0;
    char *text = sample_text(&len);
    /* Line 3 is the first entry. Each replacement must make the whole cache ignored. */
    const char *bad[] = {
        "i8:n1:in13x13x512 1 4 12.5",               /* a field short */
        "i8:n1:in13x13x512 1 4 12.5 20.25 7",       /* a field too many */
        "i8:n1:in13x13x512 99 4 12.5 20.25",        /* tile out of range */
        "i8:n1:in13x13x512 1 65 12.5 20.25",        /* split out of range */
        "i8:n1:in13x13x512 -1 4 12.5 20.25",
        "i8:n1:in13x13x512 1 4 nan 20.25",          /* non-finite */
        "i8:n1:in13x13x512 1 4 inf 20.25",
        "i8:n1:in13x13x512 1 4 1e308 20.25",        /* huge */
        "i8:n1:in13x13x512 1 4 1e999 20.25",        /* overflows strtod */
        "i8:n1:in13x13x512 1 4 -3 20.25",           /* negative time */
        "i8:n1:in13x13x512 1 4 0 20.25",            /* zero time */
        "i8:n1:in13x13x512 99999999999999999999 4 12.5 20.25",
        "i8:n1:in13x13x512 1x 4 12.5 20.25",        /* trailing junk in a number */
        "i8:n1:in13x13x512 1 4 12.5us 20.25",
        "f16:n1:in26x26x256 2 1 7.125 7.125",       /* duplicate of the next entry */
        "",                                         /* empty line */
        "\x01\x02\x03 1 4 12.5 20.25",              /* control characters in the key */
    };
    char notice[256];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t n = 0;
        char *edited = replace_line(text, 3, bad[i], &n);
        ck_assert_msg(parse_count(device, edited, n, notice, sizeof notice) == 0,
                      "accepted a bad entry: '%s'", bad[i]);
        ck_assert_ptr_nonnull(strstr(notice, "ignored"));
        free(edited);
    }
    /* A wrong or absurd entry count. */
    const char *counts[] = {"entries 2", "entries 4", "entries -1", "entries 99999999999",
                            "entries", "entries 3x"};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        size_t n = 0;
        char *edited = replace_line(text, 2, counts[i], &n);
        ck_assert_msg(parse_count(device, edited, n, notice, sizeof notice) == 0,
                      "accepted '%s'", counts[i]);
        free(edited);
    }
    /* A key longer than the format allows. */
    char long_line[GR_TCACHE_KEY_MAX + 64];
    memset(long_line, 'k', GR_TCACHE_KEY_MAX + 8);
    snprintf(long_line + GR_TCACHE_KEY_MAX + 8, 56, " 1 4 12.5 20.25");
    size_t n = 0;
    char *edited = replace_line(text, 3, long_line, &n);
    ck_assert_int_eq(parse_count(device, edited, n, notice, sizeof notice), 0);
    free(edited);
    free(text);
}
END_TEST

START_TEST(test_unknown_tactics_ignored)
{
    size_t len = 0;
    char *text = sample_text(&len);
    /* Within the old numeric bounds, but no tactic gpu/tactic.c writes: conv tile 8, a split not
     * among the search's choices, the automatic tactic or the GEMM with a split. */
    const char *bad[] = {"i8:n1:in13x13x512 8 4 12.5 20.25", "i8:n1:in13x13x512 1 5 12.5 20.25",
                         "i8:n1:in13x13x512 0 4 12.5 20.25", "i8:n1:in13x13x512 16 2 12.5 20.25",
                         "i8:n1:in13x13x512 12 0 12.5 20.25"};
    char notice[256];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t n = 0;
        char *edited = replace_line(text, 3, bad[i], &n);
        ck_assert_msg(parse_count(device, edited, n, notice, sizeof notice) == 0,
                      "accepted an unknown tactic: '%s'", bad[i]);
        ck_assert_ptr_nonnull(strstr(notice, "line 4: malformed entry"));
        free(edited);
    }
    /* The tactics it does write: tile 7 split 16, the GEMM (16, split 0), the automatic one. */
    size_t n = 0;
    char *edited = replace_line(text, 3, "i8:n1:in13x13x512 7 16 12.5 20.25", &n);
    ck_assert_int_eq(parse_count(device, edited, n, notice, sizeof notice), 3);
    free(edited);
    edited = replace_line(text, 3, "i8:n1:in13x13x512 16 0 12.5 20.25", &n);
    ck_assert_int_eq(parse_count(device, edited, n, notice, sizeof notice), 3);
    free(edited);
    /* fp32 convs' entries (the fp32 search, gpu/tactic.c): the algorithm as the tile, split-K
     * parts as the split - every algorithm unsplit, 3xTF32 split in 3; not an unknown algorithm
     * nor a split of 1. */
    const char *f32_ok[] = {"f32:n64:in52x52x128:out256:k3s1p1:act1:tf0:sk1 0 0 12.5 20.25",
                            "f32:n64:in52x52x128:out256:k3s1p1:act1:tf0:sk1 1 3 12.5 20.25",
                            "f32:n64:in52x52x128:out256:k3s1p1:act1:tf0:sk1 3 0 12.5 20.25"};
    for (size_t i = 0; i < sizeof f32_ok / sizeof f32_ok[0]; i++) {
        edited = replace_line(text, 3, f32_ok[i], &n);
        ck_assert_msg(parse_count(device, edited, n, notice, sizeof notice) == 3,
                      "refused an fp32 entry: '%s' (%s)", f32_ok[i], notice);
        free(edited);
    }
    const char *f32_bad[] = {"f32:n64:in52x52x128:out256:k3s1p1:act1:tf0:sk1 4 0 12.5 20.25",
                             "f32:n64:in52x52x128:out256:k3s1p1:act1:tf0:sk1 1 1 12.5 20.25"};
    for (size_t i = 0; i < sizeof f32_bad / sizeof f32_bad[0]; i++) {
        edited = replace_line(text, 3, f32_bad[i], &n);
        ck_assert_int_eq(parse_count(device, edited, n, notice, sizeof notice), 0);
        free(edited);
    }
    free(text);
}
END_TEST

/* Format 5's micro-batch entries (gpu/engine.c): the sub-batch as the tile, 1..4096, split 0;
 * nothing else under an "mb:" key, and a conv key still refuses a tile past 16. */
START_TEST(test_micro_batch_entries)
{
    const char *key = "mb:int8:n256:u81:if3:acc0:net0123456789abcdef";
    gr_timing_cache c;
    gr_timing_cache_init(&c, device);
    ck_assert_int_eq(gr_timing_cache_put(&c, key, 64, 0, 9000.5, 9000.5), GR_OK);
    ck_assert_int_eq(gr_timing_cache_put(&c, "mb:fp16:n4096:u81:if1:acc0:net0", 4096, 0, 1.0, 1.0),
                     GR_OK);
    ck_assert_int_eq(gr_timing_cache_put(&c, key, 0, 0, 1.0, 1.0), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gr_timing_cache_put(&c, key, 4097, 0, 1.0, 1.0), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gr_timing_cache_put(&c, "i8:n1:in13x13x512", 64, 1, 1.0, 1.0),
                     GR_ERR_INVALID_ARGUMENT);
    char *text = NULL;
    size_t len = 0;
    ck_assert_int_eq(gr_timing_cache_serialize(&c, &text, &len), GR_OK);
    gr_timing_cache_free(&c);
    char notice[256];
    ck_assert_int_eq(parse_count(device, text, len, notice, sizeof notice), 2);
    ck_assert_str_eq(notice, "");
    gr_timing_cache d;
    gr_timing_cache_init(&d, device);
    gr_timing_cache_parse(&d, text, len, "cache.txt", notice, sizeof notice);
    const gr_tcache_entry *e = gr_timing_cache_find(&d, key);
    ck_assert(e && e->tile == 64 && e->split == 0 && e->us == 9000.5);
    gr_timing_cache_free(&d);
    /* In a file: a split, a sub-batch of 0 or past 4096, a conv tile of 64 are malformed. */
    const char *bad[] = {"mb:int8:n256:u81:if3:acc0:net0 64 2 12.5 12.5",
                         "mb:int8:n256:u81:if3:acc0:net0 0 0 12.5 12.5",
                         "mb:int8:n256:u81:if3:acc0:net0 4097 0 12.5 12.5",
                         "i8:n1:in13x13x512 64 1 12.5 20.25"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t n = 0;
        char *edited = replace_line(text, 3, bad[i], &n);
        ck_assert_msg(parse_count(device, edited, n, notice, sizeof notice) == 0,
                      "accepted '%s'", bad[i]);
        ck_assert_ptr_nonnull(strstr(notice, "line 4: malformed entry"));
        free(edited);
    }
    free(text);
}
END_TEST

/* A format-4 file (conv keys named the engine's batch then) is refused as a whole, and the notice
 * says why in one line: an older format, the one this graphrun reads. */
START_TEST(test_format4_refused)
{
    size_t len = 0;
    char *text = sample_text(&len);
    const char *rest = strchr(text, '\n');
    char *edited = malloc(len + 32);
    int n = snprintf(edited, len + 32, "graphrun-timing-cache 4 %s%s", gr_version(), rest);
    char notice[256];
    ck_assert_int_eq(parse_count(device, edited, (size_t)n, notice, sizeof notice), 0);
    ck_assert_msg(strstr(notice, "an older format version (this graphrun reads format 5") != NULL,
                  "notice: %s", notice);
    ck_assert_ptr_null(strchr(notice, '\n'));
    ck_assert_int_eq(GR_TCACHE_VERSION, 5);
    free(edited);
    free(text);
}
END_TEST

START_TEST(test_checksum_mismatch_ignored)
{
    size_t len = 0;
    char *text = sample_text(&len);
    char notice[256];
    /* A time edited to another valid value (12.5 -> 13.5): only the checksum can tell. */
    char *edit = strstr(text, " 12.5 ");
    ck_assert_ptr_nonnull(edit);
    edit[2] = '3';
    ck_assert_int_eq(parse_count(device, text, len, notice, sizeof notice), 0);
    ck_assert_msg(strstr(notice, "cache.txt ignored (line 7: checksum mismatch") != NULL, "%s",
                  notice);
    free(text);
}
END_TEST

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

/* 65,536 entries (GR_TCACHE_MAX_ENTRIES): filled, written and read back in linear time. The
 * quadratic lookup took 67 s to read such a file; the bound leaves 50x headroom over the
 * measured time on a loaded 2-core machine. */
START_TEST(test_full_cache_is_linear)
{
    gr_timing_cache c;
    gr_timing_cache_init(&c, device);
    double t0 = now_us();
    char key[64];
    for (int i = 0; i < GR_TCACHE_MAX_ENTRIES; i++) {
        snprintf(key, sizeof key, "i8:n%d:in13x13x512:out13x13x%d", i % 64 + 1, i);
        ck_assert_int_eq(gr_timing_cache_put(&c, key, 1 + i % 7, 4, 10.0 + i, 20.0 + i), GR_OK);
    }
    double t1 = now_us();
    char *text = NULL;
    size_t len = 0;
    ck_assert_int_eq(gr_timing_cache_serialize(&c, &text, &len), GR_OK);
    gr_timing_cache_free(&c);
    char notice[256];
    gr_timing_cache_init(&c, device);
    double t2 = now_us();
    gr_timing_cache_parse(&c, text, len, "big.txt", notice, sizeof notice);
    double t3 = now_us();
    ck_assert_str_eq(notice, "");
    ck_assert_int_eq(c.n, GR_TCACHE_MAX_ENTRIES);
    const gr_tcache_entry *e = gr_timing_cache_find(&c, "i8:n1:in13x13x512:out13x13x64");
    ck_assert_ptr_nonnull(e);
    ck_assert(e->us == 74.0);
    ck_assert_ptr_null(gr_timing_cache_find(&c, "i8:n1:in13x13x512:out13x13x65536"));
    printf("timing cache, %d entries: put %.3f s, parse %.3f s (%zu bytes)\n",
           GR_TCACHE_MAX_ENTRIES, (t1 - t0) * 1e-6, (t3 - t2) * 1e-6, len);
    ck_assert_msg((t1 - t0) + (t3 - t2) < 5e6, "put + parse took %.1f s",
                  ((t1 - t0) + (t3 - t2)) * 1e-6);
    gr_timing_cache_free(&c);
    free(text);
}
END_TEST

START_TEST(test_garbage_never_crashes)
{
    char notice[256];
    /* Deterministic random bytes, and random bytes after a valid header: all rejected. */
    gr_rng rng;
    gr_rng_seed(&rng, 42);
    size_t len = 0;
    char *text = sample_text(&len);
    size_t header = (size_t)(strstr(text, "entries") - text);
    char buf[4096];
    for (int round = 0; round < 300; round++) {
        size_t n = 1 + gr_rng_u64(&rng) % sizeof buf;
        size_t start = round % 2 ? header : 0;
        memcpy(buf, text, start);
        for (size_t i = start; i < n; i++)
            buf[i] = (char)(gr_rng_u64(&rng) & 0xff);
        if (n < start)
            n = start;
        ck_assert_int_eq(parse_count(device, buf, n, notice, sizeof notice), 0);
        ck_assert(notice[0] != '\0');
    }
    /* Flip one byte of a valid file at every position: never a crash; the result is either the
     * whole cache (a change the format cannot see, e.g. inside a time's digits) or nothing. */
    for (size_t i = 0; i < len; i++) {
        char *copy = malloc(len);
        memcpy(copy, text, len);
        copy[i] = (char)(copy[i] ^ 0x5a);
        int got = parse_count(device, copy, len, notice, sizeof notice);
        ck_assert_msg(got == 0 || got == 3, "byte %zu flipped: %d entries kept", i, got);
        ck_assert(got == 3 || notice[0] != '\0');
        free(copy);
    }
    /* An embedded NUL. */
    char *copy = malloc(len);
    memcpy(copy, text, len);
    copy[len / 2] = '\0';
    ck_assert_int_eq(parse_count(device, copy, len, notice, sizeof notice), 0);
    free(copy);
    free(text);
}
END_TEST

START_TEST(test_unreadable_and_unwritable)
{
    char notice[256];
    gr_timing_cache c;
    gr_timing_cache_init(&c, device);
    /* A garbage file: a notice naming it. */
    char path[128];
    temp_path(path, sizeof path);
    write_text(path, "garbage\n", 8);
    gr_timing_cache_load(&c, path, notice, sizeof notice);
    ck_assert_int_eq(c.n, 0);
    ck_assert_ptr_nonnull(strstr(notice, path));
    remove(path);
    /* A directory is not a cache file. */
    gr_timing_cache_load(&c, "/tmp", notice, sizeof notice);
    ck_assert_int_eq(c.n, 0);
    ck_assert(notice[0] != '\0');
    ck_assert_int_eq(gr_timing_cache_put(&c, "k", 1, 1, 1.0, 1.0), GR_OK);
    ck_assert_int_eq(gr_timing_cache_save(&c, "/nonexistent/dir/cache.txt"), GR_ERR_IO);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "/nonexistent/dir/cache.txt"));
    /* What the format cannot hold is refused at put. */
    ck_assert_int_eq(gr_timing_cache_put(&c, "has space", 1, 1, 1.0, 1.0), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gr_timing_cache_put(&c, "", 1, 1, 1.0, 1.0), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gr_timing_cache_put(&c, "k2", 1, 1, 0.0, 1.0), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gr_timing_cache_put(&c, "k2", 1, 99, 1.0, 1.0), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(c.n, 1);
    gr_timing_cache_free(&c);
    /* A device string with a newline cannot break the file's lines. */
    gr_timing_cache_init(&c, "GPU\nentries 0");
    ck_assert_ptr_null(strchr(c.device, '\n'));
    gr_timing_cache_free(&c);
}
END_TEST

/* A timing cache that is not a regular file: a FIFO is ignored with a notice at once (not read,
 * which would block) and refused as a target, and stays a FIFO. */
START_TEST(test_fifo_neither_blocks_nor_is_replaced)
{
    char path[64], notice[256];
    snprintf(path, sizeof path, "/tmp/gr_tcache_fifo_%d", (int)getpid());
    unlink(path);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    gr_timing_cache c;
    gr_timing_cache_init(&c, device);
    gr_timing_cache_load(&c, path, notice, sizeof notice);
    ck_assert_int_eq(c.n, 0);
    ck_assert_msg(strstr(notice, "not a regular file (a FIFO)"), "%s", notice);
    ck_assert_int_eq(gr_timing_cache_put(&c, "k", 1, 1, 1.0, 1.0), GR_OK);
    ck_assert_int_eq(gr_timing_cache_save(&c, path), GR_ERR_IO);
    ck_assert_msg(strstr(gr_last_error(), "not a regular file (a FIFO)"), "%s", gr_last_error());
    struct stat sb;
    ck_assert_int_eq(lstat(path, &sb), 0);
    ck_assert(S_ISFIFO(sb.st_mode));
    gr_timing_cache_free(&c);
    unlink(path);
}
END_TEST

static Suite *tcache_suite(void)
{
    Suite *s = suite_create("timing_cache");
    TCase *tc = tcase_create("timing_cache");
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_missing_file_is_empty_without_notice);
    tcase_add_test(tc, test_other_device_ignored);
    tcase_add_test(tc, test_other_version_ignored);
    tcase_add_test(tc, test_every_truncation_ignored);
    tcase_add_test(tc, test_bad_entries_ignored);
    tcase_add_test(tc, test_unknown_tactics_ignored);
    tcase_add_test(tc, test_checksum_mismatch_ignored);
    tcase_add_test(tc, test_micro_batch_entries);
    tcase_add_test(tc, test_format4_refused);
    tcase_add_test(tc, test_garbage_never_crashes);
    tcase_add_test(tc, test_unreadable_and_unwritable);
    tcase_add_test(tc, test_fifo_neither_blocks_nor_is_replaced);
    suite_add_tcase(s, tc);
    /* Its own case: a time limit that lets the quadratic parser fail by its assertion. */
    TCase *big = tcase_create("full");
    tcase_set_timeout(big, 300);
    tcase_add_test(big, test_full_cache_is_linear);
    suite_add_tcase(s, big);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(tcache_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
