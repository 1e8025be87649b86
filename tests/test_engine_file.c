/* Check suite for saved engines (runtime.h, "saved engines"; runtime/engine_file.c) on the CPU:
 * a saved and loaded engine gives outputs bit-identical to the engine it was saved from (the CPU
 * reference is deterministic, so any difference is a real change of the plan, precision map or
 * ranges) for fp32, fp16 and int8 (calibrated ranges) and a mixed map, from a file and from
 * memory; the run-time options of a load apply and the plan's are the file's; and every damaged
 * file - another format or graphrun version, another GPU, a GPU file without a GPU, a flipped
 * byte, any truncation - is refused with one line naming what differs. The GPU twin is
 * tests/test_gpu_engine_file.c. */
#define _GNU_SOURCE /* utimensat, AT_FDCWD, popen, mkdtemp */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "base/bytes.h"

/* gr_hash64("graphrun engine file", 20): XXH3-64's value, which format 3 files are checked with. */
#define PINNED_HASH 0xcfb2eca82d634095ULL
#include "models/net.h"
#include "graphrun/runtime.h"
#include "runtime/engine_file.h"
#include "runtime/saved_gpu.h"

/* A tiny network for the byte-by-byte tests: every prefix of its file is loaded. */
static const char tiny_cfg[] = "[net]\nwidth=8\nheight=8\nchannels=3\n\n"
                               "[convolutional]\nfilters=4\nsize=3\nstride=1\npad=1\n"
                               "batch_normalize=1\nactivation=leaky\n\n"
                               "[maxpool]\nsize=2\nstride=2\n\n"
                               "[convolutional]\nfilters=2\nsize=1\nstride=1\nactivation=linear\n";

static gr_model *load_shapes(void)
{
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = "shapes";
    gr_model *model = NULL;
    ck_assert_msg(gr_model_load(&mo, &model) == GR_OK, "%s", gr_last_error());
    return model;
}

static gr_model *load_tiny(void)
{
    char path[] = "/tmp/gr_engine_file_tiny_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, tiny_cfg, sizeof tiny_cfg - 1), (long)(sizeof tiny_cfg - 1));
    close(fd);
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = NULL;
    mo.cfg_path = path;
    gr_model *model = NULL;
    gr_status st = gr_model_load(&mo, &model);
    unlink(path);
    ck_assert_msg(st == GR_OK, "%s", gr_last_error());
    return model;
}

static gr_engine *build(const gr_model *model, gr_precision prec, const gr_precision *map, int n)
{
    gr_engine_options opt;
    gr_engine_options_default(&opt);
    opt.device = GR_DEVICE_CPU;
    opt.precision = prec;
    opt.batch = 2;
    opt.layer_precision = map;
    opt.n_layer_precision = n;
    gr_engine *engine = NULL;
    ck_assert_msg(gr_engine_build(model, &opt, &engine) == GR_OK, "%s", gr_last_error());
    return engine;
}

/* A deterministic non-zero input of every pixel value. */
static void run(gr_engine *e)
{
    void *buf;
    size_t bytes;
    ck_assert_int_eq(gr_engine_input_buffer(e, 1, &buf, &bytes), GR_OK);
    for (size_t i = 0; i < bytes; i++)
        ((uint8_t *)buf)[i] = (uint8_t)((i * 7919u) >> 3);
    ck_assert_msg(gr_engine_run(e) == GR_OK, "%s", gr_last_error());
}

static size_t output_elems(const gr_engine *e, int k)
{
    gr_tensor_desc d;
    ck_assert_int_eq(gr_engine_output_desc(e, k, &d), GR_OK);
    return (size_t)d.n * d.c * d.h * d.w;
}

/* Outputs bit for bit, the precision per layer, detections and class names. */
static void expect_same(gr_engine *a, gr_engine *b)
{
    run(a);
    run(b);
    ck_assert_int_eq(gr_engine_output_count(a), gr_engine_output_count(b));
    for (int k = 0; k < gr_engine_output_count(a); k++) {
        const float *x, *y;
        ck_assert_int_eq(gr_engine_output(a, k, &x), GR_OK);
        ck_assert_int_eq(gr_engine_output(b, k, &y), GR_OK);
        size_t n = output_elems(a, k);
        ck_assert_uint_eq(n, output_elems(b, k));
        for (size_t i = 0; i < n; i++)
            ck_assert_msg(memcmp(&x[i], &y[i], sizeof x[i]) == 0,
                          "output %d element %zu: built %.9g, loaded %.9g", k, i, (double)x[i],
                          (double)y[i]);
    }
    int na, nb;
    const gr_precision *pa = gr_engine_layer_precision(a, &na), *pb = gr_engine_layer_precision(b, &nb);
    ck_assert_int_eq(na, nb);
    for (int i = 0; i < na; i++)
        ck_assert_msg(pa[i] == pb[i], "layer %d: built %s, loaded %s", i, gr_precision_name(pa[i]),
                      gr_precision_name(pb[i]));
    gr_detect_options dopt;
    gr_detect_options_default(&dopt);
    dopt.thresh = 0.2f;
    gr_detection *da = NULL, *db = NULL;
    int n1 = 0, n2 = 0;
    gr_status s1 = gr_engine_detect(a, 1, &dopt, &da, &n1), s2 = gr_engine_detect(b, 1, &dopt, &db, &n2);
    ck_assert_int_eq(s1, s2);
    ck_assert_int_eq(n1, n2);
    if (n1 > 0)
        ck_assert_mem_eq(da, db, (size_t)n1 * sizeof *da);
    gr_detections_free(da);
    gr_detections_free(db);
    ck_assert_str_eq(gr_model_class_name(gr_engine_model(a), 0),
                     gr_model_class_name(gr_engine_model(b), 0));
    /* The build's notice travels, each line marked as the build's. */
    char *copy = strdup(gr_engine_notice(a));
    for (const char *line = strtok(copy, "\n"); line; line = strtok(NULL, "\n")) {
        char want[2200];
        snprintf(want, sizeof want, "at build: %s", line);
        ck_assert_msg(strstr(gr_engine_notice(b), want), "'%s' not in: %s", want,
                      gr_engine_notice(b));
    }
    free(copy);
}

static void save_to_memory(const gr_engine *e, uint8_t **data, size_t *bytes)
{
    void *p = NULL;
    ck_assert_msg(gr_engine_save_to_memory(e, &p, bytes) == GR_OK, "%s", gr_last_error());
    *data = p;
}

static gr_engine *load_memory(const uint8_t *data, size_t bytes)
{
    gr_engine *e = NULL;
    ck_assert_msg(gr_engine_load_from_memory(data, bytes, NULL, &e) == GR_OK, "%s",
                  gr_last_error());
    return e;
}

/* Through a file, timing build and load (printed, not asserted: speed is bench's). */
static void round_trip_file(gr_precision prec, const gr_precision *map, int n)
{
    gr_model *model = load_shapes();
    double t0 = (double)clock();
    gr_engine *built = build(model, prec, map, n);
    double t1 = (double)clock();
    char path[] = "/tmp/gr_engine_file_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_msg(gr_engine_save(built, path) == GR_OK, "%s", gr_last_error());
    gr_model_destroy(model); /* the loaded engine needs nothing of it */
    gr_engine *loaded = NULL;
    double t2 = (double)clock();
    ck_assert_msg(gr_engine_load(path, NULL, &loaded) == GR_OK, "%s", gr_last_error());
    double t3 = (double)clock();
    printf("engine file %s: build %.1f ms, load %.1f ms (CPU time)\n",
           map ? "mixed" : gr_precision_name(prec), (t1 - t0) * 1e3 / CLOCKS_PER_SEC,
           (t3 - t2) * 1e3 / CLOCKS_PER_SEC);
    unlink(path);
    expect_same(built, loaded);
    gr_engine_destroy(built);
    gr_engine_destroy(loaded);
}

