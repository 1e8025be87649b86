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
