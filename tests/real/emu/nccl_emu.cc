/* tests/real/emu/nccl_emu.cc: the NCCL calls of nccl.h on the CPU, over MPI,
 * for the emulated GPU build (one process per rank under mpirun; "device"
 * memory is host memory, streams are cuda_emu_runtime.cc's worker threads).
 *
 * What NCCL guarantees, and no more, so that a wrong order, a deadlock or a
 * wrong buffer in real/comm_nccl.c shows here as it would on GPUs:
 *   - ncclCommInitRank blocks until every member has called it;
 *   - the launches of one communicator run one after another in issue
 *     order, whatever stream each is on: each takes a number when issued
 *     and, on its stream, waits for the previous number to complete;
 *   - every launch runs in its stream's order (emu_stream_enqueue);
 *   - a group (ncclGroupStart/End, nestable, per host thread) is one launch
 *     per communicator, launched at the outermost ncclGroupEnd in ascending
 *     hash of the communicators' ids (NCCL's commHash order, the same on
 *     every rank); a launch whose operations are on several streams waits
 *     for all of them and all of them wait for it (events, as NCCL does);
 *   - the transfers of a launch progress together (all posted, then all
 *     awaited), and a send completes only once its receive has matched
 *     (MPI_Issend): a program that needs buffering deadlocks here;
 *   - a pair connects on its first transfer in each direction, on the host
 *     in the call that launches it, which waits there until the peer
 *     launches the matching side (NCCL's lazy p2p connection);
 *   - collectives give the same bits on every rank: the inputs are
 *     gathered and summed in rank order, in fp32 for fp32 and bf16 (one
 *     rounding to bf16 at the end), fp64 for fp64, exactly for int32.
 * Supported: ncclSum; ncclInt32, ncclFloat32, ncclFloat64, ncclBfloat16.
 * Anything else is refused with ncclInvalidArgument.
 *
 * Errors: argument errors are returned, their message kept for
 * ncclGetLastError (and not printed, as NCCL does by default). A failure
 * inside a launch is printed on stderr and sticks to the communicator:
 * its later launches are skipped and its later calls return the error.
 *
 * MPI must give MPI_THREAD_MULTIPLE (launches run on stream threads while
 * the host thread uses MPI too): with Open MPI's plain MPI_Init, set
 * OMPI_MPI_THREAD_LEVEL=3. Communication is nonblocking, awaited by polls
 * that yield: CI runs up to 8 ranks of several threads on 2 cores.
 * The id's creator must be a member of the communicator (it answers the
 * others' bootstrap inside its own ncclCommInitRank). */
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

/* ---- errors --------------------------------------------------------------- */

static std::mutex err_m;
static char last_err[1024];

static ncclResult_t vfail(bool print, ncclResult_t r, const char *fmt, va_list ap) {
  char msg[sizeof last_err];
  std::vsnprintf(msg, sizeof msg, fmt, ap);
  std::lock_guard<std::mutex> lk(err_m);
  std::snprintf(last_err, sizeof last_err, "%s", msg);
  if (print) std::fprintf(stderr, "nccl_emu: %s\n", msg);
  return r;
}

/* Keeps the message for ncclGetLastError and returns r. */
__attribute__((format(printf, 2, 3))) static ncclResult_t fail(ncclResult_t r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfail(false, r, fmt, ap);
  va_end(ap);
  return r;
}

/* The same, also printed on stderr: failures no caller is told of. */
__attribute__((format(printf, 2, 3))) static ncclResult_t fail_loud(ncclResult_t r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfail(true, r, fmt, ap);
  va_end(ap);
  return r;
}

