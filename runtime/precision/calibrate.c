/* INT8 calibration for both backends: per-layer activation ranges from the calibration cache when
 * it matches the model, method and image set, else by calibrating on the calibration images
 * (default: the bundled photos, found by gr_data_path), each decoded and letterboxed (or
 * stretched: the engine option preprocess, resolved by the front) to uint8 exactly as the engine's
 * input is: on the GPU (runtime/gpu/calib.c: an fp32 GPU engine in batches, statistics on the
 * device) or on the CPU (planner/calib.c: the fp32 reference plan on all cores), as the engine
 * option calib_device says (AUTO: the engine's own device); then written to the cache when one is
 * named. A calibration that ran leaves a notice line with its count, time and device.
 * The front (engine.c) runs this before building the engine the ranges are for; the GPU's
 * calibration engine is built through the one build path (build.c), a call downward. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/data.h"
#include "planner/calib.h"
#include "runtime/precision/calib_cache.h"
#include "runtime/gpu/calib.h"
#include "runtime/engine_internal.h"
#include "runtime/image/image.h"
#include "runtime/trace.h"


typedef struct image_source {
    const char *const *paths;
    const gr_net *net;
    gr_preprocess how; /* the engine's (its option, resolved) */
} image_source;

/* The engine's input is the uint8 letterbox: calibrate on exactly those values. */
static gr_status load_image(int index, float *dst, void *user)
{
    const image_source *src = user;
    gr_status st = gr_image_load_planar(src->paths[index], src->how, src->net->w, src->net->h, dst);
    return st == GR_OK ? GR_OK : gr_fail_prefix(st, "int8 calibration: ");
}

/* Append one line to the notice (lines separated by '\n'). */
static void add_line(char *notice, size_t len, const char *line)
{
    size_t used = strlen(notice);
    snprintf(notice + used, len - used, "%s%s", used ? "\n" : "", line);
}

static gr_status calibrate(const gr_build_request *req, float **layer_range_out,
                           float *input_range, char *notice, size_t notice_len)
{
    const gr_net *net = req->net;
    const gr_engine_options *opt = &req->opt;
    const char *const *images = opt->calib_images;
    const char *cache = opt->calib_cache;
    /* The calibration images are RGB photos letterboxed to 3 channels (gr_image_letterbox_u8). */
    if (net->c != 3)
        return gr_fail(GR_ERR_UNSUPPORTED, "int8 calibration on photos needs a 3-channel network; "
                       "this one takes %d channels", net->c);
    if (!images && gr_data_bundled_photos(&images) != GR_OK)
        return gr_fail_prefix(GR_ERR_IO, "int8 calibration (default images: the bundled photos): ");
    float *layer_range = gr_calloc((size_t)net->n_layers, sizeof(float), "calibration ranges");
    if (!layer_range)
        return GR_ERR_OUT_OF_MEMORY;
    *layer_range_out = layer_range; /* owned by the caller from here on, also on failure */
    int n = 0; /* the first calib_max_images of them, 0: all */
    while (images[n] && (opt->calib_max_images <= 0 || n < opt->calib_max_images))
        n++;
    if (n == 0)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "int8 calibration needs at least one image");
    gr_calib_key key;
    if (cache) {
        GR_TRY(gr_calib_key_make(net, opt->preprocess, opt->calib_method, opt->calib_percentile, images, n, &key));
        int found = 0;
        char stale[512];
        GR_TRY(gr_calib_cache_read(cache, &key, net->n_layers, layer_range, input_range, &found,
                                   stale, sizeof stale));
        if (stale[0])
            add_line(notice, notice_len, stale);
        if (found)
            return GR_OK;
    }
    int on_gpu = opt->calib_device == GR_DEVICE_GPU ||
                 (opt->calib_device == GR_DEVICE_AUTO && req->device == GR_DEVICE_GPU);
    char where[64];
    double start_us = gr_now_us();
    if (on_gpu) {
        gr_gpu_calib_request gpu = {.net = net,
                                    .paths = images,
                                    .n_images = n,
                                    .method = opt->calib_method,
                                    .percentile = opt->calib_percentile,
                                    .gpu_index = opt->gpu_index,
                                    .threads = opt->calib_threads,
                                    .preprocess = opt->preprocess,
                                    .progress = opt->calib_progress,
                                    .progress_user = opt->calib_progress_user};
        int batch = 0;
        GR_TRY(gr_gpu_calibrate(&gpu, layer_range, input_range, &batch));
        snprintf(where, sizeof where, "GPU, batch %d", batch);
    } else {
        image_source source = {images, net, opt->preprocess};
        gr_calib_config cfg;
        gr_calib_config_default(&cfg);
        cfg.method = opt->calib_method;
        cfg.percentile = opt->calib_percentile;
        cfg.threads = opt->calib_threads;
        cfg.load = load_image;
        cfg.load_user = &source;
        cfg.progress = opt->calib_progress;
        cfg.progress_user = opt->calib_progress_user;
        GR_TRY(gr_plan_calibrate_images(net, n, &cfg, layer_range, input_range));
        snprintf(where, sizeof where, "CPU");
    }
    /* One more notice line (after a stale-cache notice, if any). */
    char line[160];
    snprintf(line, sizeof line, "calibration: %d image%s in %.2f s (%s)", n, n == 1 ? "" : "s",
             (gr_now_us() - start_us) * 1e-6, where);
    add_line(notice, notice_len, line);
    if (cache)
        GR_TRY(gr_calib_cache_write(cache, &key, net->n_layers, layer_range, *input_range));
    return GR_OK;
}

gr_status gr_calibrate(const gr_build_request *req, float **layer_range, float *input_range,
                       char *notice, size_t notice_len)
{
    gr_trace_push("graphrun: int8 calibration");
    gr_status st = calibrate(req, layer_range, input_range, notice, notice_len);
    gr_trace_pop();
    return st;
}
