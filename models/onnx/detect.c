/* Which files are ONNX models: by extension or by their first byte (models/onnx/onnx.h), and
 * gr_net_open (models/net.h), which opens the network a command line names through it. Built in
 * every configuration, so that a build without ONNX import still recognises and refuses them. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "models/onnx/onnx.h"

bool gr_onnx_is_model(const char *path, const uint8_t *head, size_t n)
{
    if (path) {
        size_t len = strlen(path);
        if (len >= 5 && strcasecmp(path + len - 5, ".onnx") == 0)
            return true;
    }
    /* ModelProto field 1 (ir_version), varint: tag byte (1 << 3) | 0. */
    return head && n > 0 && head[0] == 0x08;
}

bool gr_onnx_is_model_file(const char *path)
{
    if (!path)
        return false;
    if (gr_onnx_is_model(path, NULL, 0))
        return true;
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    uint8_t head[1];
    size_t n = fread(head, 1, sizeof head, f);
    fclose(f);
    return gr_onnx_is_model(NULL, head, n);
}

gr_status gr_net_open(const char *model, const char *cfg, const char *weights, uint64_t seed,
                      gr_net **out)
{
    if (!out || (!model && !cfg))
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_net_open: NULL argument");
    *out = NULL;
    const char *onnx = cfg ? (gr_onnx_is_model_file(cfg) ? cfg : NULL)
                           : (gr_onnx_is_model(model, NULL, 0) ? model : NULL);
    if (onnx && weights)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "%s: an ONNX model holds its weights; a weights "
                       "file (%s) does not apply", onnx, weights);
    if (onnx)
        return gr_net_load_onnx(onnx, out);
    GR_TRY(cfg ? gr_net_parse_file(cfg, out) : gr_net_builtin(model, out));
    gr_status st = weights ? gr_net_load_weights(*out, weights)
                           : gr_net_synthesize_weights(*out, seed);
    if (st != GR_OK) {
        gr_net_free(*out);
        *out = NULL;
    }
    return st;
}
