/* gr_image_draw_detections: the public drawing entry, which takes class names and the class
 * count (for Darknet's per-class colours) from a model. Kept apart from runtime/image.c so that
 * code drawing without a model (tests, tools) does not pull in the model module. */
#include "runtime/detect.h"

static const char *model_label(const void *ctx, int class_id)
{
    return gr_model_class_name((const gr_model *)ctx, class_id);
}

gr_status gr_image_draw_detections(gr_image *im, const gr_detection *dets, int n,
                                   const gr_model *model)
{
    int classes = 0;
    if (model) {
        gr_model_info info;
        if (gr_model_get_info(model, &info) == GR_OK)
            classes = info.classes;
    }
    /* Without a model, labels read "class N" and colours spread over the classes present. */
    return gr_draw_detections_labelled(im, dets, n, classes, model ? model_label : NULL, model);
}
