/* page.h - rendering a page the way a web framework does: build a small
 * element tree of malloc'd nodes, render it by string building into a
 * growing buffer, free the tree, then gzip the text with zlib (a fresh
 * deflate stream per request, as frameworks do).
 *
 * Owner: the calling worker thread; the session passed in is locked by the
 * caller. */
#ifndef SPRY_BENCH_PAGE_H
#define SPRY_BENCH_PAGE_H

#include <stddef.h>
#include <stdint.h>

#include "http.h"
#include "session.h"

/* A growing byte buffer (geometric capacity). */
struct sbuf {
  char *data;
  size_t len, cap;
};

int sbuf_reserve(struct sbuf *b, size_t extra);
int sbuf_append(struct sbuf *b, const char *s, size_t n);
int sbuf_puts(struct sbuf *b, const char *s);
int sbuf_printf(struct sbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void sbuf_free(struct sbuf *b);

struct page_context {
  const struct http_request *req;
  struct session *session;      /* locked */
  uint64_t request_no;          /* server-wide request counter */
  int worker;                   /* worker thread index */
  int rows;                     /* rows of the table */
};

/* Renders the HTML page into *html (appended). Returns 0 on failure. */
int page_render(const struct page_context *ctx, struct sbuf *html);

/* Gzips in[0..n) (gzip wrapper, deflate `level`) into *out (appended).
 * Returns 0 on failure. */
int page_gzip(const char *in, size_t n, int level, struct sbuf *out);

#endif
