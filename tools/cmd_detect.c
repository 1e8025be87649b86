/* `graphrun [detect]`: load a model, build an engine, run it on images (or .npy tensors), print
 * the detections, draw them, and report the time split.
 *
 * stdout carries only results (detections, or JSON with --json) so that the same command gives the
 * same stdout every time; notices and timings go to stderr. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/npy.h"
#include "tools/cli.h"
#include "tools/results.h"

/* The default --input: the bundled photo, wherever graphrun's data is (gr_data_path). */
static char default_input[4096];

void gr_cli_detect_usage(FILE *f)
{
    fprintf(f,
        "usage: graphrun [detect] [options]        run a detector on images\n"
        "       graphrun plan [options]            show the execution plan (graphrun plan --help)\n"
        "       graphrun compare [options]         fp32 vs fp16 vs int8 accuracy (compare --help)\n"
        "       graphrun eval --images DIR [options]  mAP on labelled images (graphrun eval --help)\n"
        "       graphrun bench [options]           GPU latency and throughput per precision and batch\n"
        "                                          (graphrun bench --help)\n"
        "       graphrun build [options] -o FILE   build an engine and save it (build --help)\n"
        "\n"
        "model\n"
        "  --model NAME        built-in model (default yolo = YOLOv2-tiny VOC 416x416); --list-models\n"
        "  --cfg FILE          Darknet .cfg instead of the built-in one; .onnx files (here or as\n"
        "                      --model) are imported with their weights (docs/onnx.md)\n"
        "  --weights FILE      Darknet .weights; without it, deterministic synthetic weights\n"
        "                      (--model shapes: its bundled trained weights)\n"
        "  --seed N            seed of the synthetic weights (default 1)\n"
        "  --strict-weights    refuse weights holding NaN/Inf (default: load them, with a\n"
        "                      warning line)\n"
        "  --names FILE        class names, one per line\n"
        "  --engine FILE       a saved engine (graphrun build -o FILE) instead of the above: no\n"
        "                      calibration or tactic search; the file fixes model, precision\n"
        "                      and batch. It stays mapped while graphrun runs: replace it by\n"
        "                      rename (mv, install, build -o), never cp over it (exit 3)\n"
        "input / output\n"
        "  --input FILE...     image (JPEG, PNG, BMP) or .npy float32 tensor of the network's input\n"
        "                      shape (CHW or NCHW), fed as-is (default: the bundled dog.jpg, in\n"
        "                      <prefix>/share/graphrun); several (repeated, or listed after one\n"
        "                      --input: a shell glob, at most 64) each run once, in batches of\n"
        "                      --batch\n"
        "  --input DIR         every .jpg/.jpeg/.png/.bmp in DIR, sorted by name, streamed: decoded\n"
        "                      on --threads N threads (default one per core) into batches of\n"
        "                      --batch, results as JSON Lines (one object per image); a bad file\n"
        "                      gets an \"error\" line, the rest go on (exit 3), and so does a file\n"
        "                      of an image type not decoded (.webp .tif .gif .heic ...);\n"
        "                      --save-output, --runs, --find-overflow are refused\n"
        "  --input-list FILE   the same for the image paths in FILE, one per line\n"
        "  --input VIDEO       a video file (.mp4, .mkv, .avi ...), camera (/dev/video0) or stream\n"
        "                      (rtsp://...) through FFmpeg: every frame, JSON Lines with its index\n"
        "                      and time (s); --output out.mp4 writes the video with its boxes\n"
        "  --input-type T      auto (default: from the name, else FFmpeg's probe), image, video\n"
        "  --io-timeout S      a network stream (rtsp://, http://...) that sends nothing for S\n"
        "                      seconds ends the run with one line, exit 3 (default 10; 0: wait\n"
        "                      for ever)\n"
        "  --letterbox         images to the network size as Darknet's letterbox (aspect kept, grey\n"
        "                      borders); default: the cfg's Darknet's - pjreddie cfgs letterbox,\n"
        "                      AlexeyAB cfgs stretch unless [net] letter_box=1 (docs/darknet.md);\n"
        "                      ONNX models letterbox with Ultralytics' border 114 (docs/onnx.md)\n"
        "  --stretch           images stretched to the network size (AlexeyAB's resize_image)\n");
    fprintf(f,
        "  --decode D          with --input DIR / --input-list: where JPEGs are decoded: gpu\n"
        "                      (nvJPEG, letterboxed on the GPU; other files still on the CPU), cpu\n"
        "                      (libjpeg-turbo), auto (default: gpu with a GPU engine of a build\n"
        "                      with nvJPEG, else cpu); stderr says which runs\n"
        "  --fast-decode       with --input DIR / --input-list: decode JPEGs of at least twice the\n"
        "                      network's size at 1/2, 1/4 or 1/8 scale (faster, not Darknet's exact\n"
        "                      pixels; off by default)\n"
        "  --output FILE       image with boxes (.png/.jpg; default predictions.png, with several\n"
        "                      inputs predictions.1.png ...), or an existing folder: DIR/<name>\n"
        "                      per input; --no-output writes none. An output that is an input\n"
        "                      (or a folder holding one) is refused\n"
        "  --output DIR        with --input DIR / --input-list: each image with its boxes as\n"
        "                      DIR/<name> (its own format; .bmp as .png), DIR made if missing\n"
        "                      (default: none drawn)\n"
        "  --save-output FILE  raw head outputs as .npy (float32 NCHW); further heads FILE.1.npy ...\n"
        "                      (an ONNX model whose detection head runs on the host: the graph's\n"
        "                      output, e.g. [batch, 4 + classes, boxes], docs/onnx.md)\n"
        "  --format F          results on stdout as text (a block per image or frame), json (one\n"
        "                      document), jsonl (one line per image: the folder default), coco\n"
        "                      (COCO results array), csv (one row per box), or yolo-txt\n"
        "                      (DIR/<stem>.txt label files into --output DIR, a video's as\n"
        "                      <stem>_<frame>.txt; nothing drawn); default: text for --input FILE,\n"
        "                      jsonl for a folder or a video\n"
        "  --save-conf         --format yolo-txt: the probability as a 6th column\n"
        "  --json              --format json\n");
    fprintf(f,
        "engine\n"
        "  --device D          auto (default: GPU when visible, else CPU reference), cpu, gpu\n"
        "                      (= gpu:0), gpu:N; folders, lists and videos also gpu:all or\n"
        "                      gpu:N,M,...: one engine per GPU, batches round robin\n"
        "  --prec P            fp32 (default), fp16, int8, or auto: int8 or fp16 per layer, the\n"
        "                      fastest map whose output NRMSE vs fp32 on the calibration images\n"
        "                      stays within --max-nrmse X (default 0.003)\n"
        "  --batch N           images per run (default 1; inputs repeat to fill the batch)\n"
        "  --runs N            run N times and report the median time (default 1)\n"
        "  --calib-images DIR  calibrate on the JPEG/PNG files of DIR (default: the bundled photos)\n"
        "  --find-overflow     when an output holds NaN/Inf, name the first layer that produced one\n"
        "  --eager             run the plan's kernels one by one, without the CUDA graph (to see\n"
        "                      each node in Nsight Systems)\n");
    gr_cli_engine_usage(f, GR_CMD_DETECT);
    fprintf(f,
        "detection\n"
        "  --thresh T          class probability threshold (default 0.5, as Darknet)\n"
        "  --nms T             IoU threshold of the class-wise NMS (default 0.45, as Darknet)\n"
        "  --help, --version\n"
        "\n"
        "exit status: 0 ok, 1 runtime failure or NaN/Inf in an output, 2 bad arguments, 3 bad input\n"
        "             file or an output that could not be written, 4 no GPU, 5 out of memory\n"
        "             (docs/errors.md)\n");
}

