/* http.c - request parsing into malloc'd structures (see http.h). */
#define _GNU_SOURCE
#include "http.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static char *dup_range(const char *s, size_t n) {
  char *p = malloc(n + 1);
  if (!p) return NULL;
  memcpy(p, s, n);
  p[n] = 0;
  return p;
}

static int hexval(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = tolower(c);
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

/* Percent-decodes s[0..n) into a new string ('+' is a space in queries). */
static char *url_decode(const char *s, size_t n, int plus_is_space) {
  char *out = malloc(n + 1), *o = out;
  if (!out) return NULL;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '%' && i + 2 < n && hexval(s[i + 1]) >= 0 &&
        hexval(s[i + 2]) >= 0) {
      *o++ = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
      i += 2;
    } else if (plus_is_space && s[i] == '+') {
      *o++ = ' ';
    } else {
      *o++ = s[i];
    }
  }
  *o = 0;
  return out;
}

static void fields_free(struct http_field *f) {
  while (f) {
    struct http_field *next = f->next;
    free(f->name);
    free(f->value);
    free(f);
    f = next;
  }
}

void http_request_free(struct http_request *r) {
  if (!r) return;
  free(r->method);
  free(r->target);
  free(r->path);
  free(r->version);
  fields_free(r->headers);
  fields_free(r->params);
  free(r);
}

/* Appends a field at *tail and returns it; NULL on allocation failure
 * (then name and value are freed). */
static struct http_field *field_add(struct http_field ***tail, char *name,
                                    char *value) {
  struct http_field *f = malloc(sizeof *f);
  if (!f || !name || !value) {
    free(f);
    free(name);
    free(value);
    return NULL;
  }
  f->name = name;
  f->value = value;
  f->next = NULL;
  **tail = f;
  *tail = &f->next;
  return f;
}

static int parse_query(struct http_request *r, const char *q, size_t n) {
  struct http_field **tail = &r->params;
  size_t i = 0;
  while (i < n) {
    size_t end = i;
    while (end < n && q[end] != '&') end++;
    if (end > i) {
      size_t eq = i;
      while (eq < end && q[eq] != '=') eq++;
      char *name = url_decode(q + i, eq - i, 1);
      char *value = eq < end ? url_decode(q + eq + 1, end - eq - 1, 1)
                             : dup_range("", 0);
      if (!field_add(&tail, name, value)) return 0;
    }
    i = end + 1;
  }
  return 1;
}

/* Finds the end of the head: returns the offset just past the blank line,
 * or 0 when it is not there yet. */
static size_t head_end(const char *buf, size_t len) {
  const char *p = memmem(buf, len, "\r\n\r\n", 4);
  return p ? (size_t)(p - buf) + 4 : 0;
}

long http_parse(const char *buf, size_t len, struct http_request **out) {
  *out = NULL;
  if (!buf || len == 0) return HTTP_NEED_MORE;
  size_t hlen = head_end(buf, len > HTTP_MAX_HEAD ? HTTP_MAX_HEAD : len);
  if (!hlen) return len >= HTTP_MAX_HEAD ? HTTP_TOO_BIG : HTTP_NEED_MORE;

  struct http_request *r = calloc(1, sizeof *r);
  if (!r) return HTTP_BAD;

  /* Request line: METHOD SP TARGET SP VERSION CRLF */
  const char *line = buf;
  const char *eol = memmem(line, hlen, "\r\n", 2);
  const char *sp1 = memchr(line, ' ', (size_t)(eol - line));
  const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1)) : NULL;
  if (!sp1 || !sp2 || sp1 == line || sp2 == sp1 + 1) goto bad;
  r->method = dup_range(line, (size_t)(sp1 - line));
  r->target = dup_range(sp1 + 1, (size_t)(sp2 - sp1 - 1));
  r->version = dup_range(sp2 + 1, (size_t)(eol - sp2 - 1));
  if (!r->method || !r->target || !r->version) goto bad;
  if (strncmp(r->version, "HTTP/1.", 7) != 0 || !r->version[7] || r->version[8])
    goto bad;
  if (r->target[0] != '/') goto bad;
  {
    char *q = strchr(r->target, '?');
    size_t plen = q ? (size_t)(q - r->target) : strlen(r->target);
    r->path = url_decode(r->target, plen, 0);
    if (!r->path) goto bad;
    if (q && !parse_query(r, q + 1, strlen(q + 1))) goto bad;
  }

  /* Header lines: NAME ":" OWS VALUE OWS CRLF, up to the blank line. */
  struct http_field **tail = &r->headers;
  const char *p = eol + 2;
  const char *end = buf + hlen - 2;      /* the final CRLF */
  int conn_close = 0, conn_keep = 0, chunked = 0;
  while (p < end) {
    const char *le = memmem(p, (size_t)(end - p) + 2, "\r\n", 2);
    const char *colon = memchr(p, ':', (size_t)(le - p));
    if (!colon || colon == p) goto bad;
    for (const char *c = p; c < colon; c++)
      if (*c == ' ' || *c == '\t') goto bad;
    const char *v = colon + 1, *ve = le;
    while (v < ve && (*v == ' ' || *v == '\t')) v++;
    while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t')) ve--;
    char *name = dup_range(p, (size_t)(colon - p));
    char *value = dup_range(v, (size_t)(ve - v));
    struct http_field *f = field_add(&tail, name, value);
    if (!f) goto bad;
    if (!strcasecmp(f->name, "Content-Length")) {
      char *e;
      unsigned long long n = strtoull(f->value, &e, 10);
      if (*e || e == f->value || n > (1ull << 30)) goto bad;
      r->content_length = (size_t)n;
    } else if (!strcasecmp(f->name, "Connection")) {
      if (strcasestr(f->value, "close")) conn_close = 1;
      if (strcasestr(f->value, "keep-alive")) conn_keep = 1;
    } else if (!strcasecmp(f->name, "Transfer-Encoding")) {
      if (strcasestr(f->value, "chunked")) chunked = 1;
    }
    p = le + 2;
  }
  if (chunked) {
    http_request_free(r);
    return HTTP_UNSUPPORTED;
  }
  if (r->version[7] == '1')
    r->keep_alive = !conn_close;
  else
    r->keep_alive = conn_keep && !conn_close;

  if (len - hlen < r->content_length) {   /* the body is still coming */
    http_request_free(r);
    return HTTP_NEED_MORE;
  }
  *out = r;
  return (long)(hlen + r->content_length);

bad:
  http_request_free(r);
  return HTTP_BAD;
}

const char *http_header(const struct http_request *r, const char *name) {
  for (const struct http_field *f = r->headers; f; f = f->next)
    if (!strcasecmp(f->name, name)) return f->value;
  return NULL;
}

const char *http_param(const struct http_request *r, const char *name) {
  for (const struct http_field *f = r->params; f; f = f->next)
    if (!strcmp(f->name, name)) return f->value;
  return NULL;
}

char *http_cookie(const struct http_request *r, const char *name) {
  size_t nlen = strlen(name);
  for (const struct http_field *f = r->headers; f; f = f->next) {
    if (strcasecmp(f->name, "Cookie")) continue;
    const char *s = f->value;
    while (*s) {
      while (*s == ' ' || *s == ';') s++;
      const char *e = s;
      while (*e && *e != ';') e++;
      if ((size_t)(e - s) > nlen && !strncmp(s, name, nlen) && s[nlen] == '=')
        return dup_range(s + nlen + 1, (size_t)(e - s - nlen - 1));
      s = e;
    }
  }
  return NULL;
}
