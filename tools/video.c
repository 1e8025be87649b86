/* Video in and out through FFmpeg's libraries (libavformat, libavcodec, libswscale, libavutil;
 * libavdevice for cameras): the only file of graphrun that knows FFmpeg (tools/video.h).
 *
 * Reading: demux the best video stream, decode, convert each frame to packed 8-bit RGB with
 * swscale at its own size, so that the letterbox that follows is the image path's function on
 * the same kind of pixels. Writing: RGB frames scaled/converted by swscale into the encoder's
 * pixel format, encoded at a constant frame rate (pts = frame index), muxed into the container of
 * the path's extension. Every libav return code is checked; errors are one gr_fail() line with
 * av_strerror's text. FFmpeg's log is silenced: its lines would break the CLI's one-line errors. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <errno.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include "base/base.h"
#include "tools/video.h"

/* The extensions taken for video without probing (README "Video"). */
int gr_video_has_extension(const char *path)
{
    static const char *const exts[] = {".mp4", ".mkv", ".avi", ".mov", ".webm", ".m4v", ".mpg",
                                       ".mpeg", ".ts", ".flv", ".wmv", ".3gp", ".ogv"};
    const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
    if (!dot || (slash && dot < slash))
        return 0;
    for (size_t i = 0; i < sizeof exts / sizeof exts[0]; i++)
        if (strcasecmp(dot, exts[i]) == 0)
            return 1;
    return 0;
}

static int is_camera(const char *path) { return strncmp(path, "/dev/video", 10) == 0; }

#ifdef GR_HAVE_FFMPEG

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/avutil.h>
#include <libavutil/imgutils.h>
#include <libavutil/opt.h>
#include <libswscale/swscale.h>
#ifdef GR_HAVE_AVDEVICE
#include <libavdevice/avdevice.h>
#endif

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

/* FFmpeg's error messages are not printed (GR_FFMPEG_LOG=1 prints its whole log) but counted, the
 * last one kept: some decoders find damage (FFV1's slice CRCs, H.264's concealment) and go on
 * with a concealed frame, saying so only in the log. A file's reader turns such a message into
 * its error. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long log_errors;
static char log_last[256];
static int log_verbose, log_continues; /* the last piece had no newline: the next one adds to it */

static void log_callback(void *avcl, int level, const char *fmt, va_list args)
{
    if (log_verbose) {
        va_list copy;
        va_copy(copy, args);
        av_log_default_callback(avcl, level, fmt, copy);
        va_end(copy);
    }
    if (level > AV_LOG_ERROR)
        return;
    pthread_mutex_lock(&log_lock);
    size_t used = log_continues ? strlen(log_last) : 0;
    vsnprintf(log_last + used, sizeof log_last - used, fmt, args);
    size_t len = strlen(log_last);
    log_continues = len == 0 || log_last[len - 1] != '\n';
    log_last[strcspn(log_last, "\r\n")] = '\0';
    log_errors++;
    pthread_mutex_unlock(&log_lock);
}

/* Error messages so far; *last (when not NULL) gets the latest. */
static unsigned long log_error_count(char *last, size_t len)
{
    pthread_mutex_lock(&log_lock);
    unsigned long n = log_errors;
    if (last)
        snprintf(last, len, "%s", log_last);
    pthread_mutex_unlock(&log_lock);
    return n;
}

static void init_ffmpeg(void)
{
    log_verbose = getenv("GR_FFMPEG_LOG") != NULL;
    av_log_set_level(log_verbose ? AV_LOG_VERBOSE : AV_LOG_ERROR);
    av_log_set_callback(log_callback);
#ifdef GR_HAVE_AVDEVICE
    avdevice_register_all();
#endif
    avformat_network_init();
}

int gr_video_available(void) { return 1; }

/* "what: av_strerror text" as the thread's last error, status s. */
static gr_status av_fail(gr_status s, int ret, const char *what, const char *path,
                         long long frame)
{
    char text[AV_ERROR_MAX_STRING_SIZE];
    if (av_strerror(ret, text, sizeof text) < 0)
        snprintf(text, sizeof text, "FFmpeg error %d", ret);
    if (frame >= 0)
        return gr_fail(s, "%s: frame %lld: %s: %s", path, frame, what, text);
    return gr_fail(s, "%s: %s: %s", path, what, text);
}