static int has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* "out.png" + k -> "out.k.png" (k = 0 keeps the name). */
static void indexed_name(char *dst, size_t len, const char *path, int k, const char *default_ext)
{
    if (k == 0) {
        snprintf(dst, len, "%s", path);
        return;
    }
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');
    if (!dot || (slash && dot < slash))
        snprintf(dst, len, "%s.%d%s", path, k, default_ext);
    else
        snprintf(dst, len, "%.*s.%d%s", (int)(dot - path), path, k, dot);
}

/* A network without a detection head whose output is one vector per image (a classifier such as
 * darknet19: [softmax] over 1000 classes): its top 5 classes for image b, as text or a JSON
 * "top5" member. Nothing for other outputs. */
static void print_top5(const gr_engine *engine, const gr_model *model, int b, int json)
{
    gr_tensor_desc d;
    const float *out;
    if (gr_engine_output_count(engine) != 1 || gr_engine_output_desc(engine, 0, &d) != GR_OK ||
        d.h != 1 || d.w != 1 || d.c < 1 || gr_engine_output(engine, 0, &out) != GR_OK)
        return;
    out += (size_t)b * (size_t)d.c;
    int top[5], k = d.c < 5 ? d.c : 5;
    for (int j = 0; j < k; j++) {
        top[j] = -1;
        for (int i = 0; i < d.c; i++) {
            int taken = 0;
            for (int t = 0; t < j; t++)
                taken |= top[t] == i;
            if (!taken && (top[j] < 0 || out[i] > out[top[j]]))
                top[j] = i;
        }
    }
    printf(json ? ", \"top5\": [" : "  top-5:");
    for (int j = 0; j < k; j++) {
        if (json) {
            printf("%s{\"class\": ", j ? ", " : "");
            gr_cli_json_string(stdout, gr_model_class_name(model, top[j]));
            printf(", \"class_id\": %d, \"score\": %.6f}", top[j], (double)out[top[j]]);
        } else {
            printf("%s %s %.4f", j ? "," : "", gr_model_class_name(model, top[j]),
                   (double)out[top[j]]);
        }
    }
    printf(json ? "]" : "\n");
}

