/* graphrun: a CUDA inference runtime for Darknet-style CNNs (YOLO first).
 *
 * This is the one public header. Everything in it is plain C11.
 *
 * Its declarations come in five groups, in this order, each opened by a "==== group N:" banner
 * saying what it is for and who needs it: 1 core (all that a minimal embedder needs), 2 many
 * images (runs in flight, streams, JPEG decoding, pools, folders), 3 saved engines and caches,
 * 4 introspection and measurement, 5 debug and testing hooks. tests/check_exports.sh holds each
 * group to a budget of exported functions.
 *
 * Error contract
 *   - Every call that can fail returns a gr_status; GR_OK (0) is success, anything else is failure.
 *   - After a failure, gr_last_error() returns a one-line message on the calling thread saying what
 *     and where (file and line or key, byte offset, CUDA error name). The message stays until the
 *     next failing call on the same thread. Engines also keep their own: gr_engine_last_error().
 *   - No function behind this header calls exit(), abort() or assert() on bad input. Bad input is
 *     a status, never a crash.
 *   - Results come back through out-parameters; on failure they are left NULL / zero.
 *
 * Ownership
 *   - The caller owns every object it creates (gr_model, gr_engine, gr_image, detection arrays) and
 *     releases it with the matching destroy/free function. destroy(NULL) is a no-op.
 *   - An engine keeps a pointer to nothing from the model it was built from: the model may be
 *     destroyed after gr_engine_build() returns.
 *   - The engine owns all device memory it uses.
 *
 * Option structs
 *   - gr_model_options, gr_engine_options, gr_detect_options and gr_files_options begin with
 *     `struct_size`: the sizeof of the struct as the caller was compiled, set by the *_default()
 *     functions (inline here, so the size is the caller's). Fields are only ever appended, so a
 *     library newer than the caller's header takes the fields within struct_size from the caller
 *     and gives the rest their defaults. A struct_size below the struct's first layout (0.1.0's;
 *     gr_files_options' own first) or above this library's own sizeof is
 *     GR_ERR_INVALID_ARGUMENT, naming the struct. Bindings that mirror a struct (python/graphrun)
 *     call *_init(opt, sizeof mirror) and need no padding. gr_files_stats, an out-struct, begins
 *     with struct_size too: the caller's sizeof, and the library writes no byte past it.
 *     gr_file_result, which the library gives a callback, only grows at its end too: a caller
 *     compiled with an older header reads the fields it knows.
 *
 * Threads
 *   - Separate objects are independent: any number of threads may each use their own engine at the
 *     same time, on the same GPU.
 *   - One engine is used by one thread at a time. An engine detects a second thread entering a run
 *     while one is in progress and rejects it with GR_ERR_BUSY instead of racing. The exception:
 *     gr_engine_detect_outputs (on outputs kept from a run) may be called from any thread, any
 *     number at once, beside the thread that runs the engine.
 *   - gr_pool_detect_files drives a pool's engines from the calling thread and its own worker
 *     threads for the call's duration: no other thread may use those engines meanwhile.
 *   - A gr_model is read-only after loading and may be shared by threads building engines.
 */
#ifndef GRAPHRUN_RUNTIME_H
#define GRAPHRUN_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The shared library is built with hidden visibility: what this header declares is exported,
 * nothing else (tests/check_exports.sh compares the two). */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

/* ==== group 1: core ==========================================================================
 * What every embedder needs, and all that a minimal one needs (load a model, build an engine, set
 * an image, run, detect): the version, status codes and error messages, models (options, load,
 * info, class names, data files), images (load, write, letterbox or stretch, draw detections),
 * engines (options, build, input, run, outputs, detections, notices) and the types the other
 * groups share. */

#define GRAPHRUN_VERSION_MAJOR 0
#define GRAPHRUN_VERSION_MINOR 1
#define GRAPHRUN_VERSION_PATCH 0

/* "0.1.0" */
const char *gr_version(void);

/* ---- status ------------------------------------------------------------------------------ */

typedef enum gr_status {
    GR_OK = 0,
    GR_ERR_INVALID_ARGUMENT = 1, /* NULL where an object is needed, out-of-range option */
    GR_ERR_IO = 2,               /* a file could not be opened, read or written */
    GR_ERR_PARSE = 3,            /* malformed cfg, weights, image or .npy */
    GR_ERR_UNSUPPORTED = 4,      /* valid Darknet, but not something graphrun runs */
    GR_ERR_LIMIT = 5,            /* absurd sizes, overflowing size arithmetic, too many layers */
    GR_ERR_OUT_OF_MEMORY = 6,    /* host or device allocation failed */
    GR_ERR_NO_DEVICE = 7,        /* a GPU was asked for and none is usable */
    GR_ERR_CUDA = 8,             /* a CUDA runtime call failed; the message names the error */
    GR_ERR_CUBLAS = 9,           /* a cuBLAS / cuBLASLt call failed */
    GR_ERR_STATE = 10,           /* the object cannot do this now (e.g. engine failed earlier) */
    GR_ERR_BUSY = 11,            /* another thread is inside a run on this engine */
    GR_ERR_INTERNAL = 12,        /* a graphrun bug: please report it with the message */
    GR_ERR_NUMERIC = 13          /* outputs hold NaN/Inf (only with nonfinite_is_error; the
                                    outputs of that run stay readable) */
} gr_status;

/* Short name of a status code, e.g. "parse error". Never NULL. */
const char *gr_status_str(gr_status status);

/* The message of the last failing call on this thread ("" if none). Never NULL. */
const char *gr_last_error(void);

/* ---- data types ------------------------------------------------------------------------- */

typedef enum gr_dtype { GR_DTYPE_F32 = 0, GR_DTYPE_F16, GR_DTYPE_I8, GR_DTYPE_U8, GR_DTYPE_I32 } gr_dtype;
/* GR_PREC_AUTO (engines only): int8 or fp16 per layer, chosen at build time for the least
 * latency whose error stays within gr_engine_options.max_nrmse (docs/calibration.md, "Automatic
 * mixed precision"). */
typedef enum gr_precision { GR_PREC_FP32 = 0, GR_PREC_FP16, GR_PREC_INT8, GR_PREC_AUTO } gr_precision;
typedef enum gr_device { GR_DEVICE_AUTO = 0, GR_DEVICE_CPU, GR_DEVICE_GPU } gr_device;

/* "fp32" / "fp16" / "int8" / "auto"; parse returns GR_ERR_INVALID_ARGUMENT for anything else. */
const char *gr_precision_name(gr_precision p);
gr_status gr_precision_parse(const char *name, gr_precision *out);

/* A dense tensor's shape: n images of c channels, h rows, w columns (NCHW order of the dims). */
typedef struct gr_tensor_desc {
    int n, c, h, w;
    gr_dtype dtype;
} gr_tensor_desc;

/* ---- models ------------------------------------------------------------------------------ */

typedef struct gr_model gr_model;

typedef struct gr_model_options {
    uint32_t struct_size;     /* sizeof(gr_model_options) as the caller knows it: see "Option
                                 structs" above */
    const char *builtin;      /* built-in model name ("yolo", "shapes", "darknet19", ...: see
                                 gr_builtin_models()), or NULL */
    const char *cfg_path;     /* Darknet .cfg; replaces the built-in cfg when both are given */
    const char *weights_path; /* Darknet .weights; NULL = the built-in model's bundled trained
                                 weights ("shapes": data/shapes.weights, an error if missing), else
                                 deterministic synthetic weights */
    uint64_t seed;            /* seed of the synthetic weights */
    int nonfinite_weights_is_error; /* 1: NaN/Inf among the loaded weights fail the load with
                                       GR_ERR_NUMERIC, naming the count and first layer; 0
                                       (default): loaded, counted in gr_model_info, and said in
                                       gr_model_notice() */
} gr_model_options;

/* Defaults (builtin "yolo", seed 1) for the first struct_size bytes of *opt, struct_size set;
 * GR_ERR_INVALID_ARGUMENT for a NULL opt or a struct_size outside the accepted range. */
gr_status gr_model_options_init(gr_model_options *opt, size_t struct_size);
static inline void gr_model_options_default(gr_model_options *opt)
{
    (void)gr_model_options_init(opt, sizeof *opt);
}

gr_status gr_model_load(const gr_model_options *opt, gr_model **out);
void gr_model_destroy(gr_model *model);

typedef struct gr_model_info {
    const char *name;       /* built-in name or cfg file name */
    int width, height, channels; /* network input */
    int n_layers;
    int n_outputs;          /* detection heads (or 1 for a network without one) */
    int classes;            /* 0 when the network has no detection head */
    int synthetic_weights;  /* 1 when weights were generated rather than loaded */
    double gflops;          /* multiply-adds x2, per image */
    size_t n_params;        /* weight count */
    size_t nonfinite_weights; /* NaN/Inf values among the weights (0 for sound weights) */
} gr_model_info;

gr_status gr_model_get_info(const gr_model *model, gr_model_info *info);

/* Notices from loading the model ("" if none), one line each: e.g. weights holding NaN/Inf.
 * Never NULL. */
const char *gr_model_notice(const gr_model *model);

