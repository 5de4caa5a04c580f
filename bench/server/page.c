/* page.c - page rendering and gzip (see page.h).
 *
 * The element tree is deliberately naive - a malloc'd node per element and
 * per text, malloc'd formatted and escaped strings - because that is what
 * the framework code the benchmark stands for does on every request. */
#define _GNU_SOURCE
#include "page.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

/* ---- growing buffer ---------------------------------------------------- */

int sbuf_reserve(struct sbuf *b, size_t extra) {
  if (b->len + extra + 1 <= b->cap) return 1;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + extra + 1) cap *= 2;
  char *p = realloc(b->data, cap);
  if (!p) return 0;
  b->data = p;
  b->cap = cap;
  return 1;
}

int sbuf_append(struct sbuf *b, const char *s, size_t n) {
  if (!sbuf_reserve(b, n)) return 0;
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = 0;
  return 1;
}

int sbuf_puts(struct sbuf *b, const char *s) { return sbuf_append(b, s, strlen(s)); }

int sbuf_printf(struct sbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0 || !sbuf_reserve(b, (size_t)n)) return 0;
  va_start(ap, fmt);
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
  return 1;
}

void sbuf_free(struct sbuf *b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}

/* ---- element tree ------------------------------------------------------ */

struct node {
  char *tag;                    /* NULL for a text node */
  char *attrs;                  /* " class=..." or NULL */
  char *text;                   /* escaped text of a text node */
  struct node *first, *last, *next;
};

struct dom {
  struct node *root;
  int failed;                   /* an allocation failed somewhere */
};

static char *html_escape(const char *s) {
  size_t n = 0;
  for (const char *p = s; *p; p++)
    n += *p == '<' || *p == '>' ? 4 : *p == '&' ? 5 : *p == '"' ? 6 : 1;
  char *out = malloc(n + 1), *o = out;
  if (!out) return NULL;
  for (const char *p = s; *p; p++) {
    const char *rep = *p == '<' ? "&lt;" : *p == '>' ? "&gt;"
                    : *p == '&' ? "&amp;" : *p == '"' ? "&quot;" : NULL;
    if (rep) {
      size_t l = strlen(rep);
      memcpy(o, rep, l);
      o += l;
    } else {
      *o++ = *p;
    }
  }
  *o = 0;
  return out;
}

static void attach(struct dom *d, struct node *parent, struct node *n) {
  if (!n) {
    d->failed = 1;
    return;
  }
  if (!parent) return;
  if (parent->last)
    parent->last->next = n;
  else
    parent->first = n;
  parent->last = n;
}

/* A new element under parent; attrs is a printf format (may be NULL). */
__attribute__((format(printf, 4, 5)))
static struct node *el(struct dom *d, struct node *parent, const char *tag,
                       const char *attrs, ...) {
  struct node *n = calloc(1, sizeof *n);
  if (n) {
    n->tag = strdup(tag);
    if (attrs) {
      va_list ap;
      va_start(ap, attrs);
      if (vasprintf(&n->attrs, attrs, ap) < 0) n->attrs = NULL, d->failed = 1;
      va_end(ap);
    }
    if (!n->tag) d->failed = 1;
  }
  attach(d, parent, n);
  return n ? n : parent;        /* keep building under the parent on OOM */
}

/* A text node under parent: the formatted text, escaped. */
__attribute__((format(printf, 3, 4)))
static void text(struct dom *d, struct node *parent, const char *fmt, ...) {
  struct node *n = calloc(1, sizeof *n);
  if (n) {
    char *raw = NULL;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&raw, fmt, ap) < 0) raw = NULL;
    va_end(ap);
    n->text = raw ? html_escape(raw) : NULL;
    free(raw);
    if (!n->text) d->failed = 1;
  }
  attach(d, parent, n);
}

/* A raw (already safe) text node: static CSS and script. */
static void raw(struct dom *d, struct node *parent, const char *s) {
  struct node *n = calloc(1, sizeof *n);
  if (n && !(n->text = strdup(s))) d->failed = 1;
  attach(d, parent, n);
}

