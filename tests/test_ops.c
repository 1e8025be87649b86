/* Check suite for ops/: the op table, activations, and every op's infer / cost / ref on small
 * cases whose expected values are worked out by hand in the comments (or, for the larger cases,
 * by a separate literal loop of the defining formula). Every ref() output is surrounded by guard
 * values that must survive, to catch out-of-bounds writes. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

/* Check's float macros pass floats through varargs (-Wdouble-promotion); compare as doubles. */
#define ASSERT_FLOAT_EXACT(got, want)                                                              \
    ck_assert_msg((got) == (want), "%s = %.9g, want %.9g", #got, (double)(got), (double)(want))
#define ASSERT_FLOAT_NEAR(got, want, tol)                                                          \
    ck_assert_double_eq_tol((double)(got), (double)(want), (double)(tol))

/* Darknet's CPU leaky: (x>0) ? x : .1*x with .1 a double, rounded to float once. */
static float darknet_leaky(float x) { return x > 0.0f ? x : (float)(0.1 * (double)x); }

#define GUARD 16
#define GUARD_VALUE 12345.0f

/* Run infer then ref; returns the malloc'd output (batch x out shape) and its shape. */
static float *run_op(const gr_op_params *p, const gr_weights *w, const float *const *in,
                     const gr_shape *in_shapes, int n_in, int batch, gr_shape *out_shape)
{
    const gr_op_info *info = gr_op_get(p->op);
    ck_assert_ptr_nonnull(info);
    gr_status st = gr_op_infer(p, in_shapes, n_in, out_shape);
    ck_assert_msg(st == GR_OK, "infer failed: %s", gr_last_error());
    size_t n = gr_shape_elems(*out_shape) * (size_t)batch;
    float *buf = malloc((n + 2 * GUARD) * sizeof *buf);
    ck_assert_ptr_nonnull(buf);
    for (size_t i = 0; i < n + 2 * GUARD; i++)
        buf[i] = GUARD_VALUE;
    gr_op_ref(p, w, in, in_shapes, n_in, buf + GUARD, *out_shape, batch);
    for (size_t i = 0; i < GUARD; i++) {
        ASSERT_FLOAT_EXACT(buf[i], GUARD_VALUE);
        ASSERT_FLOAT_EXACT(buf[GUARD + n + i], GUARD_VALUE);
    }
    float *out = malloc((n ? n : 1) * sizeof *out);
    ck_assert_ptr_nonnull(out);
    memcpy(out, buf + GUARD, n * sizeof *out);
    free(buf);
    return out;
}

/* Single-input convenience. */
static float *run1(const gr_op_params *p, const gr_weights *w, const float *in, gr_shape in_shape,
                   int batch, gr_shape *out_shape)
{
    const float *ins[1] = {in};
    return run_op(p, w, ins, &in_shape, 1, batch, out_shape);
}

static void assert_shape(gr_shape s, int c, int h, int w)
{
    ck_assert_int_eq(s.c, c);
    ck_assert_int_eq(s.h, h);
    ck_assert_int_eq(s.w, w);
}

/* Exact comparison: for integer-valued sums and copies, float arithmetic is exact. */
static void assert_exact(const float *got, const float *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(got[i] == want[i], "element %zu: got %.9g want %.9g", i, (double)got[i],
                      (double)want[i]);
}

static void assert_close(const float *got, const float *want, size_t n, double tol)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(fabs((double)got[i] - (double)want[i]) <= tol,
                      "element %zu: got %.9g want %.9g (tol %g)", i, (double)got[i],
                      (double)want[i], tol);
}

static gr_op_params conv_params(int filters, int size, int stride, int pad, int groups)
{
    gr_op_params p;
    gr_op_params_default(GR_OP_CONV, &p);
    p.filters = filters;
    p.size = size;
    p.stride = stride;
    p.pad = pad;
    p.groups = groups;
    p.activation = GR_ACT_LINEAR;
    return p;
}

static gr_weights plain_weights(int n, float *weights, size_t n_weights, float *biases)
{
    gr_weights w = {0};
    w.n = n;
    w.weights = weights;
    w.n_weights = n_weights;
    w.biases = biases;
    return w;
}

/* ---- table, names, defaults ----------------------------------------------------------------- */

START_TEST(test_table_complete)
{
    for (int i = 0; i < GR_OP_COUNT; i++) {
        const gr_op_info *info = gr_op_get((gr_op_kind)i);
        ck_assert_ptr_nonnull(info);
        ck_assert_ptr_nonnull(info->name);
        /* cost and rows may be NULL: the defaults (ops/ops.h) */
        ck_assert_ptr_nonnull(info->hooks);
        ck_assert(info->hooks->infer != NULL);
        ck_assert(info->hooks->ref != NULL);
        if (info->section[0]) {
            gr_op_kind back;
            ck_assert(gr_op_from_section(info->section, &back));
            ck_assert_int_eq(back, i);
        }
    }
    ck_assert_ptr_null(gr_op_get(GR_OP_COUNT));
    ck_assert_str_eq(gr_op_get(GR_OP_CONV)->name, "conv");
    ck_assert_str_eq(gr_op_get(GR_OP_CONV)->section, "convolutional");
}
END_TEST

START_TEST(test_section_lookup)
{
    gr_op_kind k;
    ck_assert(gr_op_from_section("maxpool", &k));
    ck_assert_int_eq(k, GR_OP_MAXPOOL);
    /* Darknet's aliases ([conv], [max]) belong to the parser's section table (test_cfg). */
    ck_assert(!gr_op_from_section("conv", &k));
    ck_assert(!gr_op_from_section("lstm", &k));
    ck_assert(!gr_op_from_section("", &k)); /* planner-inserted ops are not parseable */
    ck_assert(!gr_op_from_section("quantize", &k));
}
END_TEST

/* The flags column of ops.def: each property on exactly the kinds the planner relied on. */
START_TEST(test_op_flags)
{
    static const struct {
        unsigned flag;
        gr_op_kind kinds[8];
        int n;
    } expect[] = {
        {GR_OPF_STORED_VALUES, {GR_OP_MAXPOOL, GR_OP_ROUTE, GR_OP_UPSAMPLE, GR_OP_REORG}, 4},
        {GR_OPF_IN_PLACE,
         {GR_OP_SHORTCUT, GR_OP_REGION, GR_OP_YOLO, GR_OP_SAM, GR_OP_SCALE_CHANNELS},
         5},
        {GR_OPF_HEAD, {GR_OP_REGION, GR_OP_YOLO}, 2},
        {GR_OPF_WEIGHTS, {GR_OP_CONV, GR_OP_CONNECTED}, 2},
        {GR_OPF_F32_ONLY,
         {GR_OP_AVGPOOL, GR_OP_CONNECTED, GR_OP_SOFTMAX, GR_OP_REGION, GR_OP_YOLO,
          GR_OP_LOCAL_AVGPOOL, GR_OP_ATTENTION, GR_OP_DFL_HEAD},
         8},
        {GR_OPF_CONVERSION, {GR_OP_QUANTIZE, GR_OP_DEQUANTIZE}, 2},
    };
    for (size_t e = 0; e < sizeof expect / sizeof expect[0]; e++)
        for (int kind = 0; kind < GR_OP_COUNT; kind++) {
            int want = 0;
            for (int k = 0; k < expect[e].n; k++)
                want |= expect[e].kinds[k] == (gr_op_kind)kind;
            ck_assert_msg(gr_op_has(kind, expect[e].flag) == (want != 0), "%s flag %#x",
                          gr_op_get((gr_op_kind)kind)->name, expect[e].flag);
        }
    /* The classifier tail and the heads run in f32 only on the GPU (the planner keeps them f32). */
    ck_assert(gr_op_has(GR_OP_CONNECTED, GR_OPF_GPU_F32) &&
              !gr_op_has(GR_OP_CONNECTED, GR_OPF_GPU_F16) &&
              !gr_op_has(GR_OP_CONNECTED, GR_OPF_GPU_I8));
    ck_assert(gr_op_has(GR_OP_SOFTMAX, GR_OPF_GPU_F32) &&
              !gr_op_has(GR_OP_SOFTMAX, GR_OPF_GPU_F16));
    ck_assert(gr_op_has(GR_OP_YOLO, GR_OPF_GPU_F32) && !gr_op_has(GR_OP_YOLO, GR_OPF_GPU_F16));
    ck_assert(gr_op_has(GR_OP_LOCAL_AVGPOOL, GR_OPF_GPU_F32) &&
              !gr_op_has(GR_OP_LOCAL_AVGPOOL, GR_OPF_GPU_F16) &&
              !gr_op_has(GR_OP_LOCAL_AVGPOOL, GR_OPF_GPU_I8));
    ck_assert(gr_op_has(GR_OP_CONV, GR_OPF_GPU_F32 | GR_OPF_GPU_F16 | GR_OPF_GPU_I8));
    /* Every flag set at once is asked for all of them; kinds outside the table have none. */
    ck_assert(!gr_op_has(GR_OP_CONV, GR_OPF_WEIGHTS | GR_OPF_HEAD));
    ck_assert(!gr_op_has(GR_OP_COUNT, GR_OPF_WEIGHTS));
    ck_assert(!gr_op_has(-1, GR_OPF_WEIGHTS));
}
END_TEST

START_TEST(test_activation_names)
{
    for (int a = 0; a < GR_ACT_COUNT; a++) {
        gr_activation back;
        ck_assert(gr_activation_parse(gr_activation_name((gr_activation)a), &back));
        ck_assert_int_eq(back, a);
    }
    gr_activation a;
    ck_assert(gr_activation_parse("leaky", &a));
    ck_assert_int_eq(a, GR_ACT_LEAKY);
    ck_assert(gr_activation_parse("elu", &a) && a == GR_ACT_ELU);
    ck_assert(gr_activation_parse("revleaky", &a) && a == GR_ACT_LEAKY); /* AlexeyAB's alias */
    ck_assert(!gr_activation_parse("normalize_channels", &a)); /* not elementwise */
    ck_assert(!gr_activation_parse("Leaky", &a));
    ck_assert(!gr_activation_parse("", &a));
}
END_TEST