/* Class label ("dog"); a built-in model has its list, a --cfg model gets "class N" unless
 * gr_model_set_class_names() gave one (a file with one name per line). */
const char *gr_model_class_name(const gr_model *model, int class_id);
gr_status gr_model_set_class_names(gr_model *model, const char *names_path);

/* NULL-terminated list of the built-in model names; the first is the default. */
const char *const *gr_builtin_models(void);

/* The path of graphrun's data file or folder `name` ("dog.jpg", "shapes.weights", "shapes-val":
 * the bundled photos, the shapes model's weights and image sets) into buf (size bytes). Found
 * relative to the library (or the program linked with the static one) wherever the installed tree
 * was moved: <prefix>/share/graphrun beside <prefix>/lib and <prefix>/bin, then the build tree's
 * data/, then the configured prefix's share/graphrun. GR_ERR_IO naming every folder tried when
 * none holds it; GR_ERR_LIMIT when the path does not fit in size bytes. */
gr_status gr_data_path(const char *name, char *buf, size_t size);

/* ---- images ------------------------------------------------------------------------------ */

/* An 8-bit interleaved (HWC) image of c channels: data holds w*h*c bytes. Plain data; free with
 * gr_image_destroy(). The decoders always produce c = 3 (RGB); a caller may build one of 1 to 4
 * channels, and each function below says which it takes (others: GR_ERR_INVALID_ARGUMENT). */
typedef struct gr_image {
    int w, h, c;
    uint8_t *data;
} gr_image;

/* JPEG (also CMYK), PNG (any depth: 16-bit keeps the high byte; alpha dropped, gamma ignored) or
 * uncompressed 24/32-bit BMP, from a regular file; always 3 channels (RGB). */
gr_status gr_image_load(const char *path, gr_image **out);
/* .png or .jpg/.jpeg by extension; 1 to 4 channels (grey, grey+alpha, RGB, RGBA). */
gr_status gr_image_write(const gr_image *im, const char *path);
void gr_image_destroy(gr_image *im);

/* Darknet letterbox to net_w x net_h: float planar CHW in [0,1], 0.5 grey fill. Takes 3-channel
 * (RGB) images only. `out` holds 3*net_w*net_h floats. For letterboxing yourself; to feed an
 * engine as `graphrun` does, gr_engine_set_image picks this or the uint8 one by device. */
gr_status gr_image_letterbox(const gr_image *im, int net_w, int net_h, float *out);

/* The same letterbox rounded to uint8 interleaved HWC (what the GPU input copy moves); 3-channel
 * images only. `out` holds 3*net_w*net_h bytes. */
gr_status gr_image_letterbox_u8(const gr_image *im, int net_w, int net_h, uint8_t *out);

/* How an image becomes the network's input (docs/darknet.md, "Preprocessing: letterbox or
 * stretch"). LETTERBOX: Darknet's letterbox_image, the aspect kept inside grey borders (what
 * pjreddie's Darknet always does, and AlexeyAB's with [net] letter_box=1 or -letter_box);
 * STRETCH: AlexeyAB's default, resize_image straight to net_w x net_h (the aspect not kept).
 * Both are Darknet's bilinear resize_image with its exact arithmetic; the detections are mapped
 * back accordingly (gr_engine_detect). LETTERBOX_114: the letterbox with Ultralytics' border
 * value 114 instead of Darknet's 0.5 (127.5 of 255), what ONNX exports of YOLOv5 / YOLOv8 /
 * YOLO11 expect (docs/onnx.md, "Preprocessing": the ONNX importer's default). AUTO, as an engine
 * option: the model's own (gr_model_preprocess). */
typedef enum gr_preprocess {
    GR_PREPROCESS_AUTO = 0,
    GR_PREPROCESS_LETTERBOX,
    GR_PREPROCESS_STRETCH,
    GR_PREPROCESS_LETTERBOX_114
} gr_preprocess;

/* "auto" / "letterbox" / "stretch" / "letterbox114"; parse returns GR_ERR_INVALID_ARGUMENT
 * otherwise. */
const char *gr_preprocess_name(gr_preprocess p);
gr_status gr_preprocess_parse(const char *name, gr_preprocess *out);

/* gr_image_letterbox and gr_image_letterbox_u8 with the preprocessing chosen: LETTERBOX or
 * STRETCH (anything else: GR_ERR_INVALID_ARGUMENT). */
gr_status gr_image_preprocess(const gr_image *im, gr_preprocess how, int net_w, int net_h,
                              float *out);
gr_status gr_image_preprocess_u8(const gr_image *im, gr_preprocess how, int net_w, int net_h,
                                 uint8_t *out);

/* The model's preprocessing, never AUTO: a cfg of AlexeyAB's Darknet (one using a key, layer or
 * activation only it reads: docs/darknet.md) STRETCH unless its [net] says letter_box=1; any
 * other cfg and the built-in pjreddie models LETTERBOX. For gr_engine_model(engine): the
 * engine's (its preprocess option applied). */
gr_preprocess gr_model_preprocess(const gr_model *model);

/* ---- detections -------------------------------------------------------------------------- */

typedef struct gr_detection {
    float left, top, right, bottom; /* pixels of the original image */
    int class_id;
    float prob;                     /* objectness x class probability */
    float objectness;
} gr_detection;

typedef struct gr_detect_options {
    uint32_t struct_size; /* sizeof(gr_detect_options) as the caller knows it ("Option structs") */
    float thresh;      /* class probability threshold; Darknet's default 0.5 */
    float hier_thresh; /* unused by region/yolo heads; kept for Darknet parity, 0.5 */
    float nms;         /* IoU threshold of the class-wise NMS; Darknet's default 0.45 */
    int image_w, image_h; /* the original image, to undo the letterbox; 0 = network size */
    gr_preprocess preprocess; /* how the input was made from that image, to undo it: AUTO
                                 (default) = the engine's (gr_model_preprocess) */
} gr_detect_options;

/* Defaults (thresh 0.5, hier_thresh 0.5, nms 0.45, image size 0) for the first struct_size
 * bytes of *opt, struct_size set; GR_ERR_INVALID_ARGUMENT for a NULL opt or a struct_size outside
 * the accepted range. */
gr_status gr_detect_options_init(gr_detect_options *opt, size_t struct_size);
static inline void gr_detect_options_default(gr_detect_options *opt)
{
    (void)gr_detect_options_init(opt, sizeof *opt);
}

/* Draw labelled boxes into the image (in place): 3 (RGB) or 4 channels (RGBA, alpha untouched). */
gr_status gr_image_draw_detections(gr_image *im, const gr_detection *dets, int n, const gr_model *model);
void gr_detections_free(gr_detection *dets);

/* ---- engines ----------------------------------------------------------------------------- */

typedef struct gr_engine gr_engine;

/* How int8 calibration turns each tensor's |x| statistics into its range (docs/calibration.md):
 * MAX the largest |x|; PERCENTILE the calib_percentile of |x|; ENTROPY the threshold of least
 * KL divergence between the clipped and the quantized distribution (TensorRT's legacy method);
 * MSE the threshold of least expected squared quantization error (clipping plus rounding). */
typedef enum gr_calib_method {
    GR_CALIB_MAX = 0,
    GR_CALIB_PERCENTILE,
    GR_CALIB_ENTROPY,
    GR_CALIB_MSE
} gr_calib_method;

/* "max" / "percentile" / "entropy" / "mse"; parse returns GR_ERR_INVALID_ARGUMENT otherwise. */
const char *gr_calib_method_name(gr_calib_method m);
gr_status gr_calib_method_parse(const char *name, gr_calib_method *out);

/* How an fp32 engine's convolutions compute (docs/tactics.md, "How each choice is made").
 * AUTO: measured per conv at build when tactic_search is on (among the algorithms below that run
 * there; kept in the timing cache), else a fixed rule: DIRECT3X3 on the narrow early 3x3 layers
 * (at most 32 input channels), TF32X3 where its grid fills the SMs, SGEMM on the rest. The others
 * force that algorithm on every conv it runs: DIRECT3X3 every 3x3 / stride 1 / pad 1 conv (the
 * rest as AUTO's rule), TF32X3 and TF32X3_IMPLICIT every conv on sm_80+ (SGEMM before sm_80).
 * With tf32 = 1 every GEMM is cuBLAS's TF32 math (SGEMM), whatever f32_algo says. */
typedef enum gr_f32_algo {
    GR_F32_ALGO_AUTO = 0,
    GR_F32_ALGO_SGEMM,           /* im2col + cuBLAS SGEMM (exact FP32) + bias/activation */
    GR_F32_ALGO_TF32X3,          /* im2col + 3xTF32 tensor-core GEMM (FP32-level), fused epilogue */
    GR_F32_ALGO_TF32X3_IMPLICIT, /* the same GEMM gathering its input: no im2col */
    GR_F32_ALGO_DIRECT3X3        /* FP32 FMAs in Darknet's order, the 2x2/2 maxpool fused */
} gr_f32_algo;

/* "auto" / "sgemm" / "tf32x3" / "implicit" / "direct3x3"; parse returns GR_ERR_INVALID_ARGUMENT
 * otherwise. */
