/* NumPy .npy files of float32 tensors: the CLI's --input X.npy and --save-output.
 * Writes format v1.0, '<f4', C order; reads v1.0/2.0/3.0 headers but only '<f4' C-order data.
 * Every malformed file is rejected with a one-line message naming the file and byte offset.
 * NaN/Inf values are valid floats but never silent: the *_counted readers count them (or refuse
 * them), and gr_npy_read warns on stderr. */
#ifndef GR_TOOLS_NPY_H
#define GR_TOOLS_NPY_H

#include "base/base.h"

/* Most dimensions gr_npy_read/gr_npy_write handle. */
#define GR_NPY_MAX_NDIM 32

/* Write `data` (the product of dims[0..ndim) floats; ndim 0 is one scalar) to `path`. */
gr_status gr_npy_write(const char *path, const float *data, const int *dims, int ndim);

/* Read a '<f4' C-order array of at most max_ndim dimensions. On success *data is a malloc'd
 * array (free()), dims[0..*ndim) its shape; on failure *data is NULL and *ndim 0. NaN/Inf values
 * are kept, with one warning line on stderr ("graphrun: warning: FILE: N non-finite values ..."). */
gr_status gr_npy_read(const char *path, float **data, int *dims, int *ndim, int max_ndim);

/* gr_npy_read without the warning: *nonfinite = the NaN/Inf values read. With
 * nonfinite_is_error, any is GR_ERR_NUMERIC naming the file, the count and the first one's
 * element and byte offset (the out-parameters then empty, as for any failure). */
gr_status gr_npy_read_counted(const char *path, float **data, int *dims, int *ndim, int max_ndim,
                              int nonfinite_is_error, size_t *nonfinite);

/* The same from `len` bytes in memory; `name` names the source in messages. The data size is
 * checked against the header before anything is allocated. */
gr_status gr_npy_read_mem(const uint8_t *bytes, size_t len, const char *name, float **data,
                          int *dims, int *ndim, int max_ndim);
/* The same, counting (or refusing) NaN/Inf values as gr_npy_read_counted does. */
gr_status gr_npy_read_mem_counted(const uint8_t *bytes, size_t len, const char *name,
                                  float **data, int *dims, int *ndim, int max_ndim,
                                  int nonfinite_is_error, size_t *nonfinite);

#endif
