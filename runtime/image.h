/* Internal image entry points shared by the runtime, the tests and the fuzzers (the public ones are
 * in runtime.h). Decoding works on bytes in memory so that gr_image_load (a file) and a fuzzer
 * (a buffer) run exactly the same checks. */
#ifndef GR_RUNTIME_IMAGE_H
#define GR_RUNTIME_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "ops/base.h"

/* Largest image file gr_image_load reads, and the largest decoded image:
 * 2^28 pixels (768 MiB of RGB) and GR_MAX_DIM per side, checked from the header before any pixel
 * is decoded. */
#define GR_MAX_IMAGE_FILE_BYTES ((size_t)256 << 20)
#define GR_MAX_IMAGE_PIXELS ((size_t)1 << 28)

/* Decode a JPEG (libjpeg-turbo), PNG (libpng) or uncompressed 24/32-bit BMP held in `data` (len
 * bytes) to 3-channel RGB; other formats are refused. `name` names the source in messages
 * ("dog.jpg: corrupt image: ..."). On failure *out is NULL. */
gr_status gr_image_decode_mem(const uint8_t *data, size_t len, const char *name, gr_image **out);

/* The checks gr_image_decode_mem makes before decoding (size, format, header, dimensions); on
 * success *w x *h is the image's size. */
gr_status gr_image_probe_mem(const uint8_t *data, size_t len, const char *name, int *w, int *h);

#endif