static int has_image_extension(const char *path)
{
    static const char *const exts[] = {".jpg", ".jpeg", ".png", ".bmp", ".npy"};
    const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
    if (!dot || (slash && dot < slash))
        return 0;
    for (size_t i = 0; i < sizeof exts / sizeof exts[0]; i++)
        if (strcasecmp(dot, exts[i]) == 0)
            return 1;
    return 0;
}

/* Content probe for a name without a known extension: a container (not an image codec's pipe
 * demuxer, which the image path handles) recognised from the first 4 KiB. */
static int probe_is_video(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
        return 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    unsigned char buf[4096 + AVPROBE_PADDING_SIZE];
    memset(buf, 0, sizeof buf);
    size_t n = fread(buf, 1, 4096, f);
    fclose(f);
    pthread_once(&init_once, init_ffmpeg);
    AVProbeData pd = {.filename = "", .buf = buf, .buf_size = (int)n};
    int score = 0;
    const AVInputFormat *fmt = av_probe_input_format3(&pd, 1, &score);
    if (!fmt || score < AVPROBE_SCORE_EXTENSION)
        return 0;
    /* GIF and APNG are FFmpeg containers but images to graphrun, which refuses them by name
     * (docs/errors.md): --input-type video reads an animated one. */
    size_t len = strlen(fmt->name);
    return strcmp(fmt->name, "image2") != 0 && strcmp(fmt->name, "gif") != 0 &&
           strcmp(fmt->name, "apng") != 0 &&
           !(len > 5 && strcmp(fmt->name + len - 5, "_pipe") == 0);
}

int gr_video_is_input(const char *path)
{
    if (strstr(path, "://") || is_camera(path) || gr_video_has_extension(path))
        return 1;
    return !has_image_extension(path) && probe_is_video(path);
}

/* ---- reading ------------------------------------------------------------------------------ */

struct gr_video_reader {
    char *path;
    AVFormatContext *fmt;
    AVCodecContext *dec;
    struct SwsContext *sws;
    AVPacket *pkt;
    AVFrame *frame;
    int stream;
    AVRational time_base;
    int64_t start;       /* the stream's first timestamp (pts are reported from it), or 0 */
    double fps;
    long long index;     /* frames returned so far: the index of the next one */
    int draining;        /* the demuxer is at its end: the decoder is being flushed */
    int strict;          /* a file: a damaged frame is an error (a camera's is concealed) */
    unsigned long log_errors; /* FFmpeg's error messages before this reader's last frame */
    double duration;     /* seconds the file declares for the video (0: unknown) */
    double last_pts;     /* of the last frame returned */
    /* A network stream: each open or read that blocks longer than timeout_s without data is
     * given up (FFmpeg's interrupt callback, polled while it waits: the deadline is moved at
     * each call that may block); timed_out says why its call failed. 0: wait forever. */
    double timeout_s, deadline;
    int timed_out;
};

static double monotonic_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* FFmpeg polls it while a protocol waits (about every 100 ms): 1 gives the call up (AVERROR_EXIT). */
static int past_deadline(void *opaque)
{
    gr_video_reader *r = opaque;
    if (r->timeout_s > 0 && monotonic_s() > r->deadline)
        r->timed_out = 1;
    return r->timed_out;
}

/* Before a call that may block on the network: timeout_s from now. */
static void arm(gr_video_reader *r)
{
    r->deadline = monotonic_s() + r->timeout_s;
}

/* A call given up by past_deadline: one line saying the stream stalled (GR_ERR_IO); else ret's. */
static gr_status stalled(const gr_video_reader *r, const char *what)
{
    return gr_fail(GR_ERR_IO, "%s: %s: no data for %g s (the stream stalled; --io-timeout "
                   "SECONDS to wait longer, 0 for ever)", r->path, what, r->timeout_s);
}