START_TEST(test_defaults_follow_darknet)
{
    gr_op_params p;
    gr_op_params_default(GR_OP_CONV, &p);
    ck_assert_int_eq(p.op, GR_OP_CONV);
    ck_assert_int_eq(p.activation, GR_ACT_LOGISTIC); /* parse_convolutional's default */
    ck_assert_int_eq(p.size, 1);
    ck_assert_int_eq(p.stride, 1);
    ck_assert_int_eq(p.pad, 0);
    ck_assert_int_eq(p.groups, 1);
    ck_assert_int_eq(p.batch_normalize, 0);
    gr_op_params_default(GR_OP_CONNECTED, &p);
    ck_assert_int_eq(p.activation, GR_ACT_LOGISTIC);
    gr_op_params_default(GR_OP_SHORTCUT, &p);
    ck_assert_int_eq(p.activation, GR_ACT_LINEAR);
    gr_op_params_default(GR_OP_MAXPOOL, &p);
    gr_op_params_resolve(&p);
    ck_assert_int_eq(p.size, 1);
    ck_assert_int_eq(p.stride, 1);
    ck_assert_int_eq(p.pad, 0);
    gr_op_params_default(GR_OP_MAXPOOL, &p); /* size = stride, padding = size - 1 */
    p.stride = 3;
    gr_op_params_resolve(&p);
    ck_assert_int_eq(p.size, 3);
    ck_assert_int_eq(p.pad, 2);
    gr_op_params_default(GR_OP_LOCAL_AVGPOOL, &p); /* parse_local_avgpool: maxpool's defaults */
    p.stride = 2;
    gr_op_params_resolve(&p);
    ck_assert_int_eq(p.size, 2);
    ck_assert_int_eq(p.pad, 1);
    gr_op_params_default(GR_OP_REGION, &p);
    ck_assert_int_eq(p.coords, 4);
    ck_assert_int_eq(p.classes, 20);
    ck_assert_int_eq(p.num, 1);
    ck_assert_int_eq(p.softmax, 0);
    gr_op_params_default(GR_OP_YOLO, &p);
    ck_assert_int_eq(p.classes, 20);
    ck_assert_int_eq(p.num, 1);
    p.num = 3; /* no mask: every anchor */
    gr_op_params_resolve(&p);
    ck_assert_int_eq(p.n_mask, 3);
    ck_assert_int_eq(p.mask[2], 2);
    ck_assert(p.anchors[5] == 0.5f);
    gr_op_params_default(GR_OP_UPSAMPLE, &p);
    ck_assert_int_eq(p.stride, 2);
    gr_op_params_default(GR_OP_ROUTE, &p);
    ck_assert_int_eq(p.groups, 1);
    ck_assert_int_eq(p.group_id, 0);
    gr_op_params_default(GR_OP_SAM, &p); /* parse_sam: activation linear */
    ck_assert_int_eq(p.activation, GR_ACT_LINEAR);
    gr_op_params_default(GR_OP_SCALE_CHANNELS, &p); /* parse_scale_channels: linear, scale_wh 0 */
    ck_assert_int_eq(p.activation, GR_ACT_LINEAR);
    ck_assert_int_eq(p.scale_wh, 0);
}
END_TEST

/* ---- activations ------------------------------------------------------------------------------ */

START_TEST(test_activations)
{
    /* leaky slope 0.1 below zero */
    ASSERT_FLOAT_EXACT(gr_activate(3.0f, GR_ACT_LEAKY), 3.0f);
    ASSERT_FLOAT_EXACT(gr_activate(-2.0f, GR_ACT_LEAKY), -0.2f);
    /* Darknet's CPU leaky multiplies by a double .1: 0.1 * -9 = -0.9 in double, rounded once to
     * the float -0.9f (-0.899999976). The float product 0.1f * -9.0f is -0.900000036. */
    ASSERT_FLOAT_EXACT(gr_activate(-9.0f, GR_ACT_LEAKY), -0.9f);
    ck_assert(gr_activate(-9.0f, GR_ACT_LEAKY) != 0.1f * -9.0f);
    ASSERT_FLOAT_EXACT(gr_activate(-2.0f, GR_ACT_RELU), 0.0f);
    ASSERT_FLOAT_EXACT(gr_activate(2.5f, GR_ACT_RELU), 2.5f);
    ASSERT_FLOAT_EXACT(gr_activate(-7.25f, GR_ACT_LINEAR), -7.25f);
    /* logistic(0) = 1/2, logistic(ln 3) = 1/(1 + 1/3) = 3/4; tolerance: one float ulp-ish */
    const float ln3 = (float)log(3.0);
    ASSERT_FLOAT_NEAR(gr_activate(0.0f, GR_ACT_LOGISTIC), 0.5f, 1e-7f);
    ASSERT_FLOAT_NEAR(gr_activate(ln3, GR_ACT_LOGISTIC), 0.75f, 1e-7f);
    /* swish(x) = x * logistic(x) = ln3 * 3/4 */
    ASSERT_FLOAT_NEAR(gr_activate(ln3, GR_ACT_SWISH), 0.75f * ln3, 1e-6f);
    /* mish(x) = x * tanh(ln(1 + e^x)): mish(0) = 0, mish(1) = tanh(ln(1 + e)) = 0.8650984 */
    ASSERT_FLOAT_NEAR(gr_activate(0.0f, GR_ACT_MISH), 0.0f, 1e-7f);
    ASSERT_FLOAT_NEAR(gr_activate(1.0f, GR_ACT_MISH), (float)tanh(log(1.0 + exp(1.0))),
                           1e-6f);
    /* large inputs: no overflow to NaN */
    ASSERT_FLOAT_NEAR(gr_activate(100.0f, GR_ACT_MISH), 100.0f, 1e-4f);
    ASSERT_FLOAT_NEAR(gr_activate(-100.0f, GR_ACT_LOGISTIC), 0.0f, 1e-30f);
}
END_TEST

/* Float distance in units in the last place (same-sign finite floats; else large). */
static long ulp_distance(float a, float b)
{
    int32_t ia, ib;
    memcpy(&ia, &a, sizeof ia);
    memcpy(&ib, &b, sizeof ib);
    if ((ia < 0) != (ib < 0))
        return a == b ? 0 : 1L << 30; /* +0 / -0 */
    return labs((long)ia - (long)ib);
}

/* Every activation against AlexeyAB Darknet's own code, recorded on 403 inputs each (large, tiny,
 * negative, thresholds, a dense grid) by tools/oracle/alexeyab_activations.c, linked with its
 * src/activations.c and built with the same glibc as this test. Tolerance 0 ulp (same formula,
 * same libm), except: leaky, where the oracle records activate()'s .1f*x and our reference is the
 * conv path's .1*x with a double .1 (gemm.c:2341, what AlexeyAB's conv computes); and logistic,
 * which keeps pjreddie's double 1./(1.+exp(-x)) against AlexeyAB's float form: both are at most
 * 1 ulp from the exact value, so at most 2 apart, and below -88.7 AlexeyAB's expf(-x) overflows to
 * inf (result 0) where the double form still gives a subnormal (|difference| < FLT_MIN). NaN must
 * match NaN (elu/selu above 88.7). */
START_TEST(test_activations_alexeyab)
{
    FILE *f = fopen("tests/data/alexeyab_activations.txt", "r");
    ck_assert_msg(f != NULL, "tests/data/alexeyab_activations.txt: cannot open (run from the "
                             "source tree)");
    char name[32], xs[64], ys[64];
    int lines = 0, seen[GR_ACT_COUNT] = {0};
    while (fscanf(f, "%31s %63s %63s", name, xs, ys) == 3) {
        gr_activation a;
        ck_assert_msg(gr_activation_parse(name, &a), "line %d: unknown activation %s", lines + 1,
                      name);
        float x = strtof(xs, NULL), want = strtof(ys, NULL);
        /* the layers of an AlexeyAB cfg other than its convs use these very forms: bit for bit */
        float as = gr_activate_as(x, a, GR_ACT_FORM_ALEXEYAB);
        ck_assert_msg(isnan(want) ? isnan(as) : as == want,
                      "%s(%a) = %a in AlexeyAB's form, AlexeyAB gives %a", name, (double)x,
                      (double)as, (double)want);
        float got = gr_activate(x, a);
        long tol = a == GR_ACT_LEAKY ? 1 : a == GR_ACT_LOGISTIC ? 2 : 0;
        if (a == GR_ACT_LOGISTIC && fabsf(got) < FLT_MIN && fabsf(want) < FLT_MIN)
            ck_assert(got >= 0.0f && want >= 0.0f);
        else if (isnan(want))
            ck_assert_msg(isnan(got), "%s(%a) = %a, AlexeyAB gives NaN", name, (double)x,
                          (double)got);
        else
            ck_assert_msg(ulp_distance(got, want) <= tol, "%s(%a) = %a, AlexeyAB gives %a (%ld ulp)",
                          name, (double)x, (double)got, (double)want, ulp_distance(got, want));
        seen[a]++;
        lines++;
    }
    fclose(f);
    ck_assert_int_eq(lines, 8060);
    for (int a = 0; a < GR_ACT_COUNT; a++)
        ck_assert_msg(seen[a] > 0, "activation %s has no recorded values",
                      gr_activation_name((gr_activation)a));
}
END_TEST

/* Which form each layer of each fork gets, and that the forms differ where they should. */
START_TEST(test_activation_forms)
{
    gr_op_params p;
    gr_op_params_default(GR_OP_CONV, &p);
    ck_assert_int_eq(gr_act_form_of(&p, true), GR_ACT_FORM_PJREDDIE);
    p.alexeyab = 1;
    ck_assert_int_eq(gr_act_form_of(&p, true), GR_ACT_FORM_ALEXEYAB_CONV);
    ck_assert_int_eq(gr_act_form_of(&p, false), GR_ACT_FORM_ALEXEYAB);
    /* leaky(-9): .1 * -9 in double rounds to -0.9f; .1f * -9.0f is -0.900000036 */
    ASSERT_FLOAT_EXACT(gr_activate_as(-9.0f, GR_ACT_LEAKY, GR_ACT_FORM_PJREDDIE), -0.9f);
    ASSERT_FLOAT_EXACT(gr_activate_as(-9.0f, GR_ACT_LEAKY, GR_ACT_FORM_ALEXEYAB_CONV), -0.9f);
    ASSERT_FLOAT_EXACT(gr_activate_as(-9.0f, GR_ACT_LEAKY, GR_ACT_FORM_ALEXEYAB), 0.1f * -9.0f);
    ck_assert(0.1f * -9.0f != -0.9f);
    /* logistic: the float form in both AlexeyAB forms, the double one in pjreddie's; they part
     * somewhere on a fine grid */
    int differ = 0;
    for (int i = -4000; i <= 4000; i++) {
        float x = (float)i / 256.0f;
        float f = gr_activate_as(x, GR_ACT_LOGISTIC, GR_ACT_FORM_ALEXEYAB);
        ASSERT_FLOAT_EXACT(f, 1.0f / (1.0f + expf(-x)));
        ASSERT_FLOAT_EXACT(gr_activate_as(x, GR_ACT_LOGISTIC, GR_ACT_FORM_ALEXEYAB_CONV), f);
        ASSERT_FLOAT_EXACT(gr_activate_as(x, GR_ACT_LOGISTIC, GR_ACT_FORM_PJREDDIE),
                           gr_activate(x, GR_ACT_LOGISTIC));
        differ += f != gr_activate(x, GR_ACT_LOGISTIC);
    }
    ck_assert_int_gt(differ, 0);
    /* the rest are one formula in every form */
    ASSERT_FLOAT_EXACT(gr_activate_as(1.25f, GR_ACT_MISH, GR_ACT_FORM_ALEXEYAB),
                       gr_activate(1.25f, GR_ACT_MISH));
    ASSERT_FLOAT_EXACT(gr_activate_as(-2.0f, GR_ACT_RELU, GR_ACT_FORM_ALEXEYAB), 0.0f);
}
END_TEST

