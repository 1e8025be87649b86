/* The tensor-core convolution weights (kernels/conv_weights.c) against the packers the GPU engine
 * used before it took the planner's int8 quantization: the relayout of the planner's quantized
 * weights (plan->qweights, scales at plan->weights + ws_offset) must equal, byte for byte, what
 * the old packer computed from the folded f32 weights, on random weights and odd shapes (in_c
 * 3, 5, 17, 33: every padding remainder; 1x1, 3x3 and 5x5 kernels; an all-zero filter).
 * old_pack_i8 / old_pack_f16 are the loops of the former gr_conv_pack_weights_i8/_f16
 * (kernels/conv_wmma.cu) ported to C. The f16 one converts with gr_f32_to_f16: it equals CUDA's
 * __float2half_rn on every non-NaN float (compared exhaustively on the host when the packer was
 * removed), so this test checks the layout and which weights are converted. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "planner/plan.h"
#include "kernels/conv_weights.h"

static const char *odd_cfg = "[net]\nwidth=9\nheight=7\nchannels=3\n"
                             "[convolutional]\nbatch_normalize=1\nfilters=5\nsize=3\nstride=1\n"
                             "pad=1\nactivation=leaky\n"
                             "[convolutional]\nfilters=17\nsize=1\nstride=1\npad=0\n"
                             "activation=linear\n"
                             "[convolutional]\nbatch_normalize=1\nfilters=33\nsize=5\nstride=1\n"
                             "pad=1\nactivation=relu\n"
                             "[convolutional]\nfilters=7\nsize=3\nstride=2\npad=1\n"
                             "activation=leaky\n";

static size_t old_count(int out_c, int in_c, int ksize, int granule)
{
    return (size_t)out_c * ksize * ksize * (size_t)((in_c + granule - 1) / granule * granule);
}

static void old_pack_i8(const float *w, int out_c, int in_c, int ksize, int8_t *packed,
                        float *weight_scale)
{
    const int cin_pad = (in_c + 15) / 16 * 16;
    const size_t per_filter = (size_t)in_c * ksize * ksize;
    for (int c = 0; c < out_c; ++c) {
        const float *wc = w + (size_t)c * per_filter;
        float max_abs = 0.0f;
        for (size_t k = 0; k < per_filter; ++k)
            max_abs = fmaxf(max_abs, fabsf(wc[k]));
        const float scale = max_abs > 0.0f ? max_abs / 127.0f : 1.0f;
        weight_scale[c] = scale;
        for (int ky = 0; ky < ksize; ++ky)
            for (int kx = 0; kx < ksize; ++kx) {
                int8_t *dst = packed + (((size_t)c * ksize + ky) * ksize + kx) * cin_pad;
                for (int ci = 0; ci < cin_pad; ++ci) {
                    float q = 0.0f;
                    if (ci < in_c) {
                        q = rintf(wc[((size_t)ci * ksize + ky) * ksize + kx] / scale);
                        q = fminf(fmaxf(q, -127.0f), 127.0f);
                    }
                    dst[ci] = (int8_t)q;
                }
            }
    }
}

static void old_pack_f16(const float *w, int out_c, int in_c, int ksize, uint16_t *packed)
{
    const int cin_pad = (in_c + 7) / 8 * 8;
    for (int c = 0; c < out_c; ++c)
        for (int ky = 0; ky < ksize; ++ky)
            for (int kx = 0; kx < ksize; ++kx) {
                uint16_t *dst = packed + (((size_t)c * ksize + ky) * ksize + kx) * cin_pad;
                for (int ci = 0; ci < cin_pad; ++ci) {
                    const float v =
                        ci < in_c ? w[(((size_t)c * in_c + ci) * ksize + ky) * ksize + kx] : 0.0f;
                    dst[ci] = gr_f32_to_f16(v);
                }
            }
}

/* The odd network with random weights (normal, a different spread per layer so the scales
 * differ), filter 2 of layer 1 all zero (scale 1.0), random BN statistics. */
