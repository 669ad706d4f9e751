/* tests/real/emu/nccl_emu_mpi.cc: the NCCL emulation's MPI side (see
 * nccl_emu.cc for what the emulation guarantees): its error messages, the
 * data types and the rank-ordered sums, polling MPI without hogging the
 * cores, the unique ids, and the bootstrap that turns an id into the
 * members' MPI communicator. */
#include "nccl_emu_int.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <thread>

/* ---- errors --------------------------------------------------------------- */

static std::mutex err_m;
char last_err[1024];

static ncclResult_t vfail(bool print, ncclResult_t r, const char *fmt, va_list ap) {
  char msg[sizeof last_err];
  std::vsnprintf(msg, sizeof msg, fmt, ap);
  std::lock_guard<std::mutex> lk(err_m);
  std::snprintf(last_err, sizeof last_err, "%s", msg);
  if (print) std::fprintf(stderr, "nccl_emu: %s\n", msg);
  return r;
}

/* Keeps the message for ncclGetLastError and returns r. */
__attribute__((format(printf, 2, 3))) ncclResult_t fail(ncclResult_t r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfail(false, r, fmt, ap);
  va_end(ap);
  return r;
}

/* The same, also printed on stderr: failures no caller is told of. */
__attribute__((format(printf, 2, 3))) ncclResult_t fail_loud(ncclResult_t r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfail(true, r, fmt, ap);
  va_end(ap);
  return r;
}

std::string mpi_msg(int rc) {
  char s[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, s, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(s, (size_t)len);
}

/* ---- data types and sums -------------------------------------------------- */


bool type_info(ncclDataType_t t, TypeInfo *ti) {
  switch (t) {
  case ncclInt32: *ti = {4, MPI_INT32_T, "int32"}; return true;
  case ncclFloat32: *ti = {4, MPI_FLOAT, "float"}; return true;
  case ncclFloat64: *ti = {8, MPI_DOUBLE, "double"}; return true;
  case ncclBfloat16: *ti = {2, MPI_UINT16_T, "bf16"}; return true;
  default: return false;
  }
}

/* out[i] = in(rows[0][i]) + in(rows[1][i]) + ... in row (rank) order, in
 * the accumulator type A, stored with put. rows: (n, count). */
template <class T, class A, class In, class Put>
static void sum_rows_as(const void *rows, int n, size_t count, void *out, In in, Put put) {
  const T *r = static_cast<const T *>(rows);
  T *o = static_cast<T *>(out);
  for (size_t i = 0; i < count; i++) {
    A acc = in(r[i]);
    for (int k = 1; k < n; k++) acc += in(r[(size_t)k * count + i]);
    o[i] = put(acc);
  }
}

void sum_rows(ncclDataType_t t, const void *rows, int n, size_t count, void *out) {
  auto same = [](auto x) { return x; };
  switch (t) {
  case ncclFloat32: sum_rows_as<float, float>(rows, n, count, out, same, same); break;
  case ncclFloat64: sum_rows_as<double, double>(rows, n, count, out, same, same); break;
  case ncclInt32: /* two's complement wrap, as the GPU's integer adds */
    sum_rows_as<int32_t, uint32_t>(rows, n, count, out, [](int32_t x) { return (uint32_t)x; },
                                   [](uint32_t a) { return (int32_t)a; });
    break;
  case ncclBfloat16:
    sum_rows_as<kern_bf16, float>(rows, n, count, out, kern_bf16_to_float, kern_float_to_bf16);
    break;
  default: break; /* refused when issued */
  }
}

/* ---- waiting on MPI ------------------------------------------------------- */

/* Between polls: sched_yield for the first ones, then 50 us sleeps, so that
 * idle waiters leave the (few) cores to the ranks that have work. */
void poll_pause(unsigned &polls) {
  if (polls++ < 64)
    sched_yield();
  else
    std::this_thread::sleep_for(std::chrono::microseconds(50));
}

/* Polls MPI_Testall until reqs complete (WAIT_OK), MPI fails (its code;
 * statuses hold the errors when it is MPI_ERR_IN_STATUS) or *stop turns
 * true (WAIT_STOPPED, requests left pending). */
int wait_all(std::vector<MPI_Request> &reqs, std::vector<MPI_Status> &st, const std::atomic<bool> *stop) {
  st.assign(reqs.size(), MPI_Status{});
  unsigned polls = 0;
  for (;;) {
    int done = 0;
    int rc = MPI_Testall((int)reqs.size(), reqs.data(), &done, st.data());
    if (rc != MPI_SUCCESS) return rc;
    if (done) return WAIT_OK;
    if (stop && stop->load()) return WAIT_STOPPED;
    poll_pause(polls);
  }
}

/* One message of ints from src (or MPI_ANY_SOURCE) with tag on
 * MPI_COMM_WORLD, whatever its length; *from: its sender. */
static std::vector<int> recv_ints(int src, int tag, int *from) {
  MPI_Message msg;
  MPI_Status st;
  int flag = 0, n = 0;
  unsigned polls = 0;
  while (MPI_Improbe(src, tag, MPI_COMM_WORLD, &flag, &msg, &st) == MPI_SUCCESS && !flag) poll_pause(polls);
  MPI_Get_count(&st, MPI_INT, &n);
  std::vector<int> v((size_t)std::max(n, 0));
  MPI_Mrecv(v.data(), n, MPI_INT, &msg, MPI_STATUS_IGNORE);
  if (from) *from = st.MPI_SOURCE;
  return v;
}

static void send_ints(const std::vector<int> &v, int dst, int tag) {
  MPI_Request r;
  MPI_Isend(v.data(), (int)v.size(), MPI_INT, dst, tag, MPI_COMM_WORLD, &r);
  std::vector<MPI_Request> reqs{r};
  std::vector<MPI_Status> st;
  wait_all(reqs, st, nullptr);
}

/* ---- unique ids ----------------------------------------------------------- */

IdBits id_bits(const ncclUniqueId &id) {
  IdBits b;
  std::memcpy(&b, id.internal, sizeof b);
  return b;
}

/* FNV-1a of the id: the order of communicators within a group. */
uint64_t id_hash(const ncclUniqueId &id) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : id.internal) h = (h ^ ch) * 0x100000001b3ull;
  return h;
}

