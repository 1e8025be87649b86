/* A kernel launcher's rejection reaches the user's message: the GPU engine's dispatch
 * (runtime/gpu/dispatch.c) launches plan nodes whose arguments a launcher rejects, and the
 * gr_status message must name the plan node and carry the launcher's record of the check that
 * failed (gr_kernels_last_failure(): kernels/<file>.cu:<line>: <check>). The launchers check
 * their arguments before touching the device, so this suite needs the CUDA toolkit but no GPU
 * (the fake device pointers are never dereferenced). */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "runtime/gpu/backend.h"

/* A plan of one node reading tensor 0 (the network input, in the io block) and writing tensor 1
 * (in the arena), run by an instance whose memory is a fake, aligned device address. */
typedef struct one_node {
    gr_plan plan;
    gr_plan_node node;
    gr_plan_tensor t[2];
    gr_plan_buffer buffer;
    gpu_variant v;
    gpu_instance inst;
    gpu_state g;
    gpu_conv_weights nw;
    size_t splitk_offset, splitk_bytes;
} one_node;

static gr_plan_tensor tensor(gr_dtype dtype, int c, int h, int w, int c_stride)
{
    gr_plan_tensor t = {.n = 1, .c = c, .h = h, .w = w, .dtype = dtype, .c_stride = c_stride,
                        .view_of = -1, .inplace_of = -1, .scale = 1.0f};
    return t;
}

static void setup(one_node *o, int kind, gr_plan_tensor x, gr_plan_tensor y)
{
    memset(o, 0, sizeof *o);
    uint8_t *fake = (uint8_t *)(uintptr_t)0x100000;
    o->t[0] = x;
    o->t[1] = y;
    o->node = (gr_plan_node){.kind = kind, .layer = 3, .n_inputs = 1, .inputs = {0}, .output = 1,
                             .record_event = -1};
    o->plan = (gr_plan){.n_nodes = 1, .n_tensors = 2, .n_buffers = 1, .nodes = &o->node,
                        .tensors = o->t, .buffers = &o->buffer, .input_tensor = 0};
    o->nw = (gpu_conv_weights){.weights = fake, .bias = (float *)(void *)fake};
    o->inst = (gpu_instance){.arena = fake, .io = fake};
    o->v = (gpu_variant){.plan = &o->plan, .nw = &o->nw, .splitk_offset = &o->splitk_offset,
                         .splitk_bytes = &o->splitk_bytes};
    o->g.n_streams = 1; /* the default stream: nothing is launched */
}

static void expect_message(gr_status st, gr_status want, const char *const *parts)
{
    ck_assert_int_eq(st, want);
    for (const char *const *p = parts; *p; p++)
        ck_assert_msg(strstr(gr_last_error(), *p) != NULL, "'%s' not in: %s", *p, gr_last_error());
}

START_TEST(rejected_maxpool_names_the_failed_check)
{
    one_node o;
    /* maxpool size 2 stride 2 with padding 1 on 13x13 gives 7x7, not 6x6 */
    setup(&o, GR_OP_MAXPOOL, tensor(GR_DTYPE_F32, 16, 13, 13, 16),
          tensor(GR_DTYPE_F32, 16, 6, 6, 16));
    o.node.p.size = 2, o.node.p.stride = 2, o.node.p.pad = 1;
    const char *parts[] = {"plan node 0 (maxpool, layer 3): launch failed: cudaErrorInvalidValue",
                           "; kernels/pool.cu:", "maxpool_args_ok", NULL};
    expect_message(gr_gpu_launch_node(&o.g, &o.v, &o.inst, 0), GR_ERR_CUDA, parts);
}
END_TEST

START_TEST(rejected_conv_names_the_failed_check)
{
    one_node o;
    /* a 65x65 kernel: the tensor-core conv takes at most 64 */
    setup(&o, GR_OP_CONV, tensor(GR_DTYPE_F16, 16, 70, 70, 16), tensor(GR_DTYPE_F16, 16, 6, 6, 16));
    o.node.p.size = 65, o.node.p.stride = 1, o.node.p.pad = 0, o.node.p.filters = 16;
    const char *parts[] = {"plan node 0 (conv, layer 3): launch failed: cudaErrorInvalidValue",
                           "; kernels/conv_wmma.cu:", "a->ksize <= 64", NULL};
    expect_message(gr_gpu_launch_node(&o.g, &o.v, &o.inst, 0), GR_ERR_CUDA, parts);
}
END_TEST

START_TEST(rejected_direct_conv_names_the_failed_check)
{
    one_node o;
    /* an fp16 grouped conv goes to the direct kernel; 3 groups do not divide 16 channels */
    setup(&o, GR_OP_CONV, tensor(GR_DTYPE_F16, 16, 8, 8, 16), tensor(GR_DTYPE_F16, 16, 8, 8, 16));
    o.node.p.size = 3, o.node.p.stride = 1, o.node.p.pad = 1, o.node.p.filters = 16;
    o.node.p.groups = 3;
    const char *parts[] = {"plan node 0 (conv, layer 3): launch failed: cudaErrorInvalidValue",
                           "; kernels/conv_direct.cu:", "a->in_c % a->groups == 0", NULL};
    expect_message(gr_gpu_launch_node(&o.g, &o.v, &o.inst, 0), GR_ERR_CUDA, parts);
}
END_TEST

START_TEST(dtype_without_a_kernel_is_unsupported)
{
    one_node o;
    setup(&o, GR_OP_UPSAMPLE, tensor(GR_DTYPE_U8, 3, 4, 4, 3), tensor(GR_DTYPE_U8, 3, 8, 8, 3));
    o.node.p.stride = 2;
    const char *parts[] = {"the GPU engine has no kernel for upsample (layer 3) from u8 to u8",
                           "; kernels/data.cu:", "no kernel for this dtype", NULL};
    expect_message(gr_gpu_launch_node(&o.g, &o.v, &o.inst, 0), GR_ERR_UNSUPPORTED, parts);
}
END_TEST

static Suite *errors_suite(void)
{
    Suite *s = suite_create("gpu_errors");
    TCase *tc = tcase_create("launcher failures");
    tcase_add_test(tc, rejected_maxpool_names_the_failed_check);
    tcase_add_test(tc, rejected_direct_conv_names_the_failed_check);
    tcase_add_test(tc, rejected_conv_names_the_failed_check);
    tcase_add_test(tc, dtype_without_a_kernel_is_unsupported);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(errors_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