static gr_net *random_net(uint64_t seed)
{
    gr_net *net = NULL;
    ck_assert_int_eq(gr_net_parse(odd_cfg, strlen(odd_cfg), "odd.cfg", &net), GR_OK);
    ck_assert_int_eq(gr_net_synthesize_weights(net, seed), GR_OK);
    gr_rng rng;
    gr_rng_seed(&rng, seed);
    for (int l = 0; l < net->n_layers; l++) {
        gr_weights *w = &net->layers[l].w;
        float spread = 0.01f * (float)(1 << (2 * l));
        for (size_t k = 0; k < w->n_weights; k++)
            w->weights[k] = spread * gr_rng_normal(&rng);
        for (int c = 0; c < w->n; c++) {
            w->biases[c] = gr_rng_normal(&rng);
            if (w->scales) {
                w->scales[c] = 0.5f + gr_rng_uniform(&rng);
                w->rolling_mean[c] = 0.1f * gr_rng_normal(&rng);
                w->rolling_variance[c] = 0.2f + gr_rng_uniform(&rng);
            }
        }
    }
    gr_weights *w1 = &net->layers[1].w;
    size_t per_filter = w1->n_weights / (size_t)w1->n;
    memset(w1->weights + 2 * per_filter, 0, per_filter * sizeof(float));
    return net;
}

static gr_plan *plan_of(const gr_net *net, gr_precision prec)
{
    gr_plan_options opt;
    gr_plan_options_default(&opt);
    opt.precision = prec;
    gr_plan *p = NULL;
    ck_assert_msg(gr_plan_build(net, &opt, &p) == GR_OK, "%s", gr_last_error());
    return p;
}

/* The inline fp16 conversions' fast paths (base.h) equal the all-value functions: every half,
 * and float bit patterns in steps of 251 (17 million, every exponent and both signs) plus the
 * edges of the fast range and the rounding carries into the exponent (checked exhaustively over
 * all 2^32 floats once, 2026-11-26: no difference). */
START_TEST(fp16_fast_paths_equal_the_full_conversions)
{
    for (uint32_t h = 0; h < 65536; h++) {
        float a = gr_f16_to_f32((uint16_t)h), b = gr_f16_to_f32_any((uint16_t)h);
        if (memcmp(&a, &b, sizeof a) != 0)
            ck_abort_msg("half %04x: %a, want %a", h, (double)a, (double)b);
    }
    const uint32_t edges[] = {0x38800000u, 0x387fffffu, 0x477fefffu, 0x477ff000u, 0x477fffffu,
                              0x47800000u, 0x3f7ff000u, 0x3f7ff001u, 0x3f800fffu, 0x3f801000u,
                              0x3f803000u, 0x33000000u, 0x7f800000u, 0x7fc00001u};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        for (int negative = 0; negative < 2; negative++) {
            uint32_t bits = edges[i] | (negative ? 0x80000000u : 0u);
            float x;
            memcpy(&x, &bits, sizeof x);
            ck_assert_msg(gr_f32_to_f16(x) == gr_f32_to_f16_any(x), "float %08x", bits);
        }
    uint64_t differ = 0, first = 0; /* counted, not asserted per value: Check marks each assert */
    for (uint64_t u = 0; u <= 0xffffffffull; u += 251) {
        uint32_t bits = (uint32_t)u;
        float x;
        memcpy(&x, &bits, sizeof x);
        if (gr_f32_to_f16(x) != gr_f32_to_f16_any(x) && differ++ == 0)
            first = u;
    }
    ck_assert_msg(differ == 0, "%llu floats differ, the first %08llx", (unsigned long long)differ,
                  (unsigned long long)first);
}
END_TEST