START_TEST(round_trip_fp32) { round_trip_file(GR_PREC_FP32, NULL, 0); }
END_TEST

START_TEST(round_trip_fp16) { round_trip_file(GR_PREC_FP16, NULL, 0); }
END_TEST

/* int8: the calibrated ranges travel in the file (a load calibrates nothing). */
START_TEST(round_trip_int8_calibrated) { round_trip_file(GR_PREC_INT8, NULL, 0); }
END_TEST

START_TEST(round_trip_mixed_map)
{
    gr_model *model = load_shapes();
    gr_model_info info;
    ck_assert_int_eq(gr_model_get_info(model, &info), GR_OK);
    gr_precision *map = calloc((size_t)info.n_layers, sizeof *map);
    for (int i = 0; i < info.n_layers; i++)
        map[i] = (gr_precision)(i % 3);
    gr_model_destroy(model);
    round_trip_file(GR_PREC_FP32, map, info.n_layers);
    free(map);
}
END_TEST

/* The shapes model's engine at prec, and its saved bytes. */
static gr_engine *shapes_in_memory(gr_precision prec, uint8_t **data, size_t *bytes)
{
    gr_model *model = load_shapes();
    gr_engine *built = build(model, prec, NULL, 0);
    gr_model_destroy(model);
    save_to_memory(built, data, bytes);
    return built;
}

static gr_engine *shapes_int8_in_memory(uint8_t **data, size_t *bytes)
{
    return shapes_in_memory(GR_PREC_INT8, data, bytes);
}

START_TEST(round_trip_memory)
{
    uint8_t *data;
    size_t bytes;
    gr_engine *built = shapes_int8_in_memory(&data, &bytes);
    gr_engine *loaded = load_memory(data, bytes);
    expect_same(built, loaded);
    /* A loaded engine saved and loaded again: the same engine, the build's notice lines marked
     * once (they read "at build: at build: ..." before). */
    uint8_t *again;
    size_t again_bytes;
    save_to_memory(loaded, &again, &again_bytes);
    gr_engine *reloaded = load_memory(again, again_bytes);
    expect_same(built, reloaded);
    ck_assert_msg(strstr(gr_engine_notice(built), "calibration"), "no calibration line to check: %s",
                  gr_engine_notice(built));
    ck_assert_msg(!strstr(gr_engine_notice(reloaded), "at build: at build:"), "%s",
                  gr_engine_notice(reloaded));
    ck_assert_str_eq(gr_engine_notice(reloaded), gr_engine_notice(loaded));
    gr_free(again);
    gr_free(data);
    gr_engine_destroy(reloaded);
    gr_engine_destroy(built);
    gr_engine_destroy(loaded);
}
END_TEST

/* Run-time options apply; plan options are the file's. */
/* Every parameter survives the file, AlexeyAB's too (conv stride_y/dilation, its batch norm,
 * [yolo] scale_x_y/new_coords/nms_kind/beta_nms): a regression test - the first format dropped
 * them, and a loaded yolov7-tiny would have decoded its boxes as YOLOv3 does. */
START_TEST(alexeyab_params_round_trip)
{
    const char cfg[] = "[net]\nwidth=32\nheight=32\nchannels=3\n"
                       "[convolutional]\nbatch_normalize=1\nfilters=8\nsize=3\nstride=1\n"
                       "stride_y=2\npad=1\nactivation=mish\n"
                       "[convolutional]\nfilters=8\nsize=3\npad=1\ndilation=2\nactivation=swish\n"
                       "[convolutional]\nfilters=18\nsize=1\nactivation=logistic\n"
                       "[yolo]\nmask=0,1,2\nanchors=1,2,3,4,5,6\nnum=3\nclasses=1\n"
                       "scale_x_y=2.0\nnew_coords=1\nnms_kind=diounms\nbeta_nms=0.7\n";
    gr_net *net = NULL, *back = NULL;
    ck_assert_msg(gr_net_parse(cfg, strlen(cfg), "ab.cfg", &net) == GR_OK, "%s", gr_last_error());
    ck_assert_int_eq(gr_net_synthesize_weights(net, 1), GR_OK);
    gr_bytes b = {0};
    ck_assert_int_eq(gr_net_write(net, &b), GR_OK);
    gr_reader r = {b.data, b.len, 0, 0};
    ck_assert_msg(gr_net_read(&r, "ab", 0, 1, &back) == GR_OK, "%s", gr_last_error());
    ck_assert_int_eq(back->n_layers, net->n_layers);
    for (int i = 0; i < net->n_layers; i++)
        ck_assert_msg(memcmp(&back->layers[i].p, &net->layers[i].p, sizeof net->layers[i].p) == 0,
                      "layer %d: parameters differ after the round trip", i);
    ck_assert_int_eq(back->layers[0].p.stride_y, 2);
    ck_assert_int_eq(back->layers[1].p.dilation, 2);
    ck_assert_int_eq(back->layers[0].p.alexeyab, 1);
    ck_assert_int_eq(back->layers[3].p.new_coords, 1);
    ck_assert_int_eq(back->layers[3].p.nms_kind, GR_NMS_DIOU);
    gr_bytes_free(&b);
    gr_net_free(net);
    gr_net_free(back);
}
END_TEST

/* The weight floats start at a multiple of GR_NET_WEIGHT_ALIGN bytes of the buffer whatever comes
 * before the record (so a mapped engine file can lend them), and the zeros before them are
 * checked. */
START_TEST(weights_aligned_in_record)
{
    gr_net *net = NULL;
    ck_assert_int_eq(gr_net_parse(tiny_cfg, sizeof tiny_cfg - 1, "tiny.cfg", &net), GR_OK);
    ck_assert_int_eq(gr_net_synthesize_weights(net, 1), GR_OK);
    const size_t block = net->n_weight_floats * sizeof(float);
    size_t record_to_block[GR_NET_WEIGHT_ALIGN], fixed = SIZE_MAX;
    for (size_t before = 0; before < GR_NET_WEIGHT_ALIGN; before++) {
        gr_bytes b = {0};
        for (size_t k = 0; k < before; k++)
            gr_bytes_put(&b, "x", 1);
        ck_assert_int_eq(gr_net_write(net, &b), GR_OK);
        size_t at = before;
        while (at + block <= b.len && memcmp(b.data + at, net->weight_block, block) != 0)
            at++;
        ck_assert_uint_le(at + block, b.len);
        ck_assert_uint_eq(at % GR_NET_WEIGHT_ALIGN, 0);
        record_to_block[before] = at - before;
        if (record_to_block[before] < fixed)
            fixed = record_to_block[before]; /* no padding: where the count ends */
        gr_bytes_free(&b);
    }
    for (size_t before = 0; before < GR_NET_WEIGHT_ALIGN; before++) {
        if (record_to_block[before] == fixed)
            continue;
        gr_bytes b = {0};
        for (size_t k = 0; k < before; k++)
            gr_bytes_put(&b, "x", 1);
        ck_assert_int_eq(gr_net_write(net, &b), GR_OK);
        gr_net *back = NULL;
        gr_reader r = {b.data, b.len, before, 0};
        ck_assert_msg(gr_net_read(&r, "tiny", 0, 1, &back) == GR_OK, "%s", gr_last_error());
        ck_assert_mem_eq(back->weight_block, net->weight_block, block);
        gr_net_free(back);
        b.data[before + fixed] = 1; /* the first zero before the floats */
        r = (gr_reader){b.data, b.len, before, 0};
        ck_assert_int_eq(gr_net_read(&r, "tiny", 0, 1, &back), GR_ERR_PARSE);
        ck_assert_ptr_null(back);
        ck_assert_ptr_nonnull(strstr(gr_last_error(), "padding before the weights"));
        gr_bytes_free(&b);
    }
    gr_net_free(net);
}
END_TEST

