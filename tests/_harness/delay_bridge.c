// delay_bridge: a delaying Ethernet bridge between two interfaces, for the throttled link of
// tests/_harness/throttled_link.ts. The kernel here has no netem, so the delay is added in user
// space: every frame that arrives on one interface is held DELAY_MS, then sent out of the other,
// in arrival order. Working on frames (AF_PACKET) rather than on TCP streams delays everything
// the two hosts exchange (ARP, the store's connection, Gloo's pair connections on whatever ports
// they pick) without the programs knowing the relay is there.
//
// Usage: delay_bridge IFACE_A IFACE_B DELAY_MS
// Prints "ready" once both interfaces are open; exits when its stdin closes (so it never
// outlives the process that started it) and prints the frames it forwarded and dropped.
//
// The sockets carry virtio-net headers (PACKET_VNET_HDR): veth hands over segmentation-offloaded
// frames of up to 64 KiB with checksums left to fill, and the header lets such a frame go out of
// the other interface as it came in, instead of being refused for its size or arriving with a
// wrong checksum.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/virtio_net.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/** Largest frame a veth hands over with offloads on: 64 KiB of payload plus the headers. */
#define MAX_FRAME (65536 + 256)
/** Frames held per direction: ample for 100 Mbit/s × 25 ms (~210 full-size frames). */
#define QUEUE_CAP 65536

struct frame {
  int64_t due_ns;
  size_t len;
  unsigned char *bytes;
};

/** Frames held for one direction, oldest first (a ring). */
struct queue {
  struct frame slots[QUEUE_CAP];
  size_t head;
  size_t count;
};

static struct queue queues[2];
static uint64_t forwarded[2];
static uint64_t dropped[2];

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void die(const char *what, const char *iface) {
  fprintf(stderr, "delay_bridge: %s %s: %s\n", what, iface, strerror(errno));
  exit(2);
}

/** A raw socket on `iface` that sees every frame arriving there, with virtio-net headers. */
static int open_port(const char *iface) {
  int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
  if (fd < 0) die("socket for", iface);
  unsigned index = if_nametoindex(iface);
  if (index == 0) die("no interface", iface);
  int one = 1;
  if (setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof one) < 0) die("vnet hdr", iface);
  // Frames this program sends are not frames to forward back.
  if (setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one) < 0) {
    die("ignore outgoing", iface);
  }
  // Room for bursts while this process waits for a core on a busy machine.
  int bytes = 32 << 20;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof bytes);
  setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof bytes);
  struct sockaddr_ll addr = {
      .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL), .sll_ifindex = (int)index};
  if (bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0) die("bind", iface);
  // Frames addressed to the far host's MAC, not this interface's, must be seen too.
  struct packet_mreq promisc = {.mr_ifindex = (int)index, .mr_type = PACKET_MR_PROMISC};
  if (setsockopt(fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &promisc, sizeof promisc) < 0) {
    die("promiscuous", iface);
  }
  return fd;
}

/** Reads every frame waiting on `fd` into queue `q`, each due `delay_ns` from now. */
static void receive(int fd, int q, int64_t delay_ns, unsigned char *buffer) {
  for (;;) {
    struct sockaddr_ll from;
    socklen_t from_len = sizeof from;
    ssize_t n = recvfrom(fd, buffer, MAX_FRAME, MSG_DONTWAIT, (struct sockaddr *)&from, &from_len);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
      perror("delay_bridge: recvfrom");
      exit(2);
    }
    if (from.sll_pkttype == PACKET_OUTGOING) continue;
    struct queue *queue = &queues[q];
    unsigned char *copy = malloc((size_t)n);
    if (queue->count == QUEUE_CAP || copy == NULL) {
      free(copy);
      dropped[q]++;
      continue;
    }
    memcpy(copy, buffer, (size_t)n);
    struct frame *slot = &queue->slots[(queue->head + queue->count) % QUEUE_CAP];
    *slot = (struct frame){.due_ns = now_ns() + delay_ns, .len = (size_t)n, .bytes = copy};
    queue->count++;
  }
}

/** Sends out of `fd` every frame of queue `q` that is due. */
static void release(int fd, int q) {
  struct queue *queue = &queues[q];
  int64_t now = now_ns();
  while (queue->count > 0 && queue->slots[queue->head].due_ns <= now) {
    struct frame *frame = &queue->slots[queue->head];
    // A full device queue drops the frame, as a switch would; TCP sends it again.
    if (send(fd, frame->bytes, frame->len, 0) < 0) {
      dropped[q]++;
    } else {
      forwarded[q]++;
    }
    free(frame->bytes);
    queue->head = (queue->head + 1) % QUEUE_CAP;
    queue->count--;
  }
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: delay_bridge IFACE_A IFACE_B DELAY_MS\n");
    return 2;
  }
  double delay_ms = atof(argv[3]);
  if (!(delay_ms >= 0)) {
    fprintf(stderr, "delay_bridge: DELAY_MS must be a number of at least 0, got %s\n", argv[3]);
    return 2;
  }
  int64_t delay_ns = (int64_t)(delay_ms * 1e6);
  signal(SIGPIPE, SIG_IGN);
  int ports[2] = {open_port(argv[1]), open_port(argv[2])};
  unsigned char *buffer = malloc(MAX_FRAME);
  if (buffer == NULL) return 2;
  printf("ready\n");
  fflush(stdout);
  for (;;) {
    // Sleep until a frame arrives, a held frame is due, or stdin closes.
    int64_t next = -1;
    for (int q = 0; q < 2; q++) {
      if (queues[q].count == 0) continue;
      int64_t due = queues[q].slots[queues[q].head].due_ns;
      if (next < 0 || due < next) next = due;
    }
    struct timespec wait;
    struct timespec *timeout = NULL;
    if (next >= 0) {
      int64_t left = next - now_ns();
      if (left < 0) left = 0;
      wait = (struct timespec){.tv_sec = left / 1000000000LL, .tv_nsec = left % 1000000000LL};
      timeout = &wait;
    }
    struct pollfd fds[3] = {
        {.fd = ports[0], .events = POLLIN},
        {.fd = ports[1], .events = POLLIN},
        {.fd = STDIN_FILENO, .events = POLLIN},
    };
    if (ppoll(fds, 3, timeout, NULL) < 0 && errno != EINTR) {
      perror("delay_bridge: ppoll");
      return 2;
    }
    // Queue 0 holds what arrived on port 0 and leaves by port 1; queue 1 the reverse.
    if (fds[0].revents & POLLIN) receive(ports[0], 0, delay_ns, buffer);
    if (fds[1].revents & POLLIN) receive(ports[1], 1, delay_ns, buffer);
    release(ports[1], 0);
    release(ports[0], 1);
    if (fds[2].revents) {
      char byte;
      if (read(STDIN_FILENO, &byte, 1) <= 0) break;
    }
  }
  fprintf(stderr, "delay_bridge: forwarded %llu and %llu frames, dropped %llu and %llu\n",
          (unsigned long long)forwarded[0], (unsigned long long)forwarded[1],
          (unsigned long long)dropped[0], (unsigned long long)dropped[1]);
  return 0;
}