/* The few values worth knowing by heart, worked out by hand (AlexeyAB's formulas). */
START_TEST(test_activations_alexeyab_by_hand)
{
    ASSERT_FLOAT_EXACT(gr_activate(7.5f, GR_ACT_RELU6), 6.0f);
    ASSERT_FLOAT_EXACT(gr_activate(-3.0f, GR_ACT_RELU6), 0.0f);
    ASSERT_FLOAT_EXACT(gr_activate(2.5f, GR_ACT_RELU6), 2.5f);
    /* hard_mish: x for x > 0, x^2/2 + x on (-2, 0], 0 below: -1 -> -0.5 */
    ASSERT_FLOAT_EXACT(gr_activate(-1.0f, GR_ACT_HARD_MISH), -0.5f);
    ASSERT_FLOAT_EXACT(gr_activate(-3.0f, GR_ACT_HARD_MISH), 0.0f);
    ASSERT_FLOAT_EXACT(gr_activate(1.5f, GR_ACT_HARD_MISH), 1.5f);
    ASSERT_FLOAT_EXACT(gr_activate(2.0f, GR_ACT_HARDTAN), 1.0f);
    ASSERT_FLOAT_EXACT(gr_activate(0.0f, GR_ACT_PLSE), 0.5f);
    ASSERT_FLOAT_EXACT(gr_activate(-2.0f, GR_ACT_RELIE), -0.02f);
    /* stair: floor(x/2) for even floor(x), else frac + floor(x/2): 3.25 -> 0.25 + 1 */
    ASSERT_FLOAT_EXACT(gr_activate(3.25f, GR_ACT_STAIR), 1.25f);
    /* elu(-inf) = -1 mathematically, but Darknet's (x >= 0)*x is 0 * -inf = NaN */
    ck_assert(isnan(gr_activate(-INFINITY, GR_ACT_ELU)));
    /* mish through 2/(1+e^-2s) - 1, not tanhf: mish(1) = tanh(ln(1 + e)) to a few ulp */
    ASSERT_FLOAT_NEAR(gr_activate(1.0f, GR_ACT_MISH), (float)tanh(log(1.0 + exp(1.0))), 1e-6f);
    /* gelu(1) = 0.5 * (1 + tanh(0.797885 + 0.035677)) = 0.841192 */
    ASSERT_FLOAT_NEAR(gr_activate(1.0f, GR_ACT_GELU), 0.5 * (1.0 + tanh(0.833562)), 1e-6f);
}
END_TEST

/* ---- conv ------------------------------------------------------------------------------------ */

/* Read "name v0 v1 ..." (C99 hex floats) into a malloc'd array of exactly n values. */
static float *read_named_floats(FILE *f, const char *name, int n)
{
    char word[32];
    ck_assert_int_eq(fscanf(f, "%31s", word), 1);
    ck_assert_str_eq(word, name);
    float *v = malloc((size_t)n * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (int i = 0; i < n; i++) {
        char num[64];
        ck_assert_int_eq(fscanf(f, "%63s", num), 1);
        v[i] = strtof(num, NULL);
    }
    return v;
}

/* Grouped, depthwise (multiplier 1 and 2), dilated (2, 3; 3x3 and 5x5), stride_x != stride_y
 * and all at once, against AlexeyAB's own forward_convolutional_layer on the same inputs and
 * weights (tools/oracle/alexeyab_conv.c, tests/data/alexeyab_conv.txt). Bit for bit: Darknet's
 * im2col + gemm_nn adds each output's terms in the same order as the reference (input channel of
 * the group, then ky, then kx; padded taps add exact zeros), and the activations used here
 * (linear, leaky, relu, hardtan) involve no libm call. */
START_TEST(test_conv_alexeyab)
{
    FILE *f = fopen("tests/data/alexeyab_conv.txt", "r");
    ck_assert_msg(f != NULL, "tests/data/alexeyab_conv.txt: cannot open (run from the source tree)");
    int cases = 0;
    char word[16], act_name[32];
    gr_op_params p;
    int c, h, w, sx, sy, out_c, out_h, out_w;
    gr_op_params_default(GR_OP_CONV, &p);
    while (fscanf(f, "%15s %d %d %d %d %d %d %d %d %d %d %31s %d %d %d", word, &c, &h, &w,
                  &p.filters, &p.groups, &p.size, &sx, &sy, &p.dilation, &p.pad, act_name, &out_c,
                  &out_h, &out_w) == 15) {
        ck_assert_str_eq(word, "case");
        p.stride = sx;
        p.stride_y = sy;
        ck_assert(gr_activation_parse(act_name, &p.activation));
        int n_w = p.filters * (c / p.groups) * p.size * p.size;
        float *in = read_named_floats(f, "input", c * h * w);
        float *weights = read_named_floats(f, "weights", n_w);
        float *biases = read_named_floats(f, "biases", p.filters);
        float *want = read_named_floats(f, "output", out_c * out_h * out_w);
        gr_weights wt = plain_weights(p.filters, weights, (size_t)n_w, biases);
        gr_shape os;
        float *got = run1(&p, &wt, in, (gr_shape){c, h, w}, 1, &os);
        assert_shape(os, out_c, out_h, out_w);
        for (int i = 0; i < out_c * out_h * out_w; i++)
            ck_assert_msg(got[i] == want[i],
                          "case %d (groups %d, size %d, stride %dx%d, dilation %d): output %d = "
                          "%a, AlexeyAB %a",
                          cases, p.groups, p.size, sx, sy, p.dilation, i, (double)got[i],
                          (double)want[i]);
        free(got);
        free(in);
        free(weights);
        free(biases);
        free(want);
        cases++;
    }
    fclose(f);
    ck_assert_int_eq(cases, 11);
}
END_TEST

/* Dilation with a padding other than (size-1)/2: Darknet's output size and its im2col disagree,
 * so it is refused with one line naming the padding needed. */
START_TEST(test_conv_dilation_needs_centered_padding)
{
    gr_op_params p = conv_params(2, 3, 1, 0, 1);
    p.dilation = 2;
    gr_shape in = {2, 9, 9}, out;
    ck_assert_int_eq(gr_op_infer(&p, &in, 1, &out), GR_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "dilation 2 needs padding (size-1)/2 = 1"));
    p.pad = 1;
    ck_assert_int_eq(gr_op_infer(&p, &in, 1, &out), GR_OK);
    assert_shape(out, 2, 9, 9);
    /* stride_y on its own axis: 9 rows / 3 -> 3, 9 columns / 1 -> 9 */
    p.stride_y = 3;
    ck_assert_int_eq(gr_op_infer(&p, &in, 1, &out), GR_OK);
    assert_shape(out, 2, 3, 9);
}
END_TEST

START_TEST(test_conv_1x1)
{
    /* 2 input channels of 2x2, one 1x1 filter with weights (2, -1), bias 0.5:
     * out = 2*a - b + 0.5 with a = 1..4 and b = 0.5..2: 2, 3.5, 5, 6.5 */
    const float in[8] = {1, 2, 3, 4, 0.5f, 1, 1.5f, 2};
    float weights[2] = {2, -1}, bias[1] = {0.5f};
    gr_op_params p = conv_params(1, 1, 1, 0, 1);
    gr_weights w = plain_weights(1, weights, 2, bias);
    gr_shape os;
    float *out = run1(&p, &w, in, (gr_shape){2, 2, 2}, 1, &os);
    assert_shape(os, 1, 2, 2);
    const float want[4] = {2, 3.5f, 5, 6.5f};
    assert_exact(out, want, 4);
    free(out);
}
END_TEST

