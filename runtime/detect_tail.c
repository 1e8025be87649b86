/* Detections from an ONNX detection head run on the host (models/onnx/tail.h; docs/onnx.md,
 * "Detection heads"): the tail runs on the engine's output copies of one image, and its output
 * is decoded per box:
 *   anchor-free [1, 4 + nc, A] (YOLOv8 / YOLO11): cx, cy, w, h in input pixels, nc class scores;
 *     the box's class is its best score (the first on ties), prob = that score (no objectness;
 *     the detection's objectness is set to it too);
 *   objectness [1, A, 5 + nc] (YOLOv5): cx, cy, w, h, objectness, nc class scores; prob =
 *     objectness x class score, the best class's.
 * One detection per box whose prob > thresh, corners cx -+ w / 2; then the chain every head
 * shares (gr_detections_finish: letterbox undone, per-class NMS, clip). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/net.h"
#include "models/onnx/tail.h"
#include "runtime/detect.h"

/* The tail's inputs for image b: the net's outputs (the layers the tail reads). */
static void image_inputs(const gr_net *net, const float *const *outputs, int b,
                         const float **inputs)
{
    for (int k = 0; k < net->n_outputs; k++)
        inputs[k] = outputs[k] +
                    (size_t)b * gr_shape_elems(net->layers[net->output_layers[k]].out);
}

/* Run the tail for image b into a malloc'd scratch; *out points at its output inside it (or, for
 * a tail that only copies an input - a dfl_head layer's output - at that input, *scratch NULL). */
static gr_status run_tail(const gr_net *net, const float *const *outputs, int b, float **scratch,
                          const float **out)
{
    const float *inputs[GR_TAIL_MAX_INPUTS];
    for (int k = 0; k < net->n_outputs; k++)
        if (!outputs[k])
            return gr_fail(GR_ERR_INVALID_ARGUMENT, "detect: output %d is NULL", k);
    image_inputs(net, outputs, b, inputs);
    int same = gr_tail_passthrough_input(net->tail);
    if (same >= 0) {
        *scratch = NULL;
        *out = inputs[same];
        return GR_OK;
    }
    *scratch = gr_malloc(gr_tail_scratch_floats(net->tail) * sizeof **scratch, "head tail");
    if (!*scratch)
        return GR_ERR_OUT_OF_MEMORY;
    *out = gr_tail_run(net->tail, inputs, *scratch);
    return GR_OK;
}

gr_status gr_detect_tail_output(const gr_net *net, const float *const *outputs, int batch_index,
                                float **data)
{
    *data = NULL;
    float *scratch;
    const float *out;
    GR_TRY(run_tail(net, outputs, batch_index, &scratch, &out));
    size_t n = gr_tail_output_elems(net->tail);
    *data = gr_malloc((n ? n : 1) * sizeof **data, "head output");
    if (*data)
        memcpy(*data, out, n * sizeof **data);
    free(scratch);
    return *data ? GR_OK : GR_ERR_OUT_OF_MEMORY;
}

/* Box a of the output: its 4 + 1 + classes entries `stride` apart from `base`. */
static void decode(const float *base, size_t stride, int classes, bool objectness, float thresh,
                   gr_detection *d, bool *keep)
{
    const float *cls = base + (objectness ? 5 : 4) * stride;
    float obj = objectness ? base[4 * stride] : 1.0f;
    int best = 0;
    float score = objectness ? obj * cls[0] : cls[0];
    for (int k = 1; k < classes; k++) {
        float s = objectness ? obj * cls[(size_t)k * stride] : cls[(size_t)k * stride];
        if (s > score) {
            score = s;
            best = k;
        }
    }
    *keep = score > thresh;
    if (!*keep)
        return;
    float cx = base[0], cy = base[stride], half_w = base[2 * stride] * 0.5f,
          half_h = base[3 * stride] * 0.5f;
    d->left = cx - half_w;
    d->right = cx + half_w;
    d->top = cy - half_h;
    d->bottom = cy + half_h;
    d->class_id = best;
    d->prob = score;
    d->objectness = objectness ? obj : score;
}

gr_status gr_detect_tail(const gr_net *net, const float *const *outputs, int batch_index,
                         const gr_detect_options *opt, gr_detection **dets, int *n)
{
    float *scratch;
    const float *out;
    GR_TRY(run_tail(net, outputs, batch_index, &scratch, &out));
    int64_t dims[GR_TAIL_MAX_RANK];
    gr_tail_output_dims(net->tail, dims);
    bool objectness = gr_tail_get_layout(net->tail) == GR_TAIL_OBJECTNESS;
    size_t boxes = (size_t)(objectness ? dims[1] : dims[2]);
    size_t entries = (size_t)(objectness ? dims[2] : dims[1]);
    int classes = gr_tail_classes(net->tail);
    size_t count = 0, cap = 64;
    gr_detection *all = gr_malloc(cap * sizeof *all, "detections");
    for (size_t a = 0; all && a < boxes; a++) {
        gr_detection d;
        bool keep;
        const float *base = objectness ? out + a * entries : out + a;
        decode(base, objectness ? 1 : boxes, classes, objectness, opt->thresh, &d, &keep);
        if (!keep)
            continue;
        if (count == cap) {
            gr_detection *grown = realloc(all, 2 * cap * sizeof *all);
            if (!grown) {
                free(all);
                all = NULL;
                break;
            }
            all = grown;
            cap *= 2;
        }
        all[count++] = d;
    }
    free(scratch);
    if (!all)
        return gr_fail(GR_ERR_OUT_OF_MEMORY, "detect: out of memory for the detections");
    gr_nms_params kind = {GR_NMS_DEFAULT, opt->nms, 0.6f, 1, 1};
    return gr_detections_finish(all, (int)count, net->w, net->h, opt, &kind, dets, n);
}
