/* Check suite for models/parse.c, models/builtin.c and models/net.c: the shipped cfgs parse to
 * the right layer lists, Darknet's spellings and defaults are honoured, and every malformed cfg
 * under tests/data/cfg/ fails with the right status and a "file:line:" message. Tests run from
 * the source root (CTest sets the working directory), so paths are relative to it. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/embedded.h"
#include "models/net.h"

#define CFG_DIR "tests/data/cfg/"

static gr_net *parse_ok(const char *path)
{
    gr_net *net = NULL;
    gr_status st = gr_net_parse_file(path, &net);
    ck_assert_msg(st == GR_OK, "%s: %s", path, gr_last_error());
    ck_assert_ptr_nonnull(net);
    return net;
}

static void assert_shape(const gr_net *net, int layer, int c, int h, int w)
{
    gr_shape s = net->layers[layer].out;
    ck_assert_msg(s.c == c && s.h == h && s.w == w, "layer %d: %dx%dx%d, expected %dx%dx%d", layer,
                  s.c, s.h, s.w, c, h, w);
}

/* ---- shipped cfgs ----------------------------------------------------------------------- */

START_TEST(yolov2_tiny_voc_layers)
{
    gr_net *net = parse_ok("models/yolov2-tiny-voc.cfg");
    ck_assert_int_eq(net->n_layers, 16);
    ck_assert_int_eq(net->w, 416);
    ck_assert_int_eq(net->h, 416);
    ck_assert_int_eq(net->c, 3);
    assert_shape(net, 0, 16, 416, 416);
    assert_shape(net, 1, 16, 208, 208);
    assert_shape(net, 10, 512, 13, 13);
    ck_assert_int_eq(net->layers[11].p.op, GR_OP_MAXPOOL);
    ck_assert_int_eq(net->layers[11].p.stride, 1);
    assert_shape(net, 11, 512, 13, 13); /* size 2 / stride 1 keeps 13x13 */
    ck_assert_int_eq(net->layers[14].p.op, GR_OP_CONV);
    assert_shape(net, 14, 125, 13, 13);
    ck_assert_int_eq(net->layers[14].p.activation, GR_ACT_LINEAR);
    ck_assert_int_eq(net->layers[14].p.batch_normalize, 0);
    ck_assert_int_eq(net->layers[15].p.op, GR_OP_REGION);
    ck_assert_int_eq(net->layers[15].p.classes, 20);
    ck_assert_int_eq(net->layers[15].p.num, 5);
    ck_assert_int_eq(net->layers[15].p.softmax, 1);
    ck_assert(net->layers[15].p.anchors[0] == 1.08f); /* strtod then float: correctly rounded */
    ck_assert(net->layers[15].p.anchors[9] == 10.52f);
    ck_assert_str_eq(net->name, "yolov2-tiny-voc.cfg");
    gr_net_free(net);
}
END_TEST

START_TEST(yolov2_tiny_coco_layers)
{
    gr_net *net = parse_ok("models/yolov2-tiny.cfg");
    ck_assert_int_eq(net->n_layers, 16);
    assert_shape(net, 13, 512, 13, 13);
    assert_shape(net, 14, 425, 13, 13);
    ck_assert_int_eq(net->layers[15].p.classes, 80);
    gr_net_free(net);
}
END_TEST

START_TEST(yolov3_tiny_layers)
{
    gr_net *net = parse_ok("models/yolov3-tiny.cfg");
    ck_assert_int_eq(net->n_layers, 24);
    ck_assert_int_eq(net->layers[16].p.op, GR_OP_YOLO);
    ck_assert_int_eq(net->layers[16].p.n_mask, 3);
    ck_assert_int_eq(net->layers[16].p.mask[0], 3);
    ck_assert_int_eq(net->layers[16].p.num, 6);
    /* [route] layers = -4 at layer 17 reads layer 13 */
    ck_assert_int_eq(net->layers[17].n_inputs, 1);
    ck_assert_int_eq(net->layers[17].inputs[0], 13);
    assert_shape(net, 19, 128, 26, 26); /* upsample */
    /* [route] layers = -1, 8 at layer 20: 128 + 256 channels at 26x26 */
    ck_assert_int_eq(net->layers[20].n_inputs, 2);
    ck_assert_int_eq(net->layers[20].inputs[0], 19);
    ck_assert_int_eq(net->layers[20].inputs[1], 8);
    assert_shape(net, 20, 384, 26, 26);
    assert_shape(net, 22, 255, 26, 26);
    ck_assert_int_eq(net->layers[23].p.mask[2], 2);
    gr_net_free(net);
}
END_TEST

START_TEST(edges_point_backwards)
{
    const char *files[] = {"models/yolov2-tiny-voc.cfg", "models/yolov2-tiny.cfg",
                           "models/yolov3-tiny.cfg", CFG_DIR "valid_spellings.cfg"};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        gr_net *net = parse_ok(files[f]);
        for (int i = 0; i < net->n_layers; i++) {
            ck_assert_int_ge(net->layers[i].n_inputs, 1);
            for (int k = 0; k < net->layers[i].n_inputs; k++) {
                ck_assert_int_lt(net->layers[i].inputs[k], i);
                ck_assert_int_ge(net->layers[i].inputs[k], -1);
            }
            ck_assert_ptr_null(net->layers[i].w.weights);
        }
        ck_assert_ptr_null(net->weight_block);
        gr_net_free(net);
    }
}
END_TEST

START_TEST(cfg_line_numbers)
{
    gr_net *net = parse_ok("models/yolov2-tiny-voc.cfg");
    ck_assert_int_eq(net->layers[0].cfg_line, 25); /* first [convolutional] */
    ck_assert_int_eq(net->layers[1].cfg_line, 33); /* first [maxpool] */
    gr_net_free(net);
}
END_TEST

/* ---- Darknet spellings and defaults ----------------------------------------------------- */

/* valid_spellings.cfg: [network], [conv], [max], [avg], [conn], [soft], spaces around '=',
 * ';' comments, CRLF, training keys, an inline comment and a repeated key. */