START_TEST(test_conv_3x3_pad_sums)
{
    /* input 1..9 on 3x3, all-ones 3x3 kernel, pad 1: each output is the sum of its in-bounds
     * neighbourhood: corner 1+2+4+5 = 12, top edge 1+..+6 = 21, centre 45, ... */
    const float in[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    float weights[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1}, bias[1] = {0};
    gr_op_params p = conv_params(1, 3, 1, 1, 1);
    gr_weights w = plain_weights(1, weights, 9, bias);
    gr_shape os;
    float *out = run1(&p, &w, in, (gr_shape){1, 3, 3}, 1, &os);
    assert_shape(os, 1, 3, 3);
    const float want[9] = {12, 21, 16, 27, 45, 33, 24, 39, 28};
    assert_exact(out, want, 9);
    free(out);
}
END_TEST

START_TEST(test_conv_is_cross_correlation)
{
    /* Only the kernel's top-left tap is 1: out[y][x] = in[y-1][x-1] (0 outside), i.e. the
     * kernel is not flipped: 0 0 0 / 0 1 2 / 0 4 5 */
    const float in[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    float weights[9] = {1, 0, 0, 0, 0, 0, 0, 0, 0}, bias[1] = {0};
    gr_op_params p = conv_params(1, 3, 1, 1, 1);
    gr_weights w = plain_weights(1, weights, 9, bias);
    gr_shape os;
    float *out = run1(&p, &w, in, (gr_shape){1, 3, 3}, 1, &os);
    const float want[9] = {0, 0, 0, 0, 1, 2, 0, 4, 5};
    assert_exact(out, want, 9);
    free(out);
}
END_TEST

START_TEST(test_conv_stride2)
{
    /* 3x3 input, all-ones 3x3, pad 1, stride 2: out (3+2-3)/2+1 = 2, windows centred on the
     * input corners: 12, 16, 24, 28 (the corner sums of test_conv_3x3_pad_sums) */
    const float in[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    float weights[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1}, bias[1] = {0};
    gr_op_params p = conv_params(1, 3, 2, 1, 1);
    gr_weights w = plain_weights(1, weights, 9, bias);
    gr_shape os;
    float *out = run1(&p, &w, in, (gr_shape){1, 3, 3}, 1, &os);
    assert_shape(os, 1, 2, 2);
    const float want[4] = {12, 16, 24, 28};
    assert_exact(out, want, 4);
    free(out);
}
END_TEST

START_TEST(test_conv_groups)
{
    /* c=2, filters=4, groups=2, 1x1: filters 0,1 see only channel 0, filters 2,3 only channel 1.
     * in ch0 = (1, 2), ch1 = (10, 20); weights 3, -1, 5, 0.5; biases 0:
     * out = (3, 6), (-1, -2), (50, 100), (5, 10). Without groups every filter would mix both. */
    const float in[4] = {1, 2, 10, 20};
    float weights[4] = {3, -1, 5, 0.5f}, bias[4] = {0, 0, 0, 0};
    gr_op_params p = conv_params(4, 1, 1, 0, 2);
    gr_weights w = plain_weights(4, weights, 4, bias);
    gr_shape os;
    float *out = run1(&p, &w, in, (gr_shape){2, 1, 2}, 1, &os);
    assert_shape(os, 4, 1, 2);
    const float want[8] = {3, 6, -1, -2, 50, 100, 5, 10};
    assert_exact(out, want, 8);
    free(out);
}
END_TEST

START_TEST(test_conv_batchnorm_epsilon_on_std)
{
    /* 1x1 identity conv then BN. Darknet: y = scale*(x-mean)/(sqrt(var)+1e-6) + bias.
     * Channel 0: var 0, x-mean = 1e-6, scale 1, bias 0: y = 1e-6/1e-6 = 1. (cuDNN's
     *   sqrt(var+eps) with eps 1e-6 would give 1e-6/1e-3 = 0.001.)
     * Channel 1: x = 3, mean 1, var 4, scale 2, bias 0.5: y = 2*2/(2+1e-6) + 0.5 = 2.499999.
     * Tolerance 1e-6: float rounding of values near 1 and 2.5. */
    const float in[2] = {1.000001f, 3.0f};
    float weights[4] = {1, 0, 0, 1};
    float biases[2] = {0, 0.5f}, scales[2] = {1, 2}, mean[2] = {1, 1}, var[2] = {0, 4};
    gr_op_params p = conv_params(2, 1, 1, 0, 1);
    p.batch_normalize = 1;
    gr_weights w = plain_weights(2, weights, 4, biases);
    w.scales = scales;
    w.rolling_mean = mean;
    w.rolling_variance = var;
    gr_shape os;
    float *out = run1(&p, &w, in, (gr_shape){2, 1, 1}, 1, &os);
    const double diff0 = (double)(1.000001f - 1.0f); /* the float input is not exactly 1+1e-6 */
    const float want[2] = {(float)(diff0 / 1e-6), (float)(4.0 / (2.0 + 1e-6) + 0.5)};
    assert_close(out, want, 2, 1e-6);
    ck_assert(out[0] > 0.9f); /* not the 0.001 of the sqrt(var+eps) convention */
    free(out);
}
END_TEST

START_TEST(test_conv_leaky_activation)
{
    /* 1x1 conv with weight 1 and bias -1 on (0, 3): pre-activation (-1, 2); leaky -> (-0.1, 2) */
    const float in[2] = {0, 3};
    float weights[1] = {1}, bias[1] = {-1};
    gr_op_params p = conv_params(1, 1, 1, 0, 1);
    p.activation = GR_ACT_LEAKY;
    gr_weights w = plain_weights(1, weights, 1, bias);
    gr_shape os;
    float *out = run1(&p, &w, in, (gr_shape){1, 1, 2}, 1, &os);
    const float want[2] = {-0.1f, 2};
    assert_exact(out, want, 2);
    free(out);
}
END_TEST

/* -1000..1000 from a linear congruential generator. */
static int lcg_level(uint32_t *state)
{
    *state = *state * 1664525u + 1013904223u;
    return (int)(*state >> 8) % 2001 - 1000;
}

/* An AlexeyAB cfg's batch-normalized conv, as its load_network_custom -> fuse_conv_batchnorm
 * (network.c:1312-1321) and forward_convolutional_layer compute it: each weight times
 * scales / sqrt(var + .00001) rounded to float, the bias folded in double, the sum in gemm_nn's
 * order (input channel, kernel row, column), then + bias, then leaky in double (gemm.c:2341).
 * Exact; and it is not pjreddie's unfolded arithmetic, which gives other floats. */
START_TEST(test_conv_alexeyab_fused_bn)
{
    enum { C = 3, H = 5, W = 6, F = 4, K = 3 };
    float in[C * H * W], weights[F * C * K * K], biases[F], scales[F], mean[F], var[F];
    uint32_t state = 12345;
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++)
        in[i] = (float)lcg_level(&state) / 997.0f;
    for (size_t i = 0; i < sizeof weights / sizeof weights[0]; i++)
        weights[i] = (float)lcg_level(&state) / 3011.0f;
    for (int f = 0; f < F; f++) {
        biases[f] = 0.1f * (float)(f + 1);
        scales[f] = 0.7f + 0.13f * (float)f;
        mean[f] = -0.3f + 0.21f * (float)f;
        var[f] = 0.05f + 0.37f * (float)f;
    }
    gr_op_params p = conv_params(F, K, 1, 1, 1);
    p.batch_normalize = 1;
    p.alexeyab = 1;
    p.activation = GR_ACT_LEAKY;
    gr_weights w = plain_weights(F, weights, sizeof weights / sizeof weights[0], biases);
    w.scales = scales;
    w.rolling_mean = mean;
    w.rolling_variance = var;
    gr_shape os;
    float *out = run1(&p, &w, in, (gr_shape){C, H, W}, 1, &os);
    assert_shape(os, F, H, W);
    int unfolded_differs = 0;
    for (int f = 0; f < F; f++) {
        double factor = (double)scales[f] / sqrt((double)var[f] + .00001);
        float bias = (float)((double)biases[f] -
                             (double)scales[f] * (double)mean[f] / sqrt((double)var[f] + .00001));
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) {
                float sum = 0.0f, raw = 0.0f;
                for (int c = 0; c < C; c++)
                    for (int ky = 0; ky < K; ky++)
                        for (int kx = 0; kx < K; kx++) {
                            int iy = y + ky - 1, ix = x + kx - 1;
                            if (iy < 0 || iy >= H || ix < 0 || ix >= W)
                                continue;
                            float wt = weights[((f * C + c) * K + ky) * K + kx];
                            float v = in[(c * H + iy) * W + ix];
                            sum += (float)((double)wt * factor) * v;
                            raw += wt * v;
                        }
                float want = sum + bias;
                want = want > 0.0f ? want : (float)(0.1 * (double)want);
                ASSERT_FLOAT_EXACT(out[(f * H + y) * W + x], want);
                float unfolded =
                    (float)((double)(raw - mean[f]) / sqrt((double)var[f] + .00001)) * scales[f] +
                    biases[f];
                unfolded = unfolded > 0.0f ? unfolded : (float)(0.1 * (double)unfolded);
                unfolded_differs += unfolded != want;
            }
    }
    ck_assert_int_gt(unfolded_differs, 0);
    free(out);
}
END_TEST

/* The definition of a grouped, strided, padded convolution as a literal loop, for comparison. */
static float literal_conv(const float *in, gr_shape is, const float *weights, const float *biases,
                          int filters, int k, int stride, int pad, int groups, int oc, int oy,
                          int ox)
{
    int cg = is.c / groups, g = oc / (filters / groups);
    double sum = 0.0;
    for (int ic = 0; ic < cg; ic++)
        for (int ky = 0; ky < k; ky++)
            for (int kx = 0; kx < k; kx++) {
                int y = oy * stride - pad + ky, x = ox * stride - pad + kx;
                if (y < 0 || y >= is.h || x < 0 || x >= is.w)
                    continue;
                sum += (double)weights[((oc * cg + ic) * k + ky) * k + kx] *
                       (double)in[((g * cg + ic) * is.h + y) * is.w + x];
            }
    return (float)(sum + (double)biases[oc]);
}

START_TEST(test_conv_matches_literal_definition)
{
    /* Odd shapes on purpose: 4x7x5 input, 6 filters of 3x3, stride 2, pad 1, groups 2, batch 2.
     * Values are small random floats; the reference sums in float in a different order than
     * the double literal loop: 36 products of magnitude < 1, so 1e-5 absolute is ample. */
    const gr_shape is = {4, 7, 5};
    const int filters = 6, k = 3, stride = 2, pad = 1, groups = 2, batch = 2;
    float in[2 * 4 * 7 * 5], weights[6 * 2 * 3 * 3], biases[6];
    gr_rng rng;
    gr_rng_seed(&rng, 42);
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++)
        in[i] = gr_rng_uniform(&rng) * 2.0f - 1.0f;
    for (size_t i = 0; i < sizeof weights / sizeof weights[0]; i++)
        weights[i] = gr_rng_uniform(&rng) - 0.5f;
    for (int i = 0; i < filters; i++)
        biases[i] = gr_rng_uniform(&rng);
    gr_op_params p = conv_params(filters, k, stride, pad, groups);
    gr_weights w = plain_weights(filters, weights, sizeof weights / sizeof weights[0], biases);
    gr_shape os;
    float *out = run1(&p, &w, in, is, batch, &os);
    assert_shape(os, 6, 4, 3); /* (7+2-3)/2+1 = 4, (5+2-3)/2+1 = 3 */
    for (int b = 0; b < batch; b++)
        for (int oc = 0; oc < filters; oc++)
            for (int oy = 0; oy < os.h; oy++)
                for (int ox = 0; ox < os.w; ox++) {
                    float want = literal_conv(in + b * gr_shape_elems(is), is, weights, biases,
                                              filters, k, stride, pad, groups, oc, oy, ox);
                    float got = out[b * gr_shape_elems(os) + (size_t)(oc * os.h + oy) * os.w + ox];
                    ASSERT_FLOAT_NEAR(got, want, 1e-5f);
                }
    free(out);
}
END_TEST

START_TEST(test_conv_cost_yolov2_tiny_first_layer)
{
    /* 3x416x416 -> 16 filters 3x3 pad 1, BN, leaky (yolov2-tiny's first layer):
     *   weights 16*3*3*3 = 432; params 432 + 16 biases + 3*16 BN = 496;
     *   MACs 27 per output x 16*416*416 = 2768896 outputs -> 74760192, flops 2x = 149520384;
     *   elementwise: BN 4 + leaky 1 = 5 per output = 13844480; total 163364864. */
    gr_op_params p = conv_params(16, 3, 1, 1, 1);
    p.batch_normalize = 1;
    p.activation = GR_ACT_LEAKY;
    gr_shape in = {3, 416, 416}, out;
    ck_assert_int_eq(gr_op_infer(&p, &in, 1, &out), GR_OK);
    assert_shape(out, 16, 416, 416);
    gr_cost c;
    gr_op_cost(&p, &in, 1, out, &c);
    ck_assert_uint_eq(c.n_weights, 432);
    ck_assert_uint_eq(c.n_params, 496);
    ck_assert_double_eq(c.flops, 163364864.0);
    ck_assert_double_eq(c.in_elems, 519168.0);
    ck_assert_double_eq(c.out_elems, 2768896.0);
}
END_TEST

