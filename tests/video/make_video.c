/* The video tests' helper (tests/cli_video*.sh), through the CLI's own FFmpeg code (tools/video.h):
 *
 *   gr_make_video make IMAGE OUT N W H [PNG_DIR]
 *       N frames of W x H, frame k the crop of IMAGE at (7k, 5k) modulo the room left (a camera
 *       panning over the photo), written to OUT losslessly (FFV1, 8-bit RGB: the exact pixels)
 *       at 25 frames/s, and each one also as PNG_DIR/frame-KKKK.png
 *   gr_make_video make-lossy IMAGE OUT N W H
 *       the same frames through the CLI's --output codec (H.264 where there is one): a realistic
 *       video to time decoding on
 *   gr_make_video check VIDEO PNG_DIR
 *       decode VIDEO and compare every frame byte for byte with PNG_DIR/frame-KKKK.png
 *   gr_make_video probe VIDEO
 *       "frames N size WxH fps F" and one "pts T" line per frame
 *
 * Exit status: 0, 1 on a failure (one line on stderr), 77 when the build has no video. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/video.h"

static int fail(const char *what)
{
    fprintf(stderr, "gr_make_video: %s: %s\n", what, gr_last_error());
    return 1;
}

/* Frame k: the W x H window of `src` at (7k, 5k), wrapped to stay inside. */
static void crop(const gr_image *src, int k, gr_image *dst)
{
    int x0 = src->w > dst->w ? (7 * k) % (src->w - dst->w + 1) : 0;
    int y0 = src->h > dst->h ? (5 * k) % (src->h - dst->h + 1) : 0;
    for (int y = 0; y < dst->h; y++)
        memcpy(dst->data + (size_t)y * dst->w * 3,
               src->data + ((size_t)(y0 + y) * src->w + x0) * 3, (size_t)dst->w * 3);
}

static int make(char **argv, int argc, gr_video_codec codec)
{
    gr_image *src = NULL;
    if (gr_image_load(argv[2], &src) != GR_OK)
        return fail("source image");
    int n = atoi(argv[4]), w = atoi(argv[5]), h = atoi(argv[6]);
    if (n < 1 || w < 1 || h < 1 || w > src->w || h > src->h) {
        fprintf(stderr, "gr_make_video: N W H must be positive and W x H within %dx%d\n", src->w,
                src->h);
        gr_image_destroy(src);
        return 1;
    }
    gr_image frame = {.w = w, .h = h, .c = 3, .data = malloc((size_t)w * h * 3)};
    gr_video_writer *wr = NULL;
    int rc = frame.data ? 0 : 1;
    if (rc == 0 && gr_video_writer_open(argv[3], w, h, 25.0, codec, &wr) != GR_OK)
        rc = fail("open");
    for (int k = 0; k < n && rc == 0; k++) {
        crop(src, k, &frame);
        if (gr_video_writer_write(wr, &frame) != GR_OK)
            rc = fail("write");
        char name[4096];
        snprintf(name, sizeof name, "%s/frame-%04d.png", argc > 7 ? argv[7] : ".", k);
        if (rc == 0 && argc > 7 && gr_image_write(&frame, name) != GR_OK)
            rc = fail("png");
    }
    if (gr_video_writer_close(wr) != GR_OK && rc == 0)
        rc = fail("close");
    free(frame.data);
    gr_image_destroy(src);
    return rc;
}

/* Decode every frame; with a PNG folder, compare each with its PNG. */
static int read_all(const char *path, const char *png_dir)
{
    gr_video_reader *r = NULL;
    if (gr_video_open(path, 0.0, &r) != GR_OK)
        return fail("open");
    gr_image *frame = NULL;
    int rc = 0, eof = 0, n = 0;
    double pts;
    char lines[1 << 16];
    size_t used = 0;
    while (rc == 0) {
        if (gr_video_read(r, &frame, &pts, &eof) != GR_OK) {
            rc = fail("read");
            break;
        }
        if (eof)
            break;
        if (png_dir) {
            char name[4096];
            gr_image *png = NULL;
            snprintf(name, sizeof name, "%s/frame-%04d.png", png_dir, n);
            if (gr_image_load(name, &png) != GR_OK) {
                rc = fail("png");
            } else if (png->w != frame->w || png->h != frame->h ||
                       memcmp(png->data, frame->data, (size_t)png->w * png->h * 3) != 0) {
                fprintf(stderr, "gr_make_video: frame %d differs from %s\n", n, name);
                rc = 1;
            }
            gr_image_destroy(png);
        } else if (used < sizeof lines - 64) {
            used += (size_t)snprintf(lines + used, sizeof lines - used, "pts %.6f\n", pts);
        }
        n++;
    }
    if (rc == 0)
        printf("frames %d size %dx%d fps %.3f\n%s", n, frame ? frame->w : 0,
               frame ? frame->h : 0, gr_video_fps(r), png_dir ? "" : lines);
    gr_image_destroy(frame);
    gr_video_close(r);
    return rc;
}

int main(int argc, char **argv)
{
    if (!gr_video_available()) {
        fprintf(stderr, "gr_make_video: this build has no video (FFmpeg not found by cmake)\n");
        return 77;
    }
    if (argc >= 7 && strcmp(argv[1], "make") == 0)
        return make(argv, argc, GR_VIDEO_CODEC_LOSSLESS);
    if (argc == 7 && strcmp(argv[1], "make-lossy") == 0)
        return make(argv, argc, GR_VIDEO_CODEC_DEFAULT);
    if (argc == 4 && strcmp(argv[1], "check") == 0)
        return read_all(argv[2], argv[3]);
    if (argc == 3 && strcmp(argv[1], "probe") == 0)
        return read_all(argv[2], NULL);
    fprintf(stderr, "usage: gr_make_video make IMAGE OUT N W H [PNG_DIR] | make-lossy IMAGE OUT N "
                    "W H | check VIDEO PNG_DIR | probe VIDEO\n");
    return 1;
}