START_TEST(darknet_spellings)
{
    gr_net *net = parse_ok(CFG_DIR "valid_spellings.cfg");
    ck_assert_int_eq(net->n_layers, 8);
    ck_assert_int_eq(net->w, 32);
    const gr_op_kind ops[] = {GR_OP_CONV, GR_OP_MAXPOOL, GR_OP_CONV, GR_OP_ROUTE,
                              GR_OP_SHORTCUT, GR_OP_AVGPOOL, GR_OP_CONNECTED, GR_OP_SOFTMAX};
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(net->layers[i].p.op, ops[i]);
    /* The first 'filters' wins (Darknet's option_find); pad=0 so padding=2 applies. */
    ck_assert_int_eq(net->layers[0].p.filters, 8);
    ck_assert_int_eq(net->layers[0].p.pad, 2);
    ck_assert_int_eq(net->layers[0].p.activation, GR_ACT_LEAKY);
    assert_shape(net, 0, 8, 34, 34);
    /* maxpool padding defaults to size-1 */
    ck_assert_int_eq(net->layers[1].p.pad, 1);
    assert_shape(net, 1, 8, 17, 17);
    /* pad=1 means size/2; no activation line means logistic */
    ck_assert_int_eq(net->layers[2].p.pad, 1);
    ck_assert_int_eq(net->layers[2].p.activation, GR_ACT_LOGISTIC);
    /* route -1, 1 at layer 3 */
    ck_assert_int_eq(net->layers[3].inputs[0], 2);
    ck_assert_int_eq(net->layers[3].inputs[1], 1);
    assert_shape(net, 3, 12, 17, 17);
    /* shortcut reads the previous layer and 'from' */
    ck_assert_int_eq(net->layers[4].n_inputs, 2);
    ck_assert_int_eq(net->layers[4].inputs[0], 3);
    ck_assert_int_eq(net->layers[4].inputs[1], 1);
    assert_shape(net, 6, 10, 1, 1);
    gr_net_free(net);
}
END_TEST

START_TEST(crlf_equals_lf)
{
    const gr_embedded_file *cfg = gr_embedded_find("yolov3-tiny.cfg");
    ck_assert_ptr_nonnull(cfg);
    char *crlf = malloc(2 * cfg->size + 1);
    ck_assert_ptr_nonnull(crlf);
    size_t n = 0;
    for (size_t i = 0; i < cfg->size; i++) {
        if (cfg->data[i] == '\n')
            crlf[n++] = '\r';
        crlf[n++] = cfg->data[i];
    }
    gr_net *a = NULL, *b = NULL;
    ck_assert_int_eq(gr_net_parse(cfg->data, cfg->size, "lf.cfg", &a), GR_OK);
    ck_assert_int_eq(gr_net_parse(crlf, n, "crlf.cfg", &b), GR_OK);
    ck_assert_int_eq(a->n_layers, b->n_layers);
    for (int i = 0; i < a->n_layers; i++) {
        ck_assert_mem_eq(&a->layers[i].p, &b->layers[i].p, sizeof a->layers[i].p);
        ck_assert_mem_eq(&a->layers[i].out, &b->layers[i].out, sizeof a->layers[i].out);
        ck_assert_mem_eq(a->layers[i].inputs, b->layers[i].inputs, sizeof a->layers[i].inputs);
    }
    gr_net_free(a);
    gr_net_free(b);
    free(crlf);
}
END_TEST

START_TEST(parse_from_memory_names_source)
{
    const char text[] = "[net]\nwidth=8\nheight=8\nchannels=1\n[maxpool]\nsize=2\nstride=2\n";
    gr_net *net = NULL;
    ck_assert_int_eq(gr_net_parse(text, strlen(text), "dir/tiny.cfg", &net), GR_OK);
    ck_assert_str_eq(net->name, "tiny.cfg");
    ck_assert_int_eq(net->n_layers, 1);
    assert_shape(net, 0, 1, 4, 4);
    gr_net_free(net);
}
END_TEST

/* Darknet reads booleans with atoi and tests for nonzero; keys that graphrun only supports at
 * their default are accepted at that value; per-layer training keys are ignored. */
START_TEST(darknet_flags_and_default_valued_keys)
{
    const char text[] = "[net]\nwidth=8\nheight=8\nchannels=2\n"
                        "[convolutional]\nfilters=4\nsize=5\npad=2\nbatch_normalize=7\n"
                        "dilation=1\nbinary=0\nstopbackward=1\nlearning_rate=0.5\n"
                        "[shortcut]\nfrom=-1\nalpha=1\nbeta=1.0\n";
    gr_net *net = NULL;
    ck_assert_msg(gr_net_parse(text, strlen(text), "flags.cfg", &net) == GR_OK, "%s",
                  gr_last_error());
    ck_assert_int_eq(net->layers[0].p.pad, 2); /* size/2, not the flag's value */
    ck_assert_int_eq(net->layers[0].p.batch_normalize, 1);
    assert_shape(net, 0, 4, 8, 8);
    ck_assert_int_eq(net->layers[1].inputs[0], 0);
    ck_assert_int_eq(net->layers[1].inputs[1], 0);
    gr_net_free(net);
}
END_TEST

/* AlexeyAB's conv keys (parser.c:174-191): stride_x / stride_y default to stride, each given one
 * overrides it on its axis; dilation is read (and dropped to 1 on a 1x1); every activation name
 * of its get_activation parses, revleaky as leaky. */
