/* sim/h5attr.h: the one way megasim writes a string attribute into its
 * HDF5 files (results, reproduce, search, calibration samples): UTF-8,
 * variable length, so configurations larger than 64 KiB fit and h5py
 * reads them as str; and the one way it reads one back (either kind of
 * string). Header-only so calib/ can use it without linking the
 * simulator. */
#ifndef SIM_H5ATTR_H
#define SIM_H5ATTR_H

#include <hdf5.h>
#include <stdlib.h>
#include <string.h>

/* 0, or -1 when any HDF5 call fails (every handle is closed either way). */
static inline int h5_attr_str(hid_t loc, const char *name, const char *v)
{
    hid_t t = H5Tcopy(H5T_C_S1), sp = H5Screate(H5S_SCALAR), a = -1;
    int ok = t >= 0 && sp >= 0 && H5Tset_size(t, H5T_VARIABLE) >= 0 && H5Tset_cset(t, H5T_CSET_UTF8) >= 0 &&
             (a = H5Acreate2(loc, name, t, sp, H5P_DEFAULT, H5P_DEFAULT)) >= 0 && H5Awrite(a, t, &v) >= 0;
    if (a >= 0)
        ok &= H5Aclose(a) >= 0;
    if (sp >= 0)
        H5Sclose(sp);
    if (t >= 0)
        H5Tclose(t);
    return ok ? 0 : -1;
}

/* Attribute `name` of object `obj` (a path from loc), variable or fixed
 * length, as a malloc'd string; NULL when absent, not a string, or
 * unreadable. */
static inline char *h5_attr_str_get(hid_t loc, const char *obj, const char *name)
{
    if (H5Aexists_by_name(loc, obj, name, H5P_DEFAULT) <= 0)
        return NULL;
    hid_t a = H5Aopen_by_name(loc, obj, name, H5P_DEFAULT, H5P_DEFAULT);
    hid_t ft = a >= 0 ? H5Aget_type(a) : -1, mt = -1;
    char *out = NULL;
    if (ft >= 0 && H5Tget_class(ft) == H5T_STRING && (mt = H5Tcopy(ft)) >= 0) {
        if (H5Tis_variable_str(ft) > 0) {
            char *s = NULL;
            if (H5Aread(a, mt, &s) >= 0 && s) {
                out = strdup(s);
                H5free_memory(s);
            }
        } else {
            size_t n = H5Tget_size(ft);
            out = calloc(n + 1, 1);
            if (out && H5Aread(a, mt, out) < 0) {
                free(out);
                out = NULL;
            }
        }
    }
    if (mt >= 0)
        H5Tclose(mt);
    if (ft >= 0)
        H5Tclose(ft);
    if (a >= 0)
        H5Aclose(a);
    return out;
}

#endif
