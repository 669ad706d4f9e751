/* tests/kernels/emu/cuda_emu_fiber.cc: the block engine of cuda_emu.h's
 * default mode: a block's threads as fibers on the calling thread, switched
 * only at barriers (__syncthreads, __syncwarp and the shuffles built on
 * it), by a 15-instruction x86-64 stack switch. An OS thread per CUDA
 * thread (CUDA_EMU_THREADS) costs two futex round trips per thread per
 * barrier; a training step of the GPU backend, which launches thousands of
 * blocks, took minutes that way.
 *
 * Scheduling: rounds over the block's runnable fibers, forward in even
 * rounds and backward in odd ones, so that a lane reading what another
 * lane writes without a barrier between them sees the write in some
 * rounds and not in others (a missing barrier shows in results rather
 * than being hidden by a fixed order). A fiber that waits or ends picks
 * the next one of the round itself and switches straight to it (one
 * switch per wait, not two through a scheduler). A round in which no
 * fiber can run while some have not finished is a barrier that not every
 * thread reaches: reported, then abort (a GPU would hang or misbehave).
 *
 * CUDA_EMU_TSAN_FIBERS (the ThreadSanitizer test, this file compiled
 * without instrumentation): each CUDA thread is a ThreadSanitizer fiber,
 * switched without implied synchronisation, and the only happens-before
 * edges are the ones CUDA gives: a barrier (every arrival before every
 * departure of the same generation) and the block boundaries (the launch
 * before each block, each block before the next). A lane reading what
 * another wrote with no barrier between them is then a reported race, as
 * with a real thread per lane, without the futex round trips (the
 * ThreadSanitizer test took 117 CPU seconds with threads, 17 with fibers). */
#include "cuda_emu.h"

#ifndef CUDA_EMU_THREADS
#include <sys/mman.h>
#ifdef CUDA_EMU_TSAN_FIBERS
#include <sanitizer/tsan_interface.h>
#endif

extern "C" void emu_fiber_switch(void **save_sp, void *load_sp);
extern "C" void emu_fiber_start(void);
extern "C" void emu_fiber_main(void);

/* Saves the callee-saved registers on the current stack, stores its
 * pointer in *save_sp, and resumes the stack load_sp saved the same way
 * (System V x86-64 ABI). The x87 control word and MXCSR are not switched:
 * every fiber runs on one host thread in its floating-point environment,
 * which no kernel changes (emu_fiber_grid checks MXCSR's control bits
 * after each grid); saving them made up four fifths of a switch's time. */
asm(R"(
  .text
  .globl emu_fiber_switch
  .type emu_fiber_switch, @function
emu_fiber_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size emu_fiber_switch, .-emu_fiber_switch

  .globl emu_fiber_start
  .type emu_fiber_start, @function
emu_fiber_start:
  call emu_fiber_main
  ud2
  .size emu_fiber_start, .-emu_fiber_start
)");