START_TEST(alexeyab_conv_keys_and_activations)
{
    const char text[] = "[net]\nwidth=12\nheight=10\nchannels=2\n"
                        "[convolutional]\nfilters=4\nsize=3\nstride=2\nstride_x=1\npad=1\n"
                        "activation=hard_mish\n"
                        "[convolutional]\nfilters=4\nsize=3\npad=1\ndilation=2\ngroups=4\n"
                        "activation=relu6\n"
                        "[convolutional]\nfilters=4\nsize=1\ndilation=3\nstride_y=2\n"
                        "activation=revleaky\n"
                        "[shortcut]\nfrom=-1\nactivation=gelu\n";
    gr_net *net = NULL;
    ck_assert_msg(gr_net_parse(text, strlen(text), "ab.cfg", &net) == GR_OK, "%s",
                  gr_last_error());
    ck_assert_int_eq(net->layers[0].p.stride, 1);             /* stride_x */
    ck_assert_int_eq(gr_conv_stride_y(&net->layers[0].p), 2); /* stride */
    ck_assert_int_eq(net->layers[0].p.activation, GR_ACT_HARD_MISH);
    assert_shape(net, 0, 4, 5, 12);
    ck_assert_int_eq(gr_conv_dilation(&net->layers[1].p), 2);
    ck_assert_int_eq(net->layers[1].p.activation, GR_ACT_RELU6);
    assert_shape(net, 1, 4, 5, 12);
    ck_assert_int_eq(gr_conv_dilation(&net->layers[2].p), 1); /* 1x1: parse_convolutional */
    ck_assert_int_eq(net->layers[2].p.stride, 1);
    ck_assert_int_eq(gr_conv_stride_y(&net->layers[2].p), 2);
    ck_assert_int_eq(net->layers[2].p.activation, GR_ACT_LEAKY);
    assert_shape(net, 2, 4, 3, 12);
    ck_assert_int_eq(net->layers[3].p.activation, GR_ACT_GELU);
    gr_net_free(net);

    const char norm[] = "[net]\nwidth=8\nheight=8\nchannels=1\n"
                        "[convolutional]\nfilters=2\nactivation=normalize_channels\n";
    ck_assert_int_eq(gr_net_parse(norm, strlen(norm), "norm.cfg", &net), GR_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "norm.cfg:7: [convolutional] key 'activation'"));
    const char anti[] = "[net]\nwidth=8\nheight=8\nchannels=1\n"
                        "[convolutional]\nfilters=2\nsize=3\nstride=2\nantialiasing=1\n";
    ck_assert_int_ne(gr_net_parse(anti, strlen(anti), "anti.cfg", &net), GR_OK);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "antialiasing"));
    gr_net_free(net);
}
END_TEST

/* ---- AlexeyAB Darknet's keys and sections ------------------------------------------------- */

#define NET_HEAD "[net]\nwidth=32\nheight=32\nchannels=3\n[convolutional]\nfilters=4\nsize=1\n"

static gr_status parse_text(const char *text, gr_net **net)
{
    *net = NULL;
    return gr_net_parse(text, strlen(text), "t.cfg", net);
}

START_TEST(alexeyab_yolo_keys_are_read)
{
    const char text[] = NET_HEAD "batch_normalize=1\n[convolutional]\nfilters=18\nsize=1\n"
                        "activation=logistic\n[yolo]\nmask=0,1,2\nanchors=1,2,3,4,5,6\nnum=3\n"
                        "classes=1\nscale_x_y = 2.0\nnew_coords=1\nnms_kind=diounms\n"
                        "beta_nms=0.7\niou_loss=ciou\n";
    gr_net *net = NULL;
    ck_assert_msg(parse_text(text, &net) == GR_OK, "%s", gr_last_error());
    const gr_op_params *p = &net->layers[2].p;
    ck_assert(p->scale_x_y == 2.0f);
    ck_assert_int_eq(p->new_coords, 1);
    ck_assert_int_eq(p->nms_kind, GR_NMS_DIOU);
    ck_assert(p->beta_nms == 0.7f);
    /* An AlexeyAB key makes it an AlexeyAB cfg: its batch norm. */
    ck_assert_int_eq(net->layers[0].p.alexeyab, 1);
    gr_net_free(net);
    /* pjreddie's cfgs keep pjreddie's batch norm. */
    net = parse_ok("models/yolov3-tiny.cfg");
    ck_assert_int_eq(net->layers[0].p.alexeyab, 0);
    gr_net_free(net);
    net = parse_ok("models/yolov4-tiny.cfg");
    ck_assert_int_eq(net->layers[0].p.alexeyab, 1);
    ck_assert_int_eq(net->layers[30].p.nms_kind, GR_NMS_GREEDY);
    ck_assert(net->layers[30].p.scale_x_y == 1.05f);
    gr_net_free(net);

    const char bad[] = NET_HEAD "[yolo]\nclasses=1\nnum=1\nanchors=1,1\nnms_kind=softnms\n";
    ck_assert_int_eq(parse_text(bad, &net), GR_ERR_PARSE);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "t.cfg:12: [yolo] key 'nms_kind': 'softnms'"));
}
END_TEST

/* AlexeyAB's test_detector stretches unless [net] letter_box is non-zero; pjreddie's letterboxes. */
START_TEST(preprocessing_follows_the_darknet_of_the_cfg)
{
    gr_net *net = parse_ok("models/yolov4-tiny.cfg");
    ck_assert_int_eq(net->preprocess, GR_PREPROCESS_STRETCH);
    gr_net_free(net);
    net = parse_ok("models/yolov3-tiny.cfg");
    ck_assert_int_eq(net->preprocess, GR_PREPROCESS_LETTERBOX);
    gr_net_free(net);
    static const struct {
        const char *net_keys;
        gr_preprocess want;
    } cases[] = {
        {"", GR_PREPROCESS_STRETCH},
        {"letter_box=0\n", GR_PREPROCESS_STRETCH},
        {"letter_box=1\n", GR_PREPROCESS_LETTERBOX},
        {"letter_box = 2\n", GR_PREPROCESS_LETTERBOX}, /* atoi: non-zero */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[256];
        snprintf(text, sizeof text, "[net]\nwidth=32\nheight=32\nchannels=3\n%s"
                 "[convolutional]\nfilters=4\nsize=1\nactivation=mish\n", cases[i].net_keys);
        ck_assert_msg(parse_text(text, &net) == GR_OK, "%s", gr_last_error());
        ck_assert_msg(net->preprocess == cases[i].want, "'%s': %s", cases[i].net_keys,
                      gr_preprocess_name(net->preprocess));
        gr_net_free(net);
    }
    /* letter_box alone marks the cfg AlexeyAB's: 0 stretches a cfg pjreddie's could read. */
    const char plain0[] = "[net]\nwidth=32\nheight=32\nchannels=3\nletter_box=0\n"
                          "[convolutional]\nfilters=4\nsize=1\n";
    ck_assert_msg(parse_text(plain0, &net) == GR_OK, "%s", gr_last_error());
    ck_assert_int_eq(net->preprocess, GR_PREPROCESS_STRETCH);
    gr_net_free(net);
    const char bad[] = "[net]\nwidth=32\nheight=32\nchannels=3\nletter_box=yes\n"
                       "[convolutional]\nfilters=4\nsize=1\n";
    ck_assert_int_eq(parse_text(bad, &net), GR_ERR_PARSE);
    ck_assert_msg(strstr(gr_last_error(), "t.cfg:5: [net] key 'letter_box'"), "%s", gr_last_error());
}
END_TEST