const char *gr_f32_algo_name(gr_f32_algo algo);
gr_status gr_f32_algo_parse(const char *name, gr_f32_algo *out);

/* The nvJPEG backend of gr_engine_decode_jpegs (gr_engine_options.jpeg_decoder). */
typedef enum gr_jpeg_decoder {
    GR_JPEG_DECODER_AUTO = 0,
    GR_JPEG_DECODER_HARDWARE,   /* the GPU's JPEG engines (A100, H100: NVJPG) */
    GR_JPEG_DECODER_GPU_HYBRID  /* CUDA kernels, Huffman decoding on the GPU for large batches */
} gr_jpeg_decoder;

/* How a GPU engine runs its plan (docs/dataflow.md). GRAPH: one kernel per plan node, captured in
 * one CUDA graph. DATAFLOW: one persistent kernel for the whole network between the input and the
 * output copy, its blocks running the plan's row-band tasks as soon as their inputs exist; for
 * the nodes it supports (int8 / fp16, no micro-batching), else the engine keeps GRAPH and its
 * notice says why. AUTO: both built at the first build and timed, the faster kept (remembered in
 * the timing cache). */
typedef enum gr_executor {
    GR_EXECUTOR_GRAPH = 0,
    GR_EXECUTOR_DATAFLOW,
    GR_EXECUTOR_AUTO
} gr_executor;

/* "graph" / "dataflow" / "auto"; parse returns GR_ERR_INVALID_ARGUMENT otherwise. */
const char *gr_executor_name(gr_executor executor);
gr_status gr_executor_parse(const char *name, gr_executor *out);

/* A feature the engine may use: AUTO where graphrun's rule says it helps, ON wherever it applies,
 * OFF never. Each option says what its AUTO and ON mean. */
typedef enum gr_toggle { GR_TOGGLE_AUTO = 0, GR_TOGGLE_ON, GR_TOGGLE_OFF } gr_toggle;

/* "auto" / "on" / "off"; parse returns GR_ERR_INVALID_ARGUMENT otherwise. */
const char *gr_toggle_name(gr_toggle toggle);
gr_status gr_toggle_parse(const char *name, gr_toggle *out);

typedef struct gr_engine_options {
    uint32_t struct_size;    /* sizeof(gr_engine_options) as the caller knows it ("Option
                                structs" at the top); gr_engine_options_default() sets it */
    gr_device device;        /* AUTO: the GPU when one is visible, else the CPU reference */
    gr_precision precision;  /* FP32 default */
    int batch;               /* images per run, 1 default */
    int gpu_index;           /* CUDA device ordinal, 0 default */
    int use_cuda_graph;      /* 1 default; 0 runs the same launches eagerly on a stream */
    int tf32;                /* 1 allows TF32 in the FP32 path; 0 default = exact FP32 */
    int fp16_accumulate;     /* 1 accumulates FP16 GEMMs in FP16; 0 default = FP32 accumulation
                                (GPU only: the CPU emulation always accumulates in FP32) */
    gr_calib_method calib_method;
    float calib_percentile;  /* for GR_CALIB_PERCENTILE, e.g. 99.99 */
    const char *const *calib_images; /* NULL-terminated image paths; NULL = the bundled photos */
    const char *calib_cache; /* read if valid for this model, method and image set, written
                                otherwise; NULL = none */
    int calib_threads;       /* CPU threads calibrating in parallel (calibrating on the GPU:
                                decoding the images); 0 default = one per core */
    /* Called after each calibration image (done of total), from the calibrating threads one at
     * a time; NULL default = none. */
    void (*calib_progress)(int done, int total, void *user);
    void *calib_progress_user;
    int nonfinite_is_error;  /* 1: a synchronous run whose outputs hold NaN/Inf returns
                                GR_ERR_NUMERIC (outputs still readable); 0 default: GR_OK, ask
                                gr_engine_output_nonfinite() */
    int inflight;            /* runs that may be in flight at once, 1..GR_MAX_INFLIGHT; 1 default
                                (0 is taken as 1).
                                Each is an instance with its own activations, device io, pinned
                                host buffers, scratch, stream and captured graph; the weights are
                                shared. See "Runs in flight" below. */
    gr_device calib_device;  /* where int8 calibration runs (docs/calibration.md): AUTO default =
                                the GPU for a GPU engine, the CPU for a CPU engine; GPU = an fp32
                                GPU engine computes the statistics (any engine; needs a visible
                                GPU; calib_threads then decode the images); CPU = the planner's
                                executor on calib_threads cores. The ranges agree to ~1e-5
                                relative, not bit for bit (fp32 sums in another order). */
    /* Mixed precision (docs/calibration.md, "Mixed precision"). */
    const gr_precision *layer_precision; /* NULL default, or exactly n_layers entries
                                (gr_model_info.n_layers), one FP32 / FP16 / INT8 per network layer:
                                layer i computes in layer_precision[i] (layers without a reduced-
                                precision kernel stay fp32) and `precision` is ignored. Read during
                                build only. Not with GR_PREC_AUTO. */
    int n_layer_precision;
    float max_nrmse;         /* GR_PREC_AUTO: the error budget, max over the calibration images
                                (up to 16) and outputs of the output NRMSE against fp32;
                                GR_MAX_NRMSE_DEFAULT default. The chosen map is in
                                gr_engine_notice() and gr_engine_layer_precision(). */
    int tactic_search;       /* GPU: time each tensor-core (fp16/int8) conv's candidate tactics
                                (tile shape x split-K) on its real shape at build and keep the
                                fastest that passes a numerics check (int8: bit-identical to the
                                automatic tactic; fp16: NRMSE <= 1e-3); fp32 convs with f32_algo
                                AUTO: their algorithm the same way (NRMSE <= 1e-5). 1 default;
                                the environment variable GR_DISABLE_TACTIC_SEARCH=1 forces it off
                                (README, "Environment variables"). See gr_engine_tactic() and
                                docs/tactics.md. */
    const char *timing_cache; /* file of measured tactics for this GPU: read at build (a missing
                                file is fine; one from another GPU, driver, CUDA or graphrun
                                version, or a corrupt one, is ignored with a notice) so that layers
                                found there are not measured again; written (atomically) when new
                                measurements were made. NULL = none. Only read during the build. */
    /* Kernel choices (docs/tactics.md, "How each choice is made"); GPU engines only. */
    gr_f32_algo f32_algo;    /* fp32 convs' algorithm; AUTO default */
    gr_toggle f32_split_k;   /* fp32 3xTF32 GEMMs split K where their last wave of blocks would
                                leave SMs idle. AUTO (default): with the automatic algorithm and
                                one run in flight (with several, the other runs fill those SMs);
                                ON: also with several, and with f32_algo TF32X3; OFF: never */
    gr_toggle pdl;           /* programmatic dependent launch of a conv right after another kernel
                                on the only stream (sm_90+): AUTO (default) and ON where it
                                applies, OFF never */
    gr_toggle gemm_tactic;   /* fp16/int8 tactic search: AUTO (default) and ON count the GEMM
                                tactic (im2col + cuBLASLt) among the candidates where it applies,
                                OFF leaves it out */
    int micro_batch;         /* GPU: run each batch as batch / micro_batch sequential sub-batches
                                of micro_batch images through the one captured graph (one launch
                                per run; the arena is sized for the sub-batch). 0 default = auto:
                                measured at build among the sub-batches of >= 32 images that
                                divide the batch (whole replays, timing cache), else the whole
                                batch; N > 0 forces sub-batches of N images, must divide
                                batch, and must keep each pass 16-byte aligned (a multiple of 16
                                images always does; docs/errors.md). Outputs are bit-identical to the unsplit engine in int8
                                (docs/performance.md, "Micro-batching"). The CPU engine ignores
                                it. The choice: gr_engine_micro_batch(), gr_engine_notice(). */
    gr_jpeg_decoder jpeg_decoder; /* gr_engine_decode_jpegs' nvJPEG backend: AUTO (default) the
                                GPU's hardware JPEG decoder where it has one, else the GPU
                                hybrid one; HARDWARE / GPU_HYBRID force one (a GPU without
                                the hardware decoder: GR_ERR_UNSUPPORTED at the first call) */
    gr_executor executor;    /* GPU: GRAPH (default), DATAFLOW or AUTO (gr_executor above); the
                                choice and its reason: gr_engine_notice(). The CPU engine ignores
                                it. Not saved in engine files (a loaded engine runs GRAPH). */
    gr_preprocess preprocess; /* how images become the input (gr_engine_set_image, the GPU JPEG
                                decoder, calibration) and how gr_engine_detect maps boxes back:
                                AUTO (default) the model's (gr_model_preprocess), or LETTERBOX /
                                STRETCH. Saved in engine files. */
    int calib_max_images;    /* int8 calibration on the first N of calib_images (or of the
                                bundled photos) only: a quick calibration from a large folder.
                                0 default = every one. The calibration cache records the images
                                used, so it is reused only for the same N. */
} gr_engine_options;

/* 0.003: on the bundled trained model the map chosen within 0.003 keeps fp32's mAP; all int8
 * measured 0.006 with an int8-rounded head (docs/calibration.md, "Mixed precision"). */
#define GR_MAX_NRMSE_DEFAULT 0.003f

