/* GPU suite for JPEG decoding on the GPU (gr_engine_decode_jpegs: runtime/gpu/jpeg.c, the
 * letterbox kernel kernels/letterbox.cu). Exits 77 without a GPU; without nvJPEG in the build the
 * decoding cases check the refusal and skip their comparisons with one line.
 *
 *  - The letterbox kernel equals gr_image_letterbox_u8 byte for byte on the same pixels (no
 *    tolerance: the same float operations in the same order), for odd sizes, 1-pixel images,
 *    up- and down-scaling, square and non-square networks, and more images than one launch takes.
 *  - Through the engine: the device input after gr_engine_decode_jpegs is the CPU letterbox of
 *    the pixels nvJPEG decoded (read back), exactly; those pixels against libjpeg-turbo's decode
 *    of the same file: the difference is printed and bounded (mean |d| <= 2, 99.9th percentile
 *    <= 40 levels: IDCT and chroma-upsampling choices the JPEG standard leaves open, T.81 A.3.3
 *    and A.1.1; libjpeg-turbo's "fancy" triangular upsampling against a decoder's own is the
 *    largest part, at colour edges).
 *  - A run on the decoded input gives the outputs of a run on the same bytes through the pinned
 *    buffer, bit for bit; a batch mixing GPU-decoded and host-filled images, and host runs after
 *    it (the graph's input copy enabled again), too.
 *  - Damaged files: one whose entropy-coded data is broken and a truncated one, in a batch between
 *    good ones, never change what the next batch's good images decode to (no poisoning). */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

#include <cuda_runtime_api.h>

#include "graphrun/runtime.h"
#include "kernels/image.h"
#include "runtime/gpu/debug.h"
#include "runtime/image/image.h"
#include "tests/support/gpu_test.h"

static unsigned next_random(unsigned *state)
{
    *state = *state * 1103515245u + 12345u;
    return *state >> 8;
}

/* A w x h RGB image: smooth colour ramps, edges and noise (never blank). */
static gr_image *make_image(int w, int h, unsigned seed)
{
    gr_image *im = calloc(1, sizeof *im);
    ck_assert_ptr_nonnull(im);
    im->w = w;
    im->h = h;
    im->c = 3;
    im->data = malloc((size_t)w * (size_t)h * 3);
    ck_assert_ptr_nonnull(im->data);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *p = im->data + ((size_t)y * (size_t)w + (size_t)x) * 3;
            int edge = ((x / 37) + (y / 23)) % 2 ? 60 : 0;
            p[0] = (uint8_t)((x * 255) / (w > 1 ? w - 1 : 1) / 2 + edge + next_random(&seed) % 16);
            p[1] = (uint8_t)((y * 255) / (h > 1 ? h - 1 : 1) / 2 + next_random(&seed) % 16);
            p[2] = (uint8_t)(200 - edge + next_random(&seed) % 40);
        }
    return im;
}

static uint8_t *encode(const gr_image *im, int subsamp, unsigned long *len)
{
    tjhandle tj = tjInitCompress();
    ck_assert_ptr_nonnull(tj);
    uint8_t *jpeg = NULL;
    *len = 0;
    ck_assert_int_eq(tjCompress2(tj, im->data, im->w, 0, im->h, TJPF_RGB, &jpeg, len, subsamp,
                                 88, 0), 0);
    tjDestroy(tj);
    return jpeg;
}

/* ---- the letterbox kernel ------------------------------------------------------------------ */

