/* How deep an ONNX file's messages nest, checked on the protobuf wire format before protobuf-c
 * unpacks it: protobuf-c's unpacker recurses once per nested message with no limit of its own,
 * so a file of a few hundred kilobytes nesting GraphProto -> NodeProto -> AttributeProto ->
 * GraphProto ... tens of thousands deep overflows the stack. The walk follows only the fields
 * that onnx.proto declares as messages (protobuf-c's descriptors) and recurses at most
 * ONNX_MAX_NESTING levels; each byte is scanned once per enclosing message level. Malformed wire
 * data is left to the unpacker, which refuses it. */
#include "models/onnx/internal.h"

/* A varint at *p (advanced); false past `end` or beyond 10 bytes. */
static bool read_varint(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 70 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << (shift < 64 ? shift : 63);
        if (!(b & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

/* False when a message nests deeper than `depth_left` more levels. */
static bool walk(const uint8_t *p, const uint8_t *end, const ProtobufCMessageDescriptor *desc,
                 int depth_left)
{
    while (p < end) {
        uint64_t tag, len;
        if (!read_varint(&p, end, &tag))
            return true; /* malformed: protobuf-c refuses it */
        switch (tag & 7) {
        case 0:
            if (!read_varint(&p, end, &len))
                return true;
            break;
        case 1:
            if (end - p < 8)
                return true;
            p += 8;
            break;
        case 5:
            if (end - p < 4)
                return true;
            p += 4;
            break;
        case 2: {
            if (!read_varint(&p, end, &len) || len > (uint64_t)(end - p))
                return true;
            const ProtobufCFieldDescriptor *f =
                tag >> 3 <= UINT32_MAX ? protobuf_c_message_descriptor_get_field(
                                             desc, (unsigned)(tag >> 3))
                                       : NULL;
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
                if (depth_left <= 0 || !walk(p, p + len, f->descriptor, depth_left - 1))
                    return false;
            }
            p += len;
            break;
        }
        default:
            return true; /* groups (not in onnx.proto) or garbage: protobuf-c decides */
        }
    }
    return true;
}

bool onnx_nesting_ok(const uint8_t *data, size_t len)
{
    return walk(data, data + len, &onnx__model_proto__descriptor, ONNX_MAX_NESTING);
}