#define GR_MAX_INFLIGHT 8

/* Defaults (each field says its own) for the first struct_size bytes of *opt, struct_size set;
 * GR_ERR_INVALID_ARGUMENT for a NULL opt or a struct_size outside the accepted range. */
gr_status gr_engine_options_init(gr_engine_options *opt, size_t struct_size);
static inline void gr_engine_options_default(gr_engine_options *opt)
{
    (void)gr_engine_options_init(opt, sizeof *opt);
}

/* opt may be NULL (every default); otherwise its struct_size is checked as above. */
gr_status gr_engine_build(const gr_model *model, const gr_engine_options *opt, gr_engine **out);
void gr_engine_destroy(gr_engine *engine);

/* The engine's network as a model, for gr_model_class_name, gr_model_get_info and
 * gr_image_draw_detections: valid while the engine lives; never pass it to gr_model_destroy. */
const gr_model *gr_engine_model(const gr_engine *engine);

/* The device the engine actually runs on (AUTO resolved), and its name ("NVIDIA H100 80GB HBM3",
 * "CPU reference"). */
gr_device gr_engine_device(const gr_engine *engine);
const char *gr_engine_device_name(const gr_engine *engine);

/* Input: batch x 3 x net_h x net_w. Outputs: one per detection head, raw conv output (float NCHW). */
gr_status gr_engine_input_desc(const gr_engine *engine, gr_tensor_desc *desc);
int gr_engine_output_count(const gr_engine *engine);
gr_status gr_engine_output_desc(const gr_engine *engine, int index, gr_tensor_desc *desc);

/* ---- images in, as `graphrun` does ----
 * gr_engine_set_image: `im` (3-channel RGB, from gr_image_load or your own pixels) letterboxed
 * or stretched (the engine's preprocess option: gr_model_preprocess(gr_engine_model(engine))) to
 * the network's size into image `batch_index` of slot `slot`'s input buffer (slot 0 is what
 * gr_engine_run reads), in the engine's image input type, which it also makes the type the next
 * run or submit reads: on the CPU Darknet's exact float letterbox (gr_image_letterbox), on the
 * GPU the same rounded to uint8 (gr_image_letterbox_u8: the input copy moves 4x fewer bytes, and
 * int8 calibration sees the same bytes). The `graphrun` CLI and the Python package feed images
 * this way, so the same image gives the same input tensor, and the same detections, through all
 * of them. Set every image of the batch (others keep what the buffer held), then
 * gr_engine_run(engine) or gr_engine_submit(engine, slot); map boxes back with
 * gr_detect_options.image_w/image_h = im->w/im->h. GR_ERR_STATE while the slot is in flight.
 *
 *     gr_engine_set_image(engine, 0, 0, image);
 *     gr_engine_run(engine);
 *
 * gr_engine_letterbox: the same preprocessing into `dst`, one image's part of a buffer from
 * gr_engine_slot_input(engine, slot, gr_engine_image_u8(engine), ...) - for programs that
 * letterbox on threads of their own: it only reads the engine's size and device, so any thread may
 * call it, also while the engine runs another slot. gr_engine_image_u8: 1 when the image input
 * type is uint8 HWC (GPU engines), 0 for float CHW (CPU engines and NULL).
 * gr_engine_run_f32, gr_engine_run_u8, gr_engine_input_buffer and gr_image_letterbox(_u8) below
 * are for callers who prepare the input themselves (your own letterbox, tensors, a fixed type). */
gr_status gr_engine_set_image(gr_engine *engine, int slot, int batch_index, const gr_image *im);
gr_status gr_engine_letterbox(const gr_engine *engine, const gr_image *im, void *dst);
int gr_engine_image_u8(const gr_engine *engine);

/* Run on float planar CHW input in [0,1] (batch images back to back). Synchronous. */
gr_status gr_engine_run_f32(gr_engine *engine, const float *input);
/* Run on letterboxed uint8 interleaved HWC input (batch images back to back). Synchronous. */
gr_status gr_engine_run_u8(gr_engine *engine, const uint8_t *input);

/* Zero-copy input: the engine's own input buffer (pinned host memory on the GPU), of the
 * engine's input type: uint8 HWC when `u8` is 1, float CHW otherwise; batch images back to back.
 * Write the input there, then call gr_engine_run(). *bytes receives its size. */
gr_status gr_engine_input_buffer(gr_engine *engine, int u8, void **buffer, size_t *bytes);
/* Run on what is in the input buffer (of the type last asked for with gr_engine_input_buffer;
 * uint8 by default). Synchronous; on the GPU exactly one graph launch and one synchronization. */
gr_status gr_engine_run(gr_engine *engine);

/* Raw output `index` of the last run: float NCHW, valid until the next run or destroy. */
gr_status gr_engine_output(const gr_engine *engine, int index, const float **data);

/* Number of non-finite values (NaN, +-Inf) in raw output `index` of the last run, in *count. A
 * scan of the host copy of the output (small next to a run). Non-zero is almost always fp16
 * overflow (activations above 65504): fp32 or int8 avoid it. */
gr_status gr_engine_output_nonfinite(const gr_engine *engine, int index, size_t *count);

/* Decode the detection heads of the last run for image `batch_index`: region/yolo activation,
 * boxes, thresholds and class-wise NMS, mapped back to opt->image_w x image_h. */
gr_status gr_engine_detect(const gr_engine *engine, int batch_index, const gr_detect_options *opt,
                           gr_detection **dets, int *n);

/* Notices from building the engine ("" if none), one line each: e.g. a calibration cache in an
 * old format that was ignored and rewritten. Never NULL. */
const char *gr_engine_notice(const gr_engine *engine);

/* The engine's own last error message ("" if none). */
const char *gr_engine_last_error(const gr_engine *engine);

/* Number of CUDA devices visible (0 without a GPU or driver). Never fails. */
int gr_cuda_device_count(void);

/* ==== group 2: many images: runs in flight, streams, JPEG decoding, pools, folders ============
 * For throughput over many images: several runs in flight per engine (slots, each with its own
 * stream), a run on the caller's CUDA stream, detections decoded on other threads, JPEG files
 * decoded on the GPU, pools of one engine per GPU (gr_pool_*) and the folder pipeline
 * (gr_pool_detect_files, gr_files_*: what `graphrun --input DIR` and the Python package's
 * detect_files run). A program that runs one batch at a time needs none of it. */

/* Asynchronous run on the caller's CUDA stream (a cudaStream_t passed as void *; NULL = the
 * engine's own stream). The input buffer must be filled and must not be touched until `done_event`
 * (a cudaEvent_t the caller created, or NULL) has completed; outputs are valid after it. GPU only.
 * gr_engine_output/gr_engine_detect must not be called before the event completes. */
gr_status gr_engine_run_async(gr_engine *engine, void *cuda_stream, void *done_event);

/* ---- runs in flight ----
 * An engine built with inflight = N has N slots (0..N-1), each an instance of the engine with its
 * own input buffer, outputs and, on the GPU, its own stream and captured graph (weights shared),
 * so the input copy and compute of one slot overlap those of the others:
 *
 *     for (i = 0; i < count; i++) {
 *         int slot = i % N;
 *         if (i >= N) { gr_engine_wait(e, slot); ...read outputs of run i - N... }
 *         gr_engine_slot_input(e, slot, 1, &buf, &bytes); ...write input i...
 *         gr_engine_submit(e, slot);
 *     }
 *     ...then wait for the last min(count, N) slots in order...
 *
 * - gr_engine_slot_input: the slot's input buffer (as gr_engine_input_buffer; it also sets the
 *   input type the next submits read). Do not write it while the slot is in flight.
 * - gr_engine_submit: start a run of the slot on its input buffer and return (on the GPU: one
 *   graph launch on the slot's stream; the CPU backend runs it to the end before returning).
 *   GR_ERR_STATE if the slot is in flight already (wait for it first).
 * - gr_engine_wait: block until the slot's run is done. Afterwards gr_engine_output,
 *   gr_engine_output_nonfinite, gr_engine_detect and gr_engine_timing read that run (and with
 *   nonfinite_is_error a run with NaN/Inf returns GR_ERR_NUMERIC here); its outputs stay valid
 *   until the slot is submitted again or the engine destroyed. GR_ERR_STATE if nothing was
 *   submitted on the slot.
 * - A slot number outside 0..inflight-1 is GR_ERR_INVALID_ARGUMENT. The thread rule is
 *   unchanged: one thread at a time per engine, submit and wait included.
 * - gr_engine_run* and gr_engine_input_buffer are slot 0 (a synchronous run is GR_ERR_STATE
 *   while slot 0 is in flight); gr_engine_run_async uses slot 0's graph. Results equal a serial
 *   run's, bit for bit. */
gr_status gr_engine_slot_input(gr_engine *engine, int slot, int u8, void **buffer, size_t *bytes);
gr_status gr_engine_submit(gr_engine *engine, int slot);
gr_status gr_engine_wait(gr_engine *engine, int slot);

