/* Oracle driver: runs AlexeyAB Darknet's own CPU forward pass and detection chain on a fixed
 * input and prints what tests/test_alexeyab.c compares graphrun against (tests/data/alexeyab/).
 * Not part of the graphrun build: it links against AlexeyAB Darknet's objects (commit 59596d78,
 * built with its Makefile, GPU=0 OPENMP=0, OPTS=-O2); tests/data/alexeyab/README.md has the
 * commands.
 *
 * usage: driver CFG WEIGHTS THRESH NMS [SAMPLES [IMAGE]]
 *   CFG/WEIGHTS: a cfg at the size to test and graphrun's synthetic weights for it
 *   (test_alexeyab --write-weights). The input is record_input.h's dead-leaves picture, the same
 *   floats test_alexeyab feeds graphrun. The chain is test_detector's (detector.c:1690-1705):
 *   network_predict, get_network_boxes(relative, no letterbox, image = network size), then
 *   do_nms_sort or diounms_sort by the last layer's nms_kind. SAMPLES: values printed per tensor
 *   (default 400; fewer keeps the record of a small test net small).
 *   IMAGE: instead, a photo through test_detector's whole chain (detector.c:1633-1705):
 *   load_image(IMAGE, 0, 0, c) (stb_image), letterbox_image if the cfg's [net] letter_box is set
 *   else resize_image to the network size, network_predict, get_network_boxes(image size,
 *   relative, letter_box), then the NMS as above; prints "image W H LETTER_BOX" and the det
 *   lines (boxes relative to the image). The photo is a PNG of graphrun's own decode of the JPEG
 *   (test_alexeyab --write-png), so both sides start from the same bytes.
 *
 * Output, one record per line:
 *   head K LAYER C H W raw|act N SUM SUMSQ MIN MAX   moments of head K's tensor, raw = the yolo
 *                                                  layer's input, act = its output
 *   sample K raw|act INDEX VALUE                    every n/SAMPLES-th value of that tensor
 *   det CLASS PROB X Y W H                          a kept detection (relative centre box) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "darknet.h"
#include "record_input.h"

/* src/image.h's; darknet.h declares load_image_color only, whose w, h > 0 would resize. */
image load_image(char *filename, int w, int h, int c);

static size_t samples_per_tensor = 400;


static void print_tensor(int k, int index, const layer *l, const float *v, const char *kind)
{
    size_t n = (size_t)l->c * (size_t)l->h * (size_t)l->w;
    double sum = 0, sumsq = 0;
    float lo = v[0], hi = v[0];
    for (size_t i = 0; i < n; i++) {
        sum += v[i];
        sumsq += (double)v[i] * v[i];
        lo = v[i] < lo ? v[i] : lo;
        hi = v[i] > hi ? v[i] : hi;
    }
    printf("head %d %d %d %d %d %s %zu %.9g %.9g %.9g %.9g\n", k, index, l->c, l->h, l->w, kind, n,
           sum, sumsq, (double)lo, (double)hi);
    size_t stride = n / samples_per_tensor ? n / samples_per_tensor : 1;
    for (size_t i = 0; i < n; i += stride)
        printf("sample %d %s %zu %.9g\n", k, kind, i, (double)v[i]);
}

static void print_dets(detection *dets, int nboxes, const layer *last, float thresh, float nms)
{
    if (last->nms_kind == DEFAULT_NMS)
        do_nms_sort(dets, nboxes, last->classes, nms);
    else
        diounms_sort(dets, nboxes, last->classes, nms, last->nms_kind, last->beta_nms);
    for (int i = 0; i < nboxes; i++)
        for (int c = 0; c < last->classes; c++)
            if (dets[i].prob[c] > thresh)
                printf("det %d %.9g %.9g %.9g %.9g %.9g\n", c, (double)dets[i].prob[c],
                       (double)dets[i].bbox.x, (double)dets[i].bbox.y, (double)dets[i].bbox.w,
                       (double)dets[i].bbox.h);
}

/* test_detector on one photo (detector.c:1633-1705). */
static int run_photo(network *net, char *path, float thresh, float nms)
{
    int letter_box = net->letter_box != 0;
    image im = load_image(path, 0, 0, net->c);
    image sized = letter_box ? letterbox_image(im, net->w, net->h) : resize_image(im, net->w, net->h);
    network_predict_ptr(net, sized.data);
    printf("image %d %d %d\n", im.w, im.h, letter_box);
    int nboxes = 0;
    detection *dets = get_network_boxes(net, im.w, im.h, thresh, 0.5f, 0, 1, &nboxes, letter_box);
    print_dets(dets, nboxes, &net->layers[net->n - 1], thresh, nms);
    free_detections(dets, nboxes);
    free_image(sized);
    free_image(im);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 5 || argc > 7) {
        fprintf(stderr, "usage: %s CFG WEIGHTS THRESH NMS [SAMPLES [IMAGE]]\n", argv[0]);
        return 2;
    }
    if (argc >= 6 && atoi(argv[5]) > 0)
        samples_per_tensor = (size_t)atoi(argv[5]);
    float thresh = (float)atof(argv[3]), nms = (float)atof(argv[4]);
    network *net = load_network_custom(argv[1], argv[2], 0, 1);
    if (argc == 7)
        return run_photo(net, argv[6], thresh, nms);
    size_t n_in = (size_t)net->w * net->h * net->c;
    float *input = malloc(n_in * sizeof *input);
    record_input_fill(input, net->w, net->h);
    network_predict_ptr(net, input);
    int k = 0;
    for (int i = 0; i < net->n; i++) {
        layer *l = &net->layers[i];
        if (l->type != YOLO)
            continue;
        print_tensor(k, i, l, net->layers[i - 1].output, "raw");
        print_tensor(k, i, l, l->output, "act");
        k++;
    }
    int nboxes = 0;
    detection *dets =
        get_network_boxes(net, net->w, net->h, thresh, 0.5f, 0, 1, &nboxes, 0);
    print_dets(dets, nboxes, &net->layers[net->n - 1], thresh, nms);
    free_detections(dets, nboxes);
    free(input);
    return 0;
}