START_TEST(dropout_is_the_identity)
{
    const char text[] = NET_HEAD "[dropout]\nprobability=.1\ndropblock=1\n[route]\nlayers=-1\n";
    gr_net *net = NULL;
    ck_assert_msg(parse_text(text, &net) == GR_OK, "%s", gr_last_error());
    ck_assert_int_eq(net->layers[1].p.op, GR_OP_ROUTE);
    ck_assert_int_eq(net->layers[1].n_inputs, 1);
    ck_assert_int_eq(net->layers[1].inputs[0], 0);
    assert_shape(net, 1, 4, 32, 32);
    gr_net_free(net);
}
END_TEST

START_TEST(maxpool_stride_xy_and_shortcut_keys)
{
    gr_net *net = NULL;
    const char same[] = NET_HEAD "[maxpool]\nsize=2\nstride=2\nstride_x=2\nstride_y=2\n";
    ck_assert_msg(parse_text(same, &net) == GR_OK, "%s", gr_last_error());
    assert_shape(net, 1, 4, 16, 16);
    gr_net_free(net);
    const char differ[] = NET_HEAD "[maxpool]\nsize=2\nstride=2\nstride_x=1\n";
    ck_assert_int_eq(parse_text(differ, &net), GR_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "t.cfg:11: [maxpool] key 'stride_x': '1'"));
    const char weighted[] = NET_HEAD "[shortcut]\nfrom=-1\nweights_type=per_channel\n";
    ck_assert_int_eq(parse_text(weighted, &net), GR_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "key 'weights_type': 'per_channel'"));
    const char multi[] = NET_HEAD "[convolutional]\nfilters=4\n[shortcut]\nfrom=-1,-2\n";
    ck_assert_int_eq(parse_text(multi, &net), GR_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "key 'from': '-1,-2'"));
}
END_TEST

/* AlexeyAB's [sam] and [scale_channels]: inputs in the order ops/sam.c and ops/scale_channels.c
 * take them, keys, shapes, the fork they mark, and their errors with file:line. */