namespace {
constexpr size_t STACK_BYTES = 256 * 1024; /* per CUDA thread: WMMA fragments are 1 KiB each */
/* Each stack's top is moved down by its own multiple of 64 bytes, so that
 * the fibers' hot frames spread over the L2's sets (1 MiB 8-way: 2048 sets
 * of 64-byte lines, 128 KiB apart) instead of all falling in one set, 256
 * KiB apart: that conflict made the load of the next fiber's registers
 * nearly the whole cost of a switch. */
constexpr size_t COLOUR_BYTES = 128 * 1024;
constexpr size_t SLOT_BYTES = STACK_BYTES + COLOUR_BYTES;
size_t colour(unsigned t) { return (size_t)(t * 17u % 2048u) * 64; } /* 17 is odd: distinct for 2048 threads */
constexpr unsigned MAX_THREADS = 1024;
constexpr unsigned MAX_BARRIERS = 1 + MAX_THREADS / 32; /* the block's, then one per warp */

enum { READY, WAITING, DONE };

struct fiber {
  void *sp;
  uint3 idx;          /* threadIdx, computed once per grid */
  int state;
  unsigned bar;       /* the barrier it waits at */
  unsigned long seen; /* that barrier's generation when it arrived */
};

struct engine {
  char *stacks = nullptr; /* MAX_THREADS stacks, reserved once, touched as used, each over a guard page */
  std::vector<fiber> f;
  void *main_sp = nullptr;
  unsigned cur = 0;
  const std::function<void()> *body = nullptr;
  /* barrier 0: the block; 1 + w: warp w */
  std::vector<unsigned> expected, arrived;
  std::vector<unsigned long> gen;
  /* the round in progress: n fibers, the k-th of the round's order next;
   * ran of them switched to so far in it; left not yet done in the block */
  unsigned n = 0, round = 0, k = 0, ran = 0, left = 0;
  /* ThreadSanitizer's (CUDA_EMU_TSAN_FIBERS): the launching thread's
   * context, thread t's (made once and kept: its stack is always t's), and
   * the addresses its happens-before edges go through */
  void *tsan_main = nullptr;
  void *tsan_fiber[MAX_THREADS] = {};
  char sync_block_start = 0, sync_block_end = 0;
  char sync_bar[MAX_BARRIERS][2] = {}; /* barrier b, generation parity */
};

engine E;

void reserve_stacks() {
  if (E.stacks) return;
  void *p = mmap(nullptr, SLOT_BYTES * MAX_THREADS, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    std::fprintf(stderr, "cuda_emu: cannot reserve %zu MiB of fiber stacks\n", SLOT_BYTES * MAX_THREADS >> 20);
    std::abort();
  }
  E.stacks = (char *)p;
  for (unsigned t = 0; t < MAX_THREADS; t++) /* a guard page under each: an overflow faults */
    mprotect(E.stacks + (size_t)t * SLOT_BYTES, 4096, PROT_NONE);
}

/* A fresh stack for thread t whose first switch "returns" into
 * emu_fiber_start with the stack 16-byte aligned at its call. */
void *fresh_stack(unsigned t) {
  uintptr_t top = (uintptr_t)(E.stacks + (size_t)(t + 1) * SLOT_BYTES - colour(t)) & ~(uintptr_t)15;
  uint64_t *sp = (uint64_t *)top;
  *--sp = (uint64_t)&emu_fiber_start; /* the first switch's return address; popped, it leaves the
                                         stack at top, 16-byte aligned for emu_fiber_start's call */
  for (int r = 0; r < 6; r++) *--sp = 0; /* rbp rbx r12 r13 r14 r15 */
  return sp;
}

bool runnable(const fiber &x) { return x.state == READY || (x.state == WAITING && E.gen[x.bar] != x.seen); }

/* ThreadSanitizer's view (CUDA_EMU_TSAN_FIBERS; else nothing): the context
 * switched to, and the happens-before edges of barriers and blocks. */
#ifdef CUDA_EMU_TSAN_FIBERS
void tsan_to(unsigned t) {
  if (!E.tsan_fiber[t]) E.tsan_fiber[t] = __tsan_create_fiber(0);
  __tsan_switch_to_fiber(E.tsan_fiber[t], __tsan_switch_to_fiber_no_sync);
}
void tsan_to_main() { __tsan_switch_to_fiber(E.tsan_main, __tsan_switch_to_fiber_no_sync); }
void tsan_release(char *sync) { __tsan_release(sync); }
void tsan_acquire(char *sync) { __tsan_acquire(sync); }
#else
void tsan_to(unsigned) {}
void tsan_to_main() {}
void tsan_release(char *) {}
void tsan_acquire(char *) {}
#endif

void set_thread(unsigned t) {
  E.cur = t;
  emu_tid = t;
  threadIdx = E.f[t].idx;
}

/* The next fiber to run: the next runnable one in the round's order,
 * starting further rounds as needed; E.n once every fiber is done. */
unsigned pick() {
  for (;;) {
    while (E.k < E.n) {
      unsigned t = E.round % 2 ? E.n - 1 - E.k : E.k;
      E.k++;
      if (runnable(E.f[t])) {
        E.ran++;
        return t;
      }
    }
    if (E.left == 0) return E.n;
    if (E.ran == 0) {
      std::fprintf(stderr, "cuda_emu: block (%u, %u, %u): %u of %u threads wait at a barrier the others "
                           "never reach (a GPU would hang)\n",
                   blockIdx.x, blockIdx.y, blockIdx.z, E.left, E.n);
      std::abort();
    }
    E.round++, E.k = 0, E.ran = 0;
  }
}

/* The running fiber stops (waits or is done; *save receives its stack):
 * straight to the next one, or back to the launching thread's stack when
 * the block is done. */
void yield(void **save) {
  unsigned me = E.cur, t = pick();
  if (t == E.n) {
    tsan_to_main();
    emu_fiber_switch(save, E.main_sp);
  } else if (t != me) {
    set_thread(t);
    tsan_to(t);
    emu_fiber_switch(save, E.f[t].sp);
  }
}
} // namespace

