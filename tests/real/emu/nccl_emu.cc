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
#include "nccl_emu_int.h"

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
  /* its turn on the communicator is taken when issued: here, or at each
   * launch of a CUDA graph that captured it */
  emu_stream_enqueue_at_issue(ls, [L] {
    Launch now = L;
    {
      std::lock_guard<std::mutex> lk(now.comm->m);
      now.seq = now.comm->issued++;
    }
    return std::function<void()>([now] { run_launch(now); });
  });
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
  for (Launch &L : launches)
    if (ncclResult_t r = enqueue(L)) return r;
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