/* JPEG files decoded on the GPU, for callers who would otherwise decode and letterbox on the CPU
 * into a slot's input buffer (the folder mode's --decode gpu does this).
 * - gr_engine_decode_jpegs: image i < n of slot `slot`'s next run from the JPEG file's bytes
 *   jpeg[i] (bytes[i] long), decoded (nvJPEG: the GPU's hardware JPEG decoder where it has one)
 *   and letterboxed on the engine's GPU straight into the run's device input; or, where jpeg[i]
 *   is NULL, from the slot's uint8 input buffer as the caller filled it (gr_engine_slot_input,
 *   gr_engine_letterbox). decoded[i] = 1 for an image decoded on the GPU, 0 for one it did not
 *   take (NULL given, a file the GPU decoder does not handle - progressive, CMYK, 4:1:1,
 *   greyscale, not a JPEG - or one it failed on): the caller fills those images' part of the
 *   input buffer before gr_engine_submit(slot), which then copies only those (and the images
 *   >= n) from the buffer. The letterbox is gr_engine_letterbox's, byte for byte on the same
 *   pixels; the decoded pixels may differ from libjpeg-turbo's within what the JPEG standard
 *   allows (docs/performance.md, "JPEG decoding on the GPU"). The file bytes may be reused once
 *   the call returns. The engine's input type must be uint8 (gr_engine_slot_input(engine, slot,
 *   1, ...) first). Threads: like writing a slot's input buffer, a call for a slot that is not
 *   in flight may come from another thread than the one submitting (the folder mode's decoding
 *   threads do this); one thread per slot at a time. Errors: GR_ERR_UNSUPPORTED on a CPU engine
 *   or in a build without nvJPEG, GR_ERR_STATE while the slot is in flight or with float input,
 *   GR_ERR_CUDA / GR_ERR_OUT_OF_MEMORY from the device; a file it cannot decode is never an
 *   error here.
 * - gr_engine_jpeg_decoder: "nvJPEG hardware decoder" or "nvJPEG GPU hybrid decoder" once a
 *   gr_engine_decode_jpegs call opened it, else NULL; *decode_us (may be NULL): the device time
 *   the decoding and letterbox of the run last waited for took, from before the decoder's first
 *   work on the slot's stream to after the letterbox (0 when that run decoded nothing). */
gr_status gr_engine_decode_jpegs(gr_engine *engine, int slot, int n, const uint8_t *const *jpeg,
                                 const size_t *bytes, int *decoded);
const char *gr_engine_jpeg_decoder(const gr_engine *engine, double *decode_us);
/* Number of slots (the inflight option); 0 for NULL. */
int gr_engine_inflight(const gr_engine *engine);

/* gr_engine_detect on outputs kept from a run: outputs[k] = what gr_engine_output(engine, k)
 * gave after that run's gr_engine_wait (valid until its slot is submitted again). It reads
 * nothing a run changes, so any number of threads may call it at once, also while one thread
 * submits and waits on the engine's other slots: the one exception to the one-thread rule. */
gr_status gr_engine_detect_outputs(const gr_engine *engine, const float *const *outputs,
                                   int batch_index, const gr_detect_options *opt,
                                   gr_detection **dets, int *n);
/* An ONNX model whose detection head runs on the host after the engine's layers (docs/onnx.md,
 * "Detection heads": the engine's outputs are then the layers the head reads): the graph's own
 * output for image `batch_index` of `outputs` (as gr_engine_detect_outputs reads them), e.g.
 * [1, 4 + classes, boxes]. *data: malloc'd floats (free() them), row major; dims[0..*n_dims)
 * (dims holds 8). GR_ERR_UNSUPPORTED for a model without such a head. */
gr_status gr_engine_graph_output(const gr_engine *engine, const float *const *outputs,
                                 int batch_index, float **data, int64_t *dims, int *n_dims);

/* ---- pools: one engine per device ----
 * A pool holds one engine per device of a host, for spreading batches over every GPU of one
 * process. gr_pool_build builds the engine of the first device (calibration and the tactic search
 * happen there, once), then makes each other device's engine from it as a saved engine does
 * (gr_engine_save_to_memory, gr_engine_load_from_memory with gpu_index = that device): its
 * weights uploaded to that GPU, the tactics shared, nothing calibrated or searched again. A GPU
 * whose identity differs from the first's (another model, SM count, driver: the saved-engine
 * check) gets an engine built for it, said in gr_pool_notice(). Each engine is an ordinary
 * engine: callers submit and wait on its slots (runs in flight) as on any other.
 *
 * - devices: CUDA ordinals, n_devices of them (1..GR_MAX_DEVICES, each once, each visible), or
 *   devices NULL and n_devices 0: every visible GPU. opt->gpu_index is ignored (the list says).
 *   A pool on the CPU (opt->device CPU, or AUTO without a visible GPU) has one device, the CPU
 *   reference: its list is empty or {0}. Refusals are one line naming the list entry:
 *   GR_ERR_INVALID_ARGUMENT (a duplicate, a negative ordinal, too many, more than one on the
 *   CPU), GR_ERR_NO_DEVICE (an ordinal past the visible count, or no GPU at all).
 * - gr_pool_load: the same from a saved engine file (every device loads it; none is rebuilt).
 * - gr_pool_engine(pool, k): engine k (0 <= k < gr_pool_devices), borrowed: valid until
 *   gr_pool_destroy, never passed to gr_engine_destroy. gr_pool_device(pool, k): its CUDA
 *   ordinal (-1 on the CPU).
 * - Threads: each engine keeps the one-thread-at-a-time rule, so a pool is driven either by one
 *   thread for the whole pool (submit on each engine in turn, wait in submission order: the
 *   `graphrun` CLI does this), or by one thread per engine. Build and destroy from one thread,
 *   with no other thread inside the pool's engines. gr_pool_destroy waits for runs in flight. */
#define GR_MAX_DEVICES 16

typedef struct gr_pool gr_pool;

gr_status gr_pool_build(const gr_model *model, const gr_engine_options *opt, const int *devices,
                        int n_devices, gr_pool **out);
gr_status gr_pool_load(const char *path, const gr_engine_options *opt, const int *devices,
                       int n_devices, gr_pool **out);
void gr_pool_destroy(gr_pool *pool);
int gr_pool_devices(const gr_pool *pool);                 /* 0 for NULL */
gr_engine *gr_pool_engine(const gr_pool *pool, int index); /* NULL outside 0..devices-1 */
int gr_pool_device(const gr_pool *pool, int index);       /* CUDA ordinal, -1: CPU or bad index */
/* What the pool's build did beyond its engines' own notices ("" if nothing), one line each:
 * e.g. a GPU unlike the first, built separately. Never NULL. */
const char *gr_pool_notice(const gr_pool *pool);
/* A pool of engines the caller built or loaded, for the pool calls (one engine is a pool of one:
 * the Python package's Engine.detect_files runs so). The engines are borrowed: gr_pool_destroy
 * leaves them, and the caller destroys them after the pool. They must be one engine on n devices:
 * the same input (batch, channels, size, input type) and outputs; each given once, n in
 * 1..GR_MAX_DEVICES. GR_ERR_INVALID_ARGUMENT naming the first engine that differs. */
gr_status gr_pool_wrap(gr_engine *const *engines, int n, gr_pool **out);
/* Every slot of every engine of the pool made ready for JPEG decoding on the GPU: its input type
 * uint8 and its decoder opened (gr_engine_decode_jpegs with no image; opening a hardware decoder
 * takes milliseconds). GR_OK, or the first failure, its message as gr_engine_decode_jpegs gives
 * it: GR_ERR_UNSUPPORTED on a CPU engine, in a build without nvJPEG or for a backend the GPU
 * lacks, GR_ERR_CUDA / GR_ERR_OUT_OF_MEMORY from the device. gr_pool_detect_files does this
 * itself; call it first to have the decoders open before a clock starts, or to tell a failing
 * decoder from the other failures of a run. */
gr_status gr_pool_open_jpeg_decoders(gr_pool *pool);