START_TEST(test_letterbox_kernel_equals_cpu)
{
    static const int sizes[][2] = {{1, 1},     {1, 37},    {53, 1},    {640, 480}, {416, 416},
                                   {1000, 300}, {100, 1000}, {3, 2},    {415, 417}, {2000, 1333},
                                   {17, 911},  {299, 301}};
    static const int nets[][2] = {{416, 416}, {320, 256}, {64, 96}};
    const int n_sizes = (int)(sizeof sizes / sizeof sizes[0]);
    const int n = 3 * n_sizes + 4; /* more than GR_LETTERBOX_PER_LAUNCH */
    ck_assert_int_gt(n, GR_LETTERBOX_PER_LAUNCH);
    /* Darknet's letterbox, AlexeyAB's stretch (the same kernel on the stretch geometry) and the
     * letterbox with Ultralytics' border 114 (ONNX models' default). */
    static const gr_preprocess hows[] = {GR_PREPROCESS_LETTERBOX, GR_PREPROCESS_STRETCH,
                                         GR_PREPROCESS_LETTERBOX_114};
    for (size_t t = 0; t < 3 * sizeof nets / sizeof nets[0]; t++) {
        gr_preprocess how = hows[t % 3];
        int net_w = nets[t / 3][0], net_h = nets[t / 3][1];
        size_t per_image = (size_t)net_w * (size_t)net_h * 3;
        gr_letterbox_job *jobs = calloc((size_t)n, sizeof *jobs);
        gr_image **ims = calloc((size_t)n, sizeof *ims);
        uint8_t **src = calloc((size_t)n, sizeof *src);
        uint8_t *dst = NULL, *got = malloc(per_image * (size_t)n), *want = malloc(per_image);
        ck_assert(jobs && ims && src && got && want);
        ck_assert_int_eq(cudaMalloc((void **)&dst, per_image * (size_t)n), cudaSuccess);
        for (int i = 0; i < n; i++) {
            ims[i] = make_image(sizes[i % n_sizes][0], sizes[i % n_sizes][1], (unsigned)(i + 1));
            size_t bytes = (size_t)ims[i]->w * (size_t)ims[i]->h * 3;
            ck_assert_int_eq(cudaMalloc((void **)&src[i], bytes), cudaSuccess);
            ck_assert_int_eq(cudaMemcpy(src[i], ims[i]->data, bytes, cudaMemcpyHostToDevice),
                             cudaSuccess);
            gr_letterbox_geom g;
            gr_letterbox_geometry(how, ims[i]->w, ims[i]->h, net_w, net_h, &g);
            jobs[i] = (gr_letterbox_job){.src = src[i], .dst = dst + (size_t)i * per_image,
                                         .src_w = ims[i]->w, .src_h = ims[i]->h,
                                         .pitch = 3 * ims[i]->w, .new_w = g.new_w,
                                         .new_h = g.new_h, .left = g.left, .top = g.top,
                                         .w_scale = g.w_scale, .h_scale = g.h_scale,
                                         .pad = g.pad};
        }
        ck_assert_int_eq(gr_launch_letterbox_u8(jobs, n, net_w, net_h, NULL), cudaSuccess);
        ck_assert_int_eq(cudaMemcpy(got, dst, per_image * (size_t)n, cudaMemcpyDeviceToHost),
                         cudaSuccess);
        for (int i = 0; i < n; i++) {
            ck_assert_int_eq(gr_image_preprocess_u8(ims[i], how, net_w, net_h, want), GR_OK);
            const uint8_t *g8 = got + (size_t)i * per_image;
            for (size_t b = 0; b < per_image; b++)
                ck_assert_msg(g8[b] == want[b], "%dx%d into %dx%d (%s): byte %zu: GPU %u, CPU %u",
                              ims[i]->w, ims[i]->h, net_w, net_h, gr_preprocess_name(how), b,
                              g8[b], want[b]);
            cudaFree(src[i]);
            gr_image_destroy(ims[i]);
        }
        cudaFree(dst);
        free(jobs);
        free(ims);
        free(src);
        free(got);
        free(want);
    }
}
END_TEST

/* ---- through the engine -------------------------------------------------------------------- */

enum { BATCH = 6 };

typedef struct fixture {
    gr_model *model;
    gr_engine *engine;
    int net_w, net_h;
    size_t per_image;
} fixture;

