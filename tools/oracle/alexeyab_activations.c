/* Records AlexeyAB Darknet's activations on a grid of inputs, the oracle of tests/test_ops.c's
 * test_activations_alexeyab (tests/data/alexeyab_activations.txt). Not part of the build: it links
 * AlexeyAB's own src/activations.c (commit 59596d78), so the values are Darknet's, not ours.
 *
 *   AB=path/to/alexeyab-darknet     (a checkout of github.com/AlexeyAB/darknet at that commit)
 *   cc -O0 -I$AB/include -I$AB/src tools/oracle/alexeyab_activations.c $AB/src/activations.c \
 *      -lm -o /tmp/ab_act && /tmp/ab_act > tests/data/alexeyab_activations.txt
 *
 * Each line: name, input, output, both as C99 hex floats (exact). Darknet's layers reach the
 * activations through different entry points, and each is called the way its conv forward does
 * (convolutional_layer.c:1397-1404): activate_array_swish / _mish / _hard_mish for those three,
 * activate() for the rest. relu6 is the exception: activate() has no RELU6 case and returns 0
 * (activations.c:77-113), so AlexeyAB's CPU conv outputs zeros where its GPU kernel clamps; we
 * record relu6_activate (activations.h:64), the function both its name and its GPU agree on. */
#include <math.h>
#include <stdio.h>

#include "activations.h"

static const char *const names[] = {"relu6", "hard_mish", "elu", "selu", "gelu", "tanh",
                                    "loggy", "relie", "ramp", "plse", "stair", "hardtan",
                                    "lhtan", "mish", "swish", "leaky", "relu", "linear",
                                    "logistic", "revleaky"};

static float alexeyab(const char *name, float x)
{
    float in[1] = {x}, out[1], scratch[1];
    ACTIVATION a = get_activation((char *)name);
    switch (a) {
    case MISH: activate_array_mish(in, 1, scratch, out); return out[0];
    case SWISH: activate_array_swish(in, 1, scratch, out); return out[0];
    case HARD_MISH: activate_array_hard_mish(in, 1, scratch, out); return out[0];
    case RELU6: return relu6_activate(x);
    default: return activate(x, a);
    }
}

int main(void)
{
    static const float special[] = {0.0f,    -0.0f,    1e-30f,  -1e-30f, 1e-8f,   -1e-8f,
                                    0.5f,    -0.5f,    1.0f,    -1.0f,   -2.0f,   -1.999f,
                                    2.0f,    3.0f,     -3.0f,   4.0f,    -4.0f,   4.5f,
                                    -4.5f,   6.0f,     5.999f,  6.001f,  19.99f,  20.0f,
                                    20.01f,  -19.99f,  -20.0f,  -20.01f, 30.0f,   -30.0f,
                                    88.0f,   -88.0f,   89.0f,   -89.0f,  100.0f,  -100.0f,
                                    1e10f,   -1e10f,   1e-3f,   -1e-3f,  0.125f,  -0.75f};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        for (size_t i = 0; i < sizeof special / sizeof special[0]; i++)
            printf("%s %a %a\n", names[k], (double)special[i],
                   (double)alexeyab(names[k], special[i]));
        /* a dense grid over [-12, 12] in steps of 0.0625 + 1/257 (not a dyadic step) */
        for (int i = -180; i <= 180; i++) {
            float x = (float)i * (0.0625f + 1.0f / 257.0f);
            printf("%s %a %a\n", names[k], (double)x, (double)alexeyab(names[k], x));
        }
    }
    return 0;
}