START_TEST(test_conv_batch_is_independent)
{
    /* A batch of 2 gives the same as each image alone. */
    const float in[2 * 9] = {1, 2, 3, 4, 5, 6, 7, 8, 9, -1, 0, 2, 5, 3, 1, 0, 0, 7};
    float weights[9] = {1, -2, 0, 0.5f, 1, 0, 0, 3, -1}, bias[1] = {0.25f};
    gr_op_params p = conv_params(1, 3, 1, 1, 1);
    gr_weights w = plain_weights(1, weights, 9, bias);
    gr_shape os;
    float *both = run1(&p, &w, in, (gr_shape){1, 3, 3}, 2, &os);
    float *second = run1(&p, &w, in + 9, (gr_shape){1, 3, 3}, 1, &os);
    assert_exact(both + 9, second, 9);
    free(both);
    free(second);
}
END_TEST

/* ---- maxpool / avgpool --------------------------------------------------------------------- */

static gr_op_params maxpool_params(int size, int stride)
{
    gr_op_params p;
    gr_op_params_default(GR_OP_MAXPOOL, &p);
    p.size = size;
    p.stride = stride;
    p.pad = size - 1; /* the parser's default padding */
    return p;
}

START_TEST(test_maxpool_size2_stride1_keeps_size)
{
    /* padding 1, out (3+1-2)/1+1 = 3; window start i + (-1)/2 = i (C truncation): only right and
     * bottom are padded. With input -1..-9 the max of each window is its top-left value, so the
     * output equals the input; padding never wins (a zero pad would give 0 at the edges). */
    const float in[9] = {-1, -2, -3, -4, -5, -6, -7, -8, -9};
    gr_op_params p = maxpool_params(2, 1);
    gr_shape os;
    float *out = run1(&p, NULL, in, (gr_shape){1, 3, 3}, 1, &os);
    assert_shape(os, 1, 3, 3);
    assert_exact(out, in, 9);
    free(out);
    /* input 1..9: max of each 2x2 window clipped to the image: 5 6 6 / 8 9 9 / 8 9 9 */
    const float up[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    out = run1(&p, NULL, up, (gr_shape){1, 3, 3}, 1, &os);
    const float want[9] = {5, 6, 6, 8, 9, 9, 8, 9, 9};
    assert_exact(out, want, 9);
    free(out);
}
END_TEST

/* [local_avgpool]: the expected values were computed apart from the C code, in Python with exact
 * fractions over the taps inside the input of each window (start i*stride + int(-padding/2)). */
START_TEST(test_local_avgpool_means_taps_inside)
{
    /* 4x4 of 1..16, size 2 stride 1 padding 1: windows start at i (no left/top padding); the
     * last row and column average 2 taps, the corner 1. */
    float in[16];
    for (int i = 0; i < 16; i++)
        in[i] = (float)(i + 1);
    gr_op_params p = maxpool_params(2, 1);
    p.op = GR_OP_LOCAL_AVGPOOL;
    gr_shape os;
    float *out = run1(&p, NULL, in, (gr_shape){1, 4, 4}, 1, &os);
    assert_shape(os, 1, 4, 4);
    const float want[16] = {3.5f,  4.5f,  5.5f,  6,  7.5f,  8.5f,  9.5f,  10,
                            11.5f, 12.5f, 13.5f, 14, 13.5f, 14.5f, 15.5f, 16};
    assert_exact(out, want, 16);
    free(out);
    /* 5x5 of 0..24, size 3 stride 2 padding 2: windows start at 2i - 1, out 3x3; the corner
     * window holds 4 taps (0, 1, 5, 6: mean 3), the centre 9 (mean 12). */
    float in5[25];
    for (int i = 0; i < 25; i++)
        in5[i] = (float)i;
    p.size = 3;
    p.stride = 2;
    p.pad = 2;
    out = run1(&p, NULL, in5, (gr_shape){1, 5, 5}, 1, &os);
    assert_shape(os, 1, 3, 3);
    const float want5[9] = {3, 4.5f, 6, 10.5f, 12, 13.5f, 18, 19.5f, 21};
    assert_exact(out, want5, 9);
    free(out);
    /* A window wholly in the padding would average no taps: refused like maxpool's. */
    p.size = 2;
    p.pad = 4;
    ck_assert_int_eq(gr_op_infer(&p, &(gr_shape){1, 5, 5}, 1, &os), GR_ERR_PARSE);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "[local_avgpool] padding 4 too large"));
}
END_TEST

/* attention (YOLO11's C2PSA, ops/attention.c): 2 heads, key_dim 1, head_dim 2 on 1x2 pixels,
 * channels [q0 q1 | k0 k1 | v0 (2) v1 (2)], scale 0.5. Head 1's keys are equal, so its queries
 * attend uniformly (the mean of v); head 0's expected values computed apart in Python (numpy,
 * float64: v @ softmax(0.5 * q[n] * k)). */
START_TEST(test_attention_reference)
{
    const float in[16] = {1, 2,  0,  -1, /* q: head 0, head 1 */
                          3, -1, 2,  2,  /* k */
                          1, 5,  -2, 4,  /* v head 0: d 0, d 1 */
                          10, 20, 0, 1}; /* v head 1 */
    gr_op_params p;
    memset(&p, 0, sizeof p);
    gr_op_params_default(GR_OP_ATTENTION, &p);
    p.op = GR_OP_ATTENTION;
    p.groups = 2;
    p.size = 1;
    p.scale = 0.5f;
    gr_shape os;
    float *out = run1(&p, NULL, in, (gr_shape){8, 1, 2}, 1, &os);
    assert_shape(os, 4, 1, 2);
    const float want[8] = {1.47681169f, 1.07194484f, -1.28478247f, -1.89208274f,
                           15, 15, 0.5f, 0.5f};
    assert_close(out, want, 8, 1e-6);
    free(out);
    /* Channels that are not heads x (2 key_dim + head_dim), and too many tokens: refused. */
    ck_assert_int_eq(gr_op_infer(&p, &(gr_shape){7, 1, 2}, 1, &os), GR_ERR_PARSE);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "7 input channels are not 2 heads"));
    p.size = 2;
    ck_assert_int_eq(gr_op_infer(&p, &(gr_shape){8, 1, 2}, 1, &os), GR_ERR_PARSE);
    p.size = 1;
    ck_assert_int_eq(gr_op_infer(&p, &(gr_shape){8, 65, 64}, 1, &os), GR_ERR_LIMIT);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "65x64 = 4160 tokens"));
}
END_TEST

/* dfl_head (YOLOv8's anchor-free decode, ops/dfl_head.c): 2 bins, 1 class, two scales - 1x2
 * cells at stride 8, one cell at stride 16 - so three anchors in input order. Channels [left
 * bins | top | right | bottom | class], each a plane of the scale's cells. Bins (0, 0) give the
 * distance 0.5, (0, ln 3) 0.75 (softmax 1/4, 3/4), (ln 3, 0) 0.25; logits 0, ln 3, -ln 3 give
 * 0.5, 0.75, 0.25. Worked apart: anchor 0 at (0.5, 0.5) has x1 0, y1 -0.25, x2 0.75, y2 1:
 * centre (3, 3), size (6, 10) at stride 8; anchor 1 at (1.5, 0.5), all 0.5: (12, 4), (8, 8);
 * anchor 2 at (0.5, 0.5) of the stride-16 scale: (8, 8), (16, 16). */
START_TEST(test_dfl_head_reference)
{
    const float l3 = logf(3.0f);
    const float in0[18] = {0, 0, 0, 0,  /* left: bin 0, bin 1 (cell 0, cell 1) */
                           0, 0, l3, 0, /* top */
                           l3, 0, 0, 0, /* right */
                           0, 0, 0, 0,  /* bottom */
                           0, l3};      /* class 0 */
    const float in1[9] = {0, 0, 0, 0, 0, 0, 0, 0, -l3};
    gr_op_params p;
    memset(&p, 0, sizeof p);
    gr_op_params_default(GR_OP_DFL_HEAD, &p);
    p.op = GR_OP_DFL_HEAD;
    p.size = 2;
    p.classes = 1;
    p.anchors[0] = 8;
    p.anchors[1] = 16;
    const gr_shape shapes[2] = {{9, 1, 2}, {9, 1, 1}};
    gr_shape os;
    ck_assert_int_eq(gr_op_infer(&p, shapes, 2, &os), GR_OK);
    assert_shape(os, 5, 1, 3);
    float out[15];
    const float *src[2] = {in0, in1};
    gr_op_ref(&p, NULL, src, shapes, 2, out, os, 1);
    const float want[15] = {3, 12, 8,  /* x centre */
                            3, 4, 8,   /* y centre */
                            6, 8, 16,  /* width */
                            10, 8, 16, /* height */
                            0.5f, 0.75f, 0.25f};
    assert_close(out, want, 15, 1e-5);
    /* Channels that are not 4 x bins + classes, a fractional stride: refused. */
    const gr_shape bad[2] = {{9, 1, 2}, {8, 1, 1}};
    ck_assert_int_eq(gr_op_infer(&p, bad, 2, &os), GR_ERR_PARSE);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "input 1 has 8 channels, not 4 x 2 bins + 1"));
    p.anchors[1] = 1.5f;
    ck_assert_int_eq(gr_op_infer(&p, shapes, 2, &os), GR_ERR_PARSE);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "input 1's stride 1.5 is not a whole number"));
}
END_TEST

START_TEST(test_maxpool_size2_stride2_odd_gives_ceil)
{
    /* 3x3, size 2, stride 2, padding 1: out (3+1-2)/2+1 = 2 = ceil(3/2); windows start at 0 and
     * 2: max(1,2,4,5)=5, max(3,6)=6, max(7,8)=8, 9. Two channels to check channel offsets. */
    const float in[18] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 8, 7, 6, 5, 4, 3, 2, 1};
    gr_op_params p = maxpool_params(2, 2);
    gr_shape os;
    float *out = run1(&p, NULL, in, (gr_shape){2, 3, 3}, 1, &os);
    assert_shape(os, 2, 2, 2);
    /* channel 1 is 9..1: max(9,8,6,5)=9, max(7,4)=7, max(3,2)=3, 1 */
    const float want[8] = {5, 6, 8, 9, 9, 7, 3, 1};
    assert_exact(out, want, 8);
    free(out);
    gr_shape in5 = {1, 5, 5}, o5;
    ck_assert_int_eq(gr_op_infer(&p, &in5, 1, &o5), GR_OK);
    assert_shape(o5, 1, 3, 3); /* ceil(5/2) */
}
END_TEST

START_TEST(test_avgpool_global_mean)
{
    /* channel 0: (1+2+3+4)/4 = 2.5; channel 1: all -1 */
    const float in[8] = {1, 2, 3, 4, -1, -1, -1, -1};
    gr_op_params p;
    gr_op_params_default(GR_OP_AVGPOOL, &p);
    gr_shape os;
    float *out = run1(&p, NULL, in, (gr_shape){2, 2, 2}, 1, &os);
    assert_shape(os, 2, 1, 1);
    const float want[2] = {2.5f, -1};
    assert_exact(out, want, 2);
    free(out);
}
END_TEST

