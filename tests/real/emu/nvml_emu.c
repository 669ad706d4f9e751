/* tests/real/emu/nvml_emu.c: the NVML entry points kern_clock
 * (kernels/kern_common.cu) opens from libnvidia-ml.so.1, for the emulated
 * GPU: built as build/nvml_emu/libnvidia-ml.so.1 and found through
 * LD_LIBRARY_PATH by the emulated tests only (never installed, never on a
 * user's path). An emulated device has no clock or power of its own, so
 * every device answers fixed values (NVML_EMU_SM_MHZ, NVML_EMU_POWER_MW,
 * the software power-cap reason bit): the tests check the readings' whole
 * path against them exactly (the reads while the GPU works, their sums,
 * mW to W, the capped share), which a real driver's moving clock cannot
 * give. Return codes are NVML's: 0 success, 2 invalid argument, 6 not found. */
#include <stdio.h>
#include <string.h>

#define NVML_EMU_SM_MHZ 1740u      /* also in tests/real/check_run.py and tests/calib/check_calibrate.sh */
#define NVML_EMU_POWER_MW 650000u  /* 650 W */
#define NVML_EMU_DEVICES 16
#define NVML_CLOCK_SM 1
#define NVML_REASON_SW_POWER_CAP 0x4ull

static int handles[NVML_EMU_DEVICES]; /* a device handle points at its slot */

int nvmlInit_v2(void) { return 0; }

/* The emulated CUDA runtime's ids: "0000:BB:00.0" with BB = 0x18 + device. */
int nvmlDeviceGetHandleByPciBusId_v2(const char *bus, void **dev)
{
    unsigned domain, b, d, f;
    if (!bus || !dev || sscanf(bus, "%x:%x:%x.%x", &domain, &b, &d, &f) != 4)
        return 2;
    if (domain != 0 || d != 0 || f != 0 || b < 0x18 || b >= 0x18 + NVML_EMU_DEVICES)
        return 6;
    *dev = &handles[b - 0x18];
    return 0;
}

static int bad(const void *dev) { return !dev || (const int *)dev < handles || (const int *)dev >= handles + NVML_EMU_DEVICES; }

int nvmlDeviceGetClockInfo(void *dev, int type, unsigned *mhz)
{
    if (bad(dev) || !mhz || type != NVML_CLOCK_SM)
        return 2;
    *mhz = NVML_EMU_SM_MHZ;
    return 0;
}

int nvmlDeviceGetPowerUsage(void *dev, unsigned *mw)
{
    if (bad(dev) || !mw)
        return 2;
    *mw = NVML_EMU_POWER_MW;
    return 0;
}

int nvmlDeviceGetCurrentClocksEventReasons(void *dev, unsigned long long *bits)
{
    if (bad(dev) || !bits)
        return 2;
    *bits = NVML_REASON_SW_POWER_CAP;
    return 0;
}
