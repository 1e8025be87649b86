/* The folder pipeline of runtime/files.c fed by a caller's source of images instead of files:
 * the CLI's video input (tools/cmd_stream.c) runs its frames through it. gr_pool_detect_files
 * (runtime.h) is the same pipeline over paths. */
#ifndef GR_RUNTIME_FILES_H
#define GR_RUNTIME_FILES_H

#include "graphrun/runtime.h"

/* Image `index` of the source into *image (RGB) and 1, or 0 at the source's end (its failure is
 * the source's to keep). Called for index 0, 1, 2, ... one call at a time, in that order, on the
 * pipeline's worker threads, with the pipeline's `user`. The image must stay as it is until its
 * result is delivered (cb returned): an image index is asked for only after the result of
 * index - buffers x batch, so a ring of that many images, indexed by index % (buffers x batch),
 * is enough. */
typedef int (*gr_files_next_fn)(void *user, int index, const gr_image **image);

/* gr_pool_detect_files (runtime.h: results, threads, stats, return values) over the source's
 * images until its end: result->path is NULL, stats->images the images it gave at the end (0
 * before). opt->decode and opt->fast_decode do not apply (decoding is the source's); each image
 * is letterboxed into its batch buffer on the worker that asked for it. opt->jsonl is refused
 * (GR_ERR_INVALID_ARGUMENT): a video frame's record holds its frame and time, which are the
 * source's (the CLI formats them with runtime/jsonl.h in its prepare hook). */
gr_status gr_pool_detect_source(gr_pool *pool, gr_files_next_fn next, const gr_files_options *opt,
                                gr_file_fn cb, void *user, gr_files_stats *stats);

#endif
