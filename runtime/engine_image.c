/* An image into an engine's input, the one way the CLI, the examples and the Python package do
 * it: Darknet's letterbox (or AlexeyAB's stretch: the engine's preprocess) to the network's size in the engine's image input type - the exact float
 * planes on the CPU (the reference is Darknet's numbers), the same rounded to uint8 on the GPU (its
 * host-to-device copy moves 4x fewer bytes; int8 calibration sees those same bytes). Keeping the
 * choice here means a program using the API and `graphrun` feed an engine the same tensor. */
#include <stdint.h>

#include "runtime/engine_internal.h"
#include "runtime/image/image.h"

int gr_engine_image_u8(const gr_engine *engine)
{
    return engine && engine->device == GR_DEVICE_GPU;
}

gr_status gr_engine_letterbox_as(const gr_engine *engine, const gr_image *im, int file_w,
                                 int file_h, void *dst)
{
    if (!engine || !dst)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_letterbox: NULL %s",
                       engine ? "destination" : "engine");
    const gr_net *net = engine->net;
    if (net->c != 3)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_letterbox: images are RGB; the "
                       "network takes %d input channels (feed it with gr_engine_run_f32)", net->c);
    gr_preprocess how = gr_model_preprocess(&engine->model_view);
    int u8 = gr_engine_image_u8(engine);
    if (file_w == 0 && file_h == 0) /* the image's own size */
        return u8 ? gr_image_preprocess_u8(im, how, net->w, net->h, dst)
                  : gr_image_preprocess(im, how, net->w, net->h, dst);
    return u8 ? gr_image_preprocess_as_u8(im, file_w, file_h, how, net->w, net->h, dst)
              : gr_image_preprocess_as(im, file_w, file_h, how, net->w, net->h, dst);
}

gr_status gr_engine_letterbox(const gr_engine *engine, const gr_image *im, void *dst)
{
    return gr_engine_letterbox_as(engine, im, 0, 0, dst);
}

gr_status gr_engine_set_image(gr_engine *engine, int slot, int batch_index, const gr_image *im)
{
    if (!engine)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_set_image: NULL engine");
    int batch = engine->opt.batch;
    if (batch_index < 0 || batch_index >= batch)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_set_image: batch_index %d is outside "
                       "0..%d (engine option batch=%d)", batch_index, batch - 1, batch);
    if (slot < 0 || slot >= engine->inflight)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_set_image: slot %d is outside 0..%d "
                       "(engine option inflight=%d)", slot, engine->inflight - 1, engine->inflight);
    if (engine->slot_busy[slot])
        return gr_fail(GR_ERR_STATE, "gr_engine_set_image: slot %d is in flight (gr_engine_wait "
                                     "for it first)", slot);
    void *buffer = NULL;
    size_t bytes = 0;
    GR_TRY(gr_engine_slot_input(engine, slot, gr_engine_image_u8(engine), &buffer, &bytes));
    size_t per_image = bytes / (size_t)batch;
    return gr_engine_letterbox(engine, im, (uint8_t *)buffer + (size_t)batch_index * per_image);
}

gr_status gr_engine_decode_jpegs(gr_engine *engine, int slot, int n, const uint8_t *const *jpeg,
                                 const size_t *bytes, int *decoded)
{
    if (!engine || (n > 0 && (!jpeg || !bytes || !decoded)))
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_decode_jpegs: NULL argument");
    if (n < 0 || n > engine->opt.batch)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_decode_jpegs: %d images for a batch "
                       "of %d", n, engine->opt.batch);
    for (int i = 0; i < n; i++)
        decoded[i] = 0;
    if (!engine->ops->decode_jpegs)
        return gr_fail(GR_ERR_UNSUPPORTED, "gr_engine_decode_jpegs: the %s engine decodes no "
                       "JPEG itself (decode on the CPU: gr_engine_letterbox)", engine->ops->name);
    if (engine->net->c != 3)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_decode_jpegs: images are RGB; the "
                       "network takes %d input channels", engine->net->c);
    if (slot < 0 || slot >= engine->inflight)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_decode_jpegs: slot %d is outside "
                       "0..%d (engine option inflight=%d)", slot, engine->inflight - 1,
                       engine->inflight);
    if (!engine->input_u8)
        return gr_fail(GR_ERR_STATE, "gr_engine_decode_jpegs: the engine's input type is float: "
                       "gr_engine_slot_input(engine, slot, 1, ...) first");
    if (engine->slot_busy[slot])
        return gr_fail(GR_ERR_STATE, "gr_engine_decode_jpegs: slot %d is in flight "
                                     "(gr_engine_wait for it first)", slot);
    return engine->ops->decode_jpegs(engine, slot, n, jpeg, bytes, decoded);
}

const char *gr_engine_jpeg_decoder(const gr_engine *engine, double *decode_us)
{
    if (decode_us)
        *decode_us = engine ? engine->jpeg_us : 0.0;
    return engine && engine->ops->jpeg_decoder ? engine->ops->jpeg_decoder(engine) : NULL;
}