START_TEST(runtime_options_apply)
{
    gr_model *model = load_tiny();
    gr_engine *built = build(model, GR_PREC_FP16, NULL, 0);
    gr_model_destroy(model);
    uint8_t *data;
    size_t bytes;
    save_to_memory(built, &data, &bytes);
    gr_engine_options opt;
    gr_engine_options_default(&opt);
    opt.inflight = 3;
    opt.precision = GR_PREC_FP32; /* not the file's: ignored */
    opt.batch = 5;
    gr_engine *loaded = NULL;
    ck_assert_msg(gr_engine_load_from_memory(data, bytes, &opt, &loaded) == GR_OK, "%s",
                  gr_last_error());
    ck_assert_int_eq(gr_engine_inflight(loaded), 3);
    gr_tensor_desc d;
    ck_assert_int_eq(gr_engine_input_desc(loaded, &d), GR_OK);
    ck_assert_int_eq(d.n, 2);
    int n;
    const gr_precision *p = gr_engine_layer_precision(loaded, &n);
    ck_assert_int_eq(p[0], GR_PREC_FP16);
    ck_assert_int_eq(gr_engine_device(loaded), GR_DEVICE_CPU);
    gr_free(data);
    gr_engine_destroy(built);
    gr_engine_destroy(loaded);
}
END_TEST

static void tiny_file(uint8_t **data, size_t *bytes)
{
    gr_model *model = load_tiny();
    gr_engine *e = build(model, GR_PREC_FP32, NULL, 0);
    gr_model_destroy(model);
    save_to_memory(e, data, bytes);
    gr_engine_destroy(e);
}

static void expect_refused(const uint8_t *data, size_t bytes, gr_status want, const char *text)
{
    gr_engine *e = (gr_engine *)data; /* must come back NULL */
    gr_status st = gr_engine_load_from_memory(data, bytes, NULL, &e);
    ck_assert_msg(st == want, "status %s, want %s: %s", gr_status_str(st), gr_status_str(want),
                  gr_last_error());
    ck_assert_ptr_null(e);
    ck_assert_msg(strstr(gr_last_error(), text) != NULL, "'%s' not in: %s", text, gr_last_error());
    ck_assert_ptr_null(strchr(gr_last_error(), '\n'));
}

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int k = 0; k < 4; k++)
        p[k] = (uint8_t)(v >> (8 * k));
}

/* Recompute the trailing checksum, so a tampered content reaches the content checks. */
static void resign(uint8_t *data, size_t bytes)
{
    uint64_t h = gr_hash64(data, bytes - 8);
    for (int k = 0; k < 8; k++)
        data[bytes - 8 + k] = (uint8_t)(h >> (8 * k));
}

START_TEST(format_version_mismatch)
{
    uint8_t *data;
    size_t bytes;
    tiny_file(&data, &bytes);
    put_u32(data + GR_ENGINE_FILE_OFF_VERSION, GR_ENGINE_FILE_VERSION + 1);
    expect_refused(data, bytes, GR_ERR_UNSUPPORTED, "this graphrun reads format");
    put_u32(data + GR_ENGINE_FILE_OFF_VERSION, GR_ENGINE_FILE_VERSION);
    memcpy(data + GR_ENGINE_FILE_OFF_GRAPHRUN, "0.0.9", 6);
    expect_refused(data, bytes, GR_ERR_UNSUPPORTED, "built by graphrun 0.0.9, this is graphrun");
    gr_free(data);
}
END_TEST

/* The preprocessing is saved (format 4); a format-3 file (no such field) loads as the letterbox
 * its engines did, and a value outside the enum is refused. The older files are made from a
 * format-5 file: format 4 without the network's (empty) outputs, head and Q/DQ section; format 3
 * also without the field's 4 bytes in the options, 4 zero bytes added to the padding before the
 * weight floats (which keeps them where they were, at a multiple of 64). */
START_TEST(preprocessing_saved_and_format_3_letterboxes)
{
    gr_model *model = load_tiny(); /* a pjreddie cfg: the letterbox, unless the option says */
    gr_engine_options opt;
    gr_engine_options_default(&opt);
    opt.device = GR_DEVICE_CPU;
    opt.preprocess = GR_PREPROCESS_STRETCH;
    gr_engine *e = NULL;
    ck_assert_msg(gr_engine_build(model, &opt, &e) == GR_OK, "%s", gr_last_error());
    gr_model_destroy(model);
    uint8_t *data;
    size_t bytes;
    save_to_memory(e, &data, &bytes);
    gr_engine *loaded = load_memory(data, bytes);
    ck_assert_int_eq(gr_model_preprocess(gr_engine_model(loaded)), GR_PREPROCESS_STRETCH);
    gr_engine_destroy(loaded);

    uint32_t notice_len = (uint32_t)data[192] | (uint32_t)data[193] << 8 |
                          (uint32_t)data[194] << 16 | (uint32_t)data[195] << 24;
    size_t field = GR_ENGINE_FILE_HEADER + 4 + notice_len + 16 * 4 + 2 * 4;
    ck_assert_uint_eq(data[field], GR_PREPROCESS_STRETCH);
    const gr_net *net = gr_engine_model(e)->net;
    size_t w = 0, wbytes = 16 * sizeof(float);
    ck_assert_uint_ge(net->n_weight_floats, 16);
    while (w + wbytes <= bytes && memcmp(data + w, net->weight_block, wbytes) != 0)
        w += GR_NET_WEIGHT_ALIGN;
    ck_assert_msg(w + wbytes <= bytes && w > field, "the weights are not in the file");

    put_u32(data + field, GR_PREPROCESS_LETTERBOX_114); /* Ultralytics' border: kept too */
    resign(data, bytes);
    loaded = load_memory(data, bytes);
    ck_assert_int_eq(gr_model_preprocess(gr_engine_model(loaded)), GR_PREPROCESS_LETTERBOX_114);
    gr_engine_destroy(loaded);
    put_u32(data + field, 9);
    resign(data, bytes);
    expect_refused(data, bytes, GR_ERR_PARSE, "preprocessing 9 is not letterbox (1), stretch");

    /* Format 4 had no outputs, head and Q/DQ section at the network's end (12 bytes for a
     * network without them: 0 outputs, no head, no scales), before the precision map and
     * ranges flags, the input range and the CPU blob's length (20 bytes, then the checksum). */
    const size_t section = bytes - 8 - 20 - 12;
    static const uint8_t none[12] = {0};
    ck_assert_mem_eq(data + section, none, 12);
    ck_assert_int_eq(data[section + 12], 0);
    const size_t old_bytes = bytes - 12;
    uint8_t *old = malloc(bytes);
    ck_assert_ptr_nonnull(old);
    memcpy(old, data, section);
    memcpy(old + section, data + section + 12, bytes - section - 12);
    put_u32(old + GR_ENGINE_FILE_OFF_VERSION, 4);
    put_u32(old + GR_ENGINE_FILE_OFF_CONTENT_BYTES,
            (uint32_t)(old_bytes - GR_ENGINE_FILE_HEADER - 8));
    put_u32(old + field, GR_PREPROCESS_STRETCH);
    resign(old, old_bytes);
    loaded = load_memory(old, old_bytes);
    ck_assert_int_eq(gr_model_preprocess(gr_engine_model(loaded)), GR_PREPROCESS_STRETCH);
    expect_same(e, loaded);
    gr_engine_destroy(loaded);
    /* ... and format 3 no preprocessing field either. */
    memcpy(old, data, field);
    memcpy(old + field, data + field + 4, w - field - 4);
    memset(old + w - 4, 0, 4);
    memcpy(old + w, data + w, section - w);
    memcpy(old + section, data + section + 12, bytes - section - 12);
    put_u32(old + GR_ENGINE_FILE_OFF_VERSION, 3);
    put_u32(old + GR_ENGINE_FILE_OFF_CONTENT_BYTES,
            (uint32_t)(old_bytes - GR_ENGINE_FILE_HEADER - 8));
    resign(old, old_bytes);
    loaded = load_memory(old, old_bytes);
    ck_assert_int_eq(gr_model_preprocess(gr_engine_model(loaded)), GR_PREPROCESS_LETTERBOX);
    expect_same(e, loaded);
    gr_engine_destroy(loaded);
    free(old);
    gr_free(data);
    gr_engine_destroy(e);
}
END_TEST

