/* main.c - the benchmark HTTP/1.1 server (seed 003: a web framework under
 * load). Every request is parsed into malloc'd structures, finds or creates
 * its session in a shared table and locks it, renders an HTML page by
 * string building, gzips it with a fresh zlib stream and is answered with
 * Content-Encoding: gzip, on keep-alive connections.
 *
 * Threads:
 *   main      binds 127.0.0.1, accepts, hands each connection to a worker
 *             (round robin) through the worker's pipe, expires idle sessions
 *             once a second, and on SIGTERM/SIGINT stops everything.
 *   worker i  owns its connections (one epoll set each); a connection is
 *             only ever touched by its worker after the hand-over. The
 *             connection struct is malloc'd by main and freed by the worker,
 *             as in servers with an acceptor thread.
 *
 * Usage: webserver [--port N] [--threads N] [--rows N] [--level L]
 *               [--session-ttl S]
 * Prints "READY port=N allocator=NAME threads=N" on stdout when it accepts.
 * Exits 0 after SIGTERM/SIGINT, once every worker has closed its
 * connections and all memory is freed. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http.h"
#include "page.h"
#include "session.h"

enum {
  READ_CHUNK = 16 * 1024,
  MAX_BODY = 1 << 20,          /* request bodies above this get 413 */
  OUT_HIGH_WATER = 4 << 20     /* stop answering while this much is unsent */
};

struct options {
  int port, threads, rows, level, session_ttl;
};

struct conn {
  int fd;
  int closing;                  /* close once `out` is flushed */
  int want_out;                 /* EPOLLOUT is registered */
  int peer_eof;                 /* the client closed its side: send, then close */
  struct sbuf in;               /* received, not yet parsed */
  struct sbuf out;              /* to send, from out_off */
  size_t out_off;
  struct conn *prev, *next;     /* the worker's list */
};

struct worker {
  int index;
  int epfd;
  int pipe_rd, pipe_wr;         /* main -> worker: struct conn * (NULL = stop) */
  pthread_t thread;
  struct conn *conns;
};

static struct options opt = {0, 4, 48, 6, 60};
static struct session_table *sessions;
static atomic_ullong requests_total;
static int signal_pipe[2] = {-1, -1};

/* ---- allocator detection (as the other benchmark programs do) ---------- */

static const char *detect_allocator(void) {
  FILE *f = fopen("/proc/self/maps", "r");
  const char *found = "glibc";
  char line[4096];
  if (!f) return "unknown";
  while (fgets(line, sizeof line, f)) {
    if (strstr(line, "libspry")) found = "spry";
    else if (strstr(line, "jemalloc")) found = "jemalloc";
    else if (strstr(line, "tcmalloc")) found = "tcmalloc";
    else if (strstr(line, "mimalloc")) found = "mimalloc";
    else continue;
    break;
  }
  fclose(f);
  return found;
}

/* ---- answering --------------------------------------------------------- */