/* ---- route / shortcut / upsample / reorg ------------------------------------------------------ */

START_TEST(test_route_order)
{
    /* inputs listed as (b, a): b's channels first. a = 1x1x2 (1,2), b = 2x1x2 (3,4 | 5,6).
     * Batch 2: the second image is the first + 10; concatenation happens per image. */
    const float a[4] = {1, 2, 11, 12}, b[8] = {3, 4, 5, 6, 13, 14, 15, 16};
    const float *ins[2] = {b, a};
    const gr_shape shapes[2] = {{2, 1, 2}, {1, 1, 2}};
    gr_op_params p;
    gr_op_params_default(GR_OP_ROUTE, &p);
    gr_shape os;
    float *out = run_op(&p, NULL, ins, shapes, 2, 2, &os);
    assert_shape(os, 3, 1, 2);
    const float want[12] = {3, 4, 5, 6, 1, 2, 13, 14, 15, 16, 11, 12};
    assert_exact(out, want, 12);
    free(out);
}
END_TEST

START_TEST(test_route_groups)
{
    /* groups 2, group_id 1: the second half of each input's channels. a = 2 channels (1 | 2),
     * b = 4 channels (3 | 4 | 5 | 6) on 1x1: out = (2, 5, 6). */
    const float a[2] = {1, 2}, b[4] = {3, 4, 5, 6};
    const float *ins[2] = {a, b};
    const gr_shape shapes[2] = {{2, 1, 1}, {4, 1, 1}};
    gr_op_params p;
    gr_op_params_default(GR_OP_ROUTE, &p);
    p.groups = 2;
    p.group_id = 1;
    gr_shape os;
    float *out = run_op(&p, NULL, ins, shapes, 2, 1, &os);
    assert_shape(os, 3, 1, 1);
    const float want[3] = {2, 5, 6};
    assert_exact(out, want, 3);
    free(out);
}
END_TEST

START_TEST(test_sam_by_hand)
{
    /* out = act(x * from) element by element (AlexeyAB's forward_sam_layer), batch 2 (the second
     * image is the first negated: the product keeps its sign pattern, leaky then differs).
     * Leaky is Darknet's CPU one, (float)(0.1 * (double)y). */
    const float x[8] = {1, -2, 3, 4, -1, 2, -3, -4}, from[8] = {2, 3, -1, 0.5f, 2, 3, -1, 0.5f};
    const float *ins[2] = {x, from};
    const gr_shape shapes[2] = {{1, 2, 2}, {1, 2, 2}};
    gr_op_params p;
    gr_op_params_default(GR_OP_SAM, &p);
    p.activation = GR_ACT_LEAKY;
    gr_shape os;
    float *out = run_op(&p, NULL, ins, shapes, 2, 2, &os);
    assert_shape(os, 1, 2, 2);
    const float want[8] = {2, (float)(0.1 * -6.0), (float)(0.1 * -3.0), 2,
                           (float)(0.1 * -2.0), 6, 3, (float)(0.1 * -2.0)};
    assert_exact(out, want, 8);
    free(out);
    /* make_sam_layer asserts equal shapes: a one-line parse error naming both */
    const gr_shape bad[2] = {{1, 2, 2}, {2, 2, 2}};
    ck_assert_int_eq(gr_op_infer(&p, bad, 2, &os), GR_ERR_PARSE);
    ck_assert_msg(strstr(gr_last_error(), "[sam] input 1x2x2 and from-layer 2x2x2 differ"), "%s",
                  gr_last_error());
}
END_TEST

START_TEST(test_scale_channels_by_hand)
{
    /* in[0] = from (2 channels of 2x2, two images), in[1] = the scales. */
    const float from[16] = {1, 2, 3, 4, 5, 6, 7, 8, -1, -2, -3, -4, -5, -6, -7, -8};
    gr_op_params p;
    gr_op_params_default(GR_OP_SCALE_CHANNELS, &p);
    gr_shape os;
    /* scale_wh=0: one scale per channel and image, 2x1x1: {10, -1}, then {0.5, 2} */
    const float per_channel[4] = {10, -1, 0.5f, 2};
    const float *ins_c[2] = {from, per_channel};
    const gr_shape shapes_c[2] = {{2, 2, 2}, {2, 1, 1}};
    float *out = run_op(&p, NULL, ins_c, shapes_c, 2, 2, &os);
    assert_shape(os, 2, 2, 2);
    const float want_c[16] = {10, 20, 30, 40, -5, -6, -7, -8,
                              -0.5f, -1, -1.5f, -2, -10, -12, -14, -16};
    assert_exact(out, want_c, 16);
    free(out);
    /* scale_wh=1: one scale per position and image, 1x2x2, the same for every channel */
    p.scale_wh = 1;
    const float per_position[8] = {1, 0, -1, 2, 3, 1, 0, -2};
    const float *ins_p[2] = {from, per_position};
    const gr_shape shapes_p[2] = {{2, 2, 2}, {1, 2, 2}};
    out = run_op(&p, NULL, ins_p, shapes_p, 2, 2, &os);
    assert_shape(os, 2, 2, 2);
    const float want_p[16] = {1, 0, -3, 8, 5, 0, -7, 16, -3, -2, 0, 8, -15, -6, 0, 16};
    assert_exact(out, want_p, 16);
    free(out);
    /* the activation follows the product */
    p.activation = GR_ACT_RELU;
    out = run_op(&p, NULL, ins_p, shapes_p, 2, 2, &os);
    ck_assert(out[2] == 0.0f && out[3] == 8.0f && out[8] == 0.0f);
    free(out);
    /* AlexeyAB's asserts as one-line parse errors: per-position scales with scale_wh=0, per-channel
     * scales with scale_wh=1, a channel count that differs */
    p.activation = GR_ACT_LINEAR;
    p.scale_wh = 0;
    ck_assert_int_eq(gr_op_infer(&p, shapes_p, 2, &os), GR_ERR_PARSE);
    ck_assert_msg(strstr(gr_last_error(), "input 1x2x2 must be 2x1x1"), "%s", gr_last_error());
    p.scale_wh = 1;
    ck_assert_int_eq(gr_op_infer(&p, shapes_c, 2, &os), GR_ERR_PARSE);
    ck_assert_msg(strstr(gr_last_error(), "input 2x1x1 must be 1x2x2"), "%s", gr_last_error());
    p.scale_wh = 0;
    const gr_shape three[2] = {{2, 2, 2}, {3, 1, 1}};
    ck_assert_int_eq(gr_op_infer(&p, three, 2, &os), GR_ERR_PARSE);
    p.scale_wh = 2;
    ck_assert_int_ne(gr_op_infer(&p, shapes_c, 2, &os), GR_OK);
}
END_TEST

START_TEST(test_upsample_nearest)
{
    /* 1x2x2 (1 2 / 3 4), stride 2: each value becomes a 2x2 block */
    const float in[4] = {1, 2, 3, 4};
    gr_op_params p;
    gr_op_params_default(GR_OP_UPSAMPLE, &p);
    gr_shape os;
    float *out = run1(&p, NULL, in, (gr_shape){1, 2, 2}, 1, &os);
    assert_shape(os, 1, 4, 4);
    const float want[16] = {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4};
    assert_exact(out, want, 16);
    free(out);
}
END_TEST

START_TEST(test_reorg_tiny_literal)
{
    /* C=4, H=W=2, s=2, oc=1, input value = flat index. docs/darknet.md:
     *   out[i + 2*(j + 2*k)] = in[(2i + k%2) + 4*(2j + k/2)]
     * i.e. the input read as one 4x4 image (rows 0-3, 4-7, 8-11, 12-15), channel k taking the
     * pixels at row parity k/2 and column parity k%2:
     *   k=0: 0 2 8 10, k=1: 1 3 9 11, k=2: 4 6 12 14, k=3: 5 7 13 15; shape 16x1x1. */
    float in[16];
    for (int i = 0; i < 16; i++)
        in[i] = (float)i;
    gr_op_params p;
    gr_op_params_default(GR_OP_REORG, &p);
    p.stride = 2;
    gr_shape os;
    float *out = run1(&p, NULL, in, (gr_shape){4, 2, 2}, 1, &os);
    assert_shape(os, 16, 1, 1);
    const float want[16] = {0, 2, 8, 10, 1, 3, 9, 11, 4, 6, 12, 14, 5, 7, 13, 15};
    assert_exact(out, want, 16);
    free(out);
}
END_TEST

START_TEST(test_reorg_formula)
{
    /* C=8, H=4, W=6, s=2, batch 2: expected from a literal loop over docs/darknet.md's formula. */
    enum { C = 8, H = 4, W = 6, S = 2, N = C * H * W };
    float in[2 * N], want[2 * N];
    for (int i = 0; i < 2 * N; i++)
        in[i] = (float)i;
    const int oc = C / (S * S);
    for (int b = 0; b < 2; b++)
        for (int k = 0; k < C; k++)
            for (int j = 0; j < H; j++)
                for (int i = 0; i < W; i++)
                    want[b * N + i + W * (j + H * k)] =
                        in[b * N + (i * S + (k / oc) % S) +
                           W * S * ((j * S + (k / oc) / S) + H * S * (k % oc))];
    gr_op_params p;
    gr_op_params_default(GR_OP_REORG, &p);
    p.stride = S;
    gr_shape os;
    float *out = run1(&p, NULL, in, (gr_shape){C, H, W}, 2, &os);
    assert_shape(os, 32, 2, 3);
    assert_exact(out, want, 2 * N);
    free(out);
}
END_TEST

START_TEST(test_shortcut_same_shape)
{
    /* x + from, then leaky: (1 + 2, -4 + 1) = (3, -3) -> (3, -0.3) */
    const float x[2] = {1, -4}, from[2] = {2, 1};
    const float *ins[2] = {x, from};
    const gr_shape shapes[2] = {{1, 1, 2}, {1, 1, 2}};
    gr_op_params p;
    gr_op_params_default(GR_OP_SHORTCUT, &p);
    p.activation = GR_ACT_LEAKY;
    gr_shape os;
    float *out = run_op(&p, NULL, ins, shapes, 2, 1, &os);
    const float want[2] = {3, darknet_leaky(-3.0f)};
    assert_exact(out, want, 2);
    free(out);
}
END_TEST