START_TEST(sam_and_scale_channels)
{
    const char text[] = NET_HEAD "[convolutional]\nfilters=4\nsize=1\nbatch_normalize=1\n"
                                 "activation=logistic\n"
                                 "[sam]\nfrom=-2\nactivation=leaky\n"
                                 "[avgpool]\n[convolutional]\nfilters=4\nsize=1\n"
                                 "[scale_channels]\nfrom=0\n"
                                 "[convolutional]\nfilters=1\nsize=1\n"
                                 "[scale_channels]\nfrom=-2\nscale_wh=1\n";
    gr_net *net = NULL;
    ck_assert_msg(parse_text(text, &net) == GR_OK, "%s", gr_last_error());
    const gr_layer *sam = &net->layers[2], *sc = &net->layers[5], *wh = &net->layers[7];
    ck_assert_int_eq(sam->p.op, GR_OP_SAM);
    ck_assert_int_eq(sam->n_inputs, 2);
    ck_assert(sam->inputs[0] == 1 && sam->inputs[1] == 0); /* (previous, from) */
    ck_assert_int_eq(sam->p.activation, GR_ACT_LEAKY);
    ck_assert_int_eq(sc->p.op, GR_OP_SCALE_CHANNELS);
    ck_assert(sc->inputs[0] == 0 && sc->inputs[1] == 4); /* (from, previous) */
    ck_assert_int_eq(sc->p.scale_wh, 0);
    ck_assert_int_eq(sc->p.activation, GR_ACT_LINEAR);
    ck_assert(wh->inputs[0] == 5 && wh->inputs[1] == 6);
    ck_assert_int_eq(wh->p.scale_wh, 1);
    assert_shape(net, 2, 4, 32, 32);
    assert_shape(net, 5, 4, 32, 32);
    assert_shape(net, 7, 4, 32, 32);
    ck_assert_int_eq(net->layers[1].p.alexeyab, 1); /* only AlexeyAB has these sections */
    gr_net_free(net);
    static const struct {
        const char *text;
        gr_status status;
        const char *message;
    } bad[] = {
        {NET_HEAD "[sam]\n", GR_ERR_PARSE, "t.cfg:8: [sam] missing required key 'from'"},
        {NET_HEAD "[sam]\nfrom=-1,-1\n", GR_ERR_PARSE, "key 'from': '-1,-1' takes one layer"},
        {NET_HEAD "[sam]\nfrom=1\n", GR_ERR_PARSE, "key 'from': '1' must point at an earlier"},
        {NET_HEAD "[convolutional]\nfilters=2\n[sam]\nfrom=0\n", GR_ERR_PARSE,
         "t.cfg:10: layer 2: [sam] input 2x32x32 and from-layer 4x32x32 differ"},
        {NET_HEAD "[scale_channels]\nfrom=0\n", GR_ERR_PARSE,
         "t.cfg:8: layer 1: [scale_channels] input 4x32x32 must be 4x1x1"},
        {NET_HEAD "[scale_channels]\nfrom=0\nscale_wh=1\n", GR_ERR_PARSE,
         "t.cfg:8: layer 1: [scale_channels] input 4x32x32 must be 1x32x32"},
        {NET_HEAD "[scale_channels]\nfrom=0\nscale_wh=2\n", GR_ERR_LIMIT, "key 'scale_wh'"},
        {NET_HEAD "[sam]\nfrom=0\nactivation=swish\n", GR_ERR_UNSUPPORTED,
         "t.cfg:10: [sam] key 'activation': 'swish' is not supported here"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(parse_text(bad[i].text, &net) == bad[i].status, "case %zu: %s", i,
                      gr_last_error());
        ck_assert_msg(strstr(gr_last_error(), bad[i].message), "case %zu: '%s'", i,
                      gr_last_error());
        ck_assert_ptr_null(net);
    }
}
END_TEST

/* A cfg that uses refusal r with a value other than the accepted one. */
static void refusal_cfg(const gr_cfg_refusal *r, char *buf, size_t size)
{
    if (!r->key) {
        snprintf(buf, size, NET_HEAD "[%s]\n", r->section);
        return;
    }
    const char *section = strcmp(r->section, "any layer") == 0 ? "convolutional" : r->section;
    char value[64];
    if (strcmp(r->accepted, "stride") == 0)
        snprintf(value, sizeof value, "1\nstride=2");
    else if (strcmp(r->accepted, "one layer") == 0)
        snprintf(value, sizeof value, "-1,-2");
    else if (strcmp(r->accepted, "none") == 0)
        snprintf(value, sizeof value, "per_feature");
    else if (strncmp(r->accepted, "no mish", 7) == 0)
        snprintf(value, sizeof value, "mish");
    else
        snprintf(value, sizeof value, "%g", atof(r->accepted) + 1.0);
    /* The refused key first (keys are checked in order), then what the section requires. */
    const bool takes_from = strcmp(section, "shortcut") == 0 || strcmp(section, "sam") == 0 ||
                            strcmp(section, "scale_channels") == 0;
    const char *required = strcmp(section, "convolutional") == 0     ? "filters=4\n"
                           : takes_from && strcmp(r->key, "from") != 0 ? "from=-1\n"
                                                                       : "";
    snprintf(buf, size, NET_HEAD "[convolutional]\nfilters=4\n[%s]\n%s=%s\n%s", section, r->key,
             value, required);
}

/* The README's list of refusals is the parser's: every entry of one is in the other, and each
 * is really refused with GR_ERR_UNSUPPORTED naming the section or key. */
/* AlexeyAB's [local_avgpool] / [local_avg] (parse_local_avgpool): maxpool's keys and defaults
 * (size = stride, padding = size - 1), out = (in + padding - size)/stride + 1; one stride only. */
START_TEST(local_avgpool_section)
{
    gr_net *net = NULL;
    ck_assert_int_eq(parse_text("[net]\nwidth=16\nheight=16\nchannels=3\n"
                                "[convolutional]\nfilters=4\nsize=1\n"
                                "[local_avg]\nsize=4\nstride=4\n"
                                "[local_avgpool]\nstride=2\n",
                                &net),
                     GR_OK);
    ck_assert_int_eq(net->n_layers, 3);
    const gr_op_params *p = &net->layers[1].p;
    ck_assert_int_eq(p->op, GR_OP_LOCAL_AVGPOOL);
    ck_assert(p->size == 4 && p->stride == 4 && p->pad == 3);
    assert_shape(net, 1, 4, 4, 4); /* (16 + 3 - 4)/4 + 1 */
    p = &net->layers[2].p;
    ck_assert(p->size == 2 && p->stride == 2 && p->pad == 1);
    assert_shape(net, 2, 4, 2, 2); /* (4 + 1 - 2)/2 + 1 */
    gr_net_free(net);
    ck_assert_int_eq(parse_text("[net]\nwidth=16\nheight=16\nchannels=3\n"
                                "[local_avgpool]\nstride=2\nstride_x=1\n",
                                &net),
                     GR_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "t.cfg:7: [local_avgpool] key 'stride_x'"));
    gr_net_free(net);
}
END_TEST

START_TEST(refusals_match_readme)
{
    gr_cfg_refusal table[128];
    int n = gr_cfg_refusals(table, 128);
    ck_assert_int_le(n, 128);
    FILE *f = fopen("README.md", "r");
    ck_assert_ptr_nonnull(f);
    char line[1024], readme[16384] = "";
    bool in_list = false;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "### What graphrun refuses", 25) == 0)
            in_list = true;
        else if (in_list && strncmp(line, "#", 1) == 0)
            break;
        else if (in_list)
            strncat(readme, line, sizeof readme - strlen(readme) - 1);
    }
    fclose(f);
    ck_assert_msg(readme[0], "README.md has no '### What graphrun refuses' section");
    for (int i = 0; i < n; i++) {
        char entry[96], cfg[1024];
        if (table[i].key)
            snprintf(entry, sizeof entry, "`[%s] %s`", table[i].section, table[i].key);
        else
            snprintf(entry, sizeof entry, "`[%s]`", table[i].section);
        ck_assert_msg(strstr(readme, entry), "README.md does not list %s", entry);
        refusal_cfg(&table[i], cfg, sizeof cfg);
        gr_net *net = NULL;
        ck_assert_msg(parse_text(cfg, &net) == GR_ERR_UNSUPPORTED, "%s not refused: %s", entry,
                      gr_last_error());
        char named[80];
        snprintf(named, sizeof named, table[i].key ? "key '%s'" : "[%s]",
                 table[i].key ? table[i].key : table[i].section);
        ck_assert_msg(strstr(gr_last_error(), named), "%s: message '%s'", entry, gr_last_error());
    }
    /* ... and every entry of the README is in the table. */
    int listed = 0;
    for (const char *p = strstr(readme, "`["); p; p = strstr(p + 1, "`[")) {
        const char *end = strchr(p + 1, '`');
        ck_assert_ptr_nonnull(end);
        bool found = false;
        for (int i = 0; i < n && !found; i++) {
            char entry[96];
            if (table[i].key)
                snprintf(entry, sizeof entry, "`[%s] %s`", table[i].section, table[i].key);
            else
                snprintf(entry, sizeof entry, "`[%s]`", table[i].section);
            found = strncmp(p, entry, (size_t)(end - p + 1)) == 0 &&
                    strlen(entry) == (size_t)(end - p + 1);
        }
        ck_assert_msg(found, "README.md lists %.*s, which the parser accepts", (int)(end - p + 1),
                      p);
        listed++;
    }
    ck_assert_int_eq(listed, n);
}
END_TEST

