/* Parallel int8 calibration on the CPU (planner/calib.c): the fp32 plan of a network run over
 * calibration images on several threads, each layer output's |x| gathered into a gr_hist
 * (planner/calib_hist.h), and the method's threshold taken per layer. Images come from a loader
 * callback so that decoding runs on the same threads and no image set is held in memory. Results
 * are identical bit for bit for any thread count (histograms merge exactly). */
#ifndef GR_PLANNER_CALIB_H
#define GR_PLANNER_CALIB_H

#include "planner/plan.h"

typedef struct gr_calib_config {
    gr_calib_method method;
    float percentile; /* PERCENTILE: in (0, 100] */
    int threads;      /* 0 = one per online core; never more than the images */
    /* Write image `index` (float NCHW c x h x w, values in [0, 1]) to dst. Called from the worker
     * threads concurrently: it must be thread-safe. A failure is reported with gr_fail. */
    gr_status (*load)(int index, float *dst, void *user);
    void *load_user;
    /* After each image: images done of total; serialized, from the worker threads. NULL = none. */
    void (*progress)(int done, int total, void *user);
    void *progress_user;
} gr_calib_config;

void gr_calib_config_default(gr_calib_config *cfg); /* MAX, percentile 99.99, all cores */

gr_status gr_plan_calibrate_images(const gr_net *net, int n_images, const gr_calib_config *cfg,
                                   float *layer_range, float *input_range);

#endif