/* ---- image files to detections: the folder pipeline ----
 * gr_pool_detect_files runs a pool over image files as `graphrun --input DIR` does, and gives
 * each file's detections to a callback, in input order, on the calling thread:
 *
 *   - The engines' slots (runs in flight) are the batch buffers: buffer k is slot k / D of engine
 *     k % D (D = gr_pool_devices), so batch k (images k*batch ...) runs on engine k % D: round
 *     robin over the devices, then over each one's slots (until a device fails: below).
 *   - opt->threads worker threads claim the images in order and decode and letterbox each
 *     straight into its batch's buffer (gr_engine_letterbox; one reusable reader per thread).
 *   - The calling thread submits each batch once it is filled, waits for the runs in submission
 *     order and has each finished batch reported: every image's NaN/Inf values counted, its
 *     detections decoded (gr_engine_detect_outputs with opt->thresh and opt->nms, boxes in the
 *     file's pixels) and opt->prepare called, by whichever threads are free (the workers between
 *     images, and the calling thread). Then cb gets each result in input order.
 *   So reading and decoding the next batches, the runs and the reporting of the last batch
 *   overlap; a worker waits only when it is every buffer ahead of the results.
 *
 * Per image, in the result:
 *   - A file that cannot be read or decoded (missing, not a regular file - a FIFO, a directory, a
 *     device -, larger than the image file limit, corrupt, not JPEG/PNG/BMP): failure
 *     GR_FILE_FAILED_READ with gr_image_load's one-line message (starting with the path); its
 *     place in the batch runs grey (the letterbox's border). The other files go on.
 *   - A batch whose GPU decoding, submit, run or outputs fail: every image of it gets
 *     GR_FILE_FAILED_RUN with that status and message (the GPU decoder's prefixed "JPEG decoding
 *     on the GPU: "); detections that cannot be decoded: GR_FILE_FAILED_DETECT. The run goes on
 *     unless cb stops it (the CLI stops there; Python makes them records).
 *   - NaN/Inf among the image's outputs: their count in nonfinite, and no detections (error
 *     stays NULL: say it as the caller sees fit).
 *
 * A device that fails: an engine whose submit, run (wait), outputs or GPU decoding fails with a
 * device-level status (GR_ERR_CUDA, GR_ERR_CUBLAS, GR_ERR_NO_DEVICE, GR_ERR_STATE: its device or
 * context is gone) runs nothing more in this call. The failing batch and those submitted on it
 * (its runs in flight) are lost: each image GR_FILE_FAILED_DEVICE with "device K (gpu N) failed:
 * <why>" (K its gr_pool_engine index; a file's own read failure still comes first). Batches
 * decoded (or being decoded) into its slots' buffers but not submitted are copied into another
 * engine's buffer once one is free and run there (the only copy the pipeline makes, and only
 * after a failure); its buffers take no further batch. So every later batch runs on the other
 * engines, results in input order as always, each the same as without the failure. With no
 * engine left, every image not yet bound to one gets GR_FILE_FAILED_DEVICE "not run: no device
 * left (<the first failure>)" without being read, and the call returns GR_OK (a source,
 * files.h, ends there instead: its call returns the failure's status). A batch's own failure
 * (NaN/Inf, memory, its input) fails that batch only. gr_files_stats says how many devices
 * failed, the first and why, the files lost and the batches moved. Test hook (not a user
 * feature): the environment variable GR_TEST_FAIL_ENGINE=K:N, read once per call, makes engine
 * K's N-th run fail as a lost device would (GR_ERR_CUDA "injected failure ..."); a value other
 * than K:N is GR_ERR_INVALID_ARGUMENT.
 *
 * Options (gr_files_options, "Option structs" above; opt NULL: every default):
 *   - decode: CPU decodes with libjpeg-turbo (libpng, BMP) on the workers: the network input is
 *     Darknet's exactly. GPU: the workers only read each JPEG and walk its markers; the worker
 *     that completes a batch hands its files to the slot's decoder (gr_engine_decode_jpegs) and
 *     decodes on the CPU those it does not take (progressive, greyscale, CMYK, damaged: the same
 *     result, error included, as CPU decoding); PNG and BMP are decoded on the CPU. AUTO (the
 *     default): GPU where every slot's decoder opens (a GPU engine of a build with nvJPEG) and
 *     fast_decode is off, else CPU. GPU where it cannot be: GR_ERR_UNSUPPORTED (a CPU engine),
 *     GR_ERR_INVALID_ARGUMENT (fast_decode), or the decoder's failure
 *     (gr_pool_open_jpeg_decoders).
 *   - fast_decode: JPEGs at least twice the network input decoded at libjpeg-turbo's DCT scale
 *     (1/2, 1/4, 1/8) that keeps them at least that size, letterboxed where the file's size puts
 *     them: faster on large photos, not Darknet's exact input (docs/performance.md, "JPEG
 *     decoding on the CPU": the accuracy cost); boxes are still in the file's pixels.
 *   - jsonl: each result carries its JSON Lines record (gr_file_result.jsonl), made where its
 *     detections are decoded (by whichever threads are free, several at once), so the calling
 *     thread only passes text on. The CLI's lines come from the same function (runtime/jsonl.c):
 *     a caller writing these gets `graphrun --input-list`'s bytes. A failed run or detection
 *     decoding, where the CLI stops, is an {"input", "error"} record here. class_names and
 *     n_class_names name the classes where the engine's own names are not the caller's (the
 *     Python package's Engine.load(names=...)): read once per call, not per image.
 *
 * Returns GR_OK when every image was delivered or cb stopped the run; nothing is in flight on
 * the engines then (the pool may run again). Before any image: GR_ERR_INVALID_ARGUMENT (NULL
 * pool, paths, a path or cb, n < 0, bad options, stats->struct_size 0, a network that does not
 * take 3 channels), GR_ERR_OUT_OF_MEMORY, the
 * decoder's failure (decode GPU), GR_ERR_STATE when no worker thread starts. n = 0: GR_OK, no
 * call of cb.
 * Threads: cb and opt->started run on the calling thread; opt->prepare on any of the pipeline's
 * threads, several at once, in any order (an image's prepare comes after its batch's run and
 * before its cb). No other thread may use the pool's engines during the call. A result and what
 * it points to are valid during the call that gets it.
 * Memory between prepare and cb: at most buffers x batch images (gr_files_stats) are between
 * being claimed and delivered, so an array of that many entries indexed by index % (buffers x
 * batch) can carry what prepare leaves for cb.
 * stats (may be NULL; struct_size set by the caller, no byte past it written): the setup fields
 * are filled before opt->started, the rest when the call returns. */
typedef enum gr_files_decode {
    GR_FILES_DECODE_AUTO = 0,
    GR_FILES_DECODE_CPU,
    GR_FILES_DECODE_GPU
} gr_files_decode;

typedef enum gr_file_failure {
    GR_FILE_OK = 0,           /* detections (none when nonfinite > 0) */
    GR_FILE_FAILED_READ,      /* the file could not be read or decoded */
    GR_FILE_FAILED_RUN,       /* its batch's GPU decoding, submit, run or outputs failed */
    GR_FILE_FAILED_DETECT,    /* its detections could not be decoded */
    GR_FILE_FAILED_DEVICE     /* its batch was bound to a device that failed ("A device that
                                 fails" above): not run, or its run lost */
} gr_file_failure;

typedef struct gr_file_result {
    const char *path;         /* paths[index] */
    int index;                /* its position in paths, from 0 */
    int width, height;        /* the image in its file (boxes are in its pixels); 0 when it was
                                 not read */
    gr_file_failure failure;
    gr_status status;         /* GR_OK, or the failure's */
    const char *error;        /* the failure's one-line message, NULL without a failure */
    size_t nonfinite;         /* NaN/Inf values in the image's part of the outputs */
    const gr_detection *detections; /* n_detections boxes */
    int n_detections;
    int batch_end;            /* 1 for the last image of its batch (cb: a place to flush) */
    /* With opt->jsonl: the image's JSON Lines record, the bytes `graphrun --input DIR` writes
     * for it (README, "Result formats"), newline included: jsonl_len bytes, NUL-terminated
     * after them. {"input", "width", "height", "detections": [{"class", "class_id", "prob",
     * "objectness", "left", "top", "right", "bottom"}]}: prob and objectness printed %.6f, the box
     * %.1f, "input" the path as a JSON string (bytes that are not UTF-8 as U+FFFD); any failure
     * {"input", "error": its message}; NaN/Inf outputs {"input", "width", "height", "error",
     * "nonfinite"}. Made on the pipeline's threads before prepare. NULL (and 0) without
     * opt->jsonl, or where no memory was left for it. */
    const char *jsonl;
    size_t jsonl_len;
} gr_file_result;

typedef struct gr_files_stats gr_files_stats;

/* cb: non-zero stops the run (no further result; the runs in flight are waited for). */
typedef int (*gr_file_fn)(void *user, const gr_file_result *result);
typedef void (*gr_file_prepare_fn)(void *user, const gr_file_result *result);
typedef void (*gr_files_started_fn)(void *user, const gr_files_stats *stats);

typedef struct gr_files_options {
    uint32_t struct_size;     /* sizeof(gr_files_options) as the caller knows it ("Option
                                 structs") */
    int threads;              /* worker threads; 0 default: one per core this process may run on
                                 (its CPU affinity mask: a container's cpuset); at most n */
    float thresh;             /* class probability threshold, 0.5 default */
    float nms;                /* IoU threshold of the class-wise NMS, 0.45 default */
    gr_files_decode decode;   /* AUTO default */
    int fast_decode;          /* 1: large JPEGs decoded DCT-scaled (CPU decoding); 0 default */
    /* Called with cb's user for every image, whatever its failure, on any pipeline thread
     * ("Threads" above): for per-image work that may run in parallel (the CLI formats its record
     * and draws --output images here). NULL default. */
    gr_file_prepare_fn prepare;
    /* Called with cb's user once the pipeline is set up (buffers, decoder, threads decided),
     * before the first image is read, on the calling thread: for saying what will run. NULL
     * default. */
    gr_files_started_fn started;
    /* 1: every result carries its JSON Lines record (gr_file_result.jsonl), formatted by the
     * pipeline's threads with the detections, so a caller that writes or parses JSON need not
     * format it on its own thread (the Python package's detect_files). 0 default. */
    int jsonl;
    /* The lines' class names: class_names[0 .. n_class_names - 1] (read during the call; an id
     * outside them is "class N"). NULL default: the engine's own (gr_engine_model). */
    const char *const *class_names;
    int n_class_names;
} gr_files_options;