/* A network without a detection head whose outputs are tensors (an ONNX model ending before its
 * head, models/onnx/): each output's shape and summary for image b, as text or a JSON "outputs"
 * member (--save-output writes the values). Nothing for a classifier's vector (print_top5). */
static void print_tensors(const gr_engine *engine, int b, int json)
{
    int count = gr_engine_output_count(engine);
    gr_tensor_desc d;
    if (count == 1 && gr_engine_output_desc(engine, 0, &d) == GR_OK && d.h == 1 && d.w == 1)
        return;
    if (json)
        printf(", \"outputs\": [");
    for (int k = 0; k < count; k++) {
        const float *out;
        if (gr_engine_output_desc(engine, k, &d) != GR_OK ||
            gr_engine_output(engine, k, &out) != GR_OK)
            continue;
        size_t n = (size_t)d.c * (size_t)d.h * (size_t)d.w;
        out += (size_t)b * n;
        double lo = n ? (double)out[0] : 0.0, hi = lo, sum = 0.0;
        for (size_t i = 0; i < n; i++) {
            lo = fmin(lo, (double)out[i]);
            hi = fmax(hi, (double)out[i]);
            sum += (double)out[i];
        }
        double mean = n ? sum / (double)n : 0.0;
        if (json)
            printf("%s{\"shape\": [%d, %d, %d], \"min\": %.6g, \"max\": %.6g, \"mean\": %.6g}",
                   k ? ", " : "", d.c, d.h, d.w, lo, hi, mean);
        else
            printf("  output %d: %dx%dx%d (CxHxW), min %.6g, max %.6g, mean %.6g\n", k, d.c, d.h,
                   d.w, lo, hi, mean);
    }
    if (json)
        printf("]");
}

typedef struct input_slot {
    const char *path;
    gr_image *image; /* NULL for .npy input */
} input_slot;

/* One invocation: its inputs, the engine, the batch and the run times. */
typedef struct detect_run {
    gr_cli_options o;
    gr_image *images[GR_CLI_MAX_INPUTS];
    float *tensors[GR_CLI_MAX_INPUTS];
    int tensor_dims[GR_CLI_MAX_INPUTS][4], tensor_ndim[GR_CLI_MAX_INPUTS];
    gr_model *model;
    gr_engine *engine;
    gr_model_info info;
    gr_results *results; /* --format jsonl, coco, csv, yolo-txt (text and json are printed here) */
    input_slot *slots;
    float *input_f32;  /* tensors, and images letterboxed as floats (--find-overflow, mixed) */
    int images_only;   /* no .npy tensor: the images go in through gr_engine_set_image */
    double *times;     /* every run's time: runs per batch, the batches one after another */
    int n_times;
    size_t per_image;
    int first;         /* the batch being run: inputs first .. first + count - 1 */
    int count;
    int nonfinite;     /* outputs that held NaN/Inf, over every batch */
} detect_run;

