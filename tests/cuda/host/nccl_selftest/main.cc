/* The self-test's driver: loads the stand-in as libs.cu does (dlopen, then dlsym of the sixteen
 * names), then runs every scenario in 2 or 3 forked processes and checks how each ended. */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "selftest.h"

Nccl nccl;
ncclUniqueId g_second_id;

namespace {

struct Scenario {
  const char *name;
  int nranks;
  int (*run)(int rank, int n, const ncclUniqueId &id);
  const char *timeout_ms; /* DTRAIN_NCCL_STANDIN_TIMEOUT_MS for its ranks, or NULL */
  int victim; /* the rank that kills itself with SIGKILL, or -1 */
  int limit_s; /* each rank's hard limit */
};

const Scenario kScenarios[] = {
    {"collectives", 2, scenario_collectives, nullptr, -1, 60},
    {"collectives", 3, scenario_collectives, nullptr, -1, 60},
    {"groups and messages", 2, scenario_groups, nullptr, -1, 60},
    {"groups and messages", 3, scenario_groups, nullptr, -1, 60},
    {"a rank killed mid-collective", 2, scenario_kill, nullptr, 1, 30},
    {"a rank killed mid-collective", 3, scenario_kill, nullptr, 2, 30},
    {"a rank killed mid-message", 2, scenario_kill_midflight, "30000", 1, 30},
    {"abort with a silent peer", 2, scenario_silent_abort, nullptr, -1, 30},
    {"timeout with a silent peer", 2, scenario_timeout, "1000", -1, 30},
    {"init with a missing rank", 2, scenario_init_timeout, "1000", -1, 30},
};

std::vector<pid_t> g_children; /* of the scenario running, for the alarm to kill */

void kill_children() {
  for (pid_t pid : g_children) kill(pid, SIGKILL);
}

void on_alarm(int) {
  static const char msg[] = "nccl_selftest: hard time limit reached; killing every rank\n";
  kill_children();
  ssize_t ignored = write(2, msg, sizeof msg - 1);
  (void)ignored;
  _exit(3);
}

bool load(const char *path) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    fprintf(stderr, "nccl_selftest: %s\n", dlerror());
    return false;
  }
  struct Slot {
    const char *name;
    void **slot;
  } slots[] = {
      {"ncclGetUniqueId", (void **)&nccl.get_unique_id},
      {"ncclCommInitRank", (void **)&nccl.comm_init_rank},
      {"ncclCommDestroy", (void **)&nccl.comm_destroy},
      {"ncclCommAbort", (void **)&nccl.comm_abort},
      {"ncclCommGetAsyncError", (void **)&nccl.comm_get_async_error},
      {"ncclAllReduce", (void **)&nccl.all_reduce},
      {"ncclBroadcast", (void **)&nccl.broadcast},
      {"ncclAllGather", (void **)&nccl.all_gather},
      {"ncclReduceScatter", (void **)&nccl.reduce_scatter},
      {"ncclSend", (void **)&nccl.send},
      {"ncclRecv", (void **)&nccl.recv},
      {"ncclGroupStart", (void **)&nccl.group_start},
      {"ncclGroupEnd", (void **)&nccl.group_end},
      {"ncclGetErrorString", (void **)&nccl.error_string},
      {"ncclGetLastError", (void **)&nccl.last_error},
      {"ncclGetVersion", (void **)&nccl.get_version},
  };
  for (const Slot &s : slots) {
    *s.slot = dlsym(h, s.name);
    if (*s.slot == nullptr) {
      fprintf(stderr, "nccl_selftest: %s lacks %s\n", path, s.name);
      return false;
    }
  }
  return true;
}

/* Runs one scenario; true when every rank ended as it should. */
bool run(const Scenario &s) {
  if (s.timeout_ms != nullptr) setenv("DTRAIN_NCCL_STANDIN_TIMEOUT_MS", s.timeout_ms, 1);
  else unsetenv("DTRAIN_NCCL_STANDIN_TIMEOUT_MS");
  ncclUniqueId id;
  int r = nccl.get_unique_id(&id);
  if (r == ncclSuccess) r = nccl.get_unique_id(&g_second_id);
  if (r != ncclSuccess) {
    printf("FAIL %s: ncclGetUniqueId returned %d\n", s.name, r);
    return false;
  }
  const char *folder = id.internal + 8;
  fflush(stdout);
  fflush(stderr);
  g_children.clear();
  const pid_t parent = getpid();
  for (int rank = 0; rank < s.nranks; rank++) {
    pid_t pid = fork();
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1); /* the parent died before prctl */
      signal(SIGALRM, SIG_DFL);
      alarm(s.limit_s);
      g_rank = rank;
      _exit(s.run(rank, s.nranks, id));
    }
    if (pid > 0) g_children.push_back(pid);
  }
  const double start = now_ms();
  std::vector<int> status(g_children.size(), -1);
  size_t left = g_children.size();
  while (left > 0) {
    for (size_t i = 0; i < g_children.size(); i++) {
      if (status[i] != -1) continue;
      int st = 0;
      if (waitpid(g_children[i], &st, WNOHANG) == g_children[i]) {
        status[i] = st;
        left--;
      }
    }
    if (now_ms() - start > (s.limit_s + 5) * 1000.0) {
      kill_children();
      printf("FAIL %s (%d ranks): ranks still running after %d s, killed\n", s.name, s.nranks,
             s.limit_s + 5);
      for (size_t i = 0; i < g_children.size(); i++) waitpid(g_children[i], nullptr, 0);
      return false;
    }
    sleep_ms(10);
  }
  bool ok = true;
  std::string how;
  for (size_t i = 0; i < status.size(); i++) {
    const int st = status[i];
    const bool killed = WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
    const bool passed = static_cast<int>(i) == s.victim ? killed : WIFEXITED(st) && WEXITSTATUS(st) == 0;
    if (!passed) ok = false;
    char line[96];
    snprintf(line, sizeof line, " rank %zu %s", i,
             WIFEXITED(st) ? ("exit " + std::to_string(WEXITSTATUS(st))).c_str()
                           : ("signal " + std::to_string(WTERMSIG(st))).c_str());
    how += line;
  }
  /* Rank 0 removes the rendezvous folder once every rank joined (or its own init failed). */
  struct stat info;
  if (stat(folder, &info) == 0) {
    ok = false;
    how += "; the id's folder was left behind";
  }
  /* Only the groups scenario uses the second id; otherwise its folder is ours to remove. */
  const char *second = g_second_id.internal + 8;
  if (s.run == scenario_groups && stat(second, &info) == 0) {
    ok = false;
    how += "; the second id's folder was left behind";
  }
  rmdir(second);
  printf("%s %s (%d ranks) in %.0f ms:%s\n", ok ? "PASS" : "FAIL", s.name, s.nranks,
         now_ms() - start, how.c_str());
  return ok;
}

}  // namespace

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : getenv("DTRAIN_NCCL_LIB");
  if (path == nullptr || path[0] == '\0') path = "build/cuda_host/libnccl_standin.so";
  setvbuf(stdout, nullptr, _IOLBF, 0);
  signal(SIGALRM, on_alarm);
  alarm(400);
  if (!load(path)) return 2;
  int failed = 0;
  for (const Scenario &s : kScenarios)
    if (!run(s)) failed++;
  printf("%s: %d of %zu scenarios failed\n", failed ? "FAIL" : "PASS", failed,
         sizeof kScenarios / sizeof kScenarios[0]);
  return failed ? 1 : 0;
}
