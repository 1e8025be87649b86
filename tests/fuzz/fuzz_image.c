/* libFuzzer harness: image decoding from memory (the signature check, the header checks, the BMP
 * reader, and libjpeg-turbo and libpng behind them) and Darknet's letterbox of whatever decodes,
 * to a small network size in float and uint8 form.
 *
 * Headers that claim more than 2^20 pixels only exercise the size check: a 100-byte JPEG may
 * legally declare 16384x16384 and the decoder then spends seconds filling 768 MiB, which tells the fuzzer
 * nothing and trips its timeouts. The library's own checks (gr_image_probe_mem: format, header,
 * GR_MAX_IMAGE_PIXELS) run on every input. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "runtime/image/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_MAX_PIXELS ((size_t)1 << 20)
#define NET_W 16
#define NET_H 12

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int w = 0, h = 0;
    if (gr_image_probe_mem(data, size, "fuzz.img", &w, &h) == GR_OK &&
        (size_t)w * (size_t)h > FUZZ_MAX_PIXELS)
        return 0;
    gr_image *im = NULL;
    if (gr_image_decode_mem(data, size, "fuzz.img", &im) != GR_OK)
        return 0;
    static float planar[3 * NET_W * NET_H];
    static uint8_t packed[3 * NET_W * NET_H];
    if (gr_image_letterbox(im, NET_W, NET_H, planar) != GR_OK ||
        gr_image_letterbox_u8(im, NET_W, NET_H, packed) != GR_OK)
        __builtin_trap(); /* a decoded image always letterboxes */
    for (size_t i = 0; i < sizeof planar / sizeof planar[0]; i++)
        if (!(planar[i] >= 0.0f && planar[i] <= 1.0f))
            __builtin_trap(); /* pixels / 255 stay in [0, 1] */
    gr_image_destroy(im);
    return 0;
}