/* Read every input first: a bad file fails before any model work, with one line. */
static int read_inputs(detect_run *r)
{
    for (int i = 0; i < r->o.n_inputs; i++) {
        const char *path = r->o.inputs[i];
        gr_status st = has_suffix(path, ".npy")
                           ? gr_npy_read(path, &r->tensors[i], r->tensor_dims[i],
                                         &r->tensor_ndim[i], 4)
                           : gr_image_load(path, &r->images[i]);
        if (st != GR_OK)
            return gr_cli_fail(st, NULL);
    }
    return GR_EXIT_OK;
}

/* .npy tensors must be the network's input, CHW or 1xCHW; images need a 3-channel input. */
static int check_input_shapes(const detect_run *r)
{
    const gr_model_info *info = &r->info;
    for (int i = 0; i < r->o.n_inputs; i++) {
        if (!r->tensors[i]) {
            int rc = gr_cli_check_image_input(r->engine, r->o.cfg ? r->o.cfg : info->name);
            if (rc != GR_EXIT_OK)
                return rc;
            continue;
        }
        const int *d = r->tensor_ndim[i] == 4 ? r->tensor_dims[i] + 1 : r->tensor_dims[i];
        int chw = r->tensor_ndim[i] == 3 || (r->tensor_ndim[i] == 4 && r->tensor_dims[i][0] == 1);
        if (!chw || d[0] != info->channels || d[1] != info->height || d[2] != info->width) {
            fprintf(stderr, "graphrun: %s: shape does not match the network input %dx%dx%d "
                            "(float32 CHW or 1xCHW expected)\n",
                    r->o.inputs[i], info->channels, info->height, info->width);
            return GR_EXIT_INPUT;
        }
    }
    return GR_EXIT_OK;
}

/* Every input runs once: in batches of --batch, one after another (the last one filled up with
 * its own inputs repeated). Fewer inputs than the batch: one batch, the inputs repeating. */
static int batches(const gr_cli_options *o)
{
    return (o->n_inputs + o->batch - 1) / o->batch;
}

static int allocate_batch(detect_run *r)
{
    const gr_cli_options *o = &r->o;
    r->per_image = (size_t)r->info.channels * (size_t)r->info.width * (size_t)r->info.height;
    r->images_only = 1;
    for (int i = 0; i < o->n_inputs; i++)
        if (r->tensors[i])
            r->images_only = 0;
    r->slots = calloc((size_t)o->batch, sizeof *r->slots);
    r->input_f32 = calloc(r->per_image * (size_t)o->batch, sizeof(float));
    r->times = calloc((size_t)o->runs * (size_t)batches(o), sizeof *r->times);
    if (!r->slots || !r->input_f32 || !r->times) {
        fprintf(stderr, "graphrun: out of memory for a batch of %d inputs\n", o->batch);
        return GR_EXIT_OOM;
    }
    return GR_EXIT_OK;
}

/* The batch: inputs repeat to fill it. Images go in through gr_engine_set_image, as a program
 * using the API feeds them (float, exactly as Darknet, for the CPU reference; uint8 for the GPU,
 * whose input copy moves bytes). .npy tensors are fed as-is through the float input, and with
 * one in the batch the images beside it are float-letterboxed too (gr_image_letterbox). The
 * float letterbox is also kept for --find-overflow's CPU emulation. */