static int void_element(const char *tag) {
  return !strcmp(tag, "meta") || !strcmp(tag, "input") || !strcmp(tag, "br");
}

static void render(const struct node *n, struct sbuf *out, int *ok) {
  for (; n; n = n->next) {
    if (!n->tag) {
      if (n->text) *ok &= sbuf_puts(out, n->text);
      continue;
    }
    *ok &= sbuf_printf(out, "<%s%s>", n->tag, n->attrs ? n->attrs : "");
    if (void_element(n->tag)) continue;
    render(n->first, out, ok);
    *ok &= sbuf_printf(out, "</%s>", n->tag);
  }
}

static void node_free(struct node *n) {
  while (n) {
    struct node *next = n->next;
    node_free(n->first);
    free(n->tag);
    free(n->attrs);
    free(n->text);
    free(n);
    n = next;
  }
}

/* ---- the page ---------------------------------------------------------- */

static const char page_css[] =
    "body{font-family:system-ui,sans-serif;margin:2em;color:#222;background:#fafafa}"
    "h1{font-size:1.6em;border-bottom:2px solid #468}h2{font-size:1.2em;color:#468}"
    "table{border-collapse:collapse;width:100%;margin:1em 0}"
    "th,td{border:1px solid #ccd;padding:.3em .6em;text-align:left}"
    "th{background:#e8ecf4}tr.odd td{background:#f4f6fa}td.num{text-align:right;"
    "font-variant-numeric:tabular-nums}.note{color:#666;font-size:.9em}"
    "form{margin:1em 0}button{padding:.4em 1em;border-radius:4px;border:1px solid #468;"
    "background:#fff}button:hover{background:#e8ecf4}ul.headers li{font-family:monospace}";

static const char page_js[] =
    "(function(){var rows=document.querySelectorAll('tbody tr');var sum=0;"
    "rows.forEach(function(r){var c=r.querySelector('td.total');if(c)sum+=parseFloat(c.textContent)||0;});"
    "var f=document.getElementById('sum');if(f)f.textContent=sum.toFixed(2);"
    "document.querySelectorAll('button').forEach(function(b){b.addEventListener('click',"
    "function(){b.disabled=true;});});})();";

static const char *const words[] = {
    "apple",  "bolt",   "cable", "drill", "eraser", "flask", "gear",  "hinge",
    "ink",    "jar",    "kettle", "lamp", "magnet", "nail",  "oar",   "pulley",
    "quill",  "rivet",  "spool", "tape",  "umbrella", "valve", "wrench", "yarn"};
enum { NWORDS = sizeof words / sizeof words[0] };