static int open_fixture(fixture *f, int inflight, gr_preprocess how)
{
    memset(f, 0, sizeof *f);
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = "shapes";
    ck_assert_msg(gr_model_load(&mo, &f->model) == GR_OK, "%s", gr_last_error());
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_GPU;
    eo.precision = GR_PREC_FP16;
    eo.batch = BATCH;
    eo.inflight = inflight;
    eo.preprocess = how;
    ck_assert_msg(gr_engine_build(f->model, &eo, &f->engine) == GR_OK, "%s", gr_last_error());
    ck_assert_int_eq(gr_model_preprocess(gr_engine_model(f->engine)),
                     how == GR_PREPROCESS_STRETCH ? GR_PREPROCESS_STRETCH : GR_PREPROCESS_LETTERBOX);
    gr_model_info info;
    gr_model_get_info(f->model, &info);
    f->net_w = info.width;
    f->net_h = info.height;
    f->per_image = (size_t)f->net_w * (size_t)f->net_h * 3;
    int decoded[1];
    gr_status st = gr_engine_decode_jpegs(f->engine, 0, 0, NULL, NULL, decoded);
    if (st == GR_ERR_UNSUPPORTED) {
        printf("SKIP gpu_jpeg: %s\n", gr_last_error());
        return 0;
    }
    ck_assert_msg(st == GR_OK, "%s", gr_last_error());
    printf("gpu_jpeg: %s\n", gr_engine_jpeg_decoder(f->engine, NULL));
    return 1;
}

static void close_fixture(fixture *f)
{
    gr_engine_destroy(f->engine);
    gr_model_destroy(f->model);
}

/* The files of one batch: JPEGs of several sizes and subsamplings. */
typedef struct batch_files {
    uint8_t *data[BATCH];
    size_t len[BATCH];
    gr_image *source[BATCH];
} batch_files;

static void make_batch(batch_files *b, unsigned seed)
{
    static const int subsamp[] = {TJSAMP_420, TJSAMP_422, TJSAMP_444, TJSAMP_440};
    static const int sizes[][2] = {{640, 480}, {333, 500}, {1024, 683}, {416, 416}, {97, 61},
                                   {800, 600}};
    for (int i = 0; i < BATCH; i++) {
        b->source[i] = make_image(sizes[i][0], sizes[i][1], seed + (unsigned)i);
        unsigned long len;
        b->data[i] = encode(b->source[i], subsamp[i % 4], &len);
        b->len[i] = len;
    }
}

static void free_batch(batch_files *b)
{
    for (int i = 0; i < BATCH; i++) {
        tjFree(b->data[i]);
        gr_image_destroy(b->source[i]);
    }
}

/* The engine's outputs of the slot's last run, copied. */
static float *outputs_copy(gr_engine *e, size_t *count)
{
    size_t total = 0;
    int heads = gr_engine_output_count(e);
    for (int k = 0; k < heads; k++) {
        gr_tensor_desc d;
        gr_engine_output_desc(e, k, &d);
        total += (size_t)d.n * (size_t)d.c * (size_t)d.h * (size_t)d.w;
    }
    float *out = malloc(total * sizeof *out);
    ck_assert_ptr_nonnull(out);
    size_t at = 0;
    for (int k = 0; k < heads; k++) {
        gr_tensor_desc d;
        const float *v;
        gr_engine_output_desc(e, k, &d);
        ck_assert_int_eq(gr_engine_output(e, k, &v), GR_OK);
        size_t n = (size_t)d.n * (size_t)d.c * (size_t)d.h * (size_t)d.w;
        memcpy(out + at, v, n * sizeof *v);
        at += n;
    }
    *count = total;
    return out;
}

/* Decode the batch on the GPU into `slot`, run it, and return the device input read back and the
 * outputs; images with skip[i] go through the host buffer (CPU decode and letterbox). */
