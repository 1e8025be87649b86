/* Records AlexeyAB Darknet's forward_convolutional_layer on small grouped / depthwise / dilated /
 * stride_x != stride_y cases, the oracle of tests/test_ops.c's test_conv_alexeyab
 * (tests/data/alexeyab_conv.txt). Not part of the build: it links AlexeyAB's own objects
 * (commit 59596d78, built with its Makefile's defaults: CPU, no AVX, no OpenMP):
 *
 *   AB=path/to/alexeyab-darknet     (a checkout of github.com/AlexeyAB/darknet at that commit)
 *   g++ -O0 -x c -I$AB/include -I$AB/src tools/oracle/alexeyab_conv.c -x none \
 *       $(ls $AB/obj/*.o | grep -v '/darknet.o$') -lm -pthread -o /tmp/ab_conv
 *   /tmp/ab_conv > tests/data/alexeyab_conv.txt
 *
 * Per case one line "case c h w filters groups size stride_x stride_y dilation pad activation
 * out_c out_h out_w" then the lines "input ...", "weights ...", "biases ...", "output ..." of
 * C99 hex floats (exact). Inputs and weights come from a fixed LCG, in [-1, 1) and [-0.5, 0.5). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "activations.h"
#include "convolutional_layer.h"

static uint32_t lcg_state = 12345u;

static float uniform(float lo, float hi)
{
    lcg_state = lcg_state * 1664525u + 1013904223u;
    return lo + (hi - lo) * (float)(lcg_state >> 8) / 16777216.0f;
}

static void print_array(const char *name, const float *v, int n)
{
    printf("%s", name);
    for (int i = 0; i < n; i++)
        printf(" %a", (double)v[i]);
    printf("\n");
}

typedef struct conv_case {
    int c, h, w, filters, groups, size, stride_x, stride_y, dilation, pad;
    const char *activation;
} conv_case;

static void run_case(const conv_case *k)
{
    ACTIVATION act = get_activation((char *)k->activation);
    convolutional_layer l = make_convolutional_layer(
        1, 1, k->h, k->w, k->c, k->filters, k->groups, k->size, k->stride_x, k->stride_y,
        k->dilation, k->pad, act, 0, 0, 0, 0, 0, 0, 0, NULL, 0, 0, 0);
    int n_in = k->c * k->h * k->w;
    int n_w = k->filters * (k->c / k->groups) * k->size * k->size;
    float *input = calloc((size_t)n_in, sizeof *input);
    for (int i = 0; i < n_in; i++)
        input[i] = uniform(-1.0f, 1.0f);
    for (int i = 0; i < n_w; i++)
        l.weights[i] = uniform(-0.5f, 0.5f);
    for (int i = 0; i < k->filters; i++)
        l.biases[i] = uniform(-0.25f, 0.25f);
    network_state state = {0};
    state.input = input;
    state.workspace = calloc(l.workspace_size / sizeof(float) + 1, sizeof(float));
    forward_convolutional_layer(l, state);
    printf("case %d %d %d %d %d %d %d %d %d %d %s %d %d %d\n", k->c, k->h, k->w, k->filters,
           k->groups, k->size, k->stride_x, k->stride_y, k->dilation, k->pad, k->activation,
           l.out_c, l.out_h, l.out_w);
    print_array("input", input, n_in);
    print_array("weights", l.weights, n_w);
    print_array("biases", l.biases, k->filters);
    print_array("output", l.output, l.outputs);
    free(state.workspace);
    free(input);
}

int main(void)
{
    static const conv_case cases[] = {
        /* c  h   w  filters groups size sx sy dil pad activation */
        {8, 9, 7, 8, 8, 3, 1, 1, 1, 1, "leaky"},   /* depthwise 3x3 s1 */
        {6, 11, 10, 6, 6, 3, 2, 2, 1, 1, "linear"}, /* depthwise 3x3 s2 */
        {8, 6, 5, 16, 8, 3, 1, 1, 1, 1, "leaky"},   /* depthwise, multiplier 2 */
        {8, 7, 6, 6, 2, 3, 1, 1, 1, 1, "linear"},   /* two groups */
        {4, 5, 5, 4, 2, 1, 1, 1, 1, 0, "relu"},     /* grouped 1x1 */
        {3, 9, 9, 4, 1, 3, 1, 1, 2, 1, "leaky"},    /* dilation 2 */
        {4, 10, 9, 4, 4, 3, 1, 1, 3, 1, "linear"},  /* depthwise, dilation 3 */
        {2, 13, 11, 2, 1, 5, 1, 1, 2, 2, "linear"}, /* 5x5 dilation 2 */
        {3, 8, 7, 2, 1, 3, 2, 1, 1, 1, "leaky"},    /* stride_x 2, stride_y 1 */
        {3, 8, 9, 2, 1, 3, 1, 2, 1, 1, "linear"},   /* stride_x 1, stride_y 2 */
        {6, 9, 8, 6, 3, 3, 2, 2, 2, 1, "hardtan"},  /* groups + stride 2 + dilation 2 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i]);
    return 0;
}