int page_render(const struct page_context *ctx, struct sbuf *html) {
  struct dom d = {0};
  struct session *s = ctx->session;
  const struct http_request *req = ctx->req;
  int other = s->form == 1 ? 2 : 1;

  struct node *htmln = el(&d, NULL, "html", " lang=\"en\"");
  d.root = htmln;
  struct node *head = el(&d, htmln, "head", NULL);
  el(&d, head, "meta", " charset=\"utf-8\"");
  text(&d, el(&d, head, "title", NULL), "spry bench - form %d", s->form);
  raw(&d, el(&d, head, "style", NULL), page_css);

  struct node *body = el(&d, htmln, "body", " class=\"form%d\"", s->form);
  text(&d, el(&d, body, "h1", NULL), "Form %d of session %s", s->form, s->id);
  struct node *p = el(&d, body, "p", " class=\"note\"");
  text(&d, p, "Request %llu, hit %llu of this session (alive %lds), served by "
              "worker %d for %s %s.",
       (unsigned long long)ctx->request_no, (unsigned long long)s->hits,
       (long)(time(NULL) - s->created), ctx->worker, req->method, req->path);

  struct node *form = el(&d, body, "form", " action=\"/form%d\" method=\"get\"", other);
  el(&d, form, "input", " type=\"hidden\" name=\"from\" value=\"%d\"", s->form);
  text(&d, el(&d, form, "button", " type=\"submit\""), "Show form %d", other);

  struct node *table = el(&d, body, "table", " id=\"items\"");
  struct node *tr = el(&d, el(&d, table, "thead", NULL), "tr", NULL);
  static const char *const cols[] = {"#", "Item", "Quantity", "Price", "Total", "Note"};
  for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++)
    text(&d, el(&d, tr, "th", NULL), "%s", cols[i]);
  struct node *tbody = el(&d, table, "tbody", NULL);
  double sum = 0;
  for (int i = 0; i < ctx->rows; i++) {
    uint64_t mix = (ctx->request_no * 2654435761u) ^ (s->hits * 40503u) ^ (uint64_t)i;
    unsigned qty = (unsigned)(mix % 97) + 1;
    double price = (double)((mix >> 8) % 100000) / 100.0;
    sum += qty * price;
    tr = el(&d, tbody, "tr", " class=\"%s\" data-row=\"%d\"", i % 2 ? "odd" : "even", i);
    text(&d, el(&d, tr, "td", " class=\"num\""), "%d", i + 1);
    text(&d, el(&d, tr, "td", NULL), "%s %s-%llu", words[(mix >> 3) % NWORDS],
         words[(i + s->hits) % NWORDS], (unsigned long long)(mix % 10007));
    text(&d, el(&d, tr, "td", " class=\"num\""), "%u", qty);
    text(&d, el(&d, tr, "td", " class=\"num\""), "%.2f", price);
    text(&d, el(&d, tr, "td", " class=\"num total\""), "%.2f", qty * price);
    text(&d, el(&d, tr, "td", " class=\"note\""), "%s <%s> row %d of form %d",
         i % 3 ? "in stock" : "on order", words[mix % NWORDS], i, s->form);
  }
  tr = el(&d, el(&d, table, "tfoot", NULL), "tr", NULL);
  text(&d, el(&d, tr, "td", " colspan=\"4\""), "Sum");
  text(&d, el(&d, tr, "td", " class=\"num\" id=\"sum\""), "%.2f", sum);
  el(&d, tr, "td", NULL);

  text(&d, el(&d, body, "h2", NULL), "Request headers");
  struct node *ul = el(&d, body, "ul", " class=\"headers\"");
  for (const struct http_field *f = req->headers; f; f = f->next)
    text(&d, el(&d, ul, "li", NULL), "%s: %s", f->name, f->value);
  for (const struct http_field *f = req->params; f; f = f->next)
    text(&d, el(&d, ul, "li", " class=\"param\""), "?%s=%s", f->name, f->value);

  text(&d, el(&d, body, "h2", NULL), "History");
  struct node *ol = el(&d, body, "ol", NULL);
  for (unsigned k = 0; k < SESSION_HISTORY; k++) {
    const char *line = s->history[(s->history_next + k) % SESSION_HISTORY];
    if (line) text(&d, el(&d, ol, "li", NULL), "%s", line);
  }
  raw(&d, el(&d, body, "script", NULL), page_js);

  int ok = !d.failed && sbuf_puts(html, "<!DOCTYPE html>\n");
  if (ok) render(d.root, html, &ok);
  node_free(d.root);
  return ok;
}

int page_gzip(const char *in, size_t n, int level, struct sbuf *out) {
  z_stream z;
  memset(&z, 0, sizeof z);
  if (deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    return 0;
  size_t bound = deflateBound(&z, (uLong)n);
  if (!sbuf_reserve(out, bound)) {
    deflateEnd(&z);
    return 0;
  }
  z.next_in = (Bytef *)in;
  z.avail_in = (uInt)n;
  z.next_out = (Bytef *)(out->data + out->len);
  z.avail_out = (uInt)bound;
  int rc = deflate(&z, Z_FINISH);
  if (rc == Z_STREAM_END) out->len += z.total_out;
  deflateEnd(&z);
  return rc == Z_STREAM_END;
}