/* A GPU file names the GPU it was built for; the comparison names the field that differs. */
START_TEST(arch_mismatch)
{
    gr_device_identity built = {GR_DEVICE_GPU, 90, "NVIDIA H100 80GB HBM3", 132, 13000, 13000, 130000};
    gr_device_identity here = built;
    ck_assert_int_eq(gr_engine_file_check_device(&built, &here, "m.grengine"), GR_OK);
    here.sm = 86;
    snprintf(here.name, sizeof here.name, "NVIDIA A10");
    ck_assert_int_eq(gr_engine_file_check_device(&built, &here, "m.grengine"), GR_ERR_UNSUPPORTED);
    ck_assert_str_eq(gr_last_error(), "m.grengine: built for sm_90 (NVIDIA H100 80GB HBM3), this "
                                      "GPU is sm_86 (NVIDIA A10) (rebuild the engine here)");
    here = built;
    here.cuda_driver = 12040;
    ck_assert_int_eq(gr_engine_file_check_device(&built, &here, "m.grengine"), GR_ERR_UNSUPPORTED);
    ck_assert_str_eq(gr_last_error(), "m.grengine: built for driver 13000, this driver is 12040 "
                                      "(rebuild the engine here)");
    here.kind = GR_DEVICE_CPU;
    ck_assert_int_eq(gr_engine_file_check_device(&built, &here, "m.grengine"), GR_ERR_NO_DEVICE);
    gr_device_identity cpu = {GR_DEVICE_CPU, 0, "", 0, 0, 0, 0};
    ck_assert_int_eq(gr_engine_file_check_device(&cpu, &here, "m.grengine"), GR_OK);
}
END_TEST

/* A CPU file whose header is made to say GPU: refused for the GPU it names, never run. */
START_TEST(wrong_device_kind)
{
    uint8_t *data;
    size_t bytes;
    tiny_file(&data, &bytes);
    put_u32(data + GR_ENGINE_FILE_OFF_KIND, GR_DEVICE_GPU);
    put_u32(data + GR_ENGINE_FILE_OFF_SM, 90);
    gr_engine *e = NULL;
    gr_status st = gr_engine_load_from_memory(data, bytes, NULL, &e);
    ck_assert_ptr_null(e);
    if (gr_cuda_device_count() == 0)
        ck_assert_int_eq(st, GR_ERR_NO_DEVICE);
    else
        ck_assert_msg(st == GR_ERR_UNSUPPORTED || st == GR_ERR_PARSE, "%s", gr_last_error());
    ck_assert_msg(strstr(gr_last_error(), "built for sm_90") || st == GR_ERR_PARSE, "%s",
                  gr_last_error());
    put_u32(data + GR_ENGINE_FILE_OFF_KIND, 3);
    expect_refused(data, bytes, GR_ERR_PARSE, "device kind 3 is neither CPU");
    gr_free(data);
}
END_TEST

/* Any flipped byte after the header is a checksum mismatch (header bytes: refused by their own
 * check, or the checksum). */
START_TEST(corruption)
{
    uint8_t *data;
    size_t bytes;
    tiny_file(&data, &bytes);
    for (size_t pos = GR_ENGINE_FILE_HEADER; pos < bytes; pos += 7) {
        data[pos] ^= 0x40;
        expect_refused(data, bytes, GR_ERR_PARSE, "checksum mismatch: file corrupt");
        data[pos] ^= 0x40;
    }
    for (size_t pos = 0; pos < GR_ENGINE_FILE_HEADER; pos++) {
        data[pos] ^= 0x01;
        gr_engine *e = NULL;
        ck_assert_int_ne(gr_engine_load_from_memory(data, bytes, NULL, &e), GR_OK);
        ck_assert_ptr_null(e);
        data[pos] ^= 0x01;
    }
    gr_free(data);
}
END_TEST

/* Every proper prefix of the file is refused (no crash, nothing leaked: run under valgrind or
 * ASan to see the latter). */
START_TEST(truncation)
{
    uint8_t *data;
    size_t bytes;
    tiny_file(&data, &bytes);
    for (size_t len = 0; len < bytes; len++) {
        uint8_t *copy = malloc(len ? len : 1); /* exactly len bytes: a read past is ASan's */
        memcpy(copy, data, len);
        gr_engine *e = NULL;
        gr_status st = gr_engine_load_from_memory(copy, len, NULL, &e);
        ck_assert_msg(st == GR_ERR_PARSE, "prefix %zu: %s", len, gr_last_error());
        ck_assert_ptr_null(e);
        free(copy);
    }
    gr_free(data);
}
END_TEST

/* Tampered content with a valid checksum still meets the content checks. */
START_TEST(resigned_content_is_checked)
{
    uint8_t *data;
    size_t bytes;
    tiny_file(&data, &bytes);
    uint8_t *copy = malloc(bytes);
    /* The notice string comes first (u32 length), then the options: device, precision. */
    uint32_t notice_len = (uint32_t)data[GR_ENGINE_FILE_HEADER] |
                          (uint32_t)data[GR_ENGINE_FILE_HEADER + 1] << 8;
    size_t opts = GR_ENGINE_FILE_HEADER + 4 + notice_len;
    memcpy(copy, data, bytes);
    put_u32(copy + opts + 4, 7);
    resign(copy, bytes);
    expect_refused(copy, bytes, GR_ERR_PARSE, "precision 7");
    memcpy(copy, data, bytes);
    put_u32(copy + opts, GR_DEVICE_GPU);
    resign(copy, bytes);
    expect_refused(copy, bytes, GR_ERR_PARSE, "the header says CPU, the options GPU");
    free(copy);
    gr_free(data);
}
END_TEST

/* The content checksum (gr_hash64): any flipped bit of a large block changes it, in every lane
 * and the tail; words swapped between lanes or moved by one position change it; and its values
 * are XXH3-64's (seed 0; taken from xxHash 0.8.1's library) for every input-length path (0, 1-3,
 * 4-8, 9-16, 17-128, 129-240 bytes, blocks, a partial block), pinned since files depend on them
 * (a new hash needs a new format version). */
