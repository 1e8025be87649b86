/* Saved engines (runtime/engine_file.c): the file's layout and the device comparison, internal
 * so the tests can tamper with a header field by its offset and check a device on any machine.
 *
 * Layout (little endian), GR_ENGINE_FILE_HEADER bytes of header, the content, then its checksum:
 *     0   "GRENGINE"                 magic
 *     8   u32 format version         GR_ENGINE_FILE_VERSION
 *     12  char[16] graphrun version  gr_version(), NUL-padded
 *     28  u32 device kind            1 CPU, 2 GPU
 *     32  u32 sm                     GPU: major*10 + minor; 0 on the CPU
 *     36  char[128] GPU name         NUL-padded
 *     164 i32 CUDA runtime, 168 i32 driver, 172 i32 SM count
 *     176 u64 cuBLASLt version
 *     184 u64 content bytes
 *     192 content: build notice, options (format 4 on: ending with the preprocessing), network (models/net_file.c; its weight floats at a
 *         multiple of GR_NET_WEIGHT_ALIGN bytes of the file; format 5 on: ending with its
 *         outputs, the detection head run on the host (models/onnx/tail.h, gr_tail_write) and
 *         the model file's int8 scales (gr_net_qdq)), precision map, int8 ranges,
 *         backend blob (the GPU's: runtime/saved_gpu.h)
 *     end u64 gr_hash64 (base/bytes.h) of every byte before it (header included) */
#ifndef GR_RUNTIME_ENGINE_FILE_H
#define GR_RUNTIME_ENGINE_FILE_H

#include "runtime/engine_internal.h"

#define GR_ENGINE_FILE_MAGIC "GRENGINE"
#define GR_ENGINE_FILE_VERSION 5
/* Format 3 (0.x before the preprocessing field, options without it) still loads: its engines
 * letterbox, as they did; so does format 4 (before the network's outputs, head and Q/DQ
 * section: its networks had none of them). */
#define GR_ENGINE_FILE_OLDEST_VERSION 3
#define GR_ENGINE_FILE_HEADER 192
#define GR_ENGINE_FILE_OFF_VERSION 8
#define GR_ENGINE_FILE_OFF_GRAPHRUN 12
#define GR_ENGINE_FILE_OFF_KIND 28
#define GR_ENGINE_FILE_OFF_SM 32
#define GR_ENGINE_FILE_OFF_CONTENT_BYTES 184
#define GR_ENGINE_FILE_MAX_BYTES ((size_t)1 << 32) /* 4 GiB: weights of the largest Darknet nets
                                                      are ~250 MB */

/* Refuse a file built for `file` on `here`: GR_OK when they agree (a CPU file agrees with
 * anything); else GR_ERR_UNSUPPORTED (GR_ERR_NO_DEVICE when here has no GPU) with one line naming
 * the first field that differs, e.g. "m.grengine: built for sm_90 (NVIDIA H100 80GB HBM3), this
 * GPU is sm_86 (NVIDIA A10)". */
gr_status gr_engine_file_check_device(const gr_device_identity *file, const gr_device_identity *here,
                                      const char *source);

#endif