START_TEST(too_many_layers)
{
    /* GR_MAX_LAYERS + 1 one-pixel maxpools: a limit error naming the offending line. */
    const char head[] = "[net]\nwidth=2\nheight=2\nchannels=1\n";
    const char layer[] = "[maxpool]\nsize=1\nstride=1\n";
    size_t n_layers = GR_MAX_LAYERS + 1;
    size_t len = strlen(head) + n_layers * strlen(layer);
    char *text = malloc(len + 1);
    ck_assert_ptr_nonnull(text);
    char *end = text;
    memcpy(end, head, strlen(head));
    end += strlen(head);
    for (size_t i = 0; i < n_layers; i++, end += strlen(layer))
        memcpy(end, layer, strlen(layer));
    *end = '\0';
    gr_net *net = NULL;
    /* 4 lines of [net], then layer i starts at line 5 + 3*i: the one past the limit is i = 4096. */
    ck_assert_int_eq(gr_net_parse(text, len, "many.cfg", &net), GR_ERR_LIMIT);
    ck_assert_ptr_null(net);
    char where[64];
    snprintf(where, sizeof where, "many.cfg:%d:", 5 + 3 * GR_MAX_LAYERS);
    ck_assert_msg(strstr(gr_last_error(), where), "%s", gr_last_error());
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "too many layers"));
    /* Exactly GR_MAX_LAYERS layers is fine. */
    ck_assert_int_eq(gr_net_parse(text, len - strlen(layer), "many.cfg", &net), GR_OK);
    ck_assert_int_eq(net->n_layers, GR_MAX_LAYERS);
    gr_net_free(net);
    free(text);
}
END_TEST

START_TEST(missing_file_is_io_error)
{
    gr_net *net = (gr_net *)&net; /* must be reset to NULL */
    ck_assert_int_eq(gr_net_parse_file(CFG_DIR "no-such-file.cfg", &net), GR_ERR_IO);
    ck_assert_ptr_null(net);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "no-such-file.cfg"));
}
END_TEST

START_TEST(null_arguments)
{
    gr_net *net = NULL;
    ck_assert_int_eq(gr_net_parse(NULL, 10, "x.cfg", &net), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gr_net_parse("[net]", 5, "x.cfg", NULL), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gr_net_parse_file(NULL, &net), GR_ERR_INVALID_ARGUMENT);
    gr_net_free(NULL); /* no-op */
}
END_TEST

/* ---- malformed cfgs ------------------------------------------------------------------------ */

typedef struct bad_cfg {
    const char *file;
    gr_status status;
    int line;
    const char *says; /* a substring of the message */
} bad_cfg;

static const bad_cfg bad_cfgs[] = {
    {"unknown_section.cfg", GR_ERR_PARSE, 14, "unknown section [bogus]"},
    {"unknown_key.cfg", GR_ERR_PARSE, 9, "unknown key 'filterz'"},
    {"missing_filters.cfg", GR_ERR_PARSE, 6, "missing required key 'filters'"},
    {"missing_route_layers.cfg", GR_ERR_PARSE, 14, "missing required key 'layers'"},
    {"non_numeric.cfg", GR_ERR_PARSE, 8, "'abc' is not an integer"},
    {"trailing_garbage.cfg", GR_ERR_PARSE, 7, "'16abc' is not an integer"},
    {"negative_size.cfg", GR_ERR_PARSE, 8, "key 'size': '-3' is not a positive integer"},
    {"zero_stride.cfg", GR_ERR_PARSE, 8, "key 'stride': '0' is not a positive integer"},
    {"huge_filters.cfg", GR_ERR_LIMIT, 7, "key 'filters'"},
    {"huge_width.cfg", GR_ERR_LIMIT, 2, "key 'width'"},
    {"route_later_layer.cfg", GR_ERR_PARSE, 15, "earlier layer"},
    {"route_self.cfg", GR_ERR_PARSE, 15, "earlier layer"},
    {"route_before_first.cfg", GR_ERR_PARSE, 15, "before the first layer"},
    {"shortcut_later_layer.cfg", GR_ERR_PARSE, 15, "key 'from'"},
    {"empty.cfg", GR_ERR_PARSE, 1, "empty"},
    {"comments_only.cfg", GR_ERR_PARSE, 1, "empty"},
    {"no_net.cfg", GR_ERR_PARSE, 1, "[net]"},
    {"second_net.cfg", GR_ERR_PARSE, 14, "[network]"},
    {"key_before_section.cfg", GR_ERR_PARSE, 1, "before the first section"},
    {"too_many_route_inputs.cfg", GR_ERR_LIMIT, 15, "too many route inputs"},
    {"too_many_anchors.cfg", GR_ERR_LIMIT, 13, "key 'num'"},
    {"anchor_count.cfg", GR_ERR_PARSE, 12, "key 'anchors'"},
    {"yolo_mask_range.cfg", GR_ERR_PARSE, 12, "key 'mask'"},
    {"unsupported_section.cfg", GR_ERR_UNSUPPORTED, 14, "[reorg3d]"},
    {"unsupported_dilation.cfg", GR_ERR_UNSUPPORTED, 9, "key 'dilation': '2' needs padding"},
    {"bad_activation.cfg", GR_ERR_PARSE, 9, "'sparkly' is not an activation"},
    {"malformed_header.cfg", GR_ERR_PARSE, 6, "malformed section header"},
    {"missing_equals.cfg", GR_ERR_PARSE, 7, "expected 'key=value'"},
    {"kernel_too_large.cfg", GR_ERR_PARSE, 6, "layer 0: [convolutional]"},
    {"long_line.cfg", GR_ERR_LIMIT, 6, "longer than 4096"},
    {"binary.cfg", GR_ERR_PARSE, 3, "binary data"},
};