START_TEST(checksum_sees_every_bit)
{
    enum { N = 4096 + 13 };
    static uint8_t buf[N];
    uint64_t x = 0x123456789abcdefULL;
    for (size_t i = 0; i < N; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        buf[i] = (uint8_t)(x >> 56);
    }
    const uint64_t h = gr_hash64(buf, N);
    for (size_t bit = 0; bit < 8 * (size_t)N; bit += 7) { /* every lane, byte and bit position */
        buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        ck_assert_msg(gr_hash64(buf, N) != h, "bit %zu flipped, same checksum", bit);
        buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
    uint8_t word[8];
    memcpy(word, buf, 8); /* lane 0 and lane 1 of the first stripe swapped */
    memcpy(buf, buf + 8, 8);
    memcpy(buf + 8, word, 8);
    ck_assert(gr_hash64(buf, N) != h);
    memcpy(buf + 8, buf, 8);
    memcpy(buf, word, 8);
    ck_assert_uint_eq(gr_hash64(buf, N), h);
    ck_assert(gr_hash64(buf, N - 1) != h && gr_hash64(buf + 1, N - 1) != gr_hash64(buf, N - 1));
    ck_assert(gr_hash64(buf, 0) != gr_hash64(buf, 1));
    ck_assert_uint_eq(gr_hash64("graphrun engine file", 20), PINNED_HASH);
    static const struct {
        size_t len;
        uint64_t xxh3;
    } pinned[] = {{0, 0x2d06800538d394c2ULL},   {2, 0x2ccf4391dedeb5a3ULL},
                  {7, 0x150140f46854b3a8ULL},   {15, 0x25b74146c9255649ULL},
                  {100, 0x3704a294b4fd9d80ULL}, {200, 0xae9b8eb27c6959d2ULL},
                  {1000, 0x085de7a7c7f315deULL}, {N, 0x716cc0d71e2db18cULL}};
    for (size_t k = 0; k < sizeof pinned / sizeof pinned[0]; k++)
        ck_assert_msg(gr_hash64(buf, pinned[k].len) == pinned[k].xxh3, "length %zu: %016llx",
                      pinned[k].len, (unsigned long long)gr_hash64(buf, pinned[k].len));
}
END_TEST

/* Whether this process maps `path` (its deleted file too: "path (deleted)"). */
static int mapped(const char *path)
{
    FILE *f = fopen("/proc/self/maps", "r");
    ck_assert_ptr_nonnull(f);
    char line[4096];
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, path) != NULL;
    fclose(f);
    return found;
}

/* A load from a file lends the network the mapped file's weight floats (no copy) and the engine
 * keeps the mapping to its end: the file replaced by rename (as gr_engine_save writes) and then
 * deleted changes nothing - the engine runs as built and saves the same bytes again - and
 * destroying the engine unmaps it. A load from memory copies: the caller's buffer, scribbled
 * over and freed, is not read again. */
START_TEST(file_load_borrows_the_mapping)
{
    gr_model *model = load_shapes();
    gr_engine *built = build(model, GR_PREC_FP16, NULL, 0);
    gr_engine *other = build(model, GR_PREC_FP32, NULL, 0);
    gr_model_destroy(model);
    uint8_t *data;
    size_t bytes;
    save_to_memory(built, &data, &bytes);
    char path[64];
    snprintf(path, sizeof path, "/tmp/gr_engine_lend_%d.grengine", (int)getpid());
    ck_assert_int_eq(gr_engine_save(built, path), GR_OK);
    gr_engine *loaded = NULL;
    ck_assert_msg(gr_engine_load(path, NULL, &loaded) == GR_OK, "%s", gr_last_error());
    const gr_net *net = loaded->net;
    const uint8_t *map = loaded->weight_file.data, *floats = (const uint8_t *)net->weight_block;
    ck_assert_int_eq(net->weights_borrowed, 1);
    ck_assert_ptr_nonnull(loaded->weight_file.map);
    ck_assert_uint_eq(loaded->weight_file.len, bytes);
    ck_assert(floats >= map && floats + net->n_weight_floats * sizeof(float) <= map + bytes);
    ck_assert_uint_eq((size_t)(floats - map) % GR_NET_WEIGHT_ALIGN, 0);
    ck_assert(mapped(path));

    ck_assert_int_eq(gr_engine_save(other, path), GR_OK); /* replaced by rename */
    ck_assert_int_eq(unlink(path), 0);
    expect_same(built, loaded);
    uint8_t *again;
    size_t again_bytes;
    save_to_memory(loaded, &again, &again_bytes);
    ck_assert_uint_eq(again_bytes, bytes);
    ck_assert(memcmp(again, data, bytes) == 0);
    gr_free(again);
    ck_assert(mapped(path));
    gr_engine_destroy(loaded);
    ck_assert(!mapped(path));

    uint8_t *copy = malloc(bytes);
    memcpy(copy, data, bytes);
    loaded = load_memory(copy, bytes);
    ck_assert_int_eq(loaded->net->weights_borrowed, 0);
    ck_assert_ptr_null(loaded->weight_file.data);
    memset(copy, 0xa5, bytes);
    free(copy);
    save_to_memory(loaded, &again, &again_bytes);
    ck_assert_uint_eq(again_bytes, bytes);
    ck_assert(memcmp(again, data, bytes) == 0);
    gr_free(again);
    expect_same(built, loaded);
    gr_engine_destroy(loaded);
    gr_free(data);
    gr_engine_destroy(built);
    gr_engine_destroy(other);
}
END_TEST

/* gr_engine_load maps a regular file (gr_file_view) and reads anything else: the same engine from
 * a file and through a FIFO; the view of a regular file is a mapping holding the file's bytes, an
 * empty file and a FIFO are read, a directory is refused by name. */
typedef struct fifo_writer {
    const char *path;
    const uint8_t *data;
    size_t bytes;
    int ok;
} fifo_writer;

static void *write_fifo(void *arg)
{
    fifo_writer *w = arg;
    int fd = open(w->path, O_WRONLY);
    size_t done = 0;
    while (fd >= 0 && done < w->bytes) {
        ssize_t n = write(fd, w->data + done, w->bytes - done);
        if (n <= 0 && errno != EINTR)
            break;
        done += n > 0 ? (size_t)n : 0;
    }
    w->ok = fd >= 0 && done == w->bytes;
    if (fd >= 0)
        close(fd);
    return NULL;
}

START_TEST(mapped_file_and_fifo_load_alike)
{
    uint8_t *data;
    size_t bytes;
    gr_engine *built = shapes_int8_in_memory(&data, &bytes);
    char path[64];
    snprintf(path, sizeof path, "/tmp/gr_engine_view_%d.grengine", (int)getpid());
    ck_assert_int_eq(gr_engine_save(built, path), GR_OK);

    gr_file_view v;
    ck_assert_int_eq(gr_file_view_open(path, bytes, "engine", &v), GR_OK);
    ck_assert_ptr_nonnull(v.map);
    ck_assert_ptr_null(v.heap);
    ck_assert_uint_eq(v.len, bytes);
    ck_assert(memcmp(v.data, data, bytes) == 0);
    gr_file_view_release(&v);
    ck_assert_int_eq(gr_file_view_open(path, bytes - 1, "engine", &v), GR_ERR_LIMIT);
    gr_engine *loaded = NULL;
    ck_assert_msg(gr_engine_load(path, NULL, &loaded) == GR_OK, "%s", gr_last_error());
    expect_same(built, loaded);
    gr_engine_destroy(loaded);
    unlink(path);

    /* A FIFO: read, not mapped. */
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    fifo_writer w = {path, data, bytes, 0};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, write_fifo, &w), 0);
    loaded = NULL;
    gr_status st = gr_engine_load(path, NULL, &loaded);
    pthread_join(t, NULL);
    unlink(path);
    ck_assert_msg(st == GR_OK && w.ok, "%s", gr_last_error());
    expect_same(built, loaded);
    gr_engine_destroy(loaded);

    /* An empty file is read (nothing to map), then refused as an engine; a directory by kind. */
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    ck_assert_int_eq(gr_file_view_open(path, 16, "engine", &v), GR_OK);
    ck_assert_ptr_null(v.map);
    ck_assert_uint_eq(v.len, 0);
    gr_file_view_release(&v);
    ck_assert_int_eq(gr_engine_load(path, NULL, &loaded), GR_ERR_PARSE);
    unlink(path);
    ck_assert_int_eq(gr_engine_load("/tmp", NULL, &loaded), GR_ERR_IO);
    ck_assert_msg(strstr(gr_last_error(), "/tmp: not a regular file"), "%s", gr_last_error());
    ck_assert_ptr_null(loaded);
    gr_free(data);
    gr_engine_destroy(built);
}
END_TEST