/* The bootstrap's tags on MPI_COMM_WORLD: three per id (request, reply,
 * MPI_Comm_create_group), in the upper half of [0, MPI_TAG_UB], far from
 * the small tags programs use. */
static int init_tag(uint64_t counter, int which) {
  int *ub = nullptr, flag = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
  long top = flag && ub ? *ub : 32767; /* the standard's minimum */
  long base = top / 2, slots = (top - base) / 3;
  return (int)(base + 3 * (long)(counter % (uint64_t)slots) + which);
}

/* ---- communicators -------------------------------------------------------- */

ncclResult_t check_thread_level() {
  int init = 0, fin = 0, level = MPI_THREAD_SINGLE;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (!init || fin) return fail(ncclInvalidUsage, "MPI is not initialised (or already finalised): NCCL runs over MPI here");
  MPI_Query_thread(&level);
  if (level >= MPI_THREAD_MULTIPLE) return ncclSuccess;
  static std::atomic<bool> said{false};
  const char *fmt = "MPI gives thread level %d, below MPI_THREAD_MULTIPLE (%d), which the NCCL emulation needs: "
                    "set OMPI_MPI_THREAD_LEVEL=3 (mpirun -x OMPI_MPI_THREAD_LEVEL=3)";
  return said.exchange(true) ? fail(ncclInvalidUsage, fmt, level, MPI_THREAD_MULTIPLE)
                             : fail_loud(ncclInvalidUsage, fmt, level, MPI_THREAD_MULTIPLE);
}

/* The root's side of the bootstrap: collects the other members' (nranks,
 * rank, world rank, counter), checks they agree and answers each with
 * [ok, world rank of NCCL rank 0, 1, ...]. */
static ncclResult_t bootstrap_root(const IdBits &id, int nranks, int rank, std::vector<int> &world) {
  std::vector<int> from((size_t)nranks - 1);
  std::string why;
  for (int k = 0; k + 1 < nranks; k++) {
    std::vector<int> q = recv_ints(MPI_ANY_SOURCE, init_tag(id.counter, TAG_REQUEST), &from[(size_t)k]);
    bool ok = q.size() == 4 && q[0] == nranks && q[3] == (int)(id.counter & 0x7fffffff) && q[1] >= 0 &&
              q[1] < nranks && world[(size_t)q[1]] < 0;
    if (ok)
      world[(size_t)q[1]] = q[2];
    else if (why.empty())
      why = "world rank " + std::to_string(from[(size_t)k]) + " joined as rank " +
            (q.size() == 4 ? std::to_string(q[1]) + " of " + std::to_string(q[0]) : std::string("?")) +
            ", root's view: " + std::to_string(nranks) + " ranks, root is rank " + std::to_string(rank);
  }
  std::vector<int> reply{why.empty() ? 1 : 0};
  reply.insert(reply.end(), world.begin(), world.end());
  for (int f : from) send_ints(reply, f, init_tag(id.counter, TAG_REPLY));
  if (!why.empty())
    return fail(ncclInvalidArgument, "ncclCommInitRank: the members disagree (a rank twice, or nranks): %s",
                why.c_str());
  return ncclSuccess;
}

/* The world ranks of the members, by NCCL rank, through the id's root. */
ncclResult_t bootstrap(const IdBits &id, int nranks, int rank, std::vector<int> &world) {
  int me = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  world.assign((size_t)nranks, -1);
  world[(size_t)rank] = me;
  if (me == id.root) return bootstrap_root(id, nranks, rank, world);
  send_ints({nranks, rank, me, (int)(id.counter & 0x7fffffff)}, id.root, init_tag(id.counter, TAG_REQUEST));
  std::vector<int> reply = recv_ints(id.root, init_tag(id.counter, TAG_REPLY), nullptr);
  if (reply.size() != (size_t)nranks + 1 || reply[0] != 1)
    return fail(ncclInvalidArgument,
                "ncclCommInitRank: rank %d of %d: the id's root (world rank %d) refused: the members disagree on "
                "nranks or a rank is taken twice",
                rank, nranks, id.root);
  world.assign(reply.begin() + 1, reply.end());
  return ncclSuccess;
}

/* The members' MPI communicator, ranks in NCCL rank order (collective
 * over the members only). */
ncclResult_t create_mpi_comm(const IdBits &id, const std::vector<int> &world, Comm &c) {
  MPI_Group wg, g;
  MPI_Comm_group(MPI_COMM_WORLD, &wg);
  MPI_Group_incl(wg, (int)world.size(), world.data(), &g);
  int rc = MPI_Comm_create_group(MPI_COMM_WORLD, g, init_tag(id.counter, TAG_CREATE), &c.mpi);
  MPI_Group_free(&g);
  MPI_Group_free(&wg);
  if (rc != MPI_SUCCESS)
    return fail(ncclSystemError, "ncclCommInitRank: MPI_Comm_create_group: %s", mpi_msg(rc).c_str());
  MPI_Comm_set_errhandler(c.mpi, MPI_ERRORS_RETURN);
  int r = -1;
  MPI_Comm_rank(c.mpi, &r);
  if (r != c.rank) return fail(ncclInternalError, "ncclCommInitRank: MPI rank %d for NCCL rank %d", r, c.rank);
  return ncclSuccess;
}