static int fill_batch(detect_run *r, int first)
{
    int rc = GR_EXIT_OK;
    const gr_model_info *info = &r->info;
    r->first = first;
    r->count = r->o.n_inputs - first < r->o.batch ? r->o.n_inputs - first : r->o.batch;
    for (int b = 0; b < r->o.batch && rc == GR_EXIT_OK; b++) {
        int i = first + b % r->count;
        r->slots[b].path = r->o.inputs[i];
        r->slots[b].image = r->images[i];
        float *dst = r->input_f32 + (size_t)b * r->per_image;
        if (r->tensors[i]) {
            memcpy(dst, r->tensors[i], r->per_image * sizeof(float));
            continue;
        }
        gr_status st = GR_OK;
        if (!r->images_only || r->o.find_overflow)
            st = gr_image_preprocess(r->images[i], gr_model_preprocess(gr_engine_model(r->engine)),
                                     info->width, info->height, dst);
        if (st == GR_OK && r->images_only)
            st = gr_engine_set_image(r->engine, 0, b, r->images[i]);
        if (st != GR_OK)
            rc = gr_cli_fail(st, r->o.inputs[i]);
    }
    return rc;
}

static int run_timed(detect_run *r)
{
    for (int k = 0; k < r->o.runs; k++) {
        gr_status st = r->images_only ? gr_engine_run(r->engine)
                                      : gr_engine_run_f32(r->engine, r->input_f32);
        if (st != GR_OK)
            return gr_cli_fail(st, "run");
        gr_timing t;
        gr_engine_timing(r->engine, &t);
        r->times[r->n_times++] = t.end_to_end_us;
    }
    return GR_EXIT_OK;
}

/* NaN/Inf values in image b's part of the outputs. */
static size_t image_nonfinite(const gr_engine *engine, int b)
{
    size_t bad = 0;
    for (int k = 0; k < gr_engine_output_count(engine); k++) {
        gr_tensor_desc d;
        const float *v;
        if (gr_engine_output_desc(engine, k, &d) != GR_OK || gr_engine_output(engine, k, &v) != GR_OK)
            continue;
        size_t n = (size_t)d.c * (size_t)d.h * (size_t)d.w;
        for (size_t i = (size_t)b * n; i < (size_t)(b + 1) * n; i++)
            bad += !isfinite(v[i]);
    }
    return bad;
}

/* Image b's record through the results writer: the distinct inputs only (a batch repeats them
 * to fill it, and a COCO image_id or a label file must not come twice). */
static int write_result(const detect_run *r, int b, const gr_detection *dets, int n)
{
    if (b >= r->count)
        return GR_EXIT_OK;
    const gr_image *im = r->slots[b].image;
    gr_result_image rec = {.path = r->slots[b].path, .index = r->first + b, .frame = -1,
                           .width = im ? im->w : r->info.width,
                           .height = im ? im->h : r->info.height,
                           .nonfinite = image_nonfinite(r->engine, b)};
    return gr_results_write(r->results, &rec, dets, n);
}

static void print_image(const detect_run *r, int b, const gr_detection *dets, int n)
{
    const gr_model *model = gr_cli_model(r->model, r->engine);
    if (r->o.json) {
        printf("%s\n  {\"input\": ", r->first + b ? "," : "");
        gr_cli_json_string(stdout, r->slots[b].path);
        size_t bad = image_nonfinite(r->engine, b);
        if (bad)
            printf(", \"nonfinite\": %zu", bad);
        printf(", ");
        gr_cli_json_detections(stdout, model, dets, n, "\n    ");
        if (r->info.classes == 0) {
            print_top5(r->engine, model, b, 1);
            print_tensors(r->engine, b, 1);
        }
        printf("}");
        return;
    }
    gr_result_image im = {.path = r->slots[b].path, .frame = -1};
    gr_results_text(stdout, model, &im, dets, n);
    if (r->info.classes == 0) {
        print_top5(r->engine, model, b, 0);
        print_tensors(r->engine, b, 0);
    }
}

/* Where input i is drawn: --output FILE (default predictions.png) for the first, FILE.i.png after
 * it; --output DIR (an existing folder) DIR/<its name>, as --input DIR draws. */
static void drawn_name(const gr_cli_options *o, int i, char *name, size_t size)
{
    if (o->output && gr_cli_is_directory(o->output))
        gr_cli_drawn_name(o->output, o->inputs[i], name, size);
    else
        indexed_name(name, size, o->output ? o->output : "predictions.png", i, ".png");
}

/* Image b with its boxes into --output (indexed after the first); a repeated input is drawn
 * once. */