static void run_decoded(fixture *f, int slot, const batch_files *b, const int *skip,
                        uint8_t *input, float **out, size_t *n_out)
{
    const uint8_t *data[BATCH];
    size_t len[BATCH];
    int decoded[BATCH];
    void *buffer;
    size_t bytes;
    ck_assert_int_eq(gr_engine_slot_input(f->engine, slot, 1, &buffer, &bytes), GR_OK);
    for (int i = 0; i < BATCH; i++) {
        data[i] = skip && skip[i] ? NULL : b->data[i];
        len[i] = b->len[i];
        if (!data[i]) {
            gr_image *im = NULL;
            ck_assert_int_eq(gr_image_decode_mem(b->data[i], b->len[i], "x.jpg", &im), GR_OK);
            ck_assert_int_eq(gr_engine_letterbox(f->engine, im,
                                                 (uint8_t *)buffer + (size_t)i * f->per_image),
                             GR_OK);
            gr_image_destroy(im);
        }
    }
    ck_assert_msg(gr_engine_decode_jpegs(f->engine, slot, BATCH, data, len, decoded) == GR_OK,
                  "%s", gr_last_error());
    for (int i = 0; i < BATCH; i++)
        ck_assert_int_eq(decoded[i], data[i] != NULL);
    ck_assert_int_eq(gr_engine_submit(f->engine, slot), GR_OK);
    ck_assert_msg(gr_engine_wait(f->engine, slot) == GR_OK, "%s", gr_last_error());
    /* after the run: the host-filled images are copied at the submit (the run reads, never
     * writes, its input) */
    ck_assert_int_eq(gr_engine_debug_device_input(f->engine, slot, input, BATCH * f->per_image),
                     GR_OK);
    *out = outputs_copy(f->engine, n_out);
}

/* A run of `input` through the host buffer (the captured input copy). */
static float *run_host(fixture *f, int slot, const uint8_t *input, size_t *n_out)
{
    void *buffer;
    size_t bytes;
    ck_assert_int_eq(gr_engine_slot_input(f->engine, slot, 1, &buffer, &bytes), GR_OK);
    ck_assert_uint_eq(bytes, BATCH * f->per_image);
    memcpy(buffer, input, bytes);
    ck_assert_int_eq(gr_engine_submit(f->engine, slot), GR_OK);
    ck_assert_msg(gr_engine_wait(f->engine, slot) == GR_OK, "%s", gr_last_error());
    return outputs_copy(f->engine, n_out);
}

static void assert_same_outputs(const float *a, const float *b, size_t n, const char *what)
{
    size_t differ = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof *a) != 0 && differ++ == 0)
            first = i;
    ck_assert_msg(differ == 0, "%s: %zu of %zu outputs differ, the first at %zu (%.9g vs %.9g)",
                  what, differ, n, first, (double)a[first], (double)b[first]);
}

