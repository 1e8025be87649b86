/* libFuzzer harness: many files through ONE long-lived gr_image_reader, as a streaming worker
 * decodes a folder. A decoder that keeps state between files (the reader's TurboJPEG handle, its
 * buffers) must come out of any failure as able as a new one: after every failed file a known-good
 * JPEG, made once at start-up, is decoded through the same reader and must give the same bytes a
 * fresh reader gives, or the harness aborts (which is how libFuzzer reports it).
 *
 * Input: one byte of flags, then up to MAX_FILES files separated by SEPARATOR. Before file i the
 * reader's fast decode is toggled when bit i of the flags is set (on: a 16x16 network, which
 * scales the known-good 64x48 JPEG to 1/4). Files whose header claims more than 2^20 pixels are
 * skipped, as in fuzz_image.c (a tiny file may declare a huge image; decoding it tells the fuzzer
 * nothing). */
#define _POSIX_C_SOURCE 200809L

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graphrun/runtime.h"
#include "runtime/image/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SEPARATOR "--grseq--"
#define MAX_FILES 8
#define FUZZ_MAX_PIXELS ((size_t)1 << 20)
#define FAST_NET 16

static char file_path[64], good_path[64];
static gr_image_reader *reader;
static gr_image good[2]; /* the known-good JPEG as a fresh reader decodes it: exact, fast */

static void must(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_image_sequence: %s: %s\n", what, gr_last_error());
        abort();
    }
}

static void remove_files(void)
{
    unlink(good_path);
    unlink(file_path);
}

/* A 64x48 JPEG of gradients and noise, and what fresh readers decode it to. */
static void make_good_image(void)
{
    snprintf(good_path, sizeof good_path, "/tmp/gr_fuzz_sequence_good_%d.jpg", (int)getpid());
    snprintf(file_path, sizeof file_path, "/tmp/gr_fuzz_sequence_file_%d", (int)getpid());
    uint8_t px[64 * 48 * 3];
    for (size_t i = 0; i < sizeof px; i++)
        px[i] = (uint8_t)(i * 7 + (i / 192) * 3 + (i * 2654435761u >> 27));
    gr_image src = {.w = 64, .h = 48, .c = 3, .data = px};
    must(gr_image_write(&src, good_path) == GR_OK, "writing the known-good JPEG");
    atexit(remove_files);
    for (int fast = 0; fast < 2; fast++) {
        gr_image_reader *fresh = NULL;
        const gr_image *im = NULL;
        must(gr_image_reader_create(&fresh) == GR_OK, "reader");
        if (fast)
            gr_image_reader_fast_decode(fresh, GR_PREPROCESS_LETTERBOX, FAST_NET, FAST_NET);
        must(gr_image_reader_load(fresh, good_path, &im) == GR_OK, "decoding the known-good JPEG");
        size_t n = (size_t)im->w * (size_t)im->h * 3;
        good[fast] = (gr_image){.w = im->w, .h = im->h, .c = 3, .data = malloc(n)};
        must(good[fast].data != NULL, "out of memory");
        memcpy(good[fast].data, im->data, n);
        gr_image_reader_destroy(fresh);
    }
    must(good[1].w < good[0].w, "fast decode does not scale the known-good JPEG");
    must(gr_image_reader_create(&reader) == GR_OK, "reader");
}

/* The long-lived reader still decodes the known-good JPEG as a fresh one does. */
static void check_reader_healthy(bool fast, const char *after)
{
    const gr_image *im = NULL;
    if (gr_image_reader_load(reader, good_path, &im) != GR_OK) {
        fprintf(stderr, "fuzz_image_sequence: the known-good JPEG fails after %s\n", after);
        must(false, "known-good JPEG");
    }
    const gr_image *want = &good[fast];
    if (im->w != want->w || im->h != want->h ||
        memcmp(im->data, want->data, (size_t)want->w * (size_t)want->h * 3) != 0) {
        fprintf(stderr, "fuzz_image_sequence: the known-good JPEG decodes differently after %s\n",
                after);
        abort();
    }
}

static void write_file(const uint8_t *data, size_t len)
{
    FILE *f = fopen(file_path, "wb");
    must(f != NULL, "creating the temporary file");
    must(len == 0 || fwrite(data, 1, len, f) == len, "writing the temporary file");
    must(fclose(f) == 0, "closing the temporary file");
}

static const uint8_t *find_separator(const uint8_t *p, const uint8_t *end)
{
    size_t n = sizeof SEPARATOR - 1;
    for (; (size_t)(end - p) >= n; p++)
        if (memcmp(p, SEPARATOR, n) == 0)
            return p;
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!reader)
        make_good_image();
    if (size < 1)
        return 0;
    unsigned flags = data[0];
    const uint8_t *p = data + 1, *end = data + size;
    bool fast = false;
    gr_image_reader_fast_decode(reader, GR_PREPROCESS_LETTERBOX, 0, 0); /* each input starts from the same settings */
    for (int i = 0; i < MAX_FILES && p <= end; i++) {
        const uint8_t *sep = find_separator(p, end);
        const uint8_t *file_end = sep ? sep : end;
        if (flags >> i & 1) {
            fast = !fast;
            gr_image_reader_fast_decode(reader, GR_PREPROCESS_LETTERBOX, fast ? FAST_NET : 0, fast ? FAST_NET : 0);
        }
        size_t len = (size_t)(file_end - p);
        int w = 0, h = 0;
        bool huge = gr_image_probe_mem(p, len, "file", &w, &h) == GR_OK &&
                    (size_t)w * (size_t)h > FUZZ_MAX_PIXELS;
        if (!huge) {
            write_file(p, len);
            const gr_image *im = NULL;
            if (gr_image_reader_load(reader, file_path, &im) != GR_OK) {
                char after[64];
                snprintf(after, sizeof after, "failed file %d", i);
                check_reader_healthy(fast, after);
            } else if (im->c != 3 || im->w <= 0 || im->h <= 0) {
                abort();
            }
        }
        if (!sep)
            break;
        p = sep + sizeof SEPARATOR - 1;
    }
    return 0;
}
