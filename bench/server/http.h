/* http.h - HTTP/1.1 request parsing the way a web framework does it.
 *
 * Every request is parsed into freshly malloc'd structures (strings for the
 * method, path and every header, a list of query parameters) and freed once
 * the answer is built: this is the per-request allocation traffic the server
 * benchmark is meant to put on the allocator, so nothing here is pooled or
 * parsed in place on purpose.
 *
 * Owner: one worker thread parses, uses and frees a request; nothing is
 * shared. */
#ifndef SPRY_BENCH_HTTP_H
#define SPRY_BENCH_HTTP_H

#include <stddef.h>

/* Largest request head accepted; a bigger one gets 431 and the connection
 * is closed. */
enum { HTTP_MAX_HEAD = 64 * 1024 };

struct http_field {            /* a header or a query parameter */
  char *name;
  char *value;
  struct http_field *next;
};

struct http_request {
  char *method;
  char *target;                /* as sent: path?query */
  char *path;                  /* decoded path, without the query */
  char *version;               /* "HTTP/1.1" */
  struct http_field *headers;  /* in arrival order */
  struct http_field *params;   /* query parameters, decoded */
  size_t content_length;       /* body bytes that follow the head */
  int keep_alive;              /* 1 when the connection stays open */
};

/* Result of http_parse when it does not return a request. */
enum {
  HTTP_NEED_MORE = 0,          /* the head is not complete yet */
  HTTP_BAD = -1,               /* malformed: answer 400 and close */
  HTTP_TOO_BIG = -2,           /* head over HTTP_MAX_HEAD: 431 and close */
  HTTP_UNSUPPORTED = -3        /* e.g. chunked request bodies: 501 and close */
};

/* Parses one request from buf[0..len). On success stores a new request in
 * *out and returns the number of bytes it used (head plus body, > 0). The
 * body itself is skipped: no route of the server reads one. */
long http_parse(const char *buf, size_t len, struct http_request **out);
void http_request_free(struct http_request *r);

/* Case-insensitive header lookup; NULL when absent. */
const char *http_header(const struct http_request *r, const char *name);
/* Query parameter lookup; NULL when absent. */
const char *http_param(const struct http_request *r, const char *name);
/* The value of cookie `name` from the Cookie headers, malloc'd; NULL when
 * absent. */
char *http_cookie(const struct http_request *r, const char *name);

#endif
