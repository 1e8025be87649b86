/* libFuzzer harness: the .npy reader on arbitrary bytes (from memory, the same parser as files). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "tools/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile float sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    float *values = NULL;
    int dims[4], ndim = 0;
    if (gr_npy_read_mem(data, size, "fuzz.npy", &values, dims, &ndim, 4) != GR_OK) {
        if (values || ndim != 0)
            __builtin_trap(); /* failure leaves the out-parameters empty */
        return 0;
    }
    size_t elems = 1;
    for (int i = 0; i < ndim; i++)
        elems *= (size_t)dims[i];
    float sum = 0.0f;
    for (size_t i = 0; i < elems; i++) /* touch every float: ASan checks the allocation's size */
        sum += values[i];
    sink = sum;
    free(values);
    return 0;
}
