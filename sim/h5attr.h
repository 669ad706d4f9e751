/* sim/h5attr.h: the one way megasim writes a string attribute into its
 * HDF5 files (results, reproduce, search, calibration samples): UTF-8,
 * variable length, so configurations larger than 64 KiB fit and h5py
 * reads them as str. Header-only so calib/ can use it without linking the
 * simulator. */
#ifndef SIM_H5ATTR_H
#define SIM_H5ATTR_H

#include <hdf5.h>

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

#endif
