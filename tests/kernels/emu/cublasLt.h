/* tests/kernels/emu/cublasLt.h: the cuBLASLt types kern_common.h names. The
 * emulated build has no cuBLASLt: it leaves out the GEMMs and the unfused
 * attention that use it (KERN_EMU). */
#ifndef EMU_CUBLASLT_H
#define EMU_CUBLASLT_H
typedef struct cublasLtContext *cublasLtHandle_t;
typedef enum cublasStatus { CUBLAS_STATUS_SUCCESS = 0 } cublasStatus_t;
#endif