/* A saved GPU engine's blob (runtime/saved_gpu.h): what is put is what is parsed, pointers into the
 * blob; every truncation, a byte too many, another magic, too many or repeated variants are
 * refused with one line naming the source. */
START_TEST(gpu_blob_round_trip_and_damage)
{
    static const char tactics[] = "graphrun timing cache 1\nsome entries\n";
    uint8_t w0[700], w1[300];
    for (size_t i = 0; i < sizeof w0; i++)
        w0[i] = (uint8_t)(i * 31u + 7u);
    for (size_t i = 0; i < sizeof w1; i++)
        w1[i] = (uint8_t)(i * 17u + 3u);
    gr_saved_gpu s = {tactics, sizeof tactics - 1, 2,
                      {{1, 64, 0x1234567890abcdefULL, w0, sizeof w0},
                       {0, 32, 42, w1, sizeof w1}}};
    gr_bytes b = {0};
    gr_saved_gpu_put(&b, &s);
    ck_assert(!b.failed);
    gr_saved_gpu back;
    ck_assert_msg(gr_saved_gpu_parse(b.data, b.len, "m.grengine", &back) == GR_OK, "%s",
                  gr_last_error());
    ck_assert_uint_eq(back.tactics_len, sizeof tactics - 1);
    ck_assert(memcmp(back.tactics, tactics, back.tactics_len) == 0);
    ck_assert_int_eq(back.n_weights, 2);
    const gr_saved_weights *a = gr_saved_gpu_weights(&back, 1, 64);
    const gr_saved_weights *c = gr_saved_gpu_weights(&back, 0, 32);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(c);
    ck_assert_ptr_null(gr_saved_gpu_weights(&back, 1, 32));
    ck_assert_ptr_null(gr_saved_gpu_weights(NULL, 1, 64));
    ck_assert(a->layout == 0x1234567890abcdefULL && a->bytes == sizeof w0 &&
              memcmp(a->data, w0, sizeof w0) == 0);
    ck_assert(c->layout == 42 && c->bytes == sizeof w1 && memcmp(c->data, w1, sizeof w1) == 0);
    ck_assert(a->data > b.data && a->data < b.data + b.len); /* into the blob, not a copy */
    for (size_t len = 0; len < b.len; len++) {
        ck_assert_int_eq(gr_saved_gpu_parse(b.data, len, "m.grengine", &back), GR_ERR_PARSE);
        ck_assert_msg(strstr(gr_last_error(), "m.grengine: ") == gr_last_error() &&
                          strstr(gr_last_error(), "file corrupt"),
                      "%zu: %s", len, gr_last_error());
    }
    uint8_t *more = malloc(b.len + 1);
    ck_assert_ptr_nonnull(more);
    memcpy(more, b.data, b.len);
    more[b.len] = 0;
    ck_assert_int_eq(gr_saved_gpu_parse(more, b.len + 1, "m.grengine", &back), GR_ERR_PARSE);
    ck_assert_msg(strstr(gr_last_error(), "has bytes left"), "%s", gr_last_error());
    more[0] = 'X';
    ck_assert_int_eq(gr_saved_gpu_parse(more, b.len, "m.grengine", &back), GR_ERR_PARSE);
    free(more);
    gr_bytes_free(&b);

    s.weights[1].input_u8 = 1; /* the same variant twice */
    s.weights[1].micro_batch = 64;
    gr_bytes twice = {0};
    gr_saved_gpu_put(&twice, &s);
    ck_assert_int_eq(gr_saved_gpu_parse(twice.data, twice.len, "m.grengine", &back),
                     GR_ERR_PARSE);
    gr_bytes_free(&twice);
    s.n_weights = 0;
    gr_bytes none = {0};
    gr_saved_gpu_put(&none, &s);
    ck_assert_int_eq(none.len, 8 + 8 + sizeof tactics - 1 + 4);
    none.data[none.len - 4] = 3; /* three variants */
    ck_assert_int_eq(gr_saved_gpu_parse(none.data, none.len, "m.grengine", &back), GR_ERR_PARSE);
    ck_assert_msg(strstr(gr_last_error(), "3 sets of device weights"), "%s", gr_last_error());
    gr_bytes_free(&none);
}
END_TEST

START_TEST(bad_arguments)
{
    gr_engine *e = NULL;
    void *p = NULL;
    size_t n = 0;
    ck_assert_int_eq(gr_engine_load(NULL, NULL, &e), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gr_engine_load("/nonexistent/m.grengine", NULL, &e), GR_ERR_IO);
    ck_assert_ptr_null(e);
    ck_assert_msg(strstr(gr_last_error(), "/nonexistent/m.grengine: cannot open engine file: ") &&
                      !strstr(gr_last_error(), "file file"),
                  "%s", gr_last_error());
    ck_assert_int_eq(gr_engine_save(NULL, "/tmp/x"), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gr_engine_save_to_memory(NULL, &p, &n), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gr_engine_load_from_memory(NULL, 0, NULL, &e), GR_ERR_PARSE);
    ck_assert_int_eq(gr_engine_load_from_memory("GRAPHRUN", 8, NULL, &e), GR_ERR_PARSE);
    ck_assert_msg(strstr(gr_last_error(), "not a graphrun engine file"), "%s", gr_last_error());
    ck_assert_ptr_null(gr_engine_model(NULL));
    gr_free(NULL);
    /* An unwritable place: GR_ERR_IO naming it, no temporary left behind. */
    gr_model *model = load_tiny();
    gr_engine *built = build(model, GR_PREC_FP32, NULL, 0);
    ck_assert_int_eq(gr_engine_save(built, "/nonexistent/dir/m.grengine"), GR_ERR_IO);
    ck_assert_msg(strstr(gr_last_error(), "/nonexistent/dir/m.grengine"), "%s", gr_last_error());
    gr_engine_destroy(built);
    gr_model_destroy(model);
}
END_TEST

/* ---- files written and read ------------------------------------------------------------------ */

/* A fresh directory under /tmp for one test (removed by rm_dir). */
static void make_dir(char *dir, size_t len)
{
    snprintf(dir, len, "/tmp/gr_engine_files_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static int count_entries(const char *dir)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", dir);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    int n = -1;
    ck_assert_int_eq(fscanf(p, "%d", &n), 1);
    pclose(p);
    return n;
}

static void rm_dir(const char *dir)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

static int same_bytes(const char *path, const uint8_t *data, size_t bytes)
{
    char *text = NULL;
    size_t len = 0;
    if (gr_read_file(path, bytes + 1, "test", &text, &len) != GR_OK)
        return 0;
    int same = len == bytes && memcmp(text, data, bytes) == 0;
    free(text);
    return same;
}

/* gr_engine_save (and every writer through gr_write_file_atomic) replaces a regular file by
 * rename, its mode kept; writes through a symbolic link to a regular file (the link stays a link);
 * refuses a FIFO, a device, a directory, a dangling link, naming the user's path; and its
 * temporary is created exclusively under an unpredictable name, so a link planted at the name the
 * old writer used (PATH.tmp<pid>) is neither followed nor replaced. Nothing is left behind. */
