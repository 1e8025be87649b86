/* INT8 calibration for both backends: per-layer activation ranges from the calibration cache when
 * it matches the model, else from the fp32 CPU reference plan run over the calibration images
 * (default: the bundled photos), letterboxed to uint8 exactly as the engine's input is; then
 * written to the cache when one is named. */
#include <stdlib.h>

#include "planner/plan.h"
#include "runtime/calib_cache.h"
#include "runtime/engine_internal.h"
#include "runtime/trace.h"

#ifndef GR_DATA_DIR
#define GR_DATA_DIR "data"
#endif

static const char *const bundled_photos[] = {GR_DATA_DIR "/dog.jpg", GR_DATA_DIR "/person.jpg",
                                             GR_DATA_DIR "/horses.jpg", GR_DATA_DIR "/eagle.jpg",
                                             GR_DATA_DIR "/giraffe.jpg", NULL};

static gr_status calibrate(gr_engine *e, float **layer_range_out, float *input_range)
{
    const gr_net *net = e->net;
    const char *const *images = e->opt.calib_images;
    const char *cache = e->opt.calib_cache;
    float *layer_range = gr_calloc((size_t)net->n_layers, sizeof(float), "calibration ranges");
    if (!layer_range)
        return GR_ERR_OUT_OF_MEMORY;
    *layer_range_out = layer_range; /* owned by the caller from here on, also on failure */
    gr_calib_key key = gr_calib_key_make(net, e->opt.calib_method, e->opt.calib_percentile);
    if (cache) {
        int found = 0;
        GR_TRY(gr_calib_cache_read(cache, &key, net->n_layers, layer_range, input_range,
                                   &found));
        if (found)
            return GR_OK;
    }
    if (!images)
        images = bundled_photos;
    int n = 0;
    while (images[n])
        n++;
    if (n == 0)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "int8 calibration needs at least one image");
    size_t per_image = (size_t)net->c * (size_t)net->w * (size_t)net->h;
    float *data = gr_calloc((size_t)n * per_image, sizeof(float), "calibration images");
    uint8_t *u8 = gr_malloc(per_image, "calibration image");
    if (!data || !u8) {
        free(data);
        free(u8);
        return GR_ERR_OUT_OF_MEMORY;
    }
    gr_status st = GR_OK;
    for (int i = 0; i < n && st == GR_OK; i++) {
        gr_image *im = NULL;
        st = gr_image_load(images[i], &im);
        if (st != GR_OK) {
            gr_fail_prefix(st, "int8 calibration: ");
            break;
        }
        /* The engine's input is the uint8 letterbox: calibrate on exactly those values. */
        st = gr_image_letterbox_u8(im, net->w, net->h, u8);
        float *dst = data + (size_t)i * per_image;
        size_t plane = (size_t)net->w * (size_t)net->h;
        for (size_t p = 0; p < plane && st == GR_OK; p++)
            for (int c = 0; c < net->c; c++)
                dst[(size_t)c * plane + p] = (float)u8[p * (size_t)net->c + (size_t)c] / 255.0f;
        gr_image_destroy(im);
    }
    if (st == GR_OK)
        st = gr_plan_calibrate_ranges(net, data, n, e->opt.calib_method, e->opt.calib_percentile,
                                      layer_range, input_range);
    free(data);
    free(u8);
    if (st == GR_OK && cache)
        st = gr_calib_cache_write(cache, &key, net->n_layers, layer_range, *input_range, n);
    return st;
}


gr_status gr_engine_calibrate(gr_engine *e, float **layer_range_out, float *input_range)
{
    gr_trace_push("graphrun: int8 calibration");
    gr_status st = calibrate(e, layer_range_out, input_range);
    gr_trace_pop();
    return st;
}
