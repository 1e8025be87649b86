/* ONNX import in a build without protobuf-c (GR_ENABLE_ONNX off or not found): every ONNX file is
 * refused with one line saying how to get a build that reads it. */
#include "models/onnx/onnx.h"

static gr_status refuse(const char *source)
{
    return gr_fail(GR_ERR_UNSUPPORTED,
                   "%s: an ONNX model, but this graphrun was built without ONNX import (configure "
                   "found no protoc-c, libprotobuf-c or onnx.proto: apt-get install "
                   "protobuf-c-compiler libprotobuf-c-dev libonnx-dev, then reconfigure)",
                   source ? source : "<onnx>");
}

gr_status gr_net_parse_onnx(const uint8_t *data, size_t len, const char *source, gr_net **out)
{
    (void)data;
    (void)len;
    if (out)
        *out = NULL;
    return refuse(source);
}

gr_status gr_net_load_onnx(const char *path, gr_net **out)
{
    if (out)
        *out = NULL;
    return refuse(path);
}