START_TEST(save_replaces_only_regular_files)
{
    uint8_t *data;
    size_t bytes;
    tiny_file(&data, &bytes);
    gr_engine *e = load_memory(data, bytes);
    char dir[64], path[128], real[128], victim[128], planted[160];
    make_dir(dir, sizeof dir);
    struct stat sb;
    mode_t old_mask = umask(022);

    /* A new file: 0666 less the umask; an existing one keeps its mode. */
    snprintf(path, sizeof path, "%s/e.grengine", dir);
    ck_assert_msg(gr_engine_save(e, path) == GR_OK, "%s", gr_last_error());
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_int_eq(sb.st_mode & 07777, 0644);
    ck_assert_int_eq(chmod(path, 0640), 0);
    ck_assert_msg(gr_engine_save(e, path) == GR_OK, "%s", gr_last_error());
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_int_eq(sb.st_mode & 07777, 0640);
    ck_assert(same_bytes(path, data, bytes));

    /* The old writer's predictable temporary, planted as a link to a victim. */
    snprintf(victim, sizeof victim, "%s/victim", dir);
    write_text(victim, "victim");
    snprintf(planted, sizeof planted, "%s.tmp%ld", path, (long)getpid());
    ck_assert_int_eq(symlink(victim, planted), 0);
    ck_assert_msg(gr_engine_save(e, path) == GR_OK, "%s", gr_last_error());
    ck_assert(same_bytes(victim, (const uint8_t *)"victim", 6));
    ck_assert_int_eq(lstat(planted, &sb), 0);
    ck_assert(S_ISLNK(sb.st_mode));
    ck_assert(same_bytes(path, data, bytes));
    unlink(planted);

    /* A link to a regular file: the file is replaced, the link stays. */
    snprintf(real, sizeof real, "%s/real.grengine", dir);
    write_text(real, "old");
    ck_assert_int_eq(chmod(real, 0600), 0);
    snprintf(path, sizeof path, "%s/link.grengine", dir);
    ck_assert_int_eq(symlink("real.grengine", path), 0);
    ck_assert_msg(gr_engine_save(e, path) == GR_OK, "%s", gr_last_error());
    ck_assert_int_eq(lstat(path, &sb), 0);
    ck_assert(S_ISLNK(sb.st_mode));
    ck_assert(same_bytes(real, data, bytes));
    ck_assert_int_eq(stat(real, &sb), 0);
    ck_assert_int_eq(sb.st_mode & 07777, 0600);

    /* Refused, the thing in place untouched, the message naming the user's path. */
    snprintf(path, sizeof path, "%s/fifo.grengine", dir);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    ck_assert_int_eq(gr_engine_save(e, path), GR_ERR_IO);
    ck_assert_msg(strstr(gr_last_error(), "fifo.grengine: not a regular file (a FIFO)"), "%s",
                  gr_last_error());
    ck_assert_int_eq(lstat(path, &sb), 0);
    ck_assert(S_ISFIFO(sb.st_mode));
    ck_assert_int_eq(gr_engine_save(e, dir), GR_ERR_IO);
    ck_assert_msg(strstr(gr_last_error(), "not a regular file (a directory)"), "%s",
                  gr_last_error());
    snprintf(path, sizeof path, "%s/dangling.grengine", dir);
    ck_assert_int_eq(symlink("nowhere/x", path), 0);
    ck_assert_int_eq(gr_engine_save(e, path), GR_ERR_IO);
    ck_assert_msg(strstr(gr_last_error(), "dangling.grengine: a symbolic link"), "%s",
                  gr_last_error());
    ck_assert_int_eq(lstat(path, &sb), 0);
    ck_assert(S_ISLNK(sb.st_mode));
    ck_assert_int_eq(gr_engine_save(e, "/dev/null"), GR_ERR_IO);
    ck_assert_msg(strstr(gr_last_error(), "/dev/null: not a regular file (a character device)"),
                  "%s", gr_last_error());
    ck_assert_int_eq(stat("/dev/null", &sb), 0);
    ck_assert(S_ISCHR(sb.st_mode));
    snprintf(path, sizeof path, "%s/missing/e.grengine", dir);
    ck_assert_int_eq(gr_engine_save(e, path), GR_ERR_IO);
    ck_assert_msg(strncmp(gr_last_error(), path, strlen(path)) == 0 &&
                      gr_last_error()[strlen(path)] == ':' && !strstr(gr_last_error(), ".tmp"),
                  "%s", gr_last_error());

    /* Left: e.grengine, victim, real.grengine, link.grengine, fifo.grengine, dangling.grengine. */
    ck_assert_int_eq(count_entries(dir), 6);
    umask(old_mask);
    rm_dir(dir);
    gr_engine_destroy(e);
    gr_free(data);
}
END_TEST

/* A loaded engine whose file is rewritten in place (`cp new live`) is an error naming the file,
 * never a SIGBUS (truncated) or a silently different network (same size): its next run fails with
 * GR_ERR_IO and the engine stays unusable, and so does a save (it would write the weights). A
 * touch, or the identical bytes copied over it, is not a change. The file's times are set an
 * hour back first, as a deployed file's are: a rewrite within the same clock tick as the previous
 * write would keep its mtime (runtime.h says so). */
static void age(const char *path)
{
    struct timespec old[2];
    clock_gettime(CLOCK_REALTIME, &old[0]);
    old[0].tv_sec -= 3600;
    old[1] = old[0];
    ck_assert_int_eq(utimensat(AT_FDCWD, path, old, 0), 0);
}

/* cp's way: the same inode truncated, then written. */
static void write_in_place(const char *path, const uint8_t *data, size_t bytes)
{
    int fd = open(path, O_WRONLY | O_TRUNC);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, data, bytes), (long)bytes);
    close(fd);
}

static gr_engine *load_aged(const char *path)
{
    age(path);
    gr_engine *e = NULL;
    ck_assert_msg(gr_engine_load(path, NULL, &e) == GR_OK, "%s", gr_last_error());
    return e;
}

START_TEST(loaded_file_rewritten_in_place)
{
    uint8_t *data;
    size_t bytes;
    gr_engine *built = shapes_in_memory(GR_PREC_FP32, &data, &bytes);
    char dir[64], path[128];
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/live.grengine", dir);

    for (int truncate = 1; truncate >= 0; truncate--) {
        ck_assert_int_eq(gr_engine_save(built, path), GR_OK);
        gr_engine *e = load_aged(path);
        run(e);
        /* touch, and cp of the identical file over it: the same bytes (hashed again, since the
         * mtime changed), still good. */
        ck_assert_int_eq(utimensat(AT_FDCWD, path, NULL, 0), 0);
        run(e);
        age(path);
        write_in_place(path, data, bytes);
        run(e);
        /* cp of another file over it: truncated, or the same size with other weights. */
        age(path);
        uint8_t *other = malloc(bytes);
        memcpy(other, data, bytes);
        for (size_t k = bytes / 2; k < bytes / 2 + 4096 && k < bytes; k++)
            other[k] ^= 0x5a; /* inside the weights */
        write_in_place(path, other, truncate ? bytes / 3 : bytes);
        free(other);
        void *buf;
        size_t in_bytes;
        ck_assert_int_eq(gr_engine_input_buffer(e, 1, &buf, &in_bytes), GR_OK);
        memset(buf, 7, in_bytes);
        ck_assert_int_eq(gr_engine_run(e), GR_ERR_IO);
        ck_assert_msg(strstr(gr_last_error(), path) && strstr(gr_last_error(), "rewritten in place") &&
                          strstr(gr_last_error(), truncate ? "size changed" : "was written"),
                      "%s", gr_last_error());
        ck_assert_msg(strstr(gr_engine_last_error(e), "rewritten in place"), "%s",
                      gr_engine_last_error(e));
        ck_assert_int_eq(gr_engine_run(e), GR_ERR_STATE);
        void *again = NULL;
        size_t again_bytes = 0;
        ck_assert_int_ne(gr_engine_save_to_memory(e, &again, &again_bytes), GR_OK);
        ck_assert_ptr_null(again);
        gr_engine_destroy(e);
        unlink(path);
    }
    rm_dir(dir);
    gr_free(data);
    gr_engine_destroy(built);
}
END_TEST

/* A message longer than the buffer loses its middle, not its end: the OS reason after a long path
 * survives, and the path's start too. */
