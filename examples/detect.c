/* Embedding graphrun: the smallest complete program.
 *
 *   example_detect IMAGE [fp32|fp16|int8]
 *
 * Loads the default model (YOLOv2-tiny VOC; synthetic weights unless you pass real ones through
 * gr_model_options.weights_path), builds an engine on the GPU when one is visible (else the CPU
 * reference), puts the image into the engine's input the way `graphrun` does (gr_engine_set_image:
 * the letterbox straight into the engine's input buffer, no extra copy), runs once, and prints the
 * detections as `graphrun` prints them and the time split. Every call's status is checked; on
 * failure the one-line message comes from gr_last_error(). */
#include <stdio.h>
#include <stdlib.h>

#include "graphrun/runtime.h"

#define CHECK(call)                                                                                \
    do {                                                                                           \
        gr_status status_ = (call);                                                                \
        if (status_ != GR_OK) {                                                                    \
            fprintf(stderr, "example_detect: %s: %s\n", gr_status_str(status_), gr_last_error());  \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: example_detect IMAGE [fp32|fp16|int8]\n");
        return 2;
    }
    gr_model *model = NULL;
    gr_engine *engine = NULL;
    gr_image *image = NULL;
    gr_detection *dets = NULL;
    int n = 0;

    gr_model_options mo;
    gr_model_options_default(&mo); /* built-in "yolo", synthetic weights, seed 1 */
    CHECK(gr_model_load(&mo, &model));

    gr_engine_options eo;
    gr_engine_options_default(&eo); /* device auto, fp32, batch 1, CUDA graph */
    if (argc > 2)
        CHECK(gr_precision_parse(argv[2], &eo.precision));
    CHECK(gr_engine_build(model, &eo, &engine));

    CHECK(gr_image_load(argv[1], &image));
    CHECK(gr_engine_set_image(engine, 0, 0, image)); /* slot 0, image 0 of the batch */
    CHECK(gr_engine_run(engine));

    gr_detect_options dopt;
    gr_detect_options_default(&dopt);
    dopt.image_w = image->w;
    dopt.image_h = image->h;
    CHECK(gr_engine_detect(engine, 0, &dopt, &dets, &n));
    printf("%s on %s, %s: %d detections\n", argv[1], gr_engine_device_name(engine),
           gr_precision_name(eo.precision), n);
    for (int i = 0; i < n; i++)
        printf("  %-14s %5.1f%%  box left %.0f top %.0f right %.0f bottom %.0f\n",
               gr_model_class_name(model, dets[i].class_id), 100.0 * (double)dets[i].prob,
               (double)dets[i].left, (double)dets[i].top, (double)dets[i].right,
               (double)dets[i].bottom);
    gr_timing t;
    CHECK(gr_engine_timing(engine, &t));
    printf("time: conversion %.1f us, copies %.1f us, compute %.1f us, end to end %.1f us\n",
           t.convert_us, t.copy_us, t.compute_us, t.end_to_end_us);

    gr_detections_free(dets);
    gr_image_destroy(image);
    gr_engine_destroy(engine);
    gr_model_destroy(model);
    return 0;
fail:
    gr_detections_free(dets);
    gr_image_destroy(image);
    gr_engine_destroy(engine);
    gr_model_destroy(model);
    return 1;
}
