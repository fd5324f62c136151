// Wait stacks for blocking I/O and IPC calls beyond wait_wrappers.cc's (issue 34): positioned
// and vectored reads and writes, sends, file syncs and locks, sendfile and splice, System V
// messages and semaphores, POSIX message queues, tcdrain, and the 64-bit-offset names a
// program built with _FILE_OFFSET_BITS=64 calls; the names a program built with
// _FORTIFY_SOURCE calls instead of read, pread, recv, recvfrom, poll and ppoll (`__read_chk`...:
// glibc's own calls them through its internal names, which no wrapper sees), C11 threads
// (`thrd_sleep`, `thrd_join`, `mtx_lock`, `cnd_wait`...: glibc's call the internal pthread
// functions), `pthread_barrier_wait`, `system`, `copy_file_range`, `tee`, `vmsplice`; and
// which system calls made through `syscall()` block (IsBlockingSystemCall: thread_restrictions.cc's
// `syscall` marks them). Each marks the wait (scoped_wait.h) and calls the real function with
// the program's arguments: same result, errno and cancellation.
// Exported with C linkage (libstrata_base.lds). Thread safety and async-signal safety: as the
// wrapped function.
#include <fcntl.h>
#include <linux/futex.h>
#include <linux/io_uring.h>
#include <mqueue.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdarg.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <threads.h>
#include <sys/mman.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>

#include "base/internal/wait/scoped_wait.h"
#include "base/internal/wait/wait_wrappers.h"

// The fortified names (glibc's debug/*_chk.c; declared by its headers only under
// _FORTIFY_SOURCE).
extern "C" {
ssize_t __read_chk(int fd, void* data, size_t size, size_t buffer_size);
ssize_t __pread_chk(int fd, void* data, size_t size, off_t offset, size_t buffer_size);
ssize_t __pread64_chk(int fd, void* data, size_t size, off64_t offset, size_t buffer_size);
ssize_t __recv_chk(int fd, void* data, size_t size, size_t buffer_size, int flags);
ssize_t __recvfrom_chk(int fd, void* data, size_t size, size_t buffer_size, int flags,
                       sockaddr* from, socklen_t* from_size);
int __poll_chk(pollfd* fds, nfds_t count, int timeout_ms, size_t fds_size);
int __ppoll_chk(pollfd* fds, nfds_t count, const timespec* timeout, const sigset_t* mask,
                size_t fds_size);
}

// decltype(&::pread) and the like carry the declarations' attributes (nonnull, access), which
// a template argument cannot: they are not needed for the call through the pointer.
#pragma GCC diagnostic ignored "-Wignored-attributes"