/* Defaults (as each field says) for the first struct_size bytes of *opt, struct_size set;
 * GR_ERR_INVALID_ARGUMENT for a NULL opt or a struct_size outside the accepted range. */
gr_status gr_files_options_init(gr_files_options *opt, size_t struct_size);
static inline void gr_files_options_default(gr_files_options *opt)
{
    (void)gr_files_options_init(opt, sizeof *opt);
}

/* Where a run's time went (seconds), to tell what bounds it: `graphrun --input DIR` prints these
 * (README, "Many images"). */
struct gr_files_stats {
    uint32_t struct_size;     /* the caller's sizeof(gr_files_stats): no byte past it is written */
    /* The setup, filled before opt->started. */
    int images;               /* n */
    int batch;                /* images per batch: the engines' batch */
    int buffers;              /* batch buffers: every engine's slots */
    int devices;              /* the pool's engines */
    int threads;              /* worker threads to start (at the end: those that started) */
    int cores;                /* cores this process may run on */
    int gpu_decode;           /* 1: JPEGs are decoded on the GPU */
    char decoder[256];        /* gpu_decode: the GPU decoder (gr_engine_jpeg_decoder); else why the
                                 CPU decodes: "decode cpu", "a CPU engine", "fast_decode", "no GPU
                                 decoder" or the decoder's own failure */
    /* The run, filled when the call returns. */
    double elapsed_s;         /* the workers' start to their end */
    double main_cpu_s;        /* the calling thread's CPU time in that span */
    double main_wait_decoded_s; /* the calling thread waiting for a filled batch */
    double main_wait_engine_s;  /* ... for the engine (gr_engine_wait) */
    double main_report_s;     /* ... from a batch's outputs to its images reported */
    double main_report_own_s; /* ... of which reporting images itself */
    double main_deliver_s;    /* ... in cb (writing, for the CLI) */
    double main_deliver_cpu_s; /* its CPU time from batches' outputs to their results delivered */
    double workers_blocked_s; /* the workers waiting for a free batch buffer, summed */
    double workers_report_s;  /* the workers reporting images, summed */
    double read_s, decode_s, letterbox_s; /* busy time of the workers' stages, summed: stat and
                                 file read, decode, letterbox */
    double engine_s;          /* the engines' own time split of every run (gr_engine_timing:
                                 conversion, copies, compute), summed over the devices */
    double gpu_decode_s;      /* GPU decoding: the device time of decoding and letterbox */
    double handoff_s;         /* GPU decoding: the workers handing batches to the GPU decoder and
                                 decoding on the CPU the files it did not take */
    int gpu_decoded;          /* images the GPU decoded */
    double latency_p50_s, latency_p99_s; /* per image, from its pixels in the batch buffer to its
                                 batch's results delivered (cb returned for each) */
    double setup_s;           /* from the call's entry to the workers' start (buffers, decoders) */
    double finish_s;          /* from the workers' end to the call's return */
    /* Devices that failed mid-run ("A device that fails" above). */
    int devices_failed;       /* the pool's engines that failed */
    int failed_device;        /* the first one's index in the pool (gr_pool_engine), -1: none */
    int files_lost;           /* results GR_FILE_FAILED_DEVICE */
    int batches_moved;        /* batches decoded into a failed device's buffers, not yet
                                 submitted there, copied into another's and run there */
    char failed_device_error[512]; /* the first one's failure: "device K (gpu N) failed: why" */
};

gr_status gr_pool_detect_files(gr_pool *pool, const char *const *paths, int n,
                               const gr_files_options *opt, gr_file_fn cb, void *user,
                               gr_files_stats *stats);

/* ==== group 3: saved engines and caches =======================================================
 * Engines saved to a file or to memory and loaded without calibrating or searching tactics again
 * (build once, start fast: deployment, pools). The int8 calibration cache and the timing cache are
 * gr_engine_options fields (group 1); their files follow the same rules as engine files. */

/* ---- saved engines ----
 * A saved engine (a ".grengine" file, or the same bytes in memory) holds everything a start
 * needs: the network with its weights and class names, the options that shaped the plan, the
 * precision map, the int8 ranges and, on the GPU, the tactics the build chose. Loading one
 * calibrates nothing and searches or checks no tactic (they were checked at the build, on the
 * same GPU model, driver, CUDA runtime and cuBLASLt that the load requires); it plans again and
 * uploads the weights. The loaded engine is a full engine: runs, slots,
 * detection, class names (gr_engine_model), tactic info and the build's notice.
 *
 * - gr_engine_save writes the file atomically: a new file beside it (created exclusively, under
 *   an unpredictable name), written, synced, given the replaced file's mode, then renamed over
 *   path. A symbolic link to a regular file is written through (the link stays a link); a path
 *   that exists and is not a regular file (a device such as /dev/null, a FIFO, a directory, a
 *   dangling link) is refused with GR_ERR_IO naming path. Every file graphrun writes (caches,
 *   pictures, the CLI's reports) follows the same rule (docs/errors.md, "Files").
 * - gr_engine_save_to_memory: *data is malloc'd, *bytes long; release it with gr_free().
 * - gr_engine_load / _from_memory: opt may be NULL (the options as built). From opt only the
 *   run-time fields apply: gpu_index, inflight, use_cuda_graph, nonfinite_is_error. Everything
 *   else - device, precision, batch, layer_precision, tf32, fp16_accumulate, f32_algo,
 *   f32_split_k, pdl, gemm_tactic, tactic_search, the calibration fields, timing_cache - is the
 *   file's. (An fp32 GPU engine loaded with another inflight may measure its split-K choices
 *   again, as a build with that inflight would.)
 * - Refusals, each one line naming what differs (docs/errors.md, "Saved engines"): not an engine
 *   file, truncated or checksum mismatch (GR_ERR_PARSE); another format or graphrun version, or a
 *   GPU engine on another GPU model, SM count, CUDA runtime, driver or cuBLASLt
 *   (GR_ERR_UNSUPPORTED); a GPU engine where no GPU is usable (GR_ERR_NO_DEVICE); an unreadable
 *   file, or a device (/dev/zero) (GR_ERR_IO). Content is checked as strictly as the caches':
 *   options as gr_engine_build checks them, int8 ranges 0 or within the calibration cache's
 *   bounds, every layer's inputs as its op takes them (GR_ERR_PARSE); the stored notice is shown
 *   with control characters as '?'. A CPU engine file loads on any machine.
 * - gr_engine_load maps a regular file and the engine keeps it mapped until gr_engine_destroy:
 *   its network's fp32 weights are the file's bytes, not a copy (read again to save the engine
 *   and to plan a variant the file holds no device weights for). Replacing the file by rename
 *   (as gr_engine_save does; mv, install) or deleting it is safe while the engine lives.
 *   Rewriting it in place (cp onto it, truncating it) is an error, not a crash: the engine keeps
 *   the file open and its size and modification time, and the load (after the checksum), every
 *   run and a save check them; a changed file fails with GR_ERR_IO ("rewritten in place") and
 *   leaves the engine unusable (load the file again). A touch, or the identical bytes copied
 *   over it, is no change (the file is hashed again when its mtime moves). Limits: a rewrite
 *   within the clock tick of the previous write keeping the size is not seen, nor one that
 *   restores the mtime, and a truncation during a run (CPU) can still end the process with
 *   SIGBUS: deploy by rename.
 *   gr_engine_load_from_memory copies: the buffer may be freed as soon as it returns.
 * - Saving reads the engine like a run does: not while another thread runs it. */
gr_status gr_engine_save(const gr_engine *engine, const char *path);
gr_status gr_engine_save_to_memory(const gr_engine *engine, void **data, size_t *bytes);
gr_status gr_engine_load(const char *path, const gr_engine_options *opt, gr_engine **out);
gr_status gr_engine_load_from_memory(const void *data, size_t bytes, const gr_engine_options *opt,
                                     gr_engine **out);
/* Free memory graphrun allocated for the caller (gr_engine_save_to_memory's buffer). */
void gr_free(void *p);

/* ==== group 4: introspection and measurement ==================================================
 * What a built engine chose and what it costs: its precision map, micro-batch, memory, the time
 * split of the last run, the convolution tactics, the build's times, per-node times and the
 * roofline table. For reports (the CLI's plan, bench and roofline output), tuning and tests; no
 * run needs any of it. */

/* Images per pass of the engine's graph (the micro_batch option, or the measured choice): the
 * batch when runs are not split, else a divisor of it; 0 for NULL. */
int gr_engine_micro_batch(const gr_engine *engine);

/* Memory the engine runs from: device memory on the GPU, host memory on the CPU (its arena
 * figure there is the reference executor's peak of live activations). The per-instance figures
 * are for the current input type (uint8 unless float input was asked for); total counts
 * everything allocated, both input types and every instance included. */