START_TEST(malformed_cfg_fails_with_location)
{
    const bad_cfg *bad = &bad_cfgs[_i];
    char path[256], where[300];
    snprintf(path, sizeof path, CFG_DIR "%s", bad->file);
    snprintf(where, sizeof where, "%s:%d: ", path, bad->line);
    gr_net *net = (gr_net *)&net;
    gr_status st = gr_net_parse_file(path, &net);
    ck_assert_msg(st == bad->status, "%s: status %s, expected %s (%s)", bad->file,
                  gr_status_str(st), gr_status_str(bad->status), gr_last_error());
    ck_assert_ptr_null(net);
    const char *msg = gr_last_error();
    ck_assert_msg(strncmp(msg, where, strlen(where)) == 0, "'%s' does not start with '%s'", msg,
                  where);
    ck_assert_msg(strstr(msg, bad->says) != NULL, "'%s' does not say '%s'", msg, bad->says);
    ck_assert_msg(strchr(msg, '\n') == NULL, "message is not one line: '%s'", msg);
}
END_TEST

/* Deterministic mutations of a real cfg (byte flips, insertions of digits / punctuation,
 * truncations): each either parses or fails with a message; none may crash (the ASan build
 * makes any out-of-bounds access fatal here). */
START_TEST(mutated_cfgs_never_crash)
{
    const gr_embedded_file *cfg = gr_embedded_find("yolov3-tiny.cfg");
    ck_assert_ptr_nonnull(cfg);
    static const char alphabet[] = "[]=,-#;\n\r 0123456789x.\0\xff";
    char *buf = malloc(cfg->size + 1);
    ck_assert_ptr_nonnull(buf);
    gr_rng rng;
    gr_rng_seed(&rng, 7);
    int parsed = 0, failed = 0;
    for (int iter = 0; iter < 3000; iter++) {
        memcpy(buf, cfg->data, cfg->size);
        size_t len = cfg->size;
        int edits = 1 + (int)(gr_rng_u64(&rng) % 4);
        for (int e = 0; e < edits; e++) {
            size_t at = (size_t)(gr_rng_u64(&rng) % len);
            buf[at] = alphabet[gr_rng_u64(&rng) % (sizeof alphabet - 1)];
        }
        if (iter % 10 == 0)
            len = (size_t)(gr_rng_u64(&rng) % (cfg->size + 1));
        gr_net *net = NULL;
        gr_status st = gr_net_parse(buf, len, "mutant.cfg", &net);
        if (st == GR_OK) {
            ck_assert_ptr_nonnull(net);
            parsed++;
            gr_net_free(net);
        } else {
            ck_assert_ptr_null(net);
            ck_assert_msg(strncmp(gr_last_error(), "mutant.cfg", 10) == 0, "%s", gr_last_error());
            failed++;
        }
    }
    /* Both outcomes occur, or the mutations are not exercising anything. */
    ck_assert_int_gt(parsed, 0);
    ck_assert_int_gt(failed, 0);
    free(buf);
}
END_TEST

/* ---- built-ins, class names, heads ---------------------------------------------------------- */

START_TEST(builtin_names_list)
{
    const char *const *names = gr_net_builtin_names();
    const char *expected[] = {"yolo",        "yolov2-tiny-voc", "yolov2-tiny", "yolov3-tiny",
                              "shapes",      "darknet19",       "resnet18",    "yolov4-tiny",
                              "yolov4",      "yolov7-tiny",     "yolov4-csp"};
    for (int i = 0; i < 11; i++)
        ck_assert_str_eq(names[i], expected[i]);
    ck_assert_ptr_null(names[11]);
}
END_TEST

START_TEST(builtin_models_parse_with_class_names)
{
    const struct {
        const char *name, *canonical;
        int layers, classes;
        const char *first, *last;
    } cases[] = {
        {"yolo", "yolov2-tiny-voc", 16, 20, "aeroplane", "tvmonitor"},
        {"yolov2-tiny-voc", "yolov2-tiny-voc", 16, 20, "aeroplane", "tvmonitor"},
        {"yolov2-tiny", "yolov2-tiny", 16, 80, "person", "toothbrush"},
        {"yolov3-tiny", "yolov3-tiny", 24, 80, "person", "toothbrush"},
        {"shapes", "shapes", 12, 5, "circle", "cross"},
        /* Darknet's classifiers: 19 conv + 5 maxpool + avgpool + softmax; 18 conv + 8 shortcut +
         * maxpool + avgpool + softmax. */
        {"darknet19", "darknet19", 26, 1000, "kit fox", "dumbbell"},
        {"resnet18", "resnet18", 29, 1000, "kit fox", "dumbbell"},
        /* AlexeyAB's detectors: every section after [net] is one layer. */
        {"yolov4-tiny", "yolov4-tiny", 38, 80, "person", "toothbrush"},
        {"yolov4", "yolov4", 162, 80, "person", "toothbrush"},
        {"yolov7-tiny", "yolov7-tiny", 99, 80, "person", "toothbrush"},
        {"yolov4-csp", "yolov4-csp", 175, 80, "person", "toothbrush"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gr_net *net = NULL;
        ck_assert_int_eq(gr_net_builtin(cases[i].name, &net), GR_OK);
        ck_assert_str_eq(net->name, cases[i].canonical);
        ck_assert_int_eq(net->n_layers, cases[i].layers);
        ck_assert_int_eq(net->n_class_names, cases[i].classes);
        ck_assert_str_eq(net->class_names[0], cases[i].first);
        ck_assert_str_eq(net->class_names[cases[i].classes - 1], cases[i].last);
        gr_net_free(net);
    }
}
END_TEST

START_TEST(unknown_builtin_is_invalid_argument)
{
    gr_net *net = NULL;
    ck_assert_int_eq(gr_net_builtin("yolov9-huge", &net), GR_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(net);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "yolov9-huge"));
    ck_assert_ptr_null(gr_embedded_find("nothing.cfg"));
}
END_TEST

