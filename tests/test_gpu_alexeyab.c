/* AlexeyAB Darknet's models on the GPU: the built-ins yolov4-tiny, yolov7-tiny, yolov4 and
 * yolov4-csp (synthetic weights, seed 1) against the CPU reference, which tests/test_alexeyab.c
 * checks against AlexeyAB's own build. The GPU path adds to what yolov2/yolov3 exercise: mish
 * and logistic conv epilogues, route groups (yolov4-tiny), 4-input routes and size-5/9/13 SPP
 * maxpools, scale_x_y and new_coords in the yolo head kernel, and deep CSP graphs.
 * Input: data/dog.jpg letterboxed; yolov4 and yolov4-csp at 256 x 256 (cfg width/height
 * overridden) to keep the CPU reference short.
 *
 * Per head, NRMSE = RMSE / range of the fp32 CPU reference (which equals AlexeyAB's own CPU
 * build to the last printed digit, tests/data/alexeyab/README.md): the bounds are in the test
 * below. int8 is printed only. The fp32 detection counts (threshold 0.5) are printed beside the
 * CPU's, not asserted: a probability at the threshold may fall either way. A failure names the
 * model, precision, head and the NRMSE. Exits 77 without a GPU.
 * The figures quoted below were measured with the synthetic weights of before 2026-11-26 evening,
 * whose one-image calibration drove the three deep nets' heads to +-1e4 or into saturation; the
 * deep nets now calibrate on four images (models/synthetic.c) and their heads stay within +-20,
 * which can only shrink the fp16 errors. Not yet rerun on a GPU with them. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graphrun/runtime.h"
#include "tests/support/gpu_test.h"

typedef struct gpu_case {
    const char *name;
    int size; /* 0: the cfg's own */
} gpu_case;

static const gpu_case cases[] = {
    {"yolov4-tiny", 0}, {"yolov7-tiny", 0}, {"yolov4", 256}, {"yolov4-csp", 256}};

/* The built-in cfg with width/height set to `size`, into `path`. */
static void write_sized_cfg(const char *model, int size, const char *path)
{
    char src[256], line[4096];
    snprintf(src, sizeof src, "models/%s.cfg", model);
    FILE *in = fopen(src, "r"), *out = fopen(path, "w");
    ck_assert_msg(in && out, "cannot copy %s to %s", src, path);
    while (fgets(line, sizeof line, in)) {
        if (strncmp(line, "width=", 6) == 0 || strncmp(line, "height=", 7) == 0)
            fprintf(out, "%.*s=%d\n", (int)strcspn(line, "="), line, size);
        else
            fputs(line, out);
    }
    fclose(in);
    ck_assert_int_eq(fclose(out), 0);
}

static gr_model *load(const gpu_case *c, char *cfg_path)
{
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = c->name;
    if (c->size) {
        int fd = mkstemp(cfg_path);
        ck_assert_int_ge(fd, 0);
        close(fd);
        write_sized_cfg(c->name, c->size, cfg_path);
        mo.builtin = NULL;
        mo.cfg_path = cfg_path;
    }
    gr_model *m = NULL;
    ck_assert_msg(gr_model_load(&mo, &m) == GR_OK, "%s: %s", c->name, gr_last_error());
    return m;
}

static gr_engine *build(const gr_model *m, gr_device d, gr_precision p)
{
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = d;
    eo.precision = p;
    gr_engine *e = NULL;
    ck_assert_msg(gr_engine_build(m, &eo, &e) == GR_OK, "%s: %s", gr_precision_name(p),
                  gr_last_error());
    return e;
}

static double nrmse(const float *x, const float *y, size_t n)
{
    double se = 0, lo = y[0], hi = y[0];
    for (size_t i = 0; i < n; i++) {
        double d = (double)x[i] - (double)y[i];
        se += d * d;
        lo = fmin(lo, (double)y[i]);
        hi = fmax(hi, (double)y[i]);
    }
    return hi > lo ? sqrt(se / (double)n) / (hi - lo) : sqrt(se / (double)n);
}

static size_t output_elems(const gr_engine *e, int k)
{
    gr_tensor_desc d;
    ck_assert(gr_engine_output_desc(e, k, &d) == GR_OK);
    return (size_t)d.n * d.c * d.h * d.w;
}

static int count_dets(const gr_engine *e)
{
    gr_detect_options opt;
    gr_detect_options_default(&opt);
    gr_detection *d = NULL;
    int n = 0;
    ck_assert_msg(gr_engine_detect(e, 0, &opt, &d, &n) == GR_OK, "%s", gr_last_error());
    gr_detections_free(d);
    return n;
}