/* The device input of a decoded batch is the CPU's preprocessing (`how`) of the GPU's pixels. */
static void decoded_input_is_cpu_preprocess_of_gpu_pixels(gr_preprocess how)
{
    fixture f;
    if (!open_fixture(&f, 1, how))
        return;
    batch_files b;
    make_batch(&b, 11);
    uint8_t *input = malloc(BATCH * f.per_image), *want = malloc(f.per_image);
    float *out;
    size_t n_out;
    run_decoded(&f, 0, &b, NULL, input, &out, &n_out);
    double sum = 0.0;
    size_t count = 0, hist[256] = {0};
    int worst = 0;
    for (int i = 0; i < BATCH; i++) {
        gr_image *gpu = NULL, *cpu = NULL;
        ck_assert_msg(gr_engine_debug_jpeg_pixels(f.engine, 0, i, &gpu) == GR_OK, "%s",
                      gr_last_error());
        ck_assert_int_eq(gr_image_decode_mem(b.data[i], b.len[i], "x.jpg", &cpu), GR_OK);
        ck_assert_int_eq(gpu->w, cpu->w);
        ck_assert_int_eq(gpu->h, cpu->h);
        /* the device input is the CPU letterbox (or stretch) of the GPU's pixels, exactly */
        ck_assert_int_eq(gr_image_preprocess_u8(gpu, how == GR_PREPROCESS_STRETCH
                                                         ? GR_PREPROCESS_STRETCH
                                                         : GR_PREPROCESS_LETTERBOX,
                                                f.net_w, f.net_h, want), GR_OK);
        ck_assert_msg(memcmp(want, input + (size_t)i * f.per_image, f.per_image) == 0,
                      "image %d: the device input is not the %s of the decoded pixels", i,
                      gr_preprocess_name(how));
        /* the GPU's pixels against libjpeg-turbo's */
        size_t px = (size_t)cpu->w * (size_t)cpu->h * 3;
        for (size_t k = 0; k < px; k++) {
            int d = abs((int)gpu->data[k] - (int)cpu->data[k]);
            sum += d;
            hist[d]++;
            worst = d > worst ? d : worst;
        }
        count += px;
        gr_image_destroy(gpu);
        gr_image_destroy(cpu);
    }
    size_t below = 0;
    int p999 = 0;
    for (int d = 0; d < 256; d++) {
        below += hist[d];
        if ((double)below >= 0.999 * (double)count) {
            p999 = d;
            break;
        }
    }
    double mean = sum / (double)count;
    printf("gpu_jpeg: decoded pixels vs libjpeg-turbo over %zu values: mean |d| %.3f, "
           "99.9th percentile %d, max %d, equal %.1f%%\n",
           count, mean, p999, worst, 100.0 * (double)hist[0] / (double)count);
    ck_assert_msg(mean <= 2.0 && p999 <= 40, "mean |d| %.3f, 99.9th percentile %d", mean, p999);
    /* and the run on it equals a run of the same bytes through the pinned buffer */
    size_t n_host;
    float *host = run_host(&f, 0, input, &n_host);
    ck_assert_uint_eq(n_host, n_out);
    assert_same_outputs(out, host, n_out, "GPU-decoded input vs the same bytes from the host");
    free(host);
    free(out);
    free(input);
    free(want);
    free_batch(&b);
    close_fixture(&f);
}

START_TEST(test_decoded_input_is_cpu_letterbox_of_gpu_pixels)
{
    decoded_input_is_cpu_preprocess_of_gpu_pixels(GR_PREPROCESS_AUTO); /* shapes: letterbox */
}
END_TEST

START_TEST(test_decoded_input_is_cpu_stretch_of_gpu_pixels)
{
    decoded_input_is_cpu_preprocess_of_gpu_pixels(GR_PREPROCESS_STRETCH);
}
END_TEST

/* Images 1 and 4 from the host buffer, the rest decoded; then host runs again, in both slots. */
START_TEST(test_mixed_batch_and_host_runs_after)
{
    fixture f;
    if (!open_fixture(&f, 2, GR_PREPROCESS_AUTO))
        return;
    batch_files b;
    make_batch(&b, 23);
    static const int skip[BATCH] = {0, 1, 0, 0, 1, 0};
    uint8_t *mixed_in = malloc(BATCH * f.per_image), *all_in = malloc(BATCH * f.per_image);
    float *mixed, *all;
    size_t n_out;
    run_decoded(&f, 1, &b, skip, mixed_in, &mixed, &n_out);
    run_decoded(&f, 0, &b, NULL, all_in, &all, &n_out);
    /* the host-filled images are the CPU decode's letterbox, the others the GPU's */
    for (int i = 0; i < BATCH; i++) {
        int same = memcmp(mixed_in + (size_t)i * f.per_image, all_in + (size_t)i * f.per_image,
                          f.per_image) == 0;
        if (!skip[i])
            ck_assert_msg(same, "image %d, decoded in both runs, differs", i);
    }
    for (int slot = 0; slot < 2; slot++) {
        size_t n_host;
        float *host = run_host(&f, slot, mixed_in, &n_host);
        assert_same_outputs(mixed, host, n_out, "mixed batch vs the same bytes from the host");
        free(host);
        host = run_host(&f, slot, all_in, &n_host);
        assert_same_outputs(all, host, n_out, "decoded batch vs the same bytes from the host");
        free(host);
    }
    free(mixed);
    free(all);
    free(mixed_in);
    free(all_in);
    free_batch(&b);
    close_fixture(&f);
}
END_TEST