extern "C" void emu_fiber_main(void) {
  tsan_acquire(&E.sync_block_start); /* the launch and the previous blocks before this block */
  (*E.body)();
  tsan_release(&E.sync_block_end);
  E.f[E.cur].state = DONE;
  E.left--;
  void *dead;
  yield(&dead);
  __builtin_unreachable();
}

/* Barrier b for the running fiber. Every arrival of a generation releases
 * into that generation's parity slot and every departure acquires it: the
 * next generation cannot release into the same slot before every fiber
 * has left this one (it needs them all to arrive again). */
void emu_fiber_barrier(unsigned b) {
  fiber &me = E.f[E.cur];
  unsigned long g = E.gen[b];
  tsan_release(&E.sync_bar[b][g & 1]);
  if (++E.arrived[b] == E.expected[b]) {
    E.arrived[b] = 0;
    E.gen[b]++; /* the others may go on; so does the last to arrive */
  } else {
    me.state = WAITING, me.bar = b, me.seen = g;
    yield(&me.sp);
    me.state = READY;
  }
  tsan_acquire(&E.sync_bar[b][g & 1]);
}

/* MXCSR's control bits (rounding, flush to zero, exception masks), not
 * its sticky exception flags (bits 0-5), which any inexact result sets. */
static unsigned mxcsr_control() {
  unsigned x;
  asm volatile("stmxcsr %0" : "=m"(x));
  return x & ~0x3fu;
}

/* One block: fresh fibers, the launch's shared memory refilled with NaN,
 * rounds until every thread is done. */
static void run_block(unsigned long i, dim3 grid, size_t smem_fill) {
  blockIdx.x = (unsigned)(i % grid.x), blockIdx.y = (unsigned)(i / grid.x % grid.y);
  blockIdx.z = (unsigned)(i / grid.x / grid.y);
  std::memset(emu_smem, 0xff, smem_fill);
  std::fill(E.arrived.begin(), E.arrived.end(), 0u);
  std::fill(E.gen.begin(), E.gen.end(), 0ul);
  for (unsigned t = 0; t < E.n; t++) E.f[t].sp = fresh_stack(t), E.f[t].state = READY;
  E.round = 0, E.k = 0, E.ran = 0, E.left = E.n;
  tsan_release(&E.sync_block_start);
  unsigned t = pick();
  set_thread(t);
  tsan_to(t);
  emu_fiber_switch(&E.main_sp, E.f[t].sp); /* back when the block is done */
  tsan_acquire(&E.sync_block_end);
}

void emu_fiber_grid(dim3 grid, dim3 block, size_t smem_fill, const std::function<void()> &body) {
  unsigned n = block.x * block.y * block.z, warps = n / 32, fp_env = mxcsr_control();
  unsigned long nblocks = (unsigned long)grid.x * grid.y * grid.z;
  reserve_stacks();
  E.body = &body;
  E.n = n;
  E.f.assign(n, fiber{});
  for (unsigned t = 0; t < n; t++) E.f[t].idx = uint3{t % block.x, t / block.x % block.y, t / (block.x * block.y)};
  E.expected.assign(1 + warps, 32);
  E.expected[0] = n;
  E.arrived.assign(1 + warps, 0);
  E.gen.assign(1 + warps, 0);
#ifdef CUDA_EMU_TSAN_FIBERS
  E.tsan_main = __tsan_get_current_fiber();
#endif
  for (unsigned long i = 0; i < nblocks; i++) run_block(i, grid, smem_fill);
  if (mxcsr_control() != fp_env) { /* the switch keeps one floating-point environment for all fibers */
    std::fprintf(stderr, "cuda_emu: a kernel changed MXCSR's control bits (0x%x to 0x%x): the fiber switch does "
                         "not keep them per thread\n", fp_env, mxcsr_control());
    std::abort();
  }
}
#endif
