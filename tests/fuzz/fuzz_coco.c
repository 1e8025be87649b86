/* libFuzzer harness: the COCO JSON reader (tools/coco.c) on arbitrary bytes, as an instances file
 * and as a results array (from memory, the same parser as files). */
#include <stddef.h>
#include <stdint.h>

#include "tools/coco.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile double sink;

static void check(const uint8_t *data, size_t size, int results)
{
    gr_coco c;
    if (gr_coco_parse((const char *)data, size, "fuzz.json", results, &c) != GR_OK) {
        if (c.images || c.boxes || c.categories)
            __builtin_trap(); /* failure leaves nothing to free */
        return;
    }
    double sum = 0.0;
    for (int i = 0; i < c.n_images; i++) /* touch everything: ASan checks the sizes */
        sum += (double)c.images[i].id + (double)c.images[i].file_name[0];
    for (long long i = 0; i < c.n_boxes; i++)
        sum += c.boxes[i].bbox[0] + c.boxes[i].bbox[3] + c.boxes[i].score;
    for (int i = 0; i < c.n_categories; i++)
        sum += (double)c.categories[i].name[0];
    sink = sum;
    gr_coco_free(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check(data, size, 0);
    check(data, size, 1);
    return 0;
}