typedef struct gr_engine_memory_info {
    int inflight;                    /* instances */
    size_t weights_bytes;            /* shared by every instance, never duplicated */
    size_t cublas_workspace_bytes;   /* every cuBLAS workspace (GPU plans with f32 convs or
                                        [connected] layers): one per stream
                                        for the engine (slot 0, eager runs), and one per stream for
                                        each slot >= 1, whose graph runs beside the others */
    size_t arena_bytes;              /* per instance: activations */
    size_t workspace_bytes;          /* per instance: im2col, split-K and GEMM-tactic scratch */
    size_t io_bytes;                 /* per instance: device input + outputs (CPU: the slot's host
                                        input buffers and outputs) */
    size_t pinned_bytes;             /* per instance: pinned host input + outputs (GPU only) */
    size_t total_bytes;              /* device (GPU) or host (CPU) bytes of all of the above,
                                        every instance and input type; pinned memory not included */
} gr_engine_memory_info;

gr_status gr_engine_memory(const gr_engine *engine, gr_engine_memory_info *info);

/* Time split of the last run (microseconds). Type conversion = input quantize/convert plus output
 * dequantize; copies = H2D + D2H; compute = every layer. end_to_end = the whole run as the caller
 * sees it. On the CPU the copies are 0. */
typedef struct gr_timing {
    double convert_us, copy_us, compute_us, end_to_end_us;
} gr_timing;

gr_status gr_engine_timing(const gr_engine *engine, gr_timing *timing);

/* ---- convolution tactics (GPU engines) ----
 * The tactic of each tensor-core convolution of the engine's uint8-input graph, in plan order
 * (fp32 engines, CPU engines and convs without a choice - the first layer - have none; fp32
 * convs' measured algorithms are counted in gr_tactic_stats and kept in the timing cache). */
typedef struct gr_tactic_info {
    int layer;           /* Darknet layer index */
    int tile_config;     /* 0 = the kernels' automatic choice, else a tile shape (see name) */
    int split_k;         /* 0 = automatic, 1 = no split, n = the K range cut into n parts */
    int gemm;            /* 1: the GEMM tactic instead (im2col + cuBLASLt matmul + the same
                            epilogue); tile_config and split_k are then 0 */
    char name[32];       /* "auto", "128x64", "64x64 split 4", "gemm (cuBLASLt)" */
    double us;           /* median measured time of the chosen tactic (microseconds; from the
                            timing cache when cached; 0 when not searched) */
    double auto_us;      /* the same for the automatic tactic */
    int candidates;      /* candidates timed at this build; 0 when taken from the timing cache */
    int batch;           /* images us and auto_us were measured on: the representative
                            sub-batch the search times a conv with (docs/tactics.md), at most
                            the engine's batch (or micro-batch) */
} gr_tactic_info;

typedef struct gr_tactic_stats {
    int convs;           /* convs with a tactic choice, every variant built: tensor-core
                            convs, and fp32 convs whose algorithm is measured (f32_algo AUTO) */
    int searched;        /* of them, decided by measuring at this build */
    int cached;          /* of them, taken from the timing cache (checked, not timed) */
    int candidates;      /* candidate tactics timed in all */
    int rejected;        /* candidates whose output failed the numerics check (not timed) */
    double search_ms;    /* host time spent choosing tactics */
    int cut;             /* candidates dropped after one timed launch (> 1.5x the best so far) */
} gr_tactic_stats;

/* Where the engine's build went (host clock, milliseconds), for every variant built so far
 * (the micro-batch candidates' builds included). A CPU engine has resolve_ms and total_ms only. */
typedef struct gr_build_times {
    double resolve_ms;     /* int8 calibration (or its cache) and the precision map */
    double plan_ms;        /* planning, the fusion retries included */
    double weights_ms;     /* weights into the kernels' layouts and uploaded */
    double tactic_ms;      /* the tactic search (gr_tactic_stats.search_ms) */
    double micro_batch_ms; /* timing the micro-batch candidates' graphs (their builds are in the
                              other fields) */
    double capture_ms;     /* the warm-up / time-split runs and the graph captures */
    double total_ms;       /* the whole gr_engine_build (the automatic precision search too) */
} gr_build_times;
gr_status gr_engine_build_times(const gr_engine *engine, gr_build_times *times);

/* The GPU engine's per-node times (the uint8 graph's plan nodes that launch work, in schedule
 * order), measured at build by its eager time-split runs: CUDA events around each node, median of
 * 3 runs, a whole batch (every micro-batch pass). Eager with events between the nodes, so a node
 * may read a little slower than inside the graph; for comparing layers and builds. None on the
 * CPU. */
typedef struct gr_node_time {
    int layer;           /* Darknet layer index (-1: a conversion the planner inserted) */
    char kind[24];       /* "conv", "maxpool", "quantize", ... (the plan's node kind) */
    double us;           /* median microseconds */
} gr_node_time;
int gr_engine_node_time_count(const gr_engine *engine); /* 0 for NULL */
gr_status gr_engine_node_time(const gr_engine *engine, int index, gr_node_time *time);

/* ---- the roofline table (docs/performance.md, "Roofline") ----
 * Per plan node of a GPU engine (its uint8-input graph): the FLOPs and the bytes that must move
 * at the node's dtypes (weights once a replay, activations in and out for the whole batch), its
 * floor max(bytes / bandwidth, flops / peak of its precision) from the device's measured peaks,
 * and its kernels' time measured INSIDE a replay of the captured graph (CUPTI activity records,
 * mapped to plan nodes through the graph nodes each node's launches created). */
typedef struct gr_roofline_peaks {
    double dram_gbs;      /* device-to-device cudaMemcpy, (read + write bytes) / s / 1e9, best run */
    double int8_tops;     /* dense GEMMs of gemm_size^3, 2 x multiply-adds / s / 1e12, best run: */
    double fp16_tops;     /*   cublasGemmEx int8 IMMA (int32 accumulate), fp16 HMMA (fp32 or, */
    double fp32_tflops;   /*   with fp16_accumulate, fp16 accumulate), cublasSgemm (FP32 FMA) */
    int gemm_size;
    int fp16_accumulate;
} gr_roofline_peaks;

typedef struct gr_roofline_node {
    int node;             /* plan node index */
    int layer;            /* Darknet layer (-1: a conversion the planner inserted) */
    char kind[24];        /* the plan node kind, as gr_node_time's */
    gr_precision prec;    /* the precision it computes in */
    int kernels;          /* kernels (and copies / memsets) it ran per replay */
    double flops;         /* per replay (the whole batch) */
    double bytes;         /* act_bytes + weight_bytes */
    double weight_bytes;  /* of which weights (once per replay) */
    double floor_us;      /* max(bytes / dram, flops / peak(prec)) */
    double us;            /* median over replays of the sum of its kernels' durations */
    double exclusive_us;  /* of which no earlier-started kernel of the replay overlapped: these
                             add up to the replay's busy time */
} gr_roofline_node;

typedef struct gr_roofline {
    gr_roofline_peaks peaks;
    int batch, micro_batch; /* a replay runs batch / micro_batch passes of the plan */
    int replays;            /* timed under CUPTI (one more before them, untimed) */
    double replay_us;       /* median replay of the engine's own graph, events, no tracing */
    double floor_sum_us;    /* sum of the nodes' floors */
    double kernel_sum_us;   /* sum of the nodes' us */
    double busy_us;         /* median per replay of the union of the traced kernels' intervals */
    double copy_us;         /* median per replay: the input and output copies (no node's) */
    double other_us;        /* median per replay: kernels no node claims (the dataflow kernel) */
    int n_nodes;
    gr_roofline_node *nodes; /* the nodes that launch work, in schedule order */
} gr_roofline;

/* Measure the table: the device's peaks (once per device and process), then `replays` (1..1000)
 * replays of a fresh capture of the engine's forward pass under CUPTI activity tracing, after
 * replays of its own graph timed with events for replay_us. Nothing else may run on the engine
 * meanwhile, nor other CUPTI clients in the process (a profiler such as nsys or ncu: then
 * GR_ERR_UNSUPPORTED). GR_ERR_UNSUPPORTED when this graphrun was built without CUPTI or the
 * engine runs without CUDA graphs; GR_ERR_NO_DEVICE without CUDA; GR_ERR_STATE for a CPU engine.
 * *out is the caller's: gr_roofline_free. */
gr_status gr_engine_roofline(gr_engine *engine, int replays, gr_roofline **out);
void gr_roofline_free(gr_roofline *roofline); /* NULL: no-op */
/* 1 when this build can measure in-graph times (built with CUPTI), else 0. */
int gr_roofline_available(void);

int gr_engine_tactic_count(const gr_engine *engine); /* 0 for NULL */
gr_status gr_engine_tactic(const gr_engine *engine, int index, gr_tactic_info *info);
gr_status gr_engine_tactic_stats(const gr_engine *engine, gr_tactic_stats *stats);

/* The precision each network layer computes in (n entries, the model's layer count), as built:
 * the explicit or automatic map, or the uniform precision. NULL for a NULL engine. */
const gr_precision *gr_engine_layer_precision(const gr_engine *engine, int *n);

/* ==== group 5: debug and testing hooks =========================================================
 * Calls that exist for graphrun's own tests and debugging, not for embedders. None is exported
 * today; one added goes here (with its budget in tests/check_exports.sh), never into group 1. */

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* GRAPHRUN_RUNTIME_H */