namespace strata {
namespace base_internal {
namespace {

#define STRATA_FOR_EACH_IO_FUNCTION(X) \
  X(pread) \
  X(pread64) \
  X(preadv) \
  X(preadv2) \
  X(pwrite) \
  X(pwrite64) \
  X(writev) \
  X(pwritev) \
  X(pwritev2) \
  X(send) \
  X(sendto) \
  X(sendmsg) \
  X(sendmmsg) \
  X(recvmmsg) \
  X(sendfile) \
  X(splice) \
  X(msync) \
  X(sync_file_range) \
  X(syncfs) \
  X(sync) \
  X(lockf) \
  X(tcdrain) \
  X(msgrcv) \
  X(msgsnd) \
  X(semop) \
  X(semtimedop) \
  X(mq_receive) \
  X(mq_timedreceive) \
  X(mq_send) \
  X(mq_timedsend) \
  X(preadv64) \
  X(preadv64v2) \
  X(pwritev64) \
  X(pwritev64v2) \
  X(sendfile64) \
  X(lockf64) \
  X(__read_chk) \
  X(__pread_chk) \
  X(__pread64_chk) \
  X(__recv_chk) \
  X(__recvfrom_chk) \
  X(__poll_chk) \
  X(__ppoll_chk) \
  X(copy_file_range) \
  X(tee) \
  X(vmsplice) \
  X(pthread_barrier_wait) \
  X(system) \
  X(thrd_sleep) \
  X(thrd_join) \
  X(mtx_lock) \
  X(mtx_trylock) \
  X(mtx_timedlock) \
  X(cnd_wait) \
  X(cnd_timedwait) \
  X(ioctl) \
  X(getrandom) \
  X(getentropy)

STRATA_DEFINE_REAL_TABLE(STRATA_FOR_EACH_IO_FUNCTION)


}  // namespace

bool IsBlockingSystemCall(long number, const long* arguments) {
  switch (number) {
    case SYS_futex:
      switch (arguments[1] & FUTEX_CMD_MASK) {
        case FUTEX_WAIT:
        case FUTEX_WAIT_BITSET:
        case FUTEX_LOCK_PI:
        case FUTEX_LOCK_PI2:
        case FUTEX_WAIT_REQUEUE_PI:
          return true;
        default:
          return false;  // Wakes, requeues, trylocks, unlocks: they do not wait.
      }
    case SYS_io_uring_enter:  // fd, to_submit, min_complete, flags, ...
      return (arguments[3] & IORING_ENTER_GETEVENTS) != 0 && arguments[2] > 0;
#ifdef SYS_futex_waitv
    case SYS_futex_waitv:
#endif
    case SYS_nanosleep:
    case SYS_clock_nanosleep:
    case SYS_pause:
    case SYS_poll:
    case SYS_ppoll:
    case SYS_select:
    case SYS_pselect6:
    case SYS_epoll_wait:
    case SYS_epoll_pwait:
#ifdef SYS_epoll_pwait2
    case SYS_epoll_pwait2:
#endif
    case SYS_read:
    case SYS_readv:
    case SYS_pread64:
    case SYS_recvfrom:
    case SYS_recvmsg:
    case SYS_recvmmsg:
    case SYS_accept:
    case SYS_accept4:
    case SYS_connect:
    case SYS_wait4:
    case SYS_waitid:
    case SYS_msgrcv:
    case SYS_semtimedop:
    case SYS_mq_timedreceive:
    case SYS_rt_sigtimedwait:
    case SYS_rt_sigsuspend:
    case SYS_fsync:
    case SYS_fdatasync:
    case SYS_flock:
      return true;
    default:
      return false;
  }
}

void ResolveBlockingIoFunctions() {
  STRATA_RESOLVE_TABLE();
}

}  // namespace base_internal
}  // namespace strata