START_TEST(test_shortcut_mismatched_from_larger)
{
    /* x: 2 channels of 2x2 all 1; from: 1 channel of 4x4 with values 0..15.
     * stride = 4/2 = 2: from sampled at (0,0)=0, (0,2)=2, (2,0)=8, (2,2)=10 and added to x's
     * channel 0 -> 1, 3, 9, 11; only min(c) = 1 channel is added, channel 1 passes through. */
    float x[8], from[16];
    for (int i = 0; i < 8; i++)
        x[i] = 1;
    for (int i = 0; i < 16; i++)
        from[i] = (float)i;
    const float *ins[2] = {x, from};
    const gr_shape shapes[2] = {{2, 2, 2}, {1, 4, 4}};
    gr_op_params p;
    gr_op_params_default(GR_OP_SHORTCUT, &p);
    gr_shape os;
    float *out = run_op(&p, NULL, ins, shapes, 2, 1, &os);
    assert_shape(os, 2, 2, 2);
    const float want[8] = {1, 3, 9, 11, 1, 1, 1, 1};
    assert_exact(out, want, 8);
    free(out);
}
END_TEST

START_TEST(test_shortcut_mismatched_from_smaller)
{
    /* x: 1 channel 4x4 of zeros; from: 1x2x2 (1 2 / 3 4). sample = 4/2 = 2: from[j][i] lands on
     * x[2j][2i], the top-left of each 2x2 block; the rest stays 0. */
    float x[16] = {0};
    const float from[4] = {1, 2, 3, 4};
    const float *ins[2] = {x, from};
    const gr_shape shapes[2] = {{1, 4, 4}, {1, 2, 2}};
    gr_op_params p;
    gr_op_params_default(GR_OP_SHORTCUT, &p);
    gr_shape os;
    float *out = run_op(&p, NULL, ins, shapes, 2, 1, &os);
    const float want[16] = {1, 0, 2, 0, 0, 0, 0, 0, 3, 0, 4, 0, 0, 0, 0, 0};
    assert_exact(out, want, 16);
    free(out);
}
END_TEST

/* ---- connected / softmax ------------------------------------------------------------------- */

START_TEST(test_connected)
{
    /* inputs (1, 2, 3) as 3x1x1; W = [[1, 0, -1], [0.5, 0.5, 0.5]], b = (0.5, 0):
     * (1 - 3 + 0.5, 3) = (-1.5, 3); leaky -> (-0.15, 3) */
    const float in[3] = {1, 2, 3};
    float weights[6] = {1, 0, -1, 0.5f, 0.5f, 0.5f}, bias[2] = {0.5f, 0};
    gr_op_params p;
    gr_op_params_default(GR_OP_CONNECTED, &p);
    p.filters = 2;
    p.activation = GR_ACT_LEAKY;
    gr_weights w = plain_weights(2, weights, 6, bias);
    gr_shape os;
    float *out = run1(&p, &w, in, (gr_shape){3, 1, 1}, 1, &os);
    assert_shape(os, 2, 1, 1);
    const float want[2] = {darknet_leaky(-1.5f), 3};
    assert_exact(out, want, 2);
    gr_cost c;
    gr_shape in_shape = {3, 1, 1};
    gr_op_cost(&p, &in_shape, 1, os, &c);
    ck_assert_uint_eq(c.n_weights, 6);
    ck_assert_uint_eq(c.n_params, 8); /* + 2 biases */
    free(out);
}
END_TEST

START_TEST(test_softmax_groups)
{
    /* 4 values, groups 2: (0, ln3) -> (1/4, 3/4); (5, 5) -> (1/2, 1/2). Tolerance 1e-7: one
     * rounding of exp and one of the division. */
    const float in[4] = {0, (float)log(3.0), 5, 5};
    gr_op_params p;
    gr_op_params_default(GR_OP_SOFTMAX, &p);
    p.groups = 2;
    gr_shape os;
    float *out = run1(&p, NULL, in, (gr_shape){4, 1, 1}, 1, &os);
    const float want[4] = {0.25f, 0.75f, 0.5f, 0.5f};
    assert_close(out, want, 4, 1e-7);
    free(out);
}
END_TEST

/* ---- region / yolo ---------------------------------------------------------------------------- */

START_TEST(test_region_softmax)
{
    /* num 1, classes 2, coords 4 -> 7 channels on a 1x2 grid. Cell 0:
     *   x 0 -> 0.5, y ln3 -> 0.75, w 1.5 and h -2 raw, objectness 0 -> 0.5,
     *   classes (0, ln3) -> softmax (0.25, 0.75).
     * Cell 1 differs (x = ln3, classes equal) so a softmax that mixed cells would show. */
    const float l3 = (float)log(3.0);
    const float in[14] = {0, l3, l3, 0, 1.5f, 7, -2, 8, 0, -l3, 0, 4, l3, 4};
    gr_op_params p;
    gr_op_params_default(GR_OP_REGION, &p);
    p.classes = 2;
    p.num = 1;
    p.softmax = 1;
    gr_shape os;
    float *out = run1(&p, NULL, in, (gr_shape){7, 1, 2}, 1, &os);
    assert_shape(os, 7, 1, 2);
    const float want[14] = {0.5f, 0.75f, 0.75f, 0.5f, 1.5f, 7, -2, 8, 0.5f, 0.25f, 0.25f, 0.5f,
                            0.75f, 0.5f};
    assert_close(out, want, 14, 1e-7);
    free(out);
    /* softmax=0: Darknet applies a logistic to the classes instead: (0, ln3) -> (0.5, 0.75) */
    p.softmax = 0;
    out = run1(&p, NULL, in, (gr_shape){7, 1, 2}, 1, &os);
    ASSERT_FLOAT_NEAR(out[10], 0.5f, 1e-7f);
    ASSERT_FLOAT_NEAR(out[12], 0.75f, 1e-7f);
    free(out);
}
END_TEST

START_TEST(test_yolo_activations)
{
    /* one mask entry, classes 2 -> 7 channels at 1x1: logistic on x, y, objectness and both
     * classes; w, h raw: (0, ln3, 1.5, -2, ln3, 0, -ln3) -> (.5, .75, 1.5, -2, .75, .5, .25) */
    const float l3 = (float)log(3.0);
    const float in[7] = {0, l3, 1.5f, -2, l3, 0, -l3};
    gr_op_params p;
    gr_op_params_default(GR_OP_YOLO, &p);
    p.classes = 2;
    p.num = 3;
    p.n_mask = 1;
    p.mask[0] = 2;
    gr_shape os;
    float *out = run1(&p, NULL, in, (gr_shape){7, 1, 1}, 1, &os);
    const float want[7] = {0.5f, 0.75f, 1.5f, -2, 0.75f, 0.5f, 0.25f};
    assert_close(out, want, 7, 1e-7);
    free(out);
}
END_TEST

/* ---- quantize / dequantize -------------------------------------------------------------------- */

START_TEST(test_quantize_int8_rounding_and_clamp)
{
    /* scale 0.5, q = clamp(round_half_even(x / 0.5), -127, 127):
     *   0.25 -> 0.5 -> 0 (tie to even), 0.75 -> 1.5 -> 2, 1.25 -> 2.5 -> 2, -0.25 -> -0.5 -> 0,
     *   -0.75 -> -1.5 -> -2, 0.3 -> 0.6 -> 1, 100 -> 200 -> 127, -100 -> -127 (not -128),
     *   63.5 -> 127 exactly, NaN -> 0 (what __float2int_rn gives). */
    const float in[10] = {0.25f, 0.75f, 1.25f, -0.25f, -0.75f, 0.3f, 100, -100, 63.5f, NAN};
    gr_op_params p;
    gr_op_params_default(GR_OP_QUANTIZE, &p);
    p.dtype = GR_DTYPE_I8;
    p.scale = 0.5f;
    gr_shape os;
    float *q = run1(&p, NULL, in, (gr_shape){10, 1, 1}, 1, &os);
    const float want[10] = {0, 2, 2, 0, -2, 1, 127, -127, 127, 0};
    assert_exact(q, want, 10);
    /* dequantize: q * scale */
    gr_op_params d;
    gr_op_params_default(GR_OP_DEQUANTIZE, &d);
    d.scale = 0.5f;
    float *back = run1(&d, NULL, q, (gr_shape){10, 1, 1}, 1, &os);
    const float want_back[10] = {0, 1, 1, 0, -1, 0.5f, 63.5f, -63.5f, 63.5f, 0};
    assert_exact(back, want_back, 10);
    free(q);
    free(back);
}
END_TEST

START_TEST(test_quantize_f16)
{
    /* f16 has 10 mantissa bits: 1 + 2^-11 is halfway between 1 and 1 + 2^-10 -> 1 (even);
     * 1 + 3*2^-11 is halfway between 1 + 2^-10 and 1 + 2^-9 -> 1 + 2^-9 (even); 0.5 exact. */
    const float in[3] = {1.0f + 0x1p-11f, 1.0f + 3.0f * 0x1p-11f, 0.5f};
    gr_op_params p;
    gr_op_params_default(GR_OP_QUANTIZE, &p);
    p.dtype = GR_DTYPE_F16;
    gr_shape os;
    float *q = run1(&p, NULL, in, (gr_shape){3, 1, 1}, 1, &os);
    const float want[3] = {1.0f, 1.0f + 0x1p-9f, 0.5f};
    assert_exact(q, want, 3);
    gr_op_params d;
    gr_op_params_default(GR_OP_DEQUANTIZE, &d);
    d.dtype = GR_DTYPE_F16;
    float *back = run1(&d, NULL, q, (gr_shape){3, 1, 1}, 1, &os);
    assert_exact(back, want, 3); /* identity */
    free(q);
    free(back);
}
END_TEST

/* ---- infer rejects bad parameters ------------------------------------------------------------- */

static void expect_reject(const gr_op_params *p, const gr_shape *in, int n_in, gr_status want,
                          const char *fragment)
{
    gr_shape out = {-7, -7, -7};
    gr_clear_error();
    gr_status st = gr_op_infer(p, in, n_in, &out);
    ck_assert_msg(st == want, "status %d, want %d (%s)", (int)st, (int)want, gr_last_error());
    ck_assert_msg(strstr(gr_last_error(), fragment) != NULL, "message '%s' lacks '%s'",
                  gr_last_error(), fragment);
    ck_assert_msg(strchr(gr_last_error(), '\n') == NULL, "message is not one line");
}