static void http_date(char *buf, size_t n) {
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(buf, n, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

static void answer_simple(struct conn *c, int status, const char *reason,
                          const char *body, int close_after) {
  char date[64];
  http_date(date, sizeof date);
  sbuf_printf(&c->out,
              "HTTP/1.1 %d %s\r\nServer: spry-bench\r\nDate: %s\r\n"
              "Content-Type: text/plain\r\nContent-Length: %zu\r\n"
              "Connection: %s\r\n\r\n%s",
              status, reason, date, strlen(body),
              close_after ? "close" : "keep-alive", body);
  if (close_after) c->closing = 1;
}

/* The framework cycle: session, page, gzip, answer. */
static void answer_page(struct worker *w, struct conn *c,
                        const struct http_request *req) {
  uint64_t no = atomic_fetch_add_explicit(&requests_total, 1, memory_order_relaxed) + 1;
  char *sid = http_cookie(req, "SID");
  int created;
  struct session *s = session_acquire(sessions, sid, &created);
  if (!s) {
    free(sid);
    answer_simple(c, 503, "Service Unavailable", "out of memory\n", 1);
    return;
  }
  s->hits++;
  if (!strcmp(req->path, "/form1")) s->form = 1;
  else if (!strcmp(req->path, "/form2")) s->form = 2;
  char *line = NULL;
  if (asprintf(&line, "request %llu: %s %s on worker %d", (unsigned long long)no,
               req->method, req->target, w->index) >= 0)
    session_remember(s, line);

  struct page_context ctx = {req, s, no, w->index, opt.rows};
  struct sbuf html = {0}, gz = {0};
  int ok = page_render(&ctx, &html);
  int send_cookie = created || !sid;
  char *cookie = NULL;
  if (send_cookie && asprintf(&cookie, "Set-Cookie: SID=%s; Path=/; HttpOnly\r\n", s->id) < 0)
    cookie = NULL;
  session_release(sessions, s);
  free(sid);

  ok = ok && page_gzip(html.data, html.len, opt.level, &gz);
  sbuf_free(&html);
  if (!ok) {
    free(cookie);
    sbuf_free(&gz);
    answer_simple(c, 500, "Internal Server Error", "render failed\n", 1);
    return;
  }
  char date[64];
  http_date(date, sizeof date);
  int head_only = !strcmp(req->method, "HEAD");
  sbuf_printf(&c->out,
              "HTTP/1.1 200 OK\r\nServer: spry-bench\r\nDate: %s\r\n"
              "Content-Type: text/html; charset=utf-8\r\nContent-Encoding: gzip\r\n"
              "Vary: Accept-Encoding\r\nCache-Control: no-store\r\n%s"
              "Content-Length: %zu\r\nConnection: %s\r\n\r\n",
              date, cookie ? cookie : "", gz.len,
              req->keep_alive ? "keep-alive" : "close");
  if (!head_only) sbuf_append(&c->out, gz.data, gz.len);
  if (!req->keep_alive) c->closing = 1;
  free(cookie);
  sbuf_free(&gz);
}

static void answer(struct worker *w, struct conn *c, const struct http_request *req) {
  if (strcmp(req->method, "GET") && strcmp(req->method, "HEAD")) {
    answer_simple(c, 405, "Method Not Allowed", "GET or HEAD only\n", !req->keep_alive);
    return;
  }
  if (!strcmp(req->path, "/stats")) {
    char body[128];
    snprintf(body, sizeof body, "requests=%llu sessions=%zu\n",
             (unsigned long long)atomic_load(&requests_total), session_count(sessions));
    answer_simple(c, 200, "OK", body, !req->keep_alive);
    return;
  }
  answer_page(w, c, req);
}

/* Parses and answers the complete requests in c->in (up to the output
 * high-water mark); returns the bytes consumed. */
static size_t process_input(struct worker *w, struct conn *c) {
  size_t used = 0;
  while (!c->closing && c->out.len - c->out_off < OUT_HIGH_WATER) {
    struct http_request *req;
    long n = http_parse(c->in.data + used, c->in.len - used, &req);
    if (n > 0) {
      answer(w, c, req);
      http_request_free(req);
      used += (size_t)n;
      continue;
    }
    if (n == HTTP_BAD) answer_simple(c, 400, "Bad Request", "bad request\n", 1);
    else if (n == HTTP_TOO_BIG)
      answer_simple(c, 431, "Request Header Fields Too Large", "head too large\n", 1);
    else if (n == HTTP_UNSUPPORTED)
      answer_simple(c, 501, "Not Implemented", "chunked bodies unsupported\n", 1);
    else if (c->in.len - used > HTTP_MAX_HEAD + MAX_BODY)
      answer_simple(c, 413, "Payload Too Large", "body too large\n", 1);
    break;
  }
  if (used) {
    memmove(c->in.data, c->in.data + used, c->in.len - used);
    c->in.len -= used;
  }
  return used;
}

/* ---- connections ------------------------------------------------------- */

static void conn_close(struct worker *w, struct conn *c) {
  epoll_ctl(w->epfd, EPOLL_CTL_DEL, c->fd, NULL);
  close(c->fd);
  if (c->prev) c->prev->next = c->next;
  else w->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  sbuf_free(&c->in);
  sbuf_free(&c->out);
  free(c);
}

/* Sends what it can; returns 0 when the connection is dead. */
static int conn_flush(struct worker *w, struct conn *c) {
  while (c->out_off < c->out.len) {
    ssize_t n = send(c->fd, c->out.data + c->out_off, c->out.len - c->out_off,
                     MSG_NOSIGNAL);
    if (n > 0) {
      c->out_off += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    return 0;
  }
  if (c->out_off == c->out.len) {
    c->out.len = c->out_off = 0;
    /* Give back a big buffer after a burst instead of keeping it forever. */
    if (c->out.cap > 256 * 1024) sbuf_free(&c->out);
  }
  int want = c->out_off < c->out.len;
  if (want != c->want_out) {
    struct epoll_event ev = {.events = (c->peer_eof ? 0 : EPOLLIN | EPOLLRDHUP) |
                                       (want ? EPOLLOUT : 0),
                             .data.ptr = c};
    epoll_ctl(w->epfd, EPOLL_CTL_MOD, c->fd, &ev);
    c->want_out = want;
  }
  return 1;
}

/* Reads what is there; returns 0 when the peer is gone. */
static int conn_read(struct conn *c) {
  for (;;) {
    if (!sbuf_reserve(&c->in, READ_CHUNK)) return 0;
    ssize_t n = recv(c->fd, c->in.data + c->in.len, c->in.cap - c->in.len - 1, 0);
    if (n > 0) {
      c->in.len += (size_t)n;
      if (c->in.len > HTTP_MAX_HEAD + MAX_BODY + READ_CHUNK) return 1;
      continue;
    }
    if (n == 0) return 0;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

static void conn_event(struct worker *w, struct conn *c, uint32_t events) {
  if (events & (EPOLLERR | EPOLLHUP)) {
    conn_close(w, c);
    return;
  }
  if (!c->peer_eof && (events & (EPOLLIN | EPOLLRDHUP)) && !conn_read(c)) {
    /* The client is done sending: answer what it sent, then close. */
    c->peer_eof = 1;
    c->want_out = -1;           /* forces the interest update in conn_flush */
  }
  for (;;) {
    size_t used = c->in.len ? process_input(w, c) : 0;
    if (!conn_flush(w, c)) {
      conn_close(w, c);
      return;
    }
    /* Go on only while the high-water mark held requests back and the
     * output has drained since. */
    if (!used || !c->in.len || c->closing || c->out_off != c->out.len) break;
  }
  if (c->out_off == c->out.len && (c->closing || c->peer_eof)) conn_close(w, c);
}

static void *worker_main(void *arg) {
  struct worker *w = arg;
  struct epoll_event evs[64];
  int running = 1;
  while (running) {
    int n = epoll_wait(w->epfd, evs, 64, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    for (int i = 0; i < n; i++) {
      if (evs[i].data.ptr == NULL) {        /* the pipe from main */
        struct conn *c;
        while (read(w->pipe_rd, &c, sizeof c) == (ssize_t)sizeof c) {
          if (!c) {
            running = 0;
            break;
          }
          c->next = w->conns;
          if (w->conns) w->conns->prev = c;
          w->conns = c;
          struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = c};
          if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, c->fd, &ev) < 0) conn_close(w, c);
        }
        continue;
      }
      conn_event(w, evs[i].data.ptr, evs[i].events);
    }
  }
  while (w->conns) conn_close(w, w->conns);
  return NULL;
}

/* ---- main -------------------------------------------------------------- */

static void on_signal(int sig) {
  int saved = errno;
  unsigned char b = (unsigned char)sig;
  if (write(signal_pipe[1], &b, 1) < 0) { /* nothing to do */ }
  errno = saved;
}

static int parse_int(const char *s, int lo, int hi, const char *what) {
  char *e;
  long v = strtol(s, &e, 10);
  if (*e || e == s || v < lo || v > hi) {
    fprintf(stderr, "webserver: bad %s '%s' (%d..%d)\n", what, s, lo, hi);
    exit(2);
  }
  return (int)v;
}

static void parse_args(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      printf("usage: webserver [--port N] [--threads N] [--rows N] [--level 1-9] "
             "[--session-ttl S]\n");
      exit(0);
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "webserver: %s needs a value\n", a);
      exit(2);
    }
    const char *v = argv[++i];
    if (!strcmp(a, "--port")) opt.port = parse_int(v, 0, 65535, a);
    else if (!strcmp(a, "--threads")) opt.threads = parse_int(v, 1, 256, a);
    else if (!strcmp(a, "--rows")) opt.rows = parse_int(v, 0, 100000, a);
    else if (!strcmp(a, "--level")) opt.level = parse_int(v, 1, 9, a);
    else if (!strcmp(a, "--session-ttl")) opt.session_ttl = parse_int(v, 1, 1 << 30, a);
    else {
      fprintf(stderr, "webserver: unknown option %s\n", a);
      exit(2);
    }
  }
}