static int draw_image(const detect_run *r, int b, const gr_detection *dets, int n)
{
    const gr_cli_options *o = &r->o;
    if (!r->slots[b].image || (o->output && o->output[0] == '\0') || b >= r->count ||
        o->format == GR_FORMAT_YOLO_TXT)
        return GR_EXIT_OK;
    char name[4200];
    drawn_name(o, r->first + b, name, sizeof name);
    gr_status st = gr_image_draw_detections(r->slots[b].image, dets, n,
                                            gr_cli_model(r->model, r->engine));
    if (st == GR_OK)
        st = gr_image_write(r->slots[b].image, name);
    if (st != GR_OK)
        return gr_cli_fail(st, NULL);
    fprintf(stderr, "graphrun: wrote %s\n", name);
    return GR_EXIT_OK;
}

static int report_image(const detect_run *r, int b)
{
    gr_detect_options dopt;
    gr_detect_options_default(&dopt);
    dopt.thresh = r->o.thresh;
    dopt.nms = r->o.nms;
    if (r->slots[b].image) {
        dopt.image_w = r->slots[b].image->w;
        dopt.image_h = r->slots[b].image->h;
    }
    gr_detection *dets = NULL;
    int n = 0;
    gr_status st = r->info.classes > 0 ? gr_engine_detect(r->engine, b, &dopt, &dets, &n) : GR_OK;
    if (st != GR_OK)
        return gr_cli_fail(st, "decoding detections");
    int rc = GR_EXIT_OK;
    if (r->results)
        rc = write_result(r, b, dets, n);
    else
        print_image(r, b, dets, n);
    if (rc == GR_EXIT_OK)
        rc = draw_image(r, b, dets, n);
    gr_detections_free(dets);
    return rc;
}

/* The results writer of --format jsonl, coco, csv (stdout) and yolo-txt (--output DIR). */
static int open_results(detect_run *r)
{
    const gr_cli_options *o = &r->o;
    if (o->format == GR_FORMAT_DEFAULT || o->format == GR_FORMAT_JSON)
        return GR_EXIT_OK;
    gr_results_options ro = {.format = (gr_result_format)o->format, .save_conf = o->save_conf,
                             .model = r->model, .model_name = r->info.name,
                             .synthetic_weights = r->info.synthetic_weights,
                             .precision = gr_precision_name(o->precision)};
    if (ro.format == GR_FORMAT_YOLO_TXT)
        ro.label_dir = o->output; /* given: gr_cli_check_format */
    return gr_results_open(&ro, &r->results);
}

/* The start of the results: the writer of --format jsonl, coco, csv, yolo-txt, or json's head. */
static int begin_results(detect_run *r)
{
    if (r->o.format != GR_FORMAT_DEFAULT && r->o.format != GR_FORMAT_JSON)
        return open_results(r);
    if (r->o.json) {
        printf("{\"model\": ");
        gr_cli_json_string(stdout, r->info.name);
        printf(", \"synthetic_weights\": %s, \"precision\": \"%s\", \"images\": [",
               r->info.synthetic_weights ? "true" : "false", gr_precision_name(r->o.precision));
    }
    return GR_EXIT_OK;
}

/* The end of the results (rc: how the batches went; json's tail only after all of them). */
static int end_results(detect_run *r, int rc)
{
    if (r->results) {
        int closed = gr_results_close(r->results);
        r->results = NULL;
        return rc != GR_EXIT_OK ? rc : closed;
    }
    if (rc == GR_EXIT_OK && r->o.json)
        printf("\n]}\n");
    return rc;
}

/* The batch's images: with one batch every place of it (inputs repeated to fill it are printed
 * as they ran; the results writer takes each input once), with several each input once. */
static int report_images(detect_run *r)
{
    int n = batches(&r->o) == 1 ? r->o.batch : r->count;
    int rc = GR_EXIT_OK;
    for (int b = 0; b < n && rc == GR_EXIT_OK; b++)
        rc = report_image(r, b);
    return rc;
}

/* --save-output of a model whose detection head runs on the host (an ONNX graph's): the graph's
 * output, every image of the batch along the first dim. 0: written; 1: the model has none. */