START_TEST(long_messages_keep_their_end)
{
    char path[3000];
    int n = snprintf(path, sizeof path, "/tmp/gr_no_such_dir_%d", (int)getpid());
    while (n < 2000)
        n += snprintf(path + n, sizeof path - (size_t)n, "/%s", "abcdefghijklmnopqrstuvwxyz");
    snprintf(path + n, sizeof path - (size_t)n, "/m.grengine");
    gr_engine *e = NULL;
    ck_assert_int_eq(gr_engine_load(path, NULL, &e), GR_ERR_IO);
    const char *msg = gr_last_error(), *reason = strerror(ENOENT);
    size_t len = strlen(msg);
    ck_assert_msg(len < 1024 && len > strlen(reason) &&
                      strcmp(msg + len - strlen(reason), reason) == 0,
                  "%s", msg);
    ck_assert(strncmp(msg, "/tmp/gr_no_such_dir_", 20) == 0);
    ck_assert_ptr_nonnull(strstr(msg, " ... "));
    ck_assert_ptr_null(strchr(msg, '\n'));
}
END_TEST

/* Special files are refused by kind, at once: /dev/zero would read gigabytes before the engine
 * size limit. A FIFO named explicitly is still read (tested above). */
START_TEST(devices_are_refused)
{
    gr_engine *e = NULL;
    ck_assert_int_eq(gr_engine_load("/dev/zero", NULL, &e), GR_ERR_IO);
    ck_assert_msg(strstr(gr_last_error(), "/dev/zero: not a regular file (a character device)"),
                  "%s", gr_last_error());
    ck_assert_ptr_null(e);
    char *text = NULL;
    size_t len = 0;
    ck_assert_int_eq(gr_read_file("/dev/urandom", 1 << 20, "cfg", &text, &len), GR_ERR_IO);
    ck_assert_ptr_null(text);

    /* A FIFO among the calibration images with a calibration cache: the images are hashed for
     * the cache's key, and a FIFO nobody writes to is refused instead of blocking the build. */
    char dir[64], fifo[128], cache[128];
    make_dir(dir, sizeof dir);
    snprintf(fifo, sizeof fifo, "%s/photo.jpg", dir);
    snprintf(cache, sizeof cache, "%s/calib.cache", dir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    const char *images[] = {fifo, NULL};
    gr_model *model = load_tiny();
    gr_engine_options opt;
    gr_engine_options_default(&opt);
    opt.device = GR_DEVICE_CPU;
    opt.precision = GR_PREC_INT8;
    opt.calib_images = images;
    opt.calib_cache = cache;
    ck_assert_int_eq(gr_engine_build(model, &opt, &e), GR_ERR_IO);
    ck_assert_msg(strstr(gr_last_error(), "photo.jpg: not a regular file (a FIFO)"), "%s",
                  gr_last_error());
    ck_assert_ptr_null(e);
    gr_model_destroy(model);
    rm_dir(dir);
}
END_TEST

/* A well-signed file (valid checksum) with absurd values is refused as the caches refuse theirs:
 * int8 ranges outside the calibration cache's bounds, enums out of range, a layer without the
 * inputs its op takes; and a stored notice reaches the user without control characters. Each is
 * made by changing the engine before saving it, so the file is signed by the writer. */
static void expect_saved_refused(gr_engine *e, const char *text)
{
    uint8_t *data;
    size_t bytes;
    save_to_memory(e, &data, &bytes);
    expect_refused(data, bytes, GR_ERR_PARSE, text);
    gr_free(data);
}

START_TEST(resigned_values_are_checked)
{
    uint8_t *data;
    size_t bytes;
    gr_engine *e = shapes_int8_in_memory(&data, &bytes);
    ck_assert_ptr_nonnull(e->layer_range);
    const float input = e->input_range;
    e->input_range = 1e-30f;
    expect_saved_refused(e, "input's int8 range");
    e->input_range = 2.0f;
    expect_saved_refused(e, "input's int8 range");
    e->input_range = input;
    int layer = -1;
    for (int i = 0; i < e->net->n_layers && layer < 0; i++)
        if (e->layer_range[i] > 0.0f)
            layer = i;
    ck_assert_int_ge(layer, 0);
    const float range = e->layer_range[layer];
    e->layer_range[layer] = 3e38f;
    expect_saved_refused(e, "int8 range");
    e->layer_range[layer] = 1e-30f;
    expect_saved_refused(e, "int8 range");
    e->layer_range[layer] = range;

    const gr_engine_options opt = e->opt;
    e->opt.calib_method = (gr_calib_method)99;
    expect_saved_refused(e, "calib_method=99");
    e->opt = opt;
    e->opt.f32_algo = (gr_f32_algo)99;
    expect_saved_refused(e, "f32_algo=99");
    e->opt = opt;
    e->opt.pdl = (gr_toggle)99;
    expect_saved_refused(e, "pdl=99");
    e->opt = opt;
    e->opt.inflight = 99999;
    expect_saved_refused(e, "inflight");
    e->opt = opt;

    /* A layer with no inputs (layer 1 takes layer 0's output in every net). */
    const int n_inputs = e->net->layers[1].n_inputs;
    e->net->layers[1].n_inputs = 0;
    expect_saved_refused(e, "layer 1");
    e->net->layers[1].n_inputs = n_inputs;

    /* The stored notice: control characters (an escape sequence) shown as '?'. */
    snprintf(e->notice, sizeof e->notice, "calibrated\x1b[2J\x1b]0;owned\x07 \xc2\x9b" "31m\nsecond\tline");
    gr_free(data); /* the first save's bytes (the engine was loaded from a copy) */
    save_to_memory(e, &data, &bytes);
    gr_engine *loaded = load_memory(data, bytes);
    const char *notice = gr_engine_notice(loaded);
    for (const char *c = notice; *c; c++)
        ck_assert_msg(*c == '\n' || ((unsigned char)*c >= 0x20 && (unsigned char)*c != 0x7f &&
                                     (unsigned char)*c < 0x80),
                      "byte 0x%02x at %td: %s", (unsigned char)*c, c - notice, notice);
    ck_assert_msg(strstr(notice, "at build: calibrated?[2J?]0;owned? ??31m\nat build: second?line"),
                  "%s", notice);
    gr_engine_destroy(loaded);
    gr_free(data);
    gr_engine_destroy(e);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("engine_file");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, round_trip_fp32);
    tcase_add_test(tc, round_trip_fp16);
    tcase_add_test(tc, round_trip_int8_calibrated);
    tcase_add_test(tc, round_trip_mixed_map);
    tcase_add_test(tc, round_trip_memory);
    tcase_add_test(tc, alexeyab_params_round_trip);
    tcase_add_test(tc, weights_aligned_in_record);
    tcase_add_test(tc, runtime_options_apply);
    tcase_add_test(tc, format_version_mismatch);
    tcase_add_test(tc, preprocessing_saved_and_format_3_letterboxes);
    tcase_add_test(tc, arch_mismatch);
    tcase_add_test(tc, wrong_device_kind);
    tcase_add_test(tc, corruption);
    tcase_add_test(tc, truncation);
    tcase_add_test(tc, resigned_content_is_checked);
    tcase_add_test(tc, checksum_sees_every_bit);
    tcase_add_test(tc, bad_arguments);
    tcase_add_test(tc, gpu_blob_round_trip_and_damage);
    tcase_add_test(tc, mapped_file_and_fifo_load_alike);
    tcase_add_test(tc, file_load_borrows_the_mapping);
    suite_add_tcase(s, tc);
    /* Files written and read: a FIFO that blocks, or /dev/zero read to the limit, fails by time. */
    TCase *files = tcase_create("files");
    tcase_set_timeout(files, 30);
    tcase_add_test(files, save_replaces_only_regular_files);
    tcase_add_test(files, loaded_file_rewritten_in_place);
    tcase_add_test(files, long_messages_keep_their_end);
    tcase_add_test(files, devices_are_refused);
    tcase_add_test(files, resigned_values_are_checked);
    suite_add_tcase(s, files);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