static int listen_on(int port, int *bound_port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(fd, 1024) < 0 ||
      getsockname(fd, (struct sockaddr *)&addr, &len) < 0) {
    close(fd);
    return -1;
  }
  *bound_port = ntohs(addr.sin_port);
  return fd;
}

static void accept_all(int lfd, struct worker *workers, unsigned *next) {
  for (;;) {
    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;                   /* EAGAIN, or EMFILE: retried on next wakeup */
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct conn *c = calloc(1, sizeof *c);
    struct worker *w = &workers[(*next)++ % (unsigned)opt.threads];
    if (c) c->fd = fd;          /* complete before the hand-over */
    if (!c || write(w->pipe_wr, &c, sizeof c) != (ssize_t)sizeof c) {
      free(c);
      close(fd);
    }
  }
}

int main(int argc, char **argv) {
  parse_args(argc, argv);
  signal(SIGPIPE, SIG_IGN);
  if (pipe2(signal_pipe, O_NONBLOCK | O_CLOEXEC) < 0) return 1;
  struct sigaction sa = {.sa_handler = on_signal};
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);

  int port;
  int lfd = listen_on(opt.port, &port);
  if (lfd < 0) {
    perror("webserver: bind 127.0.0.1");
    return 1;
  }
  sessions = session_table_new(4096);
  struct worker *workers = calloc((size_t)opt.threads, sizeof *workers);
  if (!sessions || !workers) return 1;
  for (int i = 0; i < opt.threads; i++) {
    struct worker *w = &workers[i];
    int p[2];
    w->index = i;
    w->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (w->epfd < 0 || pipe2(p, O_NONBLOCK | O_CLOEXEC) < 0) return 1;
    w->pipe_rd = p[0];
    w->pipe_wr = p[1];
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->pipe_rd, &ev);
    if (pthread_create(&w->thread, NULL, worker_main, w)) return 1;
  }

  int epfd = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = lfd};
  epoll_ctl(epfd, EPOLL_CTL_ADD, lfd, &ev);
  ev.data.fd = signal_pipe[0];
  epoll_ctl(epfd, EPOLL_CTL_ADD, signal_pipe[0], &ev);

  printf("READY port=%d allocator=%s threads=%d\n", port, detect_allocator(), opt.threads);
  fflush(stdout);

  unsigned next = 0;
  time_t last_sweep = time(NULL);
  int stop = 0;
  while (!stop) {
    struct epoll_event evs[8];
    int n = epoll_wait(epfd, evs, 8, 1000);
    for (int i = 0; i < n; i++) {
      if (evs[i].data.fd == signal_pipe[0]) stop = 1;
      else accept_all(lfd, workers, &next);
    }
    time_t now = time(NULL);
    if (now != last_sweep) {
      session_expire(sessions, now, opt.session_ttl);
      last_sweep = now;
    }
  }

  struct conn *none = NULL;
  for (int i = 0; i < opt.threads; i++)
    if (write(workers[i].pipe_wr, &none, sizeof none) != (ssize_t)sizeof none)
      fprintf(stderr, "webserver: cannot stop worker %d\n", i);
  for (int i = 0; i < opt.threads; i++) {
    pthread_join(workers[i].thread, NULL);
    close(workers[i].epfd);
    close(workers[i].pipe_rd);
    close(workers[i].pipe_wr);
  }
  fprintf(stderr, "webserver: stopped after %llu requests, %zu sessions\n",
          (unsigned long long)atomic_load(&requests_total), session_count(sessions));
  session_table_free(sessions);
  free(workers);
  close(epfd);
  close(lfd);
  close(signal_pipe[0]);
  close(signal_pipe[1]);
  return 0;
}
