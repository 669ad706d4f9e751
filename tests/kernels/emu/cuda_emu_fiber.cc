/* tests/kernels/emu/cuda_emu_fiber.cc: the block engine of cuda_emu.h's
 * default mode: a block's threads as fibers on the calling thread, switched
 * only at barriers (__syncthreads, __syncwarp and the shuffles built on
 * it), by a 20-instruction x86-64 stack switch. An OS thread per CUDA
 * thread (CUDA_EMU_THREADS, ThreadSanitizer's mode) costs two futex round
 * trips per thread per barrier; a training step of the GPU backend, which
 * launches thousands of blocks, took minutes that way.
 *
 * Scheduling: rounds over the block's runnable fibers, forward in even
 * rounds and backward in odd ones, so that a lane reading what another
 * lane writes without a barrier between them sees the write in some
 * rounds and not in others (a missing barrier shows in results rather
 * than being hidden by a fixed order). A round in which no fiber can run
 * while some have not finished is a barrier that not every thread
 * reaches: reported, then abort (a GPU would hang or misbehave). */
#include "cuda_emu.h"

#ifndef CUDA_EMU_THREADS
#include <sys/mman.h>

extern "C" void emu_fiber_switch(void **save_sp, void *load_sp);
extern "C" void emu_fiber_start(void);
extern "C" void emu_fiber_main(void);

/* Saves the callee-saved registers, the x87 control word and MXCSR on the
 * current stack, stores its pointer in *save_sp, and resumes the stack
 * load_sp saved the same way (System V x86-64 ABI). */
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
  subq $16, %rsp
  fnstcw (%rsp)
  stmxcsr 8(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  fldcw (%rsp)
  ldmxcsr 8(%rsp)
  addq $16, %rsp
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
constexpr unsigned MAX_THREADS = 1024;

enum { READY, WAITING, DONE };

struct fiber {
  void *sp;
  unsigned tid;
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
};

engine E;

void reserve_stacks() {
  if (E.stacks) return;
  void *p = mmap(nullptr, STACK_BYTES * MAX_THREADS, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    std::fprintf(stderr, "cuda_emu: cannot reserve %zu MiB of fiber stacks\n", STACK_BYTES * MAX_THREADS >> 20);
    std::abort();
  }
  E.stacks = (char *)p;
  for (unsigned t = 0; t < MAX_THREADS; t++) /* a guard page under each: an overflow faults */
    mprotect(E.stacks + (size_t)t * STACK_BYTES, 4096, PROT_NONE);
}

/* A fresh stack for thread t whose first switch "returns" into
 * emu_fiber_start with the stack 16-byte aligned at its call. */
void *fresh_stack(unsigned t) {
  uintptr_t top = (uintptr_t)(E.stacks + (size_t)(t + 1) * STACK_BYTES) & ~(uintptr_t)15;
  uint64_t *sp = (uint64_t *)top;
  *--sp = (uint64_t)&emu_fiber_start; /* the first switch's return address; popped, it leaves the
                                         stack at top, 16-byte aligned for emu_fiber_start's call */
  for (int r = 0; r < 6; r++) *--sp = 0; /* rbp rbx r12 r13 r14 r15 */
  *--sp = 0x1F80;                       /* MXCSR: default (round to nearest, exceptions masked) */
  *--sp = 0x037F;                       /* x87 control word: default */
  return sp;
}

bool runnable(const fiber &x) { return x.state == READY || (x.state == WAITING && E.gen[x.bar] != x.seen); }

void set_thread(unsigned t) {
  E.cur = t;
  emu_tid = t;
  threadIdx.x = t % blockDim.x, threadIdx.y = t / blockDim.x % blockDim.y;
  threadIdx.z = t / (blockDim.x * blockDim.y);
}
} // namespace

extern "C" void emu_fiber_main(void) {
  (*E.body)();
  E.f[E.cur].state = DONE;
  void *dead;
  emu_fiber_switch(&dead, E.main_sp);
  __builtin_unreachable();
}

void emu_fiber_barrier(unsigned b) {
  fiber &me = E.f[E.cur];
  if (++E.arrived[b] == E.expected[b]) {
    E.arrived[b] = 0;
    E.gen[b]++; /* the others may go on; so does the last to arrive */
    return;
  }
  me.state = WAITING, me.bar = b, me.seen = E.gen[b];
  emu_fiber_switch(&me.sp, E.main_sp);
  me.state = READY;
}

void emu_fiber_grid(dim3 grid, dim3 block, const std::function<void()> &body) {
  unsigned n = block.x * block.y * block.z, warps = n / 32;
  unsigned long nblocks = (unsigned long)grid.x * grid.y * grid.z;
  reserve_stacks();
  E.body = &body;
  E.f.assign(n, fiber{});
  E.expected.assign(1 + warps, 32);
  E.expected[0] = n;
  for (unsigned long i = 0; i < nblocks; i++) {
    blockIdx.x = (unsigned)(i % grid.x), blockIdx.y = (unsigned)(i / grid.x % grid.y);
    blockIdx.z = (unsigned)(i / grid.x / grid.y);
    std::memset(emu_smem, 0xff, sizeof emu_smem);
    E.arrived.assign(1 + warps, 0);
    E.gen.assign(1 + warps, 0);
    for (unsigned t = 0; t < n; t++) E.f[t] = fiber{fresh_stack(t), t, READY, 0, 0};
    unsigned left = n;
    for (unsigned round = 0; left > 0; round++) {
      unsigned ran = 0;
      for (unsigned k = 0; k < n; k++) {
        unsigned t = round % 2 ? n - 1 - k : k;
        if (!runnable(E.f[t])) continue;
        set_thread(t);
        emu_fiber_switch(&E.main_sp, E.f[t].sp);
        ran++;
        left -= E.f[t].state == DONE;
      }
      if (ran == 0) {
        std::fprintf(stderr, "cuda_emu: block (%u, %u, %u): %u of %u threads wait at a barrier the others "
                             "never reach (a GPU would hang)\n",
                     blockIdx.x, blockIdx.y, blockIdx.z, left, n);
        std::abort();
      }
    }
  }
}
#endif