void gr_video_close(gr_video_reader *r)
{
    if (!r)
        return;
    sws_freeContext(r->sws);
    av_frame_free(&r->frame);
    av_packet_free(&r->pkt);
    avcodec_free_context(&r->dec);
    avformat_close_input(&r->fmt);
    free(r->path);
    free(r);
}

/* The container (a camera through V4L2). */
static gr_status open_input(gr_video_reader *r)
{
    const AVInputFormat *ifmt = NULL;
    if (is_camera(r->path)) {
        ifmt = av_find_input_format("video4linux2");
        if (!ifmt)
            return gr_fail(GR_ERR_UNSUPPORTED, "%s: this build has no camera (V4L2) input: install "
                           "libavdevice-dev and re-run cmake", r->path);
        struct stat sb;
        if (stat(r->path, &sb) != 0)
            return gr_fail(GR_ERR_IO, "%s: no such camera: %s", r->path, strerror(errno));
    }
    if (!(r->fmt = avformat_alloc_context()))
        return gr_fail(GR_ERR_OUT_OF_MEMORY, "%s: out of memory for a video reader", r->path);
    r->fmt->interrupt_callback.callback = past_deadline;
    r->fmt->interrupt_callback.opaque = r;
    arm(r);
    int ret = avformat_open_input(&r->fmt, r->path, ifmt, NULL); /* frees fmt on failure */
    if (ret < 0 && r->timed_out)
        return stalled(r, "cannot open video");
    if (ret < 0)
        return av_fail(ret == AVERROR(ENOENT) || ret == AVERROR(EACCES) ? GR_ERR_IO : GR_ERR_PARSE,
                       ret, "cannot open video", r->path, -1);
    arm(r);
    if ((ret = avformat_find_stream_info(r->fmt, NULL)) < 0)
        return r->timed_out ? stalled(r, "reading the stream information")
                            : av_fail(GR_ERR_PARSE, ret, "cannot read the stream information",
                                      r->path, -1);
    return GR_OK;
}