START_TEST(i8_relayout_of_the_planner_quantizer_equals_the_old_packer)
{
    gr_net *net = random_net(100 + (uint64_t)_i);
    gr_plan *p = plan_of(net, GR_PREC_INT8);
    int convs = 0, zero_filter_seen = 0;
    for (int i = 0; i < p->n_nodes; i++) {
        const gr_plan_node *nd = &p->nodes[i];
        if (nd->kind != GR_OP_CONV)
            continue;
        const gr_plan_tensor *x = &p->tensors[nd->inputs[0]];
        ck_assert_int_eq(x->dtype, GR_DTYPE_I8);
        int out_c = nd->p.filters, in_c = x->c, k = nd->p.size;
        size_t n = gr_conv_weights_count(out_c, in_c, k, 16);
        ck_assert_uint_eq(n, old_count(out_c, in_c, k, 16));
        int8_t *want = malloc(n), *got = malloc(n);
        float *want_scale = malloc((size_t)out_c * sizeof(float));
        ck_assert(want && got && want_scale);
        memset(got, 0x5a, n); /* every byte must be written */
        old_pack_i8(p->weights + nd->w_offset, out_c, in_c, k, want, want_scale);
        gr_conv_weights_relayout_i8(p->qweights + nd->qw_offset, out_c, in_c, k, got);
        ck_assert_msg(memcmp(want, got, n) == 0, "layer %d: int8 weights differ", nd->layer);
        ck_assert_msg(memcmp(want_scale, p->weights + nd->ws_offset,
                             (size_t)out_c * sizeof(float)) == 0,
                      "layer %d: weight scales differ", nd->layer);
        for (int c = 0; c < out_c; c++)
            zero_filter_seen += want_scale[c] == 1.0f;
        free(want);
        free(got);
        free(want_scale);
        convs++;
    }
    ck_assert_int_eq(convs, 4);
    ck_assert_int_ge(zero_filter_seen, 1);
    gr_plan_free(p);
    gr_net_free(net);
}
END_TEST

START_TEST(f16_relayout_equals_the_old_packer)
{
    gr_net *net = random_net(200 + (uint64_t)_i);
    gr_plan *p = plan_of(net, GR_PREC_FP16);
    int convs = 0;
    for (int i = 0; i < p->n_nodes; i++) {
        const gr_plan_node *nd = &p->nodes[i];
        if (nd->kind != GR_OP_CONV)
            continue;
        const gr_plan_tensor *x = &p->tensors[nd->inputs[0]];
        ck_assert_int_eq(x->dtype, GR_DTYPE_F16);
        int out_c = nd->p.filters, in_c = x->c, k = nd->p.size;
        size_t n = gr_conv_weights_count(out_c, in_c, k, 8);
        ck_assert_uint_eq(n, old_count(out_c, in_c, k, 8));
        uint16_t *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
        ck_assert(want && got);
        memset(got, 0x5a, n * sizeof *got);
        old_pack_f16(p->weights + nd->w_offset, out_c, in_c, k, want);
        gr_conv_weights_relayout_f16(p->weights + nd->w_offset, out_c, in_c, k, got);
        ck_assert_msg(memcmp(want, got, n * sizeof *got) == 0, "layer %d: f16 weights differ",
                      nd->layer);
        free(want);
        free(got);
        convs++;
    }
    ck_assert_int_eq(convs, 4);
    gr_plan_free(p);
    gr_net_free(net);
}
END_TEST

/* The layout itself on a hand-checked case: weight (c, ci, ky, kx) lands at
 * ((c*k + ky)*k + kx)*in_c_pad + ci, padding channels 0. */
START_TEST(relayout_moves_each_weight_to_its_channels_last_slot)
{
    enum { OUT_C = 2, IN_C = 3, K = 2 };
    int8_t q[OUT_C * IN_C * K * K];
    for (int i = 0; i < OUT_C * IN_C * K * K; i++)
        q[i] = (int8_t)(i + 1);
    int8_t out[OUT_C * K * K * 16];
    gr_conv_weights_relayout_i8(q, OUT_C, IN_C, K, out);
    for (int c = 0; c < OUT_C; c++)
        for (int ky = 0; ky < K; ky++)
            for (int kx = 0; kx < K; kx++)
                for (int ci = 0; ci < 16; ci++) {
                    int8_t v = out[((c * K + ky) * K + kx) * 16 + ci];
                    int8_t expect = ci < IN_C ? (int8_t)(((c * IN_C + ci) * K + ky) * K + kx + 1) : 0;
                    ck_assert_int_eq(v, expect);
                }
}
END_TEST

static Suite *conv_weights_suite(void)
{
    Suite *s = suite_create("conv_weights");
    TCase *tc = tcase_create("relayout");
    tcase_add_loop_test(tc, i8_relayout_of_the_planner_quantizer_equals_the_old_packer, 0, 4);
    tcase_add_loop_test(tc, f16_relayout_equals_the_old_packer, 0, 4);
    tcase_add_test(tc, relayout_moves_each_weight_to_its_channels_last_slot);
    tcase_add_test(tc, fp16_fast_paths_equal_the_full_conversions);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(conv_weights_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
