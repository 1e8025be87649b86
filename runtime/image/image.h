/* Internal image entry points shared by the runtime, the tests and the fuzzers (the public ones are
 * in runtime.h). Decoding works on bytes in memory so that gr_image_load (a file) and a fuzzer
 * (a buffer) run exactly the same checks. */
#ifndef GR_RUNTIME_IMAGE_IMAGE_H
#define GR_RUNTIME_IMAGE_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

/* Largest image file gr_image_load reads, and the largest decoded image:
 * 2^28 pixels (768 MiB of RGB) and GR_MAX_DIM per side, checked from the header before any pixel
 * is decoded. */
#define GR_MAX_IMAGE_FILE_BYTES ((size_t)256 << 20)
#define GR_MAX_IMAGE_PIXELS ((size_t)1 << 28)

/* A non-empty image of 1 to 4 channels within GR_MAX_DIM per side: what every image function
 * checks its argument against first. Then each checks the channels it handles: the letterboxes
 * (here and in runtime.h) take 3, drawing 3 or 4, writing 1 to 4; the decoders produce 3. The
 * buffer is trusted to hold w * h * c bytes. */
bool gr_image_valid(const gr_image *im);

/* Decode a JPEG (libjpeg-turbo; CMYK/YCCK converted as cv2.imread does), PNG (libpng: the stored
 * values, 16-bit as v >> 8, alpha dropped, no gamma) or uncompressed 24/32-bit BMP held in `data`
 * (len bytes) to 3-channel RGB, and WebP and TIFF where the build has their decoders (below);
 * other formats are refused. `name` names the source in messages
 * ("dog.jpg: corrupt image: ..."). On failure *out is NULL. */
gr_status gr_image_decode_mem(const uint8_t *data, size_t len, const char *name, gr_image **out);

/* The checks gr_image_decode_mem makes before decoding (size, format, header, dimensions); on
 * success *w x *h is the image's size. */
gr_status gr_image_probe_mem(const uint8_t *data, size_t len, const char *name, int *w, int *h);

/* The optional decoders (runtime/image/decode_extra.c): WebP through libwebp, TIFF through
 * libtiff, compiled in when the build found them (gr_image_extra_available). By signature:
 * gr_image_extra_kind. probe: the size from the header; decode: w x h RGB into rgb. Without the
 * library both refuse the file (GR_ERR_UNSUPPORTED) with the package to install. */
typedef enum gr_image_extra {
    GR_IMAGE_EXTRA_NONE = 0,
    GR_IMAGE_EXTRA_WEBP,
    GR_IMAGE_EXTRA_TIFF
} gr_image_extra;
gr_image_extra gr_image_extra_kind(const uint8_t *data, size_t len);
const char *gr_image_extra_name(gr_image_extra kind);
int gr_image_extra_available(gr_image_extra kind);
gr_status gr_image_extra_refuse(gr_image_extra kind, const char *name);
gr_status gr_image_extra_probe(gr_image_extra kind, const uint8_t *data, size_t len,
                               const char *name, int *w, int *h);
gr_status gr_image_extra_decode(gr_image_extra kind, const uint8_t *data, size_t len,
                                const char *name, int w, int h, uint8_t *rgb);

/* Decoding many images on one thread (the streaming workers, one reader each): the file buffer,
 * the pixel buffer and the JPEG decompressor are kept between images instead of allocated per
 * image. gr_image_reader_load reads and decodes `path` with gr_image_load's checks and messages
 * (regular files only, the size checked before reading); *out points into the reader and is
 * valid until its next load or destroy. A failed load leaves the reader as able to decode the
 * next file as a new one (the JPEG decompressor is replaced). A reader is used by one thread at
 * a time. */
typedef struct gr_image_reader gr_image_reader;
gr_status gr_image_reader_create(gr_image_reader **out);
void gr_image_reader_destroy(gr_image_reader *r); /* NULL: no-op */
gr_status gr_image_reader_load(gr_image_reader *r, const char *path, const gr_image **out);
/* Opt-in, inexact: from now on decode each JPEG at the smallest of libjpeg-turbo's DCT scales
 * (1/2, 1/4, 1/8) that keeps it at least as large as its letterbox (or stretch: `how`) in
 * net_w x net_h (so only JPEGs of at least twice that size are affected), much faster than a full
 * decode followed by a large shrink, but not the same pixels as Darknet's full-size decode (docs:
 * `--fast-decode`). net_w or net_h <= 0 turns it off (the default). *out of a load is then the
 * scaled image: letterbox it with gr_image_preprocess_as and gr_image_reader_source_size's size,
 * which is what boxes map back with. */
void gr_image_reader_fast_decode(gr_image_reader *r, gr_preprocess how, int net_w, int net_h);
/* The letterbox (or stretch) of `im` as the file_w x file_h image it was decoded from at a
 * reduced scale (gr_image_reader_fast_decode): the resized image's size and place in the
 * network input are those of the file's size (gr_letterbox_geometry(how, file_w, file_h, ...)),
 * so boxes map back with the file's size exactly; the bilinear resize reads im. file_w x file_h
 * of im's own size is gr_image_preprocess(_u8); 0 x 0 means that too. GR_ERR_INVALID_ARGUMENT
 * for a file size smaller than im's or over GR_MAX_DIM, and for what gr_image_preprocess
 * refuses. */