/* The best video stream and its decoder. */
static gr_status open_decoder(gr_video_reader *r)
{
    const AVCodec *codec = NULL;
    int ret = av_find_best_stream(r->fmt, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
    if (ret == AVERROR_STREAM_NOT_FOUND)
        return gr_fail(GR_ERR_PARSE, "%s: no video stream", r->path);
    if (ret < 0)
        return av_fail(GR_ERR_UNSUPPORTED, ret, "no decoder for its video stream", r->path, -1);
    r->stream = ret;
    AVStream *st = r->fmt->streams[ret];
    r->time_base = st->time_base;
    r->start = st->start_time != AV_NOPTS_VALUE ? st->start_time : 0;
    AVRational rate = st->avg_frame_rate.num > 0 ? st->avg_frame_rate : st->r_frame_rate;
    r->fps = rate.num > 0 && rate.den > 0 ? av_q2d(rate) : 25.0;
    /* The video's declared length: its stream's, or the file's when it holds only the video (a
     * longer audio track would make the file's longer than the video). */
    if (st->duration != AV_NOPTS_VALUE && st->duration > 0)
        r->duration = (double)st->duration * av_q2d(st->time_base);
    else if (r->fmt->nb_streams == 1 && r->fmt->duration > 0)
        r->duration = (double)r->fmt->duration / AV_TIME_BASE;
    if (!(r->dec = avcodec_alloc_context3(codec)))
        return gr_fail(GR_ERR_OUT_OF_MEMORY, "%s: out of memory for a decoder", r->path);
    if ((ret = avcodec_parameters_to_context(r->dec, st->codecpar)) < 0)
        return av_fail(GR_ERR_PARSE, ret, "bad codec parameters", r->path, -1);
    /* A file's damaged frame stops the run with its index rather than giving detections on
     * concealed pixels; a camera or a network stream conceals its glitches and goes on. */
    struct stat sb;
    if (stat(r->path, &sb) != 0)
        sb.st_mode = 0;
    r->strict = S_ISREG(sb.st_mode);
    if (r->strict)
        r->dec->err_recognition |= AV_EF_EXPLODE | AV_EF_CRCCHECK;
    /* Decoding threads of the codec's own (frames or slices) for a file, where throughput counts;
     * one for a camera or a stream, where each thread would add a frame of latency. */
    r->dec->thread_count = S_ISREG(sb.st_mode) ? 0 : 1;
    if ((ret = avcodec_open2(r->dec, codec, NULL)) < 0)
        return av_fail(GR_ERR_UNSUPPORTED, ret, "cannot open the decoder", r->path, -1);
    return GR_OK;
}

gr_status gr_video_open(const char *path, double timeout_s, gr_video_reader **out)
{
    *out = NULL;
    pthread_once(&init_once, init_ffmpeg);
    gr_video_reader *r = calloc(1, sizeof *r);
    if (!r || !(r->path = strdup(path))) {
        free(r);
        return gr_fail(GR_ERR_OUT_OF_MEMORY, "%s: out of memory for a video reader", path);
    }
    /* Files and cameras block on the disk or the device, not the network: no deadline. */
    r->timeout_s = strstr(path, "://") && strncmp(path, "file:", 5) != 0 ? timeout_s : 0.0;
    gr_status st = open_input(r);
    if (st == GR_OK)
        st = open_decoder(r);
    if (st == GR_OK && (!(r->pkt = av_packet_alloc()) || !(r->frame = av_frame_alloc())))
        st = gr_fail(GR_ERR_OUT_OF_MEMORY, "%s: out of memory for a video reader", path);
    r->log_errors = log_error_count(NULL, 0);
    if (st != GR_OK) {
        gr_video_close(r);
        return st;
    }
    *out = r;
    return GR_OK;
}

double gr_video_fps(const gr_video_reader *r) { return r->fps; }

/* *frame with room for w x h RGB (kept when it has that size). swscale's vector code may read
 * and write a little past a row's end: the buffer has slack. */
static gr_status frame_image(gr_image **frame, int w, int h, const char *path)
{
    gr_image *im = *frame;
    if (im && im->w == w && im->h == h && im->c == 3)
        return GR_OK;
    gr_image_destroy(im);
    *frame = NULL;
    if (!(im = calloc(1, sizeof *im)) ||
        !(im->data = malloc((size_t)w * (size_t)h * 3 + 64))) {
        free(im);
        return gr_fail(GR_ERR_OUT_OF_MEMORY, "%s: out of memory for a %dx%d frame", path, w, h);
    }
    im->w = w;
    im->h = h;
    im->c = 3;
    *frame = im;
    return GR_OK;
}

/* The decoded frame to RGB at its size: BT.601 unless the stream says otherwise, its range. */
static gr_status convert(gr_video_reader *r, gr_image **frame, double *pts)
{
    AVFrame *f = r->frame;
    int w = f->width, h = f->height;
    char message[256];
    unsigned long errors = log_error_count(message, sizeof message);
    if (r->strict && errors != r->log_errors)
        return gr_fail(GR_ERR_PARSE, "%s: frame %lld: damaged: %s", r->path, r->index, message);
    if (r->strict && ((f->flags & AV_FRAME_FLAG_CORRUPT) || f->decode_error_flags))
        return gr_fail(GR_ERR_PARSE, "%s: frame %lld: damaged (the decoder's error flags 0x%x)",
                       r->path, r->index, (unsigned)f->decode_error_flags);
    if (w <= 0 || h <= 0 || w > GR_MAX_DIM || h > GR_MAX_DIM)
        return gr_fail(GR_ERR_LIMIT, "%s: frame %lld: %dx%d pixels, outside 1..%d per side",
                       r->path, r->index, w, h, GR_MAX_DIM);
    gr_status st = frame_image(frame, w, h, r->path);
    if (st != GR_OK)
        return st;
    struct SwsContext *previous = r->sws;
    r->sws = sws_getCachedContext(r->sws, w, h, f->format, w, h, AV_PIX_FMT_RGB24,
                                  SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT, NULL,
                                  NULL, NULL);
    if (!r->sws)
        return gr_fail(GR_ERR_UNSUPPORTED, "%s: frame %lld: cannot convert pixel format %s to RGB",
                       r->path, r->index, av_get_pix_fmt_name(f->format));
    if (r->sws != previous) { /* a new context (size or format changed): the stream's colours */
        int cs = f->colorspace != AVCOL_SPC_UNSPECIFIED ? (int)f->colorspace : SWS_CS_DEFAULT;
        const int *coefs = sws_getCoefficients(cs);
        sws_setColorspaceDetails(r->sws, coefs, f->color_range == AVCOL_RANGE_JPEG, coefs, 1, 0,
                                 1 << 16, 1 << 16);
    }
    uint8_t *dst[4] = {(*frame)->data, NULL, NULL, NULL};
    int dst_stride[4] = {3 * w, 0, 0, 0};
    int rows = sws_scale(r->sws, (const uint8_t *const *)f->data, f->linesize, 0, h, dst,
                         dst_stride);
    if (rows != h)
        return gr_fail(GR_ERR_INTERNAL, "%s: frame %lld: swscale converted %d of %d rows",
                       r->path, r->index, rows, h);
    int64_t ts = f->best_effort_timestamp;
    *pts = ts != AV_NOPTS_VALUE ? (double)(ts - r->start) * av_q2d(r->time_base)
                                : (double)r->index / r->fps;
    r->last_pts = *pts;
    r->index++;
    av_frame_unref(f);
    return GR_OK;
}

/* The end of a file that declares a longer video than it holds (two frames of slack): cut off
 * (a partial download or copy), which the demuxer treats as an ordinary end. */
static gr_status check_complete(const gr_video_reader *r)
{
    double slack = 2.0 / r->fps;
    if (!r->strict || r->duration <= 0 || r->last_pts + slack >= r->duration - 1e-6)
        return GR_OK;
    return gr_fail(GR_ERR_PARSE, "%s: frame %lld: the file ends at %.3f s of the %.3f s it "
                   "declares (truncated?)", r->path, r->index, r->index ? r->last_pts : 0.0,
                   r->duration);
}

/* Feed the decoder one packet of the stream (or the flush at the end). */
static gr_status feed(gr_video_reader *r)
{
    arm(r);
    int ret = av_read_frame(r->fmt, r->pkt);
    if (ret < 0 && r->timed_out)
        return stalled(r, "reading");
    if (ret == AVERROR_EOF) {
        r->draining = 1;
        ret = avcodec_send_packet(r->dec, NULL);
        return ret < 0 && ret != AVERROR_EOF
                   ? av_fail(GR_ERR_PARSE, ret, "flushing the decoder", r->path, r->index)
                   : GR_OK;
    }
    if (ret < 0)
        return av_fail(GR_ERR_PARSE, ret, "reading", r->path, r->index);
    if (r->pkt->stream_index == r->stream)
        ret = avcodec_send_packet(r->dec, r->pkt);
    av_packet_unref(r->pkt);
    return ret < 0 ? av_fail(GR_ERR_PARSE, ret, "decoding", r->path, r->index) : GR_OK;
}

gr_status gr_video_read(gr_video_reader *r, gr_image **frame, double *pts, int *eof)
{
    *eof = 0;
    for (;;) {
        int ret = avcodec_receive_frame(r->dec, r->frame);
        if (ret == 0)
            return convert(r, frame, pts);
        if (ret == AVERROR_EOF) {
            *eof = 1;
            return check_complete(r);
        }
        if (ret != AVERROR(EAGAIN))
            return av_fail(GR_ERR_PARSE, ret, "decoding", r->path, r->index);
        if (r->draining) /* flushed, yet the decoder wants input: its end */
            return av_fail(GR_ERR_PARSE, AVERROR_EOF, "decoding", r->path, r->index);
        gr_status st = feed(r);
        if (st != GR_OK)
            return st;
    }
}

/* ---- writing ------------------------------------------------------------------------------ */

struct gr_video_writer {
    char *path;
    AVFormatContext *fmt;
    AVCodecContext *enc;
    AVStream *stream;
    struct SwsContext *sws;
    AVFrame *frame;
    AVPacket *pkt;
    int64_t next_pts;
    int header_written;
    int created;         /* avio_open made the file: removed again if its header fails */
};

/* H.264 where avcodec has an encoder and the container takes it; else the container's own
 * default where avcodec encodes it and it is not H.264 (WebM: VP9 or VP8); else MJPEG. FFV1 for
 * lossless. */
static const AVCodec *choose_encoder(const AVOutputFormat *ofmt, gr_video_codec codec)
{
    if (codec == GR_VIDEO_CODEC_LOSSLESS)
        return avcodec_find_encoder(AV_CODEC_ID_FFV1);
    const AVCodec *h264 = avcodec_find_encoder(AV_CODEC_ID_H264);
    if (h264 && avformat_query_codec(ofmt, AV_CODEC_ID_H264, FF_COMPLIANCE_NORMAL) == 1)
        return h264;
    const AVCodec *own = ofmt->video_codec != AV_CODEC_ID_NONE &&
                                 ofmt->video_codec != AV_CODEC_ID_H264
                             ? avcodec_find_encoder(ofmt->video_codec)
                             : NULL;
    return own ? own : avcodec_find_encoder(AV_CODEC_ID_MJPEG);
}

/* The encoder's settings: size (even for 4:2:0), frame rate, pixel format, quality. */
static void configure_encoder(gr_video_writer *wr, const AVCodec *codec, int w, int h, double fps)
{
    AVCodecContext *enc = wr->enc;
    int subsampled = codec->id != AV_CODEC_ID_FFV1;
    enc->width = subsampled && w > 1 ? w & ~1 : w;
    enc->height = subsampled && h > 1 ? h & ~1 : h;
    AVRational rate = av_d2q(fps > 0 ? fps : 25.0, 100000);
    enc->time_base = av_inv_q(rate);
    enc->framerate = rate;
    /* FFV1: the exact RGB bytes; the others 4:2:0 (what H.264, VP8/VP9 and MPEG-4 all take) */
    enc->pix_fmt = codec->id == AV_CODEC_ID_FFV1    ? AV_PIX_FMT_0RGB32
                   : codec->id == AV_CODEC_ID_MJPEG ? AV_PIX_FMT_YUVJ420P
                                                    : AV_PIX_FMT_YUV420P;
    if (codec->id == AV_CODEC_ID_MJPEG) {
        enc->flags |= AV_CODEC_FLAG_QSCALE;
        enc->global_quality = FF_QP2LAMBDA * 3;
    }
    if (codec->id == AV_CODEC_ID_FFV1) {
        enc->level = 3; /* version 3 has per-slice CRCs: damage is detected, not concealed */
        av_opt_set_int(enc->priv_data, "slicecrc", 1, 0);
    }
    else
        av_opt_set(enc->priv_data, "preset", "veryfast", 0); /* libx264's; others ignore it */
    if (wr->fmt->oformat->flags & AVFMT_GLOBALHEADER)
        enc->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
}

/* The output file and its header. */
static gr_status open_output(gr_video_writer *wr, const AVCodec *codec, int w, int h, double fps)
{
    if (!(wr->stream = avformat_new_stream(wr->fmt, NULL)) ||
        !(wr->enc = avcodec_alloc_context3(codec)) || !(wr->frame = av_frame_alloc()) ||
        !(wr->pkt = av_packet_alloc()))
        return gr_fail(GR_ERR_OUT_OF_MEMORY, "%s: out of memory for a video writer", wr->path);
    configure_encoder(wr, codec, w, h, fps);
    int ret = avcodec_open2(wr->enc, codec, NULL);
    if (ret < 0)
        return av_fail(GR_ERR_UNSUPPORTED, ret, "cannot open the encoder", wr->path, -1);
    if ((ret = avcodec_parameters_from_context(wr->stream->codecpar, wr->enc)) < 0)
        return av_fail(GR_ERR_INTERNAL, ret, "encoder parameters", wr->path, -1);
    wr->stream->time_base = wr->enc->time_base;
    wr->frame->format = wr->enc->pix_fmt;
    wr->frame->width = wr->enc->width;
    wr->frame->height = wr->enc->height;
    if ((ret = av_frame_get_buffer(wr->frame, 0)) < 0)
        return av_fail(GR_ERR_OUT_OF_MEMORY, ret, "frame buffer", wr->path, -1);
    if (!(wr->fmt->oformat->flags & AVFMT_NOFILE) &&
        (ret = avio_open(&wr->fmt->pb, wr->path, AVIO_FLAG_WRITE)) < 0)
        return av_fail(GR_ERR_IO, ret, "cannot write", wr->path, -1);
    wr->created = !(wr->fmt->oformat->flags & AVFMT_NOFILE);
    if ((ret = avformat_write_header(wr->fmt, NULL)) < 0)
        return av_fail(GR_ERR_IO, ret, "cannot write the header", wr->path, -1);
    wr->header_written = 1;
    return GR_OK;
}

static void writer_free(gr_video_writer *wr)
{
    if (wr->fmt && wr->fmt->pb && !(wr->fmt->oformat->flags & AVFMT_NOFILE))
        avio_closep(&wr->fmt->pb);
    avformat_free_context(wr->fmt);
    avcodec_free_context(&wr->enc);
    av_frame_free(&wr->frame);
    av_packet_free(&wr->pkt);
    sws_freeContext(wr->sws);
    free(wr->path);
    free(wr);
}

gr_status gr_video_writer_open(const char *path, int w, int h, double fps, gr_video_codec codec,
                               gr_video_writer **out)
{
    *out = NULL;
    pthread_once(&init_once, init_ffmpeg);
    gr_video_writer *wr = calloc(1, sizeof *wr);
    if (!wr || !(wr->path = strdup(path))) {
        free(wr);
        return gr_fail(GR_ERR_OUT_OF_MEMORY, "%s: out of memory for a video writer", path);
    }
    int ret = avformat_alloc_output_context2(&wr->fmt, NULL, NULL, path);
    gr_status st = GR_OK;
    if (ret < 0 || !wr->fmt) {
        st = gr_fail(GR_ERR_INVALID_ARGUMENT, "%s: FFmpeg has no container for this name (use "
                     ".mp4, .mkv or .avi)", path);
    } else {
        const AVCodec *enc = choose_encoder(wr->fmt->oformat, codec);
        st = enc ? open_output(wr, enc, w, h, fps)
                 : gr_fail(GR_ERR_UNSUPPORTED, "%s: this FFmpeg has no %s encoder", path,
                           codec == GR_VIDEO_CODEC_LOSSLESS ? "FFV1" : "H.264 or MJPEG");
    }
    if (st != GR_OK) {
        int remove_file = wr->created;
        writer_free(wr);
        if (remove_file)
            remove(path); /* an empty file under the asked name would look like a result */
        return st;
    }
    *out = wr;
    return GR_OK;
}

const char *gr_video_writer_codec(const gr_video_writer *wr) { return wr->enc->codec->name; }

/* Send one frame (NULL: flush) and mux every packet the encoder returns. */
static gr_status encode(gr_video_writer *wr, const AVFrame *frame)
{
    int ret = avcodec_send_frame(wr->enc, frame);
    if (ret < 0)
        return av_fail(GR_ERR_INTERNAL, ret, "encoding", wr->path, wr->next_pts - 1);
    for (;;) {
        ret = avcodec_receive_packet(wr->enc, wr->pkt);
        if (ret == AVERROR(EAGAIN) || ret == AVERROR_EOF)
            return GR_OK;
        if (ret < 0)
            return av_fail(GR_ERR_INTERNAL, ret, "encoding", wr->path, wr->next_pts - 1);
        /* Every frame lasts one tick of the frame rate; without a duration, MP4's edit list
         * would end before the last frame and readers would lose it. */
        if (wr->pkt->duration <= 0)
            wr->pkt->duration = 1;
        av_packet_rescale_ts(wr->pkt, wr->enc->time_base, wr->stream->time_base);
        wr->pkt->stream_index = wr->stream->index;
        ret = av_interleaved_write_frame(wr->fmt, wr->pkt); /* takes the packet's reference */
        if (ret < 0)
            return av_fail(GR_ERR_IO, ret, "writing", wr->path, wr->next_pts - 1);
    }
}

gr_status gr_video_writer_write(gr_video_writer *wr, const gr_image *im)
{
    if (!im || !im->data || im->c != 3 || im->w <= 0 || im->h <= 0)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "%s: a video frame must be RGB", wr->path);
    int ret = av_frame_make_writable(wr->frame);
    if (ret < 0)
        return av_fail(GR_ERR_OUT_OF_MEMORY, ret, "frame buffer", wr->path, wr->next_pts);
    wr->sws = sws_getCachedContext(wr->sws, im->w, im->h, AV_PIX_FMT_RGB24, wr->enc->width,
                                   wr->enc->height, wr->enc->pix_fmt,
                                   SWS_BICUBIC | SWS_ACCURATE_RND, NULL, NULL, NULL);
    if (!wr->sws)
        return gr_fail(GR_ERR_UNSUPPORTED, "%s: cannot convert RGB to %s", wr->path,
                       av_get_pix_fmt_name(wr->enc->pix_fmt));
    const uint8_t *src[4] = {im->data, NULL, NULL, NULL};
    int src_stride[4] = {3 * im->w, 0, 0, 0};
    sws_scale(wr->sws, src, src_stride, 0, im->h, wr->frame->data, wr->frame->linesize);
    wr->frame->pts = wr->next_pts++;
    return encode(wr, wr->frame);
}