/* Flip bits in the middle of the entropy-coded data (never making a 0xFF). */
static void damage_scan(uint8_t *d, size_t len)
{
    size_t sos = 2;
    while (sos + 4 < len && !(d[sos] == 0xFF && d[sos + 1] == 0xDA))
        sos += 2 + ((size_t)d[sos + 2] << 8 | d[sos + 3]);
    size_t start = sos + 2 + ((size_t)d[sos + 2] << 8 | d[sos + 3]);
    for (size_t k = start + (len - start) / 3; k < start + (len - start) / 2; k += 7)
        if (d[k] != 0xFF && (d[k] ^ 0x5A) != 0xFF)
            d[k] ^= 0x5A;
}

START_TEST(test_damaged_files_never_poison_the_next_batch)
{
    fixture f;
    if (!open_fixture(&f, 1, GR_PREPROCESS_AUTO))
        return;
    batch_files good;
    make_batch(&good, 37);
    uint8_t *first = malloc(BATCH * f.per_image), *again = malloc(BATCH * f.per_image);
    float *out1, *out2;
    size_t n_out;
    run_decoded(&f, 0, &good, NULL, first, &out1, &n_out);
    /* a batch with a damaged scan, a truncated file and garbage among good files */
    batch_files bad;
    make_batch(&bad, 41);
    damage_scan(bad.data[1], bad.len[1]);
    bad.len[3] = bad.len[3] / 2;
    memset(bad.data[5] + 2, 0x37, bad.len[5] - 2);
    const uint8_t *data[BATCH];
    int decoded[BATCH];
    for (int i = 0; i < BATCH; i++)
        data[i] = bad.data[i];
    ck_assert_msg(gr_engine_decode_jpegs(f.engine, 0, BATCH, data, bad.len, decoded) == GR_OK,
                  "%s", gr_last_error());
    printf("gpu_jpeg: the damaged batch: decoded %d %d %d %d %d %d (1: on the GPU)\n", decoded[0],
           decoded[1], decoded[2], decoded[3], decoded[4], decoded[5]);
    ck_assert_int_eq(decoded[5], 0); /* no JPEG header at all */
    ck_assert_int_eq(gr_engine_submit(f.engine, 0), GR_OK);
    ck_assert_msg(gr_engine_wait(f.engine, 0) == GR_OK, "%s", gr_last_error());
    /* the good batch again: the same device input and outputs as the first time */
    run_decoded(&f, 0, &good, NULL, again, &out2, &n_out);
    ck_assert_msg(memcmp(first, again, BATCH * f.per_image) == 0,
                  "the good batch decodes differently after the damaged one");
    assert_same_outputs(out1, out2, n_out, "good batch before and after the damaged one");
    free(out1);
    free(out2);
    free(first);
    free(again);
    free_batch(&good);
    free_batch(&bad);
    close_fixture(&f);
}
END_TEST

static Suite *gpu_jpeg_suite(void)
{
    Suite *s = suite_create("gpu_jpeg");
    TCase *tc = tcase_create("gpu_jpeg");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_letterbox_kernel_equals_cpu);
    tcase_add_test(tc, test_decoded_input_is_cpu_letterbox_of_gpu_pixels);
    tcase_add_test(tc, test_decoded_input_is_cpu_stretch_of_gpu_pixels);
    tcase_add_test(tc, test_mixed_batch_and_host_runs_after);
    tcase_add_test(tc, test_damaged_files_never_poison_the_next_batch);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (!gr_test_have_gpu("gpu_jpeg"))
        return 77;
    int failed = gr_test_run_in_process(gpu_jpeg_suite());
    return failed == 0 ? 0 : 1;
}