extern "C" {

ssize_t pread(int fd, void* data, size_t size, off_t offset) {
  const auto real = STRATA_REAL(pread);
  STRATA_IO_CALL(pread, fd, data, size, offset);
}
ssize_t pread64(int fd, void* data, size_t size, off64_t offset) {
  const auto real = STRATA_REAL(pread64);
  STRATA_IO_CALL(pread64, fd, data, size, offset);
}
ssize_t preadv(int fd, const iovec* vectors, int count, off_t offset) {
  const auto real = STRATA_REAL(preadv);
  STRATA_IO_CALL(preadv, fd, vectors, count, offset);
}
ssize_t preadv2(int fd, const iovec* vectors, int count, off_t offset, int flags) {
  const auto real = STRATA_REAL(preadv2);
  STRATA_IO_CALL(preadv2, fd, vectors, count, offset, flags);
}
ssize_t pwrite(int fd, const void* data, size_t size, off_t offset) {
  const auto real = STRATA_REAL(pwrite);
  STRATA_IO_CALL(pwrite, fd, data, size, offset);
}
ssize_t pwrite64(int fd, const void* data, size_t size, off64_t offset) {
  const auto real = STRATA_REAL(pwrite64);
  STRATA_IO_CALL(pwrite64, fd, data, size, offset);
}
ssize_t writev(int fd, const iovec* vectors, int count) {
  const auto real = STRATA_REAL(writev);
  STRATA_IO_CALL(writev, fd, vectors, count);
}
ssize_t pwritev(int fd, const iovec* vectors, int count, off_t offset) {
  const auto real = STRATA_REAL(pwritev);
  STRATA_IO_CALL(pwritev, fd, vectors, count, offset);
}
ssize_t pwritev2(int fd, const iovec* vectors, int count, off_t offset, int flags) {
  const auto real = STRATA_REAL(pwritev2);
  STRATA_IO_CALL(pwritev2, fd, vectors, count, offset, flags);
}
ssize_t send(int fd, const void* data, size_t size, int flags) {
  const auto real = STRATA_REAL(send);
  STRATA_IO_CALL(send, fd, data, size, flags);
}
ssize_t sendto(int fd, const void* data, size_t size, int flags, const sockaddr* to,
               socklen_t to_size) {
  const auto real = STRATA_REAL(sendto);
  STRATA_IO_CALL(sendto, fd, data, size, flags, to, to_size);
}
ssize_t sendmsg(int fd, const msghdr* message, int flags) {
  const auto real = STRATA_REAL(sendmsg);
  STRATA_IO_CALL(sendmsg, fd, message, flags);
}
int sendmmsg(int fd, mmsghdr* messages, unsigned int count, int flags) {
  const auto real = STRATA_REAL(sendmmsg);
  STRATA_IO_CALL(sendmmsg, fd, messages, count, flags);
}
int recvmmsg(int fd, mmsghdr* messages, unsigned int count, int flags, timespec* timeout) {
  const auto real = STRATA_REAL(recvmmsg);
  STRATA_IO_CALL(recvmmsg, fd, messages, count, flags, timeout);
}
ssize_t sendfile(int out, int in, off_t* offset, size_t count) {
  const auto real = STRATA_REAL(sendfile);
  STRATA_IO_CALL(sendfile, out, in, offset, count);
}
ssize_t splice(int in, loff_t* in_offset, int out, loff_t* out_offset, size_t size,
               unsigned int flags) {
  const auto real = STRATA_REAL(splice);
  STRATA_IO_CALL(splice, in, in_offset, out, out_offset, size, flags);
}
int msync(void* address, size_t size, int flags) {
  const auto real = STRATA_REAL(msync);
  STRATA_IO_CALL(msync, address, size, flags);
}
int sync_file_range(int fd, off64_t offset, off64_t size, unsigned int flags) {
  const auto real = STRATA_REAL(sync_file_range);
  STRATA_IO_CALL(sync_file_range, fd, offset, size, flags);
}
int syncfs(int fd) {
  const auto real = STRATA_REAL(syncfs);
  STRATA_IO_CALL(syncfs, fd);
}
void sync() {
  const auto real = STRATA_REAL(sync);
  strata::base_internal::ScopedWait wait(reinterpret_cast<const void*>(real), STRATA_WRAPPER_FRAME(),
                                         true);
  real();
}
int lockf(int fd, int command, off_t size) {
  const auto real = STRATA_REAL(lockf);
  STRATA_IO_CALL(lockf, fd, command, size);
}
int tcdrain(int fd) {
  const auto real = STRATA_REAL(tcdrain);
  STRATA_IO_CALL(tcdrain, fd);
}
ssize_t msgrcv(int queue, void* message, size_t size, long type, int flags) {
  const auto real = STRATA_REAL(msgrcv);
  STRATA_IO_CALL(msgrcv, queue, message, size, type, flags);
}
int msgsnd(int queue, const void* message, size_t size, int flags) {
  const auto real = STRATA_REAL(msgsnd);
  STRATA_IO_CALL(msgsnd, queue, message, size, flags);
}
int semop(int set, sembuf* operations, size_t count) {
  const auto real = STRATA_REAL(semop);
  STRATA_IO_CALL(semop, set, operations, count);
}
int semtimedop(int set, sembuf* operations, size_t count, const timespec* timeout) {
  const auto real = STRATA_REAL(semtimedop);
  STRATA_IO_CALL(semtimedop, set, operations, count, timeout);
}
ssize_t mq_receive(mqd_t queue, char* message, size_t size, unsigned int* priority) {
  const auto real = STRATA_REAL(mq_receive);
  STRATA_IO_CALL(mq_receive, queue, message, size, priority);
}
ssize_t mq_timedreceive(mqd_t queue, char* message, size_t size, unsigned int* priority,
                        const timespec* deadline) {
  const auto real = STRATA_REAL(mq_timedreceive);
  STRATA_IO_CALL(mq_timedreceive, queue, message, size, priority, deadline);
}
int mq_send(mqd_t queue, const char* message, size_t size, unsigned int priority) {
  const auto real = STRATA_REAL(mq_send);
  STRATA_IO_CALL(mq_send, queue, message, size, priority);
}
int mq_timedsend(mqd_t queue, const char* message, size_t size, unsigned int priority,
                 const timespec* deadline) {
  const auto real = STRATA_REAL(mq_timedsend);
  STRATA_IO_CALL(mq_timedsend, queue, message, size, priority, deadline);
}
ssize_t preadv64(int fd, const iovec* vectors, int count, off64_t offset) {
  const auto real = STRATA_REAL(preadv64);
  STRATA_IO_CALL(preadv64, fd, vectors, count, offset);
}
ssize_t preadv64v2(int fd, const iovec* vectors, int count, off64_t offset, int flags) {
  const auto real = STRATA_REAL(preadv64v2);
  STRATA_IO_CALL(preadv64v2, fd, vectors, count, offset, flags);
}
ssize_t pwritev64(int fd, const iovec* vectors, int count, off64_t offset) {
  const auto real = STRATA_REAL(pwritev64);
  STRATA_IO_CALL(pwritev64, fd, vectors, count, offset);
}
ssize_t pwritev64v2(int fd, const iovec* vectors, int count, off64_t offset, int flags) {
  const auto real = STRATA_REAL(pwritev64v2);
  STRATA_IO_CALL(pwritev64v2, fd, vectors, count, offset, flags);
}
ssize_t sendfile64(int out, int in, off64_t* offset, size_t count) {
  const auto real = STRATA_REAL(sendfile64);
  STRATA_IO_CALL(sendfile64, out, in, offset, count);
}
int lockf64(int fd, int command, off64_t size) {
  const auto real = STRATA_REAL(lockf64);
  STRATA_IO_CALL(lockf64, fd, command, size);
}
ssize_t __read_chk(int fd, void* data, size_t size, size_t buffer_size) {
  const auto real = STRATA_REAL(__read_chk);
  STRATA_IO_CALL(__read_chk, fd, data, size, buffer_size);
}
ssize_t __pread_chk(int fd, void* data, size_t size, off_t offset, size_t buffer_size) {
  const auto real = STRATA_REAL(__pread_chk);
  STRATA_IO_CALL(__pread_chk, fd, data, size, offset, buffer_size);
}
ssize_t __pread64_chk(int fd, void* data, size_t size, off64_t offset, size_t buffer_size) {
  const auto real = STRATA_REAL(__pread64_chk);
  STRATA_IO_CALL(__pread64_chk, fd, data, size, offset, buffer_size);
}
ssize_t __recv_chk(int fd, void* data, size_t size, size_t buffer_size, int flags) {
  const auto real = STRATA_REAL(__recv_chk);
  STRATA_IO_CALL(__recv_chk, fd, data, size, buffer_size, flags);
}
ssize_t __recvfrom_chk(int fd, void* data, size_t size, size_t buffer_size, int flags,
                       sockaddr* from, socklen_t* from_size) {
  const auto real = STRATA_REAL(__recvfrom_chk);
  STRATA_IO_CALL(__recvfrom_chk, fd, data, size, buffer_size, flags, from, from_size);
}
int __poll_chk(pollfd* fds, nfds_t count, int timeout_ms, size_t fds_size) {
  const auto real = STRATA_REAL(__poll_chk);
  STRATA_WAIT_CALL(__poll_chk, fds, count, timeout_ms, fds_size);
}
int __ppoll_chk(pollfd* fds, nfds_t count, const timespec* timeout, const sigset_t* mask,
                size_t fds_size) {
  const auto real = STRATA_REAL(__ppoll_chk);
  STRATA_WAIT_CALL(__ppoll_chk, fds, count, timeout, mask, fds_size);
}
ssize_t copy_file_range(int in, off64_t* in_offset, int out, off64_t* out_offset, size_t size,
                        unsigned int flags) {
  const auto real = STRATA_REAL(copy_file_range);
  STRATA_IO_CALL(copy_file_range, in, in_offset, out, out_offset, size, flags);
}
ssize_t tee(int in, int out, size_t size, unsigned int flags) {
  const auto real = STRATA_REAL(tee);
  STRATA_IO_CALL(tee, in, out, size, flags);
}
ssize_t vmsplice(int fd, const iovec* vectors, size_t count, unsigned int flags) {
  const auto real = STRATA_REAL(vmsplice);
  STRATA_IO_CALL(vmsplice, fd, vectors, count, flags);
}
int pthread_barrier_wait(pthread_barrier_t* barrier) {
  const auto real = STRATA_REAL(pthread_barrier_wait);
  STRATA_WAIT_CALL(pthread_barrier_wait, barrier);
}
int system(const char* command) {
  const auto real = STRATA_REAL(system);
  STRATA_WAIT_CALL(system, command);
}
int thrd_sleep(const timespec* duration, timespec* remaining) {
  const auto real = STRATA_REAL(thrd_sleep);
  STRATA_WAIT_CALL(thrd_sleep, duration, remaining);
}
int thrd_join(thrd_t thread, int* result) {
  const auto real = STRATA_REAL(thrd_join);
  STRATA_WAIT_CALL(thrd_join, thread, result);
}
// mtx_lock and mtx_timedlock try the lock first, as pthread_mutex_lock's wrapper does: only a
// contended lock marks a wait.
int mtx_lock(mtx_t* mutex) {
  const auto real = STRATA_REAL(mtx_lock);
  const int tried = STRATA_REAL(mtx_trylock)(mutex);
  if (tried != thrd_busy) return tried;
  STRATA_WAIT_CALL(mtx_lock, mutex);
}
int mtx_timedlock(mtx_t* __restrict mutex, const timespec* __restrict deadline) {
  const auto real = STRATA_REAL(mtx_timedlock);
  const int tried = STRATA_REAL(mtx_trylock)(mutex);
  if (tried != thrd_busy) return tried;
  STRATA_WAIT_CALL(mtx_timedlock, mutex, deadline);
}
int cnd_wait(cnd_t* condition, mtx_t* mutex) {
  const auto real = STRATA_REAL(cnd_wait);
  STRATA_WAIT_CALL(cnd_wait, condition, mutex);
}
int cnd_timedwait(cnd_t* __restrict condition, mtx_t* __restrict mutex,
                  const timespec* __restrict deadline) {
  const auto real = STRATA_REAL(cnd_timedwait);
  STRATA_WAIT_CALL(cnd_timedwait, condition, mutex, deadline);
}

// ioctl: mostly quick, but a terminal's drain (TCSBRK, TCSETSW) and many drivers' requests
// wait; its kernel CPU is charged to it. The one variadic argument is read as glibc reads it
// (a pointer-sized word).
int ioctl(int fd, unsigned long request, ...) {
  const auto real = STRATA_REAL(ioctl);
  va_list arguments;
  va_start(arguments, request);
  void* const argument = va_arg(arguments, void*);
  va_end(arguments);
  STRATA_IO_CALL(ioctl, fd, request, argument);
}
// getrandom and getentropy wait until the kernel's entropy pool is ready (early boot), and
// spend kernel CPU generating the bytes.
ssize_t getrandom(void* buffer, size_t size, unsigned int flags) {
  const auto real = STRATA_REAL(getrandom);
  STRATA_IO_CALL(getrandom, buffer, size, flags);
}
int getentropy(void* buffer, size_t size) {
  const auto real = STRATA_REAL(getentropy);
  STRATA_IO_CALL(getentropy, buffer, size);
}

}  // extern "C"