gr_status gr_video_writer_close(gr_video_writer *wr)
{
    if (!wr)
        return GR_OK;
    gr_status st = encode(wr, NULL);
    int ret = st == GR_OK && wr->header_written ? av_write_trailer(wr->fmt) : 0;
    if (ret < 0)
        st = av_fail(GR_ERR_IO, ret, "writing the trailer", wr->path, -1);
    if (st == GR_OK && wr->fmt->pb && !(wr->fmt->oformat->flags & AVFMT_NOFILE) &&
        (ret = avio_closep(&wr->fmt->pb)) < 0)
        st = av_fail(GR_ERR_IO, ret, "closing", wr->path, -1);
    writer_free(wr);
    return st;
}

#else /* built without FFmpeg: the names are known, every open says how to enable video */

#define GR_NO_FFMPEG                                                                              \
    "this graphrun was built without FFmpeg: install libavformat-dev libavcodec-dev "           \
    "libswscale-dev libavutil-dev (libavdevice-dev for cameras) and re-run cmake"

struct gr_video_reader {
    int unused;
};
struct gr_video_writer {
    int unused;
};

int gr_video_available(void) { return 0; }

int gr_video_is_input(const char *path)
{
    return strstr(path, "://") || is_camera(path) || gr_video_has_extension(path);
}

