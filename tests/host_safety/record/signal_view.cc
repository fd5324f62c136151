// Prints what a program sees of its own signal dispositions for SIGINT, SIGTERM and SIGHUP,
// through sigaction() and signal(), before and after it sets and resets its own handler.
// No Strata include or call. The output must be the same with or without a profiler.
#include <signal.h>

#include <cstdio>
#include <initializer_list>

namespace {

void OwnHandler(int) {}

const char* Describe(sighandler_t handler) {
  if (handler == SIG_DFL) return "default";
  if (handler == SIG_IGN) return "ignore";
  if (handler == OwnHandler) return "own";
  if (handler == SIG_ERR) return "error";
  return "FOREIGN";
}

void Show(const char* when, int signal_number) {
  struct sigaction current;
  if (sigaction(signal_number, nullptr, &current) != 0) {
    std::printf("%s sig=%d sigaction failed\n", when, signal_number);
    return;
  }
  int masked = 0;
  for (int s = 1; s < 32; ++s) masked += sigismember(&current.sa_mask, s) == 1 ? (1 << s) : 0;
  std::printf("%s sig=%d handler=%s flags=0x%x mask=0x%x\n", when, signal_number,
              Describe(current.sa_handler), static_cast<unsigned>(current.sa_flags), masked);
}

}  // namespace

int main() {
  for (int s : {SIGINT, SIGTERM, SIGHUP}) {
    Show("start", s);
    std::printf("signal(own) returned %s\n", Describe(signal(s, OwnHandler)));
    Show("own", s);
    std::printf("signal(default) returned %s\n", Describe(signal(s, SIG_DFL)));
    Show("reset", s);
    struct sigaction action = {};
    action.sa_handler = SIG_DFL;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    sigaddset(&action.sa_mask, SIGUSR1);
    struct sigaction previous;
    sigaction(s, &action, &previous);
    std::printf("sigaction(default) returned %s\n", Describe(previous.sa_handler));
    Show("flags", s);
  }
  return 0;
}