static int save_graph_output(const detect_run *r, int *rc)
{
    const float *outs[16] = {NULL};
    int count = gr_engine_output_count(r->engine);
    for (int k = 0; k < count && k < 16; k++)
        gr_engine_output(r->engine, k, &outs[k]);
    float *first = NULL, *all = NULL;
    int64_t dims[8];
    int n_dims = 0;
    if (gr_engine_graph_output(r->engine, outs, 0, &first, dims, &n_dims) != GR_OK)
        return 1;
    size_t n = 1;
    int idims[8];
    for (int d = 0; d < n_dims; d++) {
        n *= (size_t)dims[d];
        idims[d] = (int)dims[d];
    }
    int batch = r->o.batch;
    gr_status st = (all = malloc((size_t)batch * n * sizeof *all)) ? GR_OK : GR_ERR_OUT_OF_MEMORY;
    for (int b = 0; b < batch && st == GR_OK; b++) {
        float *one = first;
        if (b > 0)
            st = gr_engine_graph_output(r->engine, outs, b, &one, dims, &n_dims);
        if (st == GR_OK)
            memcpy(all + (size_t)b * n, one, n * sizeof *all);
        if (b > 0)
            free(one);
    }
    idims[0] *= batch;
    if (st == GR_OK)
        st = gr_npy_write(r->o.save_output, all, idims, n_dims);
    free(first);
    free(all);
    if (st != GR_OK) {
        *rc = gr_cli_fail(st, NULL);
        return 0;
    }
    fprintf(stderr, "graphrun: wrote %s (the graph's output, %d dims, float32)\n",
            r->o.save_output, n_dims);
    *rc = GR_EXIT_OK;
    return 0;
}

/* --save-output: each head's raw output as .npy (an ONNX graph's own output when its detection
 * head runs on the host). */
static int save_outputs(const detect_run *r)
{
    int rc = GR_EXIT_OK;
    if (r->o.save_output && save_graph_output(r, &rc) == 0)
        return rc;
    for (int k = 0; r->o.save_output && k < gr_engine_output_count(r->engine); k++) {
        gr_tensor_desc d;
        const float *data;
        gr_engine_output_desc(r->engine, k, &d);
        gr_engine_output(r->engine, k, &data);
        char name[4096];
        indexed_name(name, sizeof name, r->o.save_output, k, ".npy");
        int dims[4] = {d.n, d.c, d.h, d.w};
        gr_status st = gr_npy_write(name, data, dims, 4);
        if (st != GR_OK)
            return gr_cli_fail(st, NULL);
        fprintf(stderr, "graphrun: wrote %s (%dx%dx%dx%d float32)\n", name, d.n, d.c, d.h, d.w);
    }
    return GR_EXIT_OK;
}

static void print_timing(detect_run *r)
{
    gr_timing t;
    gr_engine_timing(r->engine, &t);
    gr_cli_sort(r->times, r->n_times);
    fprintf(stderr,
            "time (last run): type conversion %.1f us, memory copy %.1f us, computation %.1f us; "
            "end to end %.1f us",
            t.convert_us, t.copy_us, t.compute_us, t.end_to_end_us);
    if (r->n_times > 1)
        fprintf(stderr, "; median of %d runs %.1f us, p99 %.1f us", r->n_times,
                gr_cli_percentile(r->times, r->n_times, 50.0),
                gr_cli_percentile(r->times, r->n_times, 99.0));
    fprintf(stderr, "\n");
}

/* One batch: its runs, the NaN/Inf check (and --find-overflow), its results and files. */
static int run_batch(detect_run *r, int first)
{
    int rc = fill_batch(r, first);
    if (rc == GR_EXIT_OK)
        rc = run_timed(r);
    if (rc != GR_EXIT_OK)
        return rc;
    int nonfinite = gr_cli_report_nonfinite(r->engine, gr_precision_name(r->o.precision));
    r->nonfinite += nonfinite;
    gr_status st = nonfinite && r->o.find_overflow ? gr_cli_find_overflow(&r->o, r->input_f32)
                                                   : GR_OK;
    if (st != GR_OK)
        return gr_cli_fail(st, "--find-overflow");
    if ((rc = report_images(r)) != GR_EXIT_OK)
        return rc;
    return save_outputs(r);
}