gr_status gr_video_open(const char *path, double timeout_s, gr_video_reader **out)
{
    (void)timeout_s;
    *out = NULL;
    return gr_fail(GR_ERR_UNSUPPORTED, "%s: video input: " GR_NO_FFMPEG, path);
}

gr_status gr_video_read(gr_video_reader *r, gr_image **frame, double *pts, int *eof)
{
    (void)r, (void)frame, (void)pts;
    *eof = 1;
    return gr_fail(GR_ERR_UNSUPPORTED, "video input: " GR_NO_FFMPEG);
}

double gr_video_fps(const gr_video_reader *r)
{
    (void)r;
    return 25.0;
}

void gr_video_close(gr_video_reader *r) { (void)r; }

gr_status gr_video_writer_open(const char *path, int w, int h, double fps, gr_video_codec codec,
                               gr_video_writer **out)
{
    (void)w, (void)h, (void)fps, (void)codec;
    *out = NULL;
    return gr_fail(GR_ERR_UNSUPPORTED, "%s: video output: " GR_NO_FFMPEG, path);
}

gr_status gr_video_writer_write(gr_video_writer *wr, const gr_image *frame)
{
    (void)wr, (void)frame;
    return gr_fail(GR_ERR_UNSUPPORTED, "video output: " GR_NO_FFMPEG);
}

gr_status gr_video_writer_close(gr_video_writer *wr)
{
    (void)wr;
    return GR_OK;
}

const char *gr_video_writer_codec(const gr_video_writer *wr)
{
    (void)wr;
    return "none";
}

#endif
