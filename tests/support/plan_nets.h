/* Networks for the planner tests: random Darknet cfgs (chains, fan-out, concat, shortcut,
 * upsample, reorg, several heads) parsed by the real parser and given synthetic weights, and the
 * built-in cfgs at a reduced input size so full-network runs stay fast. */
#ifndef GR_TESTS_PLAN_NETS_H
#define GR_TESTS_PLAN_NETS_H

#include <stddef.h>
#include <stdint.h>

#include "models/net.h"

/* Write a random cfg for `seed` into buf (NUL-terminated). Returns the length, 0 if it did not fit.
 */
size_t gr_test_random_cfg(uint64_t seed, char *buf, size_t len);

/* Parse the random cfg of `seed` and synthesize its weights. */
gr_status gr_test_random_net(uint64_t seed, gr_net **out);

/* A built-in cfg ("yolov2-tiny-voc.cfg") with its input changed to side x side (a multiple of 32),
 * weights synthesized with seed 1. */
gr_status gr_test_builtin_at(const char *cfg_name, int side, gr_net **out);

/* A small route/reorg network (tests/data/route_reorg.cfg), weights synthesized with seed 1. */
gr_status gr_test_route_reorg_net(gr_net **out);

/* YOLOv8's ONNX head, small (tests/data/concat_head.cfg): layer 0 a 16-channel feature map, 1 a
 * 64-channel box conv, 3 a 3-channel class conv, 4 their concat, the output; seed 1. */
gr_status gr_test_concat_head_net(gr_net **out);

#endif
