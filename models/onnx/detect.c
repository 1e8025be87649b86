/* Which files are ONNX models: by extension or by their first byte (models/onnx/onnx.h). Built in
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
