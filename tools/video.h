/* graphrun CLI: video files, cameras and streams through FFmpeg's libraries (tools/video.c, the
 * only file that knows FFmpeg). The CLI alone reads and writes video, so it lives in tools/.
 *
 * Built without FFmpeg (CMake found no libavformat/libavcodec/libswscale/libavutil through
 * pkg-config), every open fails with one line saying how to enable it, and gr_video_available()
 * is 0. Errors are gr_fail()'s (gr_last_error()): one line naming the file, the frame where there
 * is one, and FFmpeg's av_strerror text. FFmpeg's own log is silenced. */
#ifndef GR_TOOLS_VIDEO_H
#define GR_TOOLS_VIDEO_H

#include "graphrun/runtime.h"

/* 1 when this build reads and writes video; 0 without FFmpeg. */
int gr_video_available(void);

/* What --input PATH is, for --input-type auto (README "Video"): 1 for a video, 0 otherwise.
 * A video: a URL (scheme://...), a V4L2 device (/dev/video*), a name ending in a video extension
 * (.mp4 .mkv .avi .mov .webm .m4v .mpg .mpeg .ts .flv .wmv .3gp .ogv), or - for a regular file
 * with no image (.jpg .jpeg .png .bmp) or .npy extension - a file FFmpeg's probe recognises as a
 * container holding something other than a single image. Without FFmpeg only the names count
 * (so the open says how to enable video). */
int gr_video_is_input(const char *path);

/* 1 when path ends in one of those video extensions (what a video's --output must be). */
int gr_video_has_extension(const char *path);

typedef struct gr_video_reader gr_video_reader;

/* Open a file, a URL or a camera (/dev/video*, through libavdevice's V4L2 input) and its best
 * video stream's decoder. timeout_s (a URL only; 0: none): an open or read of the stream that
 * waits that long without data fails with "PATH: reading: no data for N s (the stream
 * stalled; ...)", GR_ERR_IO, instead of waiting for ever. */
gr_status gr_video_open(const char *path, double timeout_s, gr_video_reader **out);
/* The next frame, converted to 8-bit RGB (swscale, no resize: the same pixels the image path
 * would letterbox) into *frame, which is reused when it has the frame's size and replaced
 * otherwise (the caller owns it: gr_image_destroy). *pts: its presentation time in seconds
 * (the best-effort timestamp; index / frame rate when the stream has none). *eof is 1 (and
 * nothing else set) after the last frame. A frame the decoder refuses fails the read with its
 * index ("clip.mp4: frame 17: Invalid data found when processing input"). */
gr_status gr_video_read(gr_video_reader *r, gr_image **frame, double *pts, int *eof);
/* Frames per second of the stream (its average rate; 25 when it declares none). */
double gr_video_fps(const gr_video_reader *r);
void gr_video_close(gr_video_reader *r); /* NULL: no-op */

typedef struct gr_video_writer gr_video_writer;

/* The codec of a writer: the default is H.264 (whichever H.264 encoder avcodec has, libx264
 * first) at fps frames per second, or MJPEG when there is none (one notice line on stderr);
 * lossless is FFV1 in 8-bit RGB (exact pixels: the tests' source videos). The container is the
 * one FFmpeg guesses from path's extension (.mp4, .mkv, .avi, .mov ...). */
typedef enum gr_video_codec {
    GR_VIDEO_CODEC_DEFAULT = 0,
    GR_VIDEO_CODEC_LOSSLESS = 1
} gr_video_codec;

/* The stream's size is fixed at w x h (frames of another size are scaled to it). */
gr_status gr_video_writer_open(const char *path, int w, int h, double fps, gr_video_codec codec,
                               gr_video_writer **out);
gr_status gr_video_writer_write(gr_video_writer *wr, const gr_image *frame);
/* Flush the encoder and write the trailer; frees wr whatever happens (NULL: GR_OK). */
gr_status gr_video_writer_close(gr_video_writer *wr);
/* The codec the writer chose ("libx264", "mjpeg", "ffv1"). */
const char *gr_video_writer_codec(const gr_video_writer *wr);

#endif