START_TEST(alexeyab_models_match_cpu_reference)
{
    const gpu_case *c = &cases[_i];
    char cfg[] = "/tmp/gr_gpu_alexeyab_XXXXXX";
    gr_model *m = load(c, cfg);
    gr_model_info info;
    ck_assert(gr_model_get_info(m, &info) == GR_OK);
    gr_image *im = NULL;
    ck_assert_msg(gr_image_load("data/dog.jpg", &im) == GR_OK, "%s", gr_last_error());
    size_t n_in = (size_t)3 * info.width * info.height;
    float *input = malloc(n_in * sizeof *input);
    ck_assert_ptr_nonnull(input);
    ck_assert(gr_image_letterbox(im, info.width, info.height, input) == GR_OK);
    /* fp32 and fp16 against the CPU engine of the same precision (its emulation rounds as the
     * GPU does; what differs is the fp32 summation order): fp32 1e-4; fp16 5e-2, because one
     * half-precision rounding that the summation order flips is carried through 40 to 170 layers
     * of synthetic weights whose activations grow to 1e4 (measured on the H100: yolov4-tiny
     * 4.7e-4, yolov4 2.8e-3, yolov7-tiny 7.7e-3, yolov4-csp 4.4e-2; fp16 against fp32: up to
     * 0.07). A wrong activation or box decoding gives NRMSE of order 1. int8 is printed against the CPU fp32 engine only: the GPU calibrates on the GPU, the
     * CPU engine on the CPU, and the ranges agree to ~1e-5 relative, not bit for bit. */
    static const double limit[] = {1e-4, 5e-2, INFINITY};
    gr_engine *cpu32 = build(m, GR_DEVICE_CPU, GR_PREC_FP32);
    ck_assert_msg(gr_engine_run_f32(cpu32, input) == GR_OK, "%s", gr_last_error());
    char failure[512] = "";
    for (int p = GR_PREC_FP32; p <= GR_PREC_INT8; p++) {
        gr_engine *cpu = p == GR_PREC_FP16 ? build(m, GR_DEVICE_CPU, GR_PREC_FP16) : cpu32;
        if (cpu != cpu32)
            ck_assert_msg(gr_engine_run_f32(cpu, input) == GR_OK, "%s", gr_last_error());
        gr_engine *gpu = build(m, GR_DEVICE_GPU, (gr_precision)p);
        ck_assert_msg(gr_engine_run_f32(gpu, input) == GR_OK, "%s", gr_last_error());
        for (int k = 0; k < gr_engine_output_count(gpu); k++) {
            const float *ref = NULL, *out = NULL;
            gr_engine_output(cpu, k, &ref);
            gr_engine_output(gpu, k, &out);
            double e = nrmse(out, ref, output_elems(gpu, k));
            printf("%-12s %s head %d: NRMSE %.3g against the CPU %s engine\n", c->name,
                   gr_precision_name((gr_precision)p), k, e,
                   gr_precision_name(p == GR_PREC_FP16 ? GR_PREC_FP16 : GR_PREC_FP32));
            fflush(stdout); /* bench/alexeyab.py reads these lines, also from a run cut short */
            if (!(e <= limit[p]))
                snprintf(failure, sizeof failure, "%s %s head %d: NRMSE %.3g (limit %g)",
                         c->name, gr_precision_name((gr_precision)p), k, e, limit[p]);
        }
        if (p == GR_PREC_FP32) {
            int n_cpu = count_dets(cpu32), n_gpu = count_dets(gpu);
            printf("%-12s fp32 detections: CPU %d, GPU %d\n", c->name, n_cpu, n_gpu);
            fflush(stdout);
        }
        gr_engine_destroy(gpu);
        if (cpu != cpu32)
            gr_engine_destroy(cpu);
    }
    ck_assert_msg(failure[0] == '\0', "%s", failure);
    gr_engine_destroy(cpu32);
    gr_model_destroy(m);
    gr_image_destroy(im);
    free(input);
    if (c->size)
        unlink(cfg);
}
END_TEST

int main(void)
{
    if (!gr_test_have_gpu("test_gpu_alexeyab"))
        return 77;
    Suite *s = suite_create("gpu_alexeyab");
    TCase *tc = tcase_create("models");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, alexeyab_models_match_cpu_reference, 0,
                        (int)(sizeof cases / sizeof cases[0]));
    suite_add_tcase(s, tc);
    return gr_test_run_in_process(s) ? 1 : 0;
}
