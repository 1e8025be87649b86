/* NumPy .npy files of float32 tensors: the CLI's --input X.npy and --save-output.
 * Writes format v1.0, '<f4', C order; reads v1.0/2.0/3.0 headers but only '<f4' C-order data.
 * Every malformed file is rejected with a one-line message naming the file and byte offset. */
#ifndef GR_TOOLS_NPY_H
#define GR_TOOLS_NPY_H

#include "base/base.h"

/* Most dimensions gr_npy_read/gr_npy_write handle. */
#define GR_NPY_MAX_NDIM 32

/* Write `data` (the product of dims[0..ndim) floats; ndim 0 is one scalar) to `path`. */
gr_status gr_npy_write(const char *path, const float *data, const int *dims, int ndim);

/* Read a '<f4' C-order array of at most max_ndim dimensions. On success *data is a malloc'd
 * array (free()), dims[0..*ndim) its shape; on failure *data is NULL and *ndim 0. */
gr_status gr_npy_read(const char *path, float **data, int *dims, int *ndim, int max_ndim);

/* The same from `len` bytes in memory; `name` names the source in messages. The data size is
 * checked against the header before anything is allocated. */
gr_status gr_npy_read_mem(const uint8_t *bytes, size_t len, const char *name, float **data,
                          int *dims, int *ndim, int max_ndim);

#endif
