/* The ONNX suites' inputs (onnx_inputs.h). */
#include "tests/support/onnx_inputs.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graphrun/runtime.h"
#include "models/onnx/onnx.h"
#include "tools/npy.h"

bool gr_test_have_onnx(void)
{
    gr_net *net = NULL;
    gr_status st = gr_net_load_onnx("tests/onnx/erf.onnx", &net);
    gr_net_free(net);
    return st != GR_OK && strstr(gr_last_error(), "built without ONNX import") == NULL;
}

float *gr_test_onnx_input(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "tests/onnx/%s", name);
    float *x = NULL;
    if (strstr(name, ".npy")) {
        int dims[8], ndim = 0;
        ck_assert_msg(gr_npy_read(path, &x, dims, &ndim, 8) == GR_OK, "%s", gr_last_error());
        return x;
    }
    gr_image *im = NULL;
    ck_assert_msg(gr_image_load(path, &im) == GR_OK, "%s", gr_last_error());
    size_t plane = (size_t)im->w * (size_t)im->h;
    x = malloc(3 * plane * sizeof *x);
    ck_assert_ptr_nonnull(x);
    for (int c = 0; c < 3; c++)
        for (size_t i = 0; i < plane; i++)
            x[(size_t)c * plane + i] = (float)im->data[i * 3 + (size_t)c] / 255.0f;
    gr_image_destroy(im);
    return x;
}

int gr_test_copy_outputs(const gr_engine *e, float **out, size_t *n, int max)
{
    int count = gr_engine_output_count(e);
    ck_assert_msg(count >= 1 && count <= max, "%d outputs (1 to %d expected)", count, max);
    for (int k = 0; k < count; k++) {
        gr_tensor_desc d;
        const float *o = NULL;
        ck_assert_int_eq(gr_engine_output_desc(e, k, &d), GR_OK);
        ck_assert_int_eq(gr_engine_output(e, k, &o), GR_OK);
        n[k] = (size_t)d.c * d.h * d.w;
        out[k] = malloc(n[k] * sizeof *out[k]);
        ck_assert_ptr_nonnull(out[k]);
        memcpy(out[k], o, n[k] * sizeof *out[k]);
    }
    return count;
}

int gr_test_expect_same_results(const gr_engine *a, const gr_engine *b, const char *what)
{
    int n_out = gr_engine_output_count(a);
    ck_assert_int_eq(n_out, gr_engine_output_count(b));
    ck_assert_int_le(n_out, 8);
    const float *oa[8], *ob[8];
    for (int k = 0; k < n_out; k++) {
        gr_tensor_desc da, db;
        ck_assert_int_eq(gr_engine_output_desc(a, k, &da), GR_OK);
        ck_assert_int_eq(gr_engine_output_desc(b, k, &db), GR_OK);
        const size_t n = (size_t)da.n * da.c * da.h * da.w;
        ck_assert_uint_eq(n, (size_t)db.n * db.c * db.h * db.w);
        ck_assert_int_eq(gr_engine_output(a, k, &oa[k]), GR_OK);
        ck_assert_int_eq(gr_engine_output(b, k, &ob[k]), GR_OK);
        ck_assert_msg(memcmp(oa[k], ob[k], n * sizeof *oa[k]) == 0, "%s: output %d differs", what,
                      k);
    }
    float *ga = NULL, *gb = NULL;
    int64_t da[8], db[8];
    int na = 0, nb = 0;
    const gr_status sa = gr_engine_graph_output(a, oa, 0, &ga, da, &na);
    ck_assert_int_eq(gr_engine_graph_output(b, ob, 0, &gb, db, &nb), sa);
    if (sa == GR_OK) {
        ck_assert_int_eq(na, nb);
        ck_assert_mem_eq(da, db, (size_t)na * sizeof *da);
        size_t n = 1;
        for (int d = 0; d < na; d++)
            n *= (size_t)da[d];
        ck_assert_msg(memcmp(ga, gb, n * sizeof *ga) == 0, "%s: graph output differs", what);
        printf("%s: graph output [%lld, %lld, %lld] identical\n", what, (long long)da[0],
               (long long)da[1], (long long)da[2]);
    }
    free(ga);
    free(gb);
    gr_detect_options dopt;
    gr_detect_options_default(&dopt);
    dopt.thresh = 0.25f;
    dopt.nms = 0.45f;
    gr_detection *xa = NULL, *xb = NULL;
    int ca = 0, cb = 0;
    const gr_status da_st = gr_engine_detect(a, 0, &dopt, &xa, &ca);
    ck_assert_int_eq(gr_engine_detect(b, 0, &dopt, &xb, &cb), da_st);
    ck_assert_int_eq(ca, cb);
    if (ca > 0)
        ck_assert_mem_eq(xa, xb, (size_t)ca * sizeof *xa);
    gr_detections_free(xa);
    gr_detections_free(xb);
    return ca;
}