START_TEST(class_names_text_trims_and_skips_blank_lines)
{
    gr_net *net = parse_ok("models/yolov2-tiny-voc.cfg");
    const char text[] = "  cat \r\n\r\n\tdog\n\nbig bird\n";
    ck_assert_int_eq(gr_net_set_class_names_text(net, text, strlen(text), "x.names"), GR_OK);
    ck_assert_int_eq(net->n_class_names, 3);
    ck_assert_str_eq(net->class_names[0], "cat");
    ck_assert_str_eq(net->class_names[1], "dog");
    ck_assert_str_eq(net->class_names[2], "big bird");
    /* Replacing frees the old list (ASan checks); binary input is rejected and keeps the list. */
    ck_assert_int_eq(gr_net_load_class_names(net, "models/coco.names"), GR_OK);
    ck_assert_int_eq(net->n_class_names, 80);
    ck_assert_int_eq(gr_net_set_class_names_text(net, "a\0b", 3, "bin.names"), GR_ERR_PARSE);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "bin.names:1:"));
    ck_assert_int_eq(net->n_class_names, 80);
    ck_assert_int_eq(gr_net_load_class_names(net, "no/such.names"), GR_ERR_IO);
    gr_net_free(net);
}
END_TEST

START_TEST(heads_of_yolov2_and_yolov3)
{
    int heads[4];
    gr_net *v2 = parse_ok("models/yolov2-tiny-voc.cfg");
    ck_assert_int_eq(gr_net_heads(v2, heads, 4), 1);
    ck_assert_int_eq(heads[0], 14);
    ck_assert_int_eq(gr_net_head_decoder(v2, 0), 15);
    ck_assert_int_eq(gr_net_head_decoder(v2, 1), -1);
    gr_net_free(v2);

    gr_net *v3 = parse_ok("models/yolov3-tiny.cfg");
    ck_assert_int_eq(gr_net_heads(v3, heads, 4), 2);
    ck_assert_int_eq(heads[0], 15);
    ck_assert_int_eq(heads[1], 22);
    ck_assert_int_eq(gr_net_head_decoder(v3, 0), 16);
    ck_assert_int_eq(gr_net_head_decoder(v3, 1), 23);
    ck_assert_int_eq(gr_net_heads(v3, heads, 1), 1); /* respects max */
    gr_net_free(v3);
}
END_TEST

START_TEST(net_without_decoder_has_last_layer_as_head)
{
    gr_net *net = parse_ok(CFG_DIR "valid_spellings.cfg");
    int heads[2];
    ck_assert_int_eq(gr_net_heads(net, heads, 2), 1);
    ck_assert_int_eq(heads[0], net->n_layers - 1);
    ck_assert_int_eq(gr_net_head_decoder(net, 0), -1);
    gr_net_free(net);
}
END_TEST

START_TEST(input_shape_of_layers)
{
    gr_net *net = parse_ok("models/yolov3-tiny.cfg");
    gr_shape in0 = gr_net_input_shape(net, 0, 0);
    ck_assert(in0.c == 3 && in0.h == 416 && in0.w == 416);
    gr_shape r1 = gr_net_input_shape(net, 20, 1); /* layer 8's output */
    ck_assert(r1.c == 256 && r1.h == 26 && r1.w == 26);
    gr_shape none = gr_net_input_shape(net, 20, 2);
    ck_assert_int_eq(none.c, 0);
    none = gr_net_input_shape(net, 99, 0);
    ck_assert_int_eq(none.c, 0);
    gr_net_free(net);
}
END_TEST

static Suite *cfg_suite(void)
{
    Suite *s = suite_create("cfg");
    TCase *shipped = tcase_create("shipped");
    tcase_add_test(shipped, alexeyab_yolo_keys_are_read);
    tcase_add_test(shipped, preprocessing_follows_the_darknet_of_the_cfg);
    tcase_add_test(shipped, dropout_is_the_identity);
    tcase_add_test(shipped, maxpool_stride_xy_and_shortcut_keys);
    tcase_add_test(shipped, refusals_match_readme);
    tcase_add_test(shipped, sam_and_scale_channels);
    tcase_add_test(shipped, yolov2_tiny_voc_layers);
    tcase_add_test(shipped, yolov2_tiny_coco_layers);
    tcase_add_test(shipped, yolov3_tiny_layers);
    tcase_add_test(shipped, edges_point_backwards);
    tcase_add_test(shipped, cfg_line_numbers);
    suite_add_tcase(s, shipped);

    TCase *syntax = tcase_create("syntax");
    tcase_add_test(syntax, darknet_spellings);
    tcase_add_test(syntax, local_avgpool_section);
    tcase_add_test(syntax, crlf_equals_lf);
    tcase_add_test(syntax, parse_from_memory_names_source);
    tcase_add_test(syntax, darknet_flags_and_default_valued_keys);
    tcase_add_test(syntax, alexeyab_conv_keys_and_activations);
    tcase_add_test(syntax, too_many_layers);
    tcase_add_test(syntax, missing_file_is_io_error);
    tcase_add_test(syntax, null_arguments);
    suite_add_tcase(s, syntax);

    TCase *malformed = tcase_create("malformed");
    tcase_add_loop_test(malformed, malformed_cfg_fails_with_location, 0,
                        (int)(sizeof bad_cfgs / sizeof bad_cfgs[0]));
    tcase_add_test(malformed, mutated_cfgs_never_crash);
    tcase_set_timeout(malformed, 60);
    suite_add_tcase(s, malformed);

    TCase *builtin = tcase_create("builtin");
    tcase_add_test(builtin, builtin_names_list);
    tcase_add_test(builtin, builtin_models_parse_with_class_names);
    tcase_add_test(builtin, unknown_builtin_is_invalid_argument);
    tcase_add_test(builtin, class_names_text_trims_and_skips_blank_lines);
    tcase_add_test(builtin, heads_of_yolov2_and_yolov3);
    tcase_add_test(builtin, net_without_decoder_has_last_layer_as_head);
    tcase_add_test(builtin, input_shape_of_layers);
    suite_add_tcase(s, builtin);
    return s;
}

int main(void)
{
    SRunner *runner = srunner_create(cfg_suite());
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? 0 : 1;
}