/* Every input, batch after batch; the results around them; the time split at the end. */
static int run_and_report(detect_run *r)
{
    int rc = allocate_batch(r);
    if (rc == GR_EXIT_OK)
        rc = begin_results(r);
    for (int first = 0; first < r->o.n_inputs && rc == GR_EXIT_OK; first += r->o.batch)
        rc = run_batch(r, first);
    rc = end_results(r, rc);
    if (rc != GR_EXIT_OK)
        return rc;
    print_timing(r);
    return r->nonfinite ? GR_EXIT_FAILURE : GR_EXIT_OK;
}

/* Before anything is read: --save-output holds one run's outputs (one batch); no file written
 * (--output's drawn images, --save-output's .npy) may be an input, nor --output DIR hold one. */
static int check_outputs(const gr_cli_options *o)
{
    if (o->save_output && batches(o) > 1) {
        fprintf(stderr, "graphrun: --save-output writes one run's outputs: %d inputs at --batch %d "
                        "are %d runs (give --batch %d, or one --input)\n", o->n_inputs, o->batch,
                batches(o), o->n_inputs);
        return GR_EXIT_USAGE;
    }
    int rc = GR_EXIT_OK;
    int draws = !(o->output && !o->output[0]) && o->format != GR_FORMAT_YOLO_TXT;
    if (o->output && o->output[0] && gr_cli_is_directory(o->output))
        rc = gr_cli_check_output("--output", o->output, 1, o->inputs, o->n_inputs);
    char name[4200];
    for (int i = 0; draws && i < o->n_inputs && rc == GR_EXIT_OK; i++) {
        drawn_name(o, i, name, sizeof name);
        rc = gr_cli_check_output("--output", name, 0, o->inputs, o->n_inputs);
    }
    for (int k = 0; o->save_output && k < GR_CLI_MAX_INPUTS && rc == GR_EXIT_OK; k++) {
        indexed_name(name, sizeof name, o->save_output, k, ".npy"); /* each head's file */
        rc = gr_cli_check_output("--save-output", name, 0, o->inputs, o->n_inputs);
    }
    if (o->format == GR_FORMAT_YOLO_TXT && rc == GR_EXIT_OK)
        rc = gr_cli_check_output("--output", o->output, 1, o->inputs, o->n_inputs);
    return rc;
}

static void detect_free(detect_run *r)
{
    for (int i = 0; i < r->o.n_inputs; i++) {
        gr_image_destroy(r->images[i]);
        free(r->tensors[i]);
    }
    free(r->slots);
    free(r->input_f32);
    free(r->times);
    gr_engine_destroy(r->engine);
    gr_model_destroy(r->model);
}

int gr_cli_detect_images(const gr_cli_options *o)
{
    /* (--decode cpu and auto are what this mode does: one image is decoded on the CPU) */
    if (o->fast_decode || o->decode == GR_CLI_DECODE_GPU) {
        fprintf(stderr, "graphrun: %s applies to --input DIR and --input-list only\n",
                o->fast_decode ? "--fast-decode" : "--decode gpu");
        return GR_EXIT_USAGE;
    }
    detect_run *r = calloc(1, sizeof *r);
    if (!r) {
        fprintf(stderr, "graphrun: out of memory\n");
        return GR_EXIT_OOM;
    }
    r->o = *o;
    if (r->o.format == GR_FORMAT_TEXT) /* this mode's own */
        r->o.format = GR_FORMAT_DEFAULT;
    int rc = GR_EXIT_OK;
    if (r->o.n_inputs == 0) {
        gr_status st = gr_data_path("dog.jpg", default_input, sizeof default_input);
        r->o.inputs[r->o.n_inputs++] = default_input;
        if (st != GR_OK)
            rc = gr_cli_fail(st, "the default --input");
    }
    if (rc == GR_EXIT_OK)
        rc = check_outputs(&r->o);
    if (rc == GR_EXIT_OK)
        rc = read_inputs(r);
    if (rc == GR_EXIT_OK)
        rc = gr_cli_open(&r->o, &r->model, &r->engine, &r->info);
    if (rc == GR_EXIT_OK)
        rc = check_input_shapes(r);
    if (rc == GR_EXIT_OK)
        rc = run_and_report(r);
    detect_free(r);
    free(r);
    return rc;
}