static std::string mpi_msg(int rc) {
  char s[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, s, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(s, (size_t)len);
}

/* ---- data types and sums -------------------------------------------------- */

struct TypeInfo {
  size_t bytes;
  MPI_Datatype mpi;
  const char *name;
};

static bool type_info(ncclDataType_t t, TypeInfo *ti) {
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

static void sum_rows(ncclDataType_t t, const void *rows, int n, size_t count, void *out) {
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
static void poll_pause(unsigned &polls) {
  if (polls++ < 64)
    sched_yield();
  else
    std::this_thread::sleep_for(std::chrono::microseconds(50));
}

enum { WAIT_OK = 0, WAIT_STOPPED = -1 };

/* Polls MPI_Testall until reqs complete (WAIT_OK), MPI fails (its code;
 * statuses hold the errors when it is MPI_ERR_IN_STATUS) or *stop turns
 * true (WAIT_STOPPED, requests left pending). */
static int wait_all(std::vector<MPI_Request> &reqs, std::vector<MPI_Status> &st, const std::atomic<bool> *stop) {
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

/* The id's bytes: unique job-wide as (root world rank, root's counter). */
struct IdBits {
  uint64_t magic;
  int32_t root; /* world rank of the creator, which answers the bootstrap */
  uint32_t pad;
  uint64_t counter; /* per process */
};
static_assert(sizeof(IdBits) <= NCCL_UNIQUE_ID_BYTES, "ncclUniqueId too small");
static constexpr uint64_t id_magic = 0x314d45434c43434eull; /* "NCCLCEM1" */

static IdBits id_bits(const ncclUniqueId &id) {
  IdBits b;
  std::memcpy(&b, id.internal, sizeof b);
  return b;
}

/* FNV-1a of the id: the order of communicators within a group. */
static uint64_t id_hash(const ncclUniqueId &id) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : id.internal) h = (h ^ ch) * 0x100000001b3ull;
  return h;
}

/* The bootstrap's tags on MPI_COMM_WORLD: three per id (request, reply,
 * MPI_Comm_create_group), in the upper half of [0, MPI_TAG_UB], far from
 * the small tags programs use. */
enum { TAG_REQUEST, TAG_REPLY, TAG_CREATE };
static int init_tag(uint64_t counter, int which) {
  int *ub = nullptr, flag = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
  long top = flag && ub ? *ub : 32767; /* the standard's minimum */
  long base = top / 2, slots = (top - base) / 3;
  return (int)(base + 3 * (long)(counter % (uint64_t)slots) + which);
}

/* ---- communicators -------------------------------------------------------- */

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

static ncclResult_t check_thread_level() {
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
static ncclResult_t bootstrap(const IdBits &id, int nranks, int rank, std::vector<int> &world) {
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
static ncclResult_t create_mpi_comm(const IdBits &id, const std::vector<int> &world, Comm &c) {
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

/* ---- operations and launches ---------------------------------------------- */

enum class Kind { AllReduce, AllGather, ReduceScatter, Broadcast, Send, Recv };
static const char *const kind_name[] = {"ncclAllReduce", "ncclAllGather", "ncclReduceScatter",
                                        "ncclBroadcast", "ncclSend",      "ncclRecv"};

/* One call as issued: count is NCCL's (per rank for AllGather and
 * ReduceScatter); peer is the root for Broadcast. */
struct Task {
  Kind kind;
  const void *send;
  void *recv;
  size_t count;
  ncclDataType_t type;
  int peer;
  cudaStream_t stream;
};

/* What one communicator runs of a group: its tasks, in issue order. */
struct Launch {
  std::shared_ptr<Comm> comm;
  uint64_t seq = 0;
  std::vector<Task> tasks;
};

static bool is_p2p(Kind k) { return k == Kind::Send || k == Kind::Recv; }

/* Posts t's requests; tmp: the gathered inputs of a reduction. */
static int post(const Comm &c, const Task &t, std::vector<char> &tmp, std::vector<MPI_Request> &reqs) {
  TypeInfo ti;
  type_info(t.type, &ti);
  int n = (int)t.count;
  size_t row = t.count * ti.bytes;
  MPI_Request r = MPI_REQUEST_NULL;
  int rc = MPI_SUCCESS;
  switch (t.kind) {
  case Kind::AllReduce:
    tmp.resize(row * (size_t)c.nranks);
    rc = MPI_Iallgather(t.send, n, ti.mpi, tmp.data(), n, ti.mpi, c.mpi, &r);
    break;
  case Kind::ReduceScatter: /* rank j gets everyone's block j */
    tmp.resize(row * (size_t)c.nranks);
    rc = MPI_Ialltoall(t.send, n, ti.mpi, tmp.data(), n, ti.mpi, c.mpi, &r);
    break;
  case Kind::AllGather: {
    bool in_place = t.send == static_cast<char *>(t.recv) + (size_t)c.rank * row;
    rc = MPI_Iallgather(in_place ? MPI_IN_PLACE : t.send, n, ti.mpi, t.recv, n, ti.mpi, c.mpi, &r);
    break;
  }
  case Kind::Broadcast:
    if (c.rank == t.peer && t.send != t.recv) std::memmove(t.recv, t.send, row);
    rc = MPI_Ibcast(t.recv, n, ti.mpi, t.peer, c.mpi, &r);
    break;
  case Kind::Send: rc = MPI_Issend(t.send, n, ti.mpi, t.peer, TAG_DATA, c.mpi, &r); break;
  case Kind::Recv: rc = MPI_Irecv(t.recv, n, ti.mpi, t.peer, TAG_DATA, c.mpi, &r); break;
  }
  reqs.push_back(r);
  return rc;
}

/* "ncclRecv (rank 1 of 2, peer 0, 100 float)" */
static std::string describe(const Comm &c, const Task &t) {
  TypeInfo ti;
  type_info(t.type, &ti);
  char who[32] = "", s[160];
  if (is_p2p(t.kind) || t.kind == Kind::Broadcast)
    std::snprintf(who, sizeof who, ", %s %d", t.kind == Kind::Broadcast ? "root" : "peer", t.peer);
  std::snprintf(s, sizeof s, "%s (rank %d of %d%s, %zu %s)", kind_name[(int)t.kind], c.rank, c.nranks, who, t.count,
                ti.name);
  return s;
}

/* A received message shorter than posted: NCCL would hang or read garbage. */
static ncclResult_t check_recv_count(const Comm &c, const Task &t, const MPI_Status &st) {
  TypeInfo ti;
  type_info(t.type, &ti);
  int got = 0;
  MPI_Get_count(&st, ti.mpi, &got);
  if ((size_t)got == t.count) return ncclSuccess;
  return fail_loud(ncclInvalidUsage, "%s: the matching ncclSend sent %d elements", describe(c, t).c_str(), got);
}

/* Runs a launch's tasks: all posted, all awaited, then the sums. */
static ncclResult_t exec_tasks(Comm &c, const std::vector<Task> &tasks) {
  std::vector<std::vector<char>> tmp(tasks.size());
  std::vector<MPI_Request> reqs;
  std::vector<MPI_Status> st;
  for (size_t k = 0; k < tasks.size(); k++) {
    int rc = post(c, tasks[k], tmp[k], reqs);
    if (rc != MPI_SUCCESS)
      return fail_loud(ncclRemoteError, "%s: %s", describe(c, tasks[k]).c_str(), mpi_msg(rc).c_str());
  }
  int rc = wait_all(reqs, st, &c.aborted);
  if (rc == WAIT_STOPPED) return ncclInvalidUsage; /* aborted: nobody is told */
  for (size_t k = 0; rc != WAIT_OK && k < tasks.size(); k++) /* one request per task */
    if (rc != MPI_ERR_IN_STATUS || (st[k].MPI_ERROR != MPI_SUCCESS && st[k].MPI_ERROR != MPI_ERR_PENDING))
      return fail_loud(ncclRemoteError, "%s: %s", describe(c, tasks[k]).c_str(),
                       mpi_msg(rc == MPI_ERR_IN_STATUS ? st[k].MPI_ERROR : rc).c_str());
  for (size_t k = 0; k < tasks.size(); k++) {
    const Task &t = tasks[k];
    if (t.kind == Kind::Recv && check_recv_count(c, t, st[k]) != ncclSuccess) return ncclInvalidUsage;
    if (t.kind == Kind::AllReduce || t.kind == Kind::ReduceScatter)
      sum_rows(t.type, tmp[k].data(), c.nranks, t.count, t.recv);
  }
  return ncclSuccess;
}

static void wait_turn(Comm &c, uint64_t seq) {
  std::unique_lock<std::mutex> lk(c.m);
  c.cv.wait(lk, [&] { return c.done == seq || c.aborted.load(); });
}

static void end_turn(Comm &c) {
  {
    std::lock_guard<std::mutex> lk(c.m);
    c.done++;
  }
  c.cv.notify_all();
}

/* On the launch's stream: after the communicator's previous launch. */
static void run_launch(const Launch &L) {
  Comm &c = *L.comm;
  wait_turn(c, L.seq);
  if (!c.aborted && c.error == ncclSuccess) {
    ncclResult_t r;
    try {
      r = exec_tasks(c, L.tasks);
    } catch (const std::exception &e) {
      r = fail_loud(ncclSystemError, "%s: %s", describe(c, L.tasks[0]).c_str(), e.what());
    }
    int none = ncclSuccess;
    if (r != ncclSuccess && !c.aborted) c.error.compare_exchange_strong(none, r);
  }
  end_turn(c);
}

/* ---- host-side connection of pairs ---------------------------------------- */

/* My send connection to p pairs with p's receive connection from me: each
 * side sends a token and waits for the other's. All of a group's new
 * connections are made together; a rank needs none with itself. */
struct Conn {
  Comm *c;
  int peer;
  bool send;
};

static bool connected(const Conn &k) { return (k.send ? k.c->send_conn : k.c->recv_conn)[(size_t)k.peer]; }

static ncclResult_t connect_pairs(const std::vector<Launch> &launches) {
  static const int token = 1;
  std::vector<Conn> conns;
  for (const Launch &L : launches)
    for (const Task &t : L.tasks) {
      Conn k{L.comm.get(), t.peer, t.kind == Kind::Send};
      auto same = [&](const Conn &o) { return o.c == k.c && o.peer == k.peer && o.send == k.send; };
      if (is_p2p(t.kind) && t.peer != k.c->rank && !connected(k) && std::none_of(conns.begin(), conns.end(), same))
        conns.push_back(k);
    }
  std::vector<MPI_Request> reqs(2 * conns.size());
  std::vector<int> sink(conns.size());
  for (size_t i = 0; i < conns.size(); i++) {
    const Conn &k = conns[i];
    MPI_Isend(&token, 1, MPI_INT, k.peer, k.send ? TAG_CONN_SEND : TAG_CONN_RECV, k.c->mpi, &reqs[2 * i]);
    MPI_Irecv(&sink[i], 1, MPI_INT, k.peer, k.send ? TAG_CONN_RECV : TAG_CONN_SEND, k.c->mpi, &reqs[2 * i + 1]);
  }
  std::vector<MPI_Status> st;
  int rc = wait_all(reqs, st, nullptr);
  if (rc != WAIT_OK) return fail_loud(ncclRemoteError, "connecting peers: %s", mpi_msg(rc).c_str());
  for (const Conn &k : conns) (k.send ? k.c->send_conn : k.c->recv_conn)[(size_t)k.peer] = 1;
  return ncclSuccess;
}

/* ---- streams -------------------------------------------------------------- */

/* An event per stream, recorded on that stream only (its generations then
 * complete in order: cuda_emu_runtime.cc), reused and never destroyed
 * (cudaEventDestroy synchronizes the device). */
static cudaEvent_t stream_event(cudaStream_t s) {
  static std::mutex m;
  static auto *events = new std::map<cudaStream_t, cudaEvent_t>;
  std::lock_guard<std::mutex> lk(m);
  cudaEvent_t &e = (*events)[s];
  if (!e && cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) e = nullptr;
  return e;
}

/* ev: "s waits for what was issued on from so far". */
static ncclResult_t stream_wait(cudaStream_t s, cudaStream_t from) {
  cudaEvent_t e = stream_event(from);
  if (!e || cudaEventRecord(e, from) != cudaSuccess || cudaStreamWaitEvent(s, e, 0) != cudaSuccess)
    return fail(ncclUnhandledCudaError, "joining the streams of a group: an emulated CUDA event call failed");
  return ncclSuccess;
}

/* Enqueues L on the stream of its first task; with tasks on other streams
 * too, it waits for them all and they all wait for it (as NCCL joins the
 * user streams of a launch). */
static ncclResult_t enqueue(const Launch &L) {
  std::vector<cudaStream_t> streams;
  for (const Task &t : L.tasks)
    if (std::find(streams.begin(), streams.end(), t.stream) == streams.end()) streams.push_back(t.stream);
  cudaStream_t ls = streams[0];
  for (size_t k = 1; k < streams.size(); k++)
    if (ncclResult_t r = stream_wait(ls, streams[k])) return r;
  emu_stream_enqueue(ls, [L] { run_launch(L); });
  for (size_t k = 1; k < streams.size(); k++)
    if (ncclResult_t r = stream_wait(streams[k], ls)) return r;
  return ncclSuccess;
}

/* ---- groups --------------------------------------------------------------- */

struct GroupState {
  int depth = 0;
  ncclResult_t error = ncclSuccess; /* the first error issuing into the group */
  std::vector<std::pair<std::shared_ptr<Comm>, Task>> tasks;
};
static thread_local GroupState G;

/* One launch per communicator, in ascending id hash (ties: first issued). */
static std::vector<Launch> split_by_comm(std::vector<std::pair<std::shared_ptr<Comm>, Task>> &tasks) {
  std::vector<Launch> out;
  for (auto &[c, t] : tasks) {
    auto it = std::find_if(out.begin(), out.end(), [&](const Launch &L) { return L.comm == c; });
    if (it == out.end()) it = out.insert(out.end(), Launch{c, 0, {}});
    it->tasks.push_back(t);
  }
  std::stable_sort(out.begin(), out.end(), [](const Launch &a, const Launch &b) { return a.comm->hash < b.comm->hash; });
  return out;
}

static ncclResult_t launch_group(std::vector<std::pair<std::shared_ptr<Comm>, Task>> &tasks) {
  std::vector<Launch> launches = split_by_comm(tasks);
  for (Launch &L : launches)
    if (int e = L.comm->error.load()) return fail((ncclResult_t)e, "a communicator of this group failed before (see stderr)");
  if (ncclResult_t r = connect_pairs(launches)) return r;
  for (Launch &L : launches) {
    {
      std::lock_guard<std::mutex> lk(L.comm->m);
      L.seq = L.comm->issued++;
    }
    if (ncclResult_t r = enqueue(L)) return r;
  }
  return ncclSuccess;
}

/* ---- checks when issued --------------------------------------------------- */

static ncclResult_t check_task(ncclComm_t h, const Task &t, ncclRedOp_t op) {
  const char *what = kind_name[(int)t.kind];
  TypeInfo ti;
  if (!h) return fail(ncclInvalidArgument, "%s: comm is NULL", what);
  const Comm &c = *h->c;
  if (int e = c.error.load()) return fail((ncclResult_t)e, "%s: this communicator failed before (see stderr)", what);
  if (!type_info(t.type, &ti))
    return fail(ncclInvalidArgument, "%s: datatype %d is not emulated (int32, float, double, bf16 are)", what, (int)t.type);
  if ((t.kind == Kind::AllReduce || t.kind == Kind::ReduceScatter) && op != ncclSum)
    return fail(ncclInvalidArgument, "%s: reduction op %d is not emulated (ncclSum is)", what, (int)op);
  if (t.count > (size_t)INT_MAX) return fail(ncclInvalidArgument, "%s: count %zu above INT_MAX", what, t.count);
  bool peer_ok = t.peer >= 0 && t.peer < c.nranks;
  if ((is_p2p(t.kind) || t.kind == Kind::Broadcast) && !peer_ok)
    return fail(ncclInvalidArgument, "%s: %s %d out of range [0, %d)", what, is_p2p(t.kind) ? "peer" : "root",
                t.peer, c.nranks);
  bool needs_send = t.kind != Kind::Recv && (t.kind != Kind::Broadcast || t.peer == c.rank);
  if (t.count && ((needs_send && !t.send) || (t.kind != Kind::Send && !t.recv)))
    return fail(ncclInvalidArgument, "%s: NULL buffer for %zu elements", what, t.count);
  return ncclSuccess;
}

/* Checks t and adds it to the open group, or launches it alone (an
 * implicit group, as NCCL does). Collectives of no element do nothing. */
static ncclResult_t issue(ncclComm_t h, Task t, ncclRedOp_t op = ncclSum) {
  ncclResult_t r = check_task(h, t, op);
  if (r != ncclSuccess) {
    if (G.depth > 0 && G.error == ncclSuccess) G.error = r;
    return r;
  }
  if (t.count == 0 && !is_p2p(t.kind)) return ncclSuccess;
  G.depth++;
  G.tasks.push_back({h->c, t});
  return ncclGroupEnd();
}

/* ---- the API -------------------------------------------------------------- */

extern "C" {

ncclResult_t ncclGetVersion(int *version) {
  if (!version) return fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t r) {
  switch (r) {
  case ncclSuccess: return "no error";
  case ncclUnhandledCudaError: return "unhandled cuda error";
  case ncclSystemError: return "unhandled system error";
  case ncclInternalError: return "internal error";
  case ncclInvalidArgument: return "invalid argument";
  case ncclInvalidUsage: return "invalid usage";
  case ncclRemoteError: return "remote process exited or there was a network error";
  case ncclInProgress: return "NCCL operation in progress";
  default: return "unknown result code";
  }
}

const char *ncclGetLastError(ncclComm_t) { return last_err; }

ncclResult_t ncclGetUniqueId(ncclUniqueId *out) {
  static std::atomic<uint64_t> counter{0};
  int init = 0;
  if (!out) return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  MPI_Initialized(&init);
  if (!init) return fail(ncclInvalidUsage, "ncclGetUniqueId: MPI is not initialised: NCCL runs over MPI here");
  IdBits b{};
  b.magic = id_magic;
  MPI_Comm_rank(MPI_COMM_WORLD, &b.root);
  b.counter = counter++;
  std::memset(out, 0, sizeof *out);
  std::memcpy(out->internal, &b, sizeof b);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *out, int nranks, ncclUniqueId commId, int rank) {
  if (!out) return fail(ncclInvalidArgument, "ncclCommInitRank: comm is NULL");
  *out = nullptr;
  if (ncclResult_t r = check_thread_level()) return r;
  if (G.depth > 0) return fail(ncclInvalidUsage, "ncclCommInitRank inside a group is not emulated");
  IdBits id = id_bits(commId);
  if (nranks < 1) return fail(ncclInvalidArgument, "ncclCommInitRank: nranks %d < 1", nranks);
  if (rank < 0 || rank >= nranks)
    return fail(ncclInvalidArgument, "ncclCommInitRank: rank %d out of range [0, %d)", rank, nranks);
  int world_size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  if (id.magic != id_magic || id.root < 0 || id.root >= world_size)
    return fail(ncclInvalidArgument, "ncclCommInitRank: commId was not made by ncclGetUniqueId in this job");
  auto c = std::make_shared<Comm>();
  c->rank = rank, c->nranks = nranks, c->hash = id_hash(commId);
  c->send_conn.assign((size_t)nranks, 0), c->recv_conn.assign((size_t)nranks, 0);
  std::vector<int> world;
  if (ncclResult_t r = bootstrap(id, nranks, rank, world)) return r;
  if (ncclResult_t r = create_mpi_comm(id, world, *c)) return r;
  *out = new ncclComm{c};
  return ncclSuccess;
}

/* Waits for the communicator's launches, then frees it. */
ncclResult_t ncclCommDestroy(ncclComm_t h) {
  if (!h) return fail(ncclInvalidArgument, "ncclCommDestroy: comm is NULL");
  Comm &c = *h->c;
  {
    std::unique_lock<std::mutex> lk(c.m);
    c.cv.wait(lk, [&] { return c.done >= c.issued; });
  }
  int rc = MPI_Comm_free(&c.mpi);
  delete h;
  if (rc != MPI_SUCCESS) return fail(ncclSystemError, "ncclCommDestroy: MPI_Comm_free: %s", mpi_msg(rc).c_str());
  return ncclSuccess;
}

/* Local only: launches not yet run are skipped, those running stop
 * waiting; the MPI communicator is left (freeing it is collective). */
ncclResult_t ncclCommAbort(ncclComm_t h) {
  if (!h) return ncclSuccess;
  {
    std::lock_guard<std::mutex> lk(h->c->m);
    h->c->aborted = true;
  }
  h->c->cv.notify_all();
  delete h;
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return issue(comm, {Kind::AllReduce, sendbuff, recvbuff, count, datatype, 0, stream}, op);
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  return issue(comm, {Kind::AllGather, sendbuff, recvbuff, sendcount, datatype, 0, stream});
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return issue(comm, {Kind::ReduceScatter, sendbuff, recvbuff, recvcount, datatype, 0, stream}, op);
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  return issue(comm, {Kind::Broadcast, sendbuff, recvbuff, count, datatype, root, stream});
}

ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return issue(comm, {Kind::Send, sendbuff, nullptr, count, datatype, peer, stream});
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return issue(comm, {Kind::Recv, nullptr, recvbuff, count, datatype, peer, stream});
}

ncclResult_t ncclGroupStart(void) {
  G.depth++;
  return ncclSuccess;
}

/* The outermost one launches what the group collected; an error issuing
 * into the group drops the whole group and is returned here. */
ncclResult_t ncclGroupEnd(void) {
  if (G.depth == 0) return fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--G.depth > 0) return ncclSuccess;
  auto tasks = std::move(G.tasks);
  ncclResult_t err = G.error;
  G.tasks.clear(), G.error = ncclSuccess;
  if (err != ncclSuccess) return err;
  return tasks.empty() ? ncclSuccess : launch_group(tasks);
}

} /* extern "C" */