gr_status gr_image_preprocess_as(const gr_image *im, int file_w, int file_h, gr_preprocess how,
                                 int net_w, int net_h, float *out);
gr_status gr_image_preprocess_as_u8(const gr_image *im, int file_w, int file_h,
                                    gr_preprocess how, int net_w, int net_h, uint8_t *out);
/* The size stored in the last loaded file (what boxes map back to), scaled or not; 0 x 0 when
 * the last load failed before reading it. */
void gr_image_reader_source_size(const gr_image_reader *r, int *w, int *h);
/* Seconds the last load spent reading its file (stat, open, read), the rest of it decoding: the
 * folder pipeline's stage report (runtime/files.c). */
double gr_image_reader_read_seconds(const gr_image_reader *r);

/* The letterbox computed step by step as Darknet does (float planes: bytes to [0,1], horizontal
 * resize of every source row, vertical resize, copy into the grey canvas, then for _u8 the
 * v * 255 + 0.5 rounding). gr_image_letterbox and gr_image_letterbox_u8 (runtime.h) compute the
 * same bytes faster; these are kept as the definition they are tested against. */
gr_status gr_image_letterbox_reference(const gr_image *im, gr_preprocess how, int net_w, int net_h,
                                       float *out);

/* A JPEG file's structure from its markers, no pixel decoded (runtime/image/jpeg_scan.c): for
 * choosing the decoder. complete: SOI, one frame, at least one scan, and the EOI marker reached
 * with every marker segment and entropy-coded segment intact in between. */
enum { GR_JPEG_444 = 0, GR_JPEG_422 = 1, GR_JPEG_420 = 2, GR_JPEG_440 = 3 };
typedef struct gr_jpeg_info {
    int is_jpeg;          /* starts with SOI */
    int complete;
    int sof;              /* the frame's marker: 0xC0 baseline, 0xC1 extended, 0xC2 progressive... */
    int precision, width, height, components;
    int h[4], v[4];       /* sampling factors per component */
    int subsampling;      /* GR_JPEG_444 ... for 3 components with 1x1 chroma, else -1 */
    int frames, scans, partial_scans; /* partial: a scan of fewer components than the frame */
    int huffman_tables;   /* a DHT segment was seen */
    int adobe_transform;  /* APP14 "Adobe" transform flag, -1 without one */
    int jfif;             /* a JFIF APP0 segment was seen */
    int ycbcr;            /* 3 components libjpeg takes for YCbCr (JFIF, Adobe transform 1, or
                           * component ids other than 'R' 'G' 'B'): jdapimin.c */
} gr_jpeg_info;
void gr_jpeg_scan(const uint8_t *data, size_t len, gr_jpeg_info *info);
/* 1 for a complete 8-bit single-scan baseline/extended-Huffman YCbCr JPEG at 4:4:4, 4:2:2,
 * 4:2:0 or 4:4:0: what the GPU decoder is given. */
int gr_jpeg_gpu_decodable(const gr_jpeg_info *info);

/* Where an im_w x im_h image lands in Darknet's net_w x net_h letterbox (new_w x new_h at
 * (left, top); stretched: net_w x net_h at (0, 0)) and its resize's scales (w_scale = (im_w - 1) / (new_w - 1), 0 for new_w 1; h
 * likewise): every letterbox takes them from here, the CPU's and the GPU's (kernels/image.h). */
typedef struct gr_letterbox_geom {
    int new_w, new_h, left, top;
    float w_scale, h_scale;
    uint8_t pad; /* the border's byte: 128 (Darknet's 0.5), 114 for LETTERBOX_114 */
} gr_letterbox_geom;

/* A net's or an option's preprocessing as a letterbox runs it: STRETCH and LETTERBOX_114 as they
 * are, anything else (AUTO) Darknet's LETTERBOX. */
gr_preprocess gr_preprocess_concrete(gr_preprocess how);
void gr_letterbox_geometry(gr_preprocess how, int im_w, int im_h, int net_w, int net_h,
                           gr_letterbox_geom *g);

/* The values an engine computes from for the image at `path`: its uint8 letterbox or stretch
 * (gr_image_preprocess_u8, what the engines' input is) divided by 255, as planar float CHW:
 * 3 x net_h x net_w floats into dst. The calibration and precision searches evaluate on exactly
 * these. Errors as gr_image_load's, or out of memory. */
gr_status gr_image_load_planar(const char *path, gr_preprocess how, int net_w, int net_h,
                               float *dst);
gr_status gr_image_letterbox_reference_u8(const gr_image *im, gr_preprocess how, int net_w,
                                          int net_h, uint8_t *out);

#endif