START_TEST(test_infer_rejects_conv)
{
    gr_shape in = {4, 8, 8};
    gr_op_params p = conv_params(0, 3, 1, 1, 1);
    expect_reject(&p, &in, 1, GR_ERR_PARSE, "[convolutional] filters 0 must be >= 1");
    p = conv_params(6, 3, 1, 1, 4);
    expect_reject(&p, &in, 1, GR_ERR_PARSE, "filters 6 not divisible by groups 4");
    p = conv_params(6, 3, 1, 1, 3);
    expect_reject(&p, &in, 1, GR_ERR_PARSE, "input channels 4 not divisible by groups 3");
    p = conv_params(4, 11, 1, 1, 1);
    expect_reject(&p, &in, 1, GR_ERR_PARSE, "size 11 larger than the padded input");
    p = conv_params(4, 3, 0, 1, 1);
    expect_reject(&p, &in, 1, GR_ERR_PARSE, "stride 0 must be >= 1");
    p = conv_params(4, 3, 1, -1, 1);
    expect_reject(&p, &in, 1, GR_ERR_PARSE, "padding -1 must be >= 0");
    p = conv_params(GR_MAX_DIM + 1, 1, 1, 0, 1);
    expect_reject(&p, &in, 1, GR_ERR_LIMIT, "filters 65537 exceeds the limit");
    /* 65536 filters of 65536 channels: a 2^32-element weight tensor */
    gr_shape wide = {GR_MAX_DIM, 1, 1};
    p = conv_params(GR_MAX_DIM, 1, 1, 0, 1);
    expect_reject(&p, &wide, 1, GR_ERR_LIMIT, "weight tensor");
    gr_shape absurd = {3, GR_MAX_DIM + 1, 4};
    p = conv_params(4, 3, 1, 1, 1);
    expect_reject(&p, &absurd, 1, GR_ERR_LIMIT, "exceeds the dimension limit");
    gr_shape huge = {GR_MAX_DIM, GR_MAX_DIM, 2}; /* 2^33 elements */
    expect_reject(&p, &huge, 1, GR_ERR_LIMIT, "elements");
    p.activation = GR_ACT_COUNT;
    expect_reject(&p, &in, 1, GR_ERR_PARSE, "activation");
    p = conv_params(4, 3, 1, 1, 1);
    expect_reject(&p, &in, 2, GR_ERR_INVALID_ARGUMENT, "takes 1 input");
}
END_TEST

START_TEST(test_infer_rejects_pool_and_shape_ops)
{
    gr_shape in = {4, 8, 8};
    gr_op_params p = maxpool_params(2, 2);
    p.size = 0;
    expect_reject(&p, &in, 1, GR_ERR_PARSE, "[maxpool] size 0 must be >= 1");
    p = maxpool_params(2, 2);
    p.pad = 3; /* ceil(3/2) = 2 >= size: a window wholly in the padding */
    expect_reject(&p, &in, 1, GR_ERR_PARSE, "[maxpool] padding 3 too large");
    p = maxpool_params(9, 1);
    p.pad = 0;
    expect_reject(&p, &in, 1, GR_ERR_PARSE, "size 9 larger");

    gr_op_params u;
    gr_op_params_default(GR_OP_UPSAMPLE, &u);
    u.stride = 0;
    expect_reject(&u, &in, 1, GR_ERR_PARSE, "[upsample] stride 0 must be >= 1");
    gr_shape big = {1, 40000, 4};
    u.stride = 2; /* 80000 rows > GR_MAX_DIM */
    expect_reject(&u, &big, 1, GR_ERR_LIMIT, "dimension limit");

    gr_op_params r;
    gr_op_params_default(GR_OP_REORG, &r);
    r.stride = 3;
    expect_reject(&r, &in, 1, GR_ERR_PARSE, "[reorg] input 8x8 not divisible by stride 3");
    gr_shape three = {3, 8, 8};
    r.stride = 2;
    expect_reject(&r, &three, 1, GR_ERR_PARSE, "channels 3 not divisible by stride^2 = 4");

    gr_op_params route;
    gr_op_params_default(GR_OP_ROUTE, &route);
    gr_shape mixed[2] = {{4, 8, 8}, {4, 4, 4}};
    expect_reject(&route, mixed, 2, GR_ERR_PARSE, "[route] input 1 is 4x4");
    expect_reject(&route, mixed, 0, GR_ERR_PARSE, "[route] needs 1 to");
    route.groups = 2;
    route.group_id = 2;
    expect_reject(&route, mixed, 1, GR_ERR_PARSE, "group_id 2 must be in 0..1");
    gr_shape odd[1] = {{3, 8, 8}};
    route.group_id = 0;
    expect_reject(&route, odd, 1, GR_ERR_PARSE, "channels 3 not divisible by groups 2");

    gr_op_params s;
    gr_op_params_default(GR_OP_SHORTCUT, &s);
    gr_shape skew[2] = {{4, 8, 8}, {4, 16, 8}}; /* height ratio 2, width ratio 1 */
    expect_reject(&s, skew, 2, GR_ERR_PARSE, "[shortcut]");
    expect_reject(&s, skew, 1, GR_ERR_INVALID_ARGUMENT, "takes 2 inputs");

    gr_op_params sm;
    gr_op_params_default(GR_OP_SOFTMAX, &sm);
    sm.groups = 3;
    gr_shape ten = {10, 1, 1};
    expect_reject(&sm, &ten, 1, GR_ERR_PARSE, "[softmax] 10 inputs not divisible by groups 3");
}
END_TEST

START_TEST(test_infer_rejects_heads_and_quant)
{
    gr_op_params p;
    gr_op_params_default(GR_OP_REGION, &p);
    p.num = 5; /* 5*(4+1+20) = 125 channels expected */
    gr_shape in = {124, 13, 13};
    expect_reject(&p, &in, 1, GR_ERR_PARSE, "[region] input has 124 channels");
    p.coords = 5;
    in.c = 130;
    expect_reject(&p, &in, 1, GR_ERR_UNSUPPORTED, "[region] coords 5");
    p.coords = 4;
    p.num = GR_MAX_ANCHORS + 1;
    expect_reject(&p, &in, 1, GR_ERR_LIMIT, "[region] num");

    gr_op_params y;
    gr_op_params_default(GR_OP_YOLO, &y);
    y.classes = 80;
    y.num = 6;
    y.n_mask = 3;
    y.mask[0] = 3;
    y.mask[1] = 4;
    y.mask[2] = 5;
    gr_shape yin = {255, 13, 13}, yout;
    ck_assert_int_eq(gr_op_infer(&y, &yin, 1, &yout), GR_OK);
    assert_shape(yout, 255, 13, 13);
    yin.c = 250;
    expect_reject(&y, &yin, 1, GR_ERR_PARSE, "[yolo] input has 250 channels");
    yin.c = 255;
    y.mask[2] = 6;
    expect_reject(&y, &yin, 1, GR_ERR_PARSE, "[yolo] mask entry 2 is 6");

    gr_op_params q;
    gr_op_params_default(GR_OP_QUANTIZE, &q);
    q.scale = 0.0f;
    gr_shape qin = {4, 4, 4};
    expect_reject(&q, &qin, 1, GR_ERR_INVALID_ARGUMENT, "[quantize] int8 scale");
    q.scale = 1.0f;
    q.dtype = GR_DTYPE_U8;
    expect_reject(&q, &qin, 1, GR_ERR_UNSUPPORTED, "dtype u8 unsupported");
}
END_TEST

START_TEST(test_infer_yolov2_tiny_shapes)
{
    /* The shape chain of yolov2-tiny-voc: 416 -> 6 maxpools of which 5 halve (208, 104, 52,
     * 26, 13) and the last (size 2 stride 1) keeps 13; the final 1x1 conv gives 125x13x13. */
    gr_shape s = {3, 416, 416};
    const int filters[6] = {16, 32, 64, 128, 256, 512};
    for (int i = 0; i < 6; i++) {
        gr_op_params c = conv_params(filters[i], 3, 1, 1, 1);
        ck_assert_int_eq(gr_op_infer(&c, &s, 1, &s), GR_OK);
        gr_op_params m = maxpool_params(2, i < 5 ? 2 : 1);
        ck_assert_int_eq(gr_op_infer(&m, &s, 1, &s), GR_OK);
    }
    assert_shape(s, 512, 13, 13);
    gr_op_params last = conv_params(125, 1, 1, 0, 1);
    ck_assert_int_eq(gr_op_infer(&last, &s, 1, &s), GR_OK);
    assert_shape(s, 125, 13, 13);
}
END_TEST

static Suite *ops_suite(void)
{
    Suite *s = suite_create("ops");
    TCase *tc = tcase_create("ops");
    tcase_add_test(tc, test_table_complete);
    tcase_add_test(tc, test_section_lookup);
    tcase_add_test(tc, test_op_flags);
    tcase_add_test(tc, test_activation_names);
    tcase_add_test(tc, test_defaults_follow_darknet);
    tcase_add_test(tc, test_activations);
    tcase_add_test(tc, test_activations_alexeyab);
    tcase_add_test(tc, test_activations_alexeyab_by_hand);
    tcase_add_test(tc, test_activation_forms);
    tcase_add_test(tc, test_conv_1x1);
    tcase_add_test(tc, test_conv_3x3_pad_sums);
    tcase_add_test(tc, test_conv_is_cross_correlation);
    tcase_add_test(tc, test_conv_stride2);
    tcase_add_test(tc, test_conv_groups);
    tcase_add_test(tc, test_conv_alexeyab);
    tcase_add_test(tc, test_conv_alexeyab_fused_bn);
    tcase_add_test(tc, test_conv_dilation_needs_centered_padding);
    tcase_add_test(tc, test_conv_batchnorm_epsilon_on_std);
    tcase_add_test(tc, test_conv_leaky_activation);
    tcase_add_test(tc, test_conv_matches_literal_definition);
    tcase_add_test(tc, test_conv_cost_yolov2_tiny_first_layer);
    tcase_add_test(tc, test_conv_batch_is_independent);
    tcase_add_test(tc, test_maxpool_size2_stride1_keeps_size);
    tcase_add_test(tc, test_maxpool_size2_stride2_odd_gives_ceil);
    tcase_add_test(tc, test_local_avgpool_means_taps_inside);
    tcase_add_test(tc, test_attention_reference);
    tcase_add_test(tc, test_dfl_head_reference);
    tcase_add_test(tc, test_avgpool_global_mean);
    tcase_add_test(tc, test_route_order);
    tcase_add_test(tc, test_route_groups);
    tcase_add_test(tc, test_sam_by_hand);
    tcase_add_test(tc, test_scale_channels_by_hand);
    tcase_add_test(tc, test_upsample_nearest);
    tcase_add_test(tc, test_reorg_tiny_literal);
    tcase_add_test(tc, test_reorg_formula);
    tcase_add_test(tc, test_shortcut_same_shape);
    tcase_add_test(tc, test_shortcut_mismatched_from_larger);
    tcase_add_test(tc, test_shortcut_mismatched_from_smaller);
    tcase_add_test(tc, test_connected);
    tcase_add_test(tc, test_softmax_groups);
    tcase_add_test(tc, test_region_softmax);
    tcase_add_test(tc, test_yolo_activations);
    tcase_add_test(tc, test_quantize_int8_rounding_and_clamp);
    tcase_add_test(tc, test_quantize_f16);
    tcase_add_test(tc, test_infer_rejects_conv);
    tcase_add_test(tc, test_infer_rejects_pool_and_shape_ops);
    tcase_add_test(tc, test_infer_rejects_heads_and_quant);
    tcase_add_test(tc, test_infer_yolov2_tiny_shapes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(ops_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
