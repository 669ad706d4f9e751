/* tests/real/emu/nccl_emu_int.h: what the NCCL emulation's two halves
 * share: the API and its launches (nccl_emu.cc) and the MPI side
 * (nccl_emu_mpi.cc). Not for other users: nccl.h is the interface. */
#ifndef NCCL_EMU_INT_H
#define NCCL_EMU_INT_H

#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cuda_emu_stream.h"
#include "kernels/kern_common.h"
#include "nccl.h"

/* ---- errors (nccl_emu_mpi.cc) --------------------------------------------- */

extern char last_err[1024]; /* ncclGetLastError's */
/* Keeps the message for ncclGetLastError and returns r. */
__attribute__((format(printf, 2, 3))) ncclResult_t fail(ncclResult_t r, const char *fmt, ...);
/* The same, also printed on stderr: failures no caller is told of. */
__attribute__((format(printf, 2, 3))) ncclResult_t fail_loud(ncclResult_t r, const char *fmt, ...);
std::string mpi_msg(int rc);

/* ---- data types and sums -------------------------------------------------- */

struct TypeInfo {
  size_t bytes;
  MPI_Datatype mpi;
  const char *name;
};
bool type_info(ncclDataType_t t, TypeInfo *ti);
/* out[i] = rows[0][i] + rows[1][i] + ... in rank order (fp32 for fp32 and
 * bf16, fp64 for fp64, exact for int32). rows: (n, count). */
void sum_rows(ncclDataType_t t, const void *rows, int n, size_t count, void *out);

/* ---- waiting on MPI -------------------------------------------------------- */

void poll_pause(unsigned &polls);
enum { WAIT_OK = 0, WAIT_STOPPED = -1 };
/* Polls MPI_Testall until reqs complete (WAIT_OK), MPI fails (its code;
 * statuses hold the errors when it is MPI_ERR_IN_STATUS) or *stop turns
 * true (WAIT_STOPPED, requests left pending). */
int wait_all(std::vector<MPI_Request> &reqs, std::vector<MPI_Status> &st, const std::atomic<bool> *stop);

/* ---- unique ids and communicators ---------------------------------------- */

/* The id's bytes: unique job-wide as (root world rank, root's counter). */
struct IdBits {
  uint64_t magic;
  int32_t root; /* world rank of the creator, which answers the bootstrap */
  uint32_t pad;
  uint64_t counter; /* per process */
};
static_assert(sizeof(IdBits) <= NCCL_UNIQUE_ID_BYTES, "ncclUniqueId too small");
static constexpr uint64_t id_magic = 0x314d45434c43434eull; /* "NCCLCEM1" */
IdBits id_bits(const ncclUniqueId &id);
uint64_t id_hash(const ncclUniqueId &id); /* FNV-1a: the order of communicators within a group */
enum { TAG_REQUEST, TAG_REPLY, TAG_CREATE };

/* Tags on a communicator's own MPI communicator. */
enum { TAG_DATA = 0, TAG_CONN_SEND = 1, TAG_CONN_RECV = 2 };

/* A communicator's state, shared by its handle and its launches in
 * flight (so that ncclCommAbort need not wait for them). */
struct Comm {
  MPI_Comm mpi = MPI_COMM_NULL;
  int rank = 0, nranks = 0;
  uint64_t hash = 0;
  std::mutex m;
  std::condition_variable cv;
  uint64_t issued = 0, done = 0; /* launches: numbered when issued, completed in that order */
  std::atomic<int> error{ncclSuccess}; /* sticky: the first failure inside a launch */
  std::atomic<bool> aborted{false};
  std::vector<char> send_conn, recv_conn; /* per peer: connected (host side only) */
};

struct ncclComm {
  std::shared_ptr<Comm> c;
};

ncclResult_t check_thread_level();
/* The world ranks of the members, by NCCL rank, through the id's root. */
ncclResult_t bootstrap(const IdBits &id, int nranks, int rank, std::vector<int> &world);
/* The members' MPI communicator, ranks in NCCL rank order. */
ncclResult_t create_mpi_comm(const IdBits &id, const std::vector<int> &world, Comm &c);

#endif
