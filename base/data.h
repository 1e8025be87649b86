/* graphrun's data files (the bundled photos, the shapes model's weights and image sets): where
 * they are (gr_data_path, runtime.h, is the one place that knows) and the bundled photo list the
 * library and the CLI share. */
#ifndef GR_BASE_DATA_H
#define GR_BASE_DATA_H

#include "base/base.h"

/* The bundled photos, in this order: dog, person, horses, eagle, giraffe (.jpg). The default int8
 * calibration set and `graphrun compare`'s default inputs. */
#define GR_BUNDLED_PHOTOS 5

/* *list: the bundled photos' paths (gr_data_path), NULL-terminated, valid for the process's
 * lifetime (resolved once). GR_ERR_IO as gr_data_path's when one is missing. */
gr_status gr_data_bundled_photos(const char *const **list);

#endif
