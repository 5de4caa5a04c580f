/* strbuild.c - four ways to build a string, many threads at once (seed 001,
 * "Memory Managers and String Building", after Eric Grange's string
 * concatenation series; its text is the source of the four builders and of
 * the piece: CRLF + "Eating apple #" + the number i, for i = 1..N).
 *
 *   naive      Result := Result + piece: one realloc to the exact new length
 *              per piece (Delphi's trivial concatenation).
 *   geometric  a string builder (Delphi's TStringBuilder): capacity starts at
 *              16 and grows by 3/2 (or to twice the need) with realloc;
 *              ToString copies into an exact-size string.
 *   blocks     a write-only block stream (DWScript's TWriteOnlyBlockStream):
 *              a linked list of fixed 8 KiB - 2 pointers blocks, joined into
 *              one string at the end, then the blocks are freed.
 *   writer     a preallocated text writer (mORMot's TTextWriter with its
 *              owned TRawByteStringStream): an 8 KiB buffer allocated once,
 *              numbers formatted straight into it, flushed into the stream's
 *              string, which grows by an exact realloc per flush.
 *
 * As in the Delphi originals, the first three turn the number into a
 * temporary heap string (IntToStr) before appending it, and every builder is
 * a heap object created and destroyed per build.
 *
 * Each of --threads threads builds --repeat strings of --pieces pieces; each
 * result is compared byte for byte with a reference built once up front,
 * then freed. Reports the wall time from the start barrier to the last join.
 */
#include "common.h"

#define TEST_NAME "strbuild"

static const char piece_text[] = "\r\nEating apple #";
#define PIECE_LEN (sizeof piece_text - 1)

static struct {
  uint64_t threads, pieces, repeat;
  const char *builder;
} cfg = {1, 10000, 3000, "naive"};

static char *reference;
static size_t reference_len;
static pthread_barrier_t start_line;

/* Decimal digits of v into out (no terminator); returns the count. */
static size_t format_u64(char *out, uint64_t v)
{
  char tmp[20];
  size_t n = 0, i;
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  for (i = 0; i < n; i++)
    out[i] = tmp[n - 1 - i];
  return n;
}

/* IntToStr: the number as a new heap string. */
static char *int_to_heap(uint64_t v, size_t *len)
{
  char digits[20];
  char *s;
  *len = format_u64(digits, v);
  s = (char *)malloc(*len + 1);
  if (!s)
    bench_oom(TEST_NAME, *len + 1);
  memcpy(s, digits, *len);
  s[*len] = 0;
  return s;
}

static void *xrealloc(void *p, size_t n)
{
  p = realloc(p, n);
  if (!p)
    bench_oom(TEST_NAME, n);
  return p;
}

static void *xmalloc(size_t n)
{
  return xrealloc(NULL, n);
}

/* ---- naive: one exact realloc per piece --------------------------------- */

static char *build_naive(uint64_t pieces, size_t *out_len)
{
  char *s = NULL;
  size_t len = 0;
  uint64_t i;
  for (i = 1; i <= pieces; i++) {
    size_t nl;
    char *num = int_to_heap(i, &nl);
    s = (char *)xrealloc(s, len + PIECE_LEN + nl + 1);
    memcpy(s + len, piece_text, PIECE_LEN);
    memcpy(s + len + PIECE_LEN, num, nl);
    len += PIECE_LEN + nl;
    s[len] = 0;
    free(num);
  }
  *out_len = len;
  return s;
}

/* ---- geometric: a string builder ---------------------------------------- */

struct string_builder {
  char *data;
  size_t len, cap;
};

static void sb_append(struct string_builder *sb, const char *p, size_t n)
{
  if (sb->len + n > sb->cap) {
    size_t cap = sb->cap * 3 / 2;
    if (cap < sb->len + n)
      cap = (sb->len + n) * 2;
    sb->data = (char *)xrealloc(sb->data, cap);
    sb->cap = cap;
  }
  memcpy(sb->data + sb->len, p, n);
  sb->len += n;
}

static char *build_geometric(uint64_t pieces, size_t *out_len)
{
  struct string_builder *sb = (struct string_builder *)xmalloc(sizeof *sb);
  char *s;
  uint64_t i;
  sb->cap = 16;
  sb->len = 0;
  sb->data = (char *)xmalloc(sb->cap);
  for (i = 1; i <= pieces; i++) {
    size_t nl;
    char *num = int_to_heap(i, &nl);
    sb_append(sb, piece_text, PIECE_LEN);
    sb_append(sb, num, nl);
    free(num);
  }
  s = (char *)xmalloc(sb->len + 1); /* ToString */
  memcpy(s, sb->data, sb->len);
  s[sb->len] = 0;
  *out_len = sb->len;
  free(sb->data);
  free(sb);
  return s;
}

/* ---- blocks: a write-only block stream ---------------------------------- */

/* DWScript's block size: 8 KiB less two pointers, header included. */
#define WOBS_BLOCK_BYTES (8192 - 2 * sizeof(void *))

struct wobs_block {
  struct wobs_block *next;
  char data[];
};
#define WOBS_DATA_BYTES (WOBS_BLOCK_BYTES - sizeof(struct wobs_block))

struct wobs {
  struct wobs_block *first, *last;
  size_t used_in_last, total;
};

static void wobs_write(struct wobs *w, const char *p, size_t n)
{
  while (n) {
    size_t room, k;
    if (!w->last || w->used_in_last == WOBS_DATA_BYTES) {
      struct wobs_block *b = (struct wobs_block *)xmalloc(WOBS_BLOCK_BYTES);
      b->next = NULL;
      if (w->last)
        w->last->next = b;
      else
        w->first = b;
      w->last = b;
      w->used_in_last = 0;
    }
    room = WOBS_DATA_BYTES - w->used_in_last;
    k = n < room ? n : room;
    memcpy(w->last->data + w->used_in_last, p, k);
    w->used_in_last += k;
    w->total += k;
    p += k;
    n -= k;
  }
}

static char *build_blocks(uint64_t pieces, size_t *out_len)
{
  struct wobs *w = (struct wobs *)xmalloc(sizeof *w);
  struct wobs_block *b, *next;
  char *s;
  size_t at = 0;
  uint64_t i;
  memset(w, 0, sizeof *w);
  for (i = 1; i <= pieces; i++) {
    size_t nl;
    char *num = int_to_heap(i, &nl);
    wobs_write(w, piece_text, PIECE_LEN);
    wobs_write(w, num, nl);
    free(num);
  }
  s = (char *)xmalloc(w->total + 1); /* ToString: one copy of every block */
  for (b = w->first; b; b = next) {
    size_t k = b == w->last ? w->used_in_last : WOBS_DATA_BYTES;
    next = b->next;
    memcpy(s + at, b->data, k);
    at += k;
    free(b);
  }
  s[at] = 0;
  *out_len = at;
  free(w);
  return s;
}

/* ---- writer: a preallocated text writer --------------------------------- */

#define WRITER_BUFFER_BYTES 8192 /* mORMot TTextWriter's default aBufSize */

struct byte_stream { /* TRawByteStringStream: a string grown exactly */
  char *data;
  size_t len;
};

struct text_writer {
  struct byte_stream *stream;
  char *buf;
  size_t used;
};

static void tw_flush(struct text_writer *tw)
{
  struct byte_stream *st = tw->stream;
  st->data = (char *)xrealloc(st->data, st->len + tw->used + 1);
  memcpy(st->data + st->len, tw->buf, tw->used);
  st->len += tw->used;
  st->data[st->len] = 0;
  tw->used = 0;
}

static void tw_add(struct text_writer *tw, const char *p, size_t n)
{
  if (tw->used + n > WRITER_BUFFER_BYTES)
    tw_flush(tw);
  memcpy(tw->buf + tw->used, p, n); /* pieces are far smaller than the buffer */
  tw->used += n;
}

static void tw_add_u64(struct text_writer *tw, uint64_t v)
{
  if (tw->used + 20 > WRITER_BUFFER_BYTES)
    tw_flush(tw);
  tw->used += format_u64(tw->buf + tw->used, v);
}

static char *build_writer(uint64_t pieces, size_t *out_len)
{
  struct text_writer *tw = (struct text_writer *)xmalloc(sizeof *tw);
  char *s;
  uint64_t i;
  tw->stream = (struct byte_stream *)xmalloc(sizeof *tw->stream);
  tw->stream->data = NULL;
  tw->stream->len = 0;
  tw->buf = (char *)xmalloc(WRITER_BUFFER_BYTES);
  tw->used = 0;
  for (i = 1; i <= pieces; i++) {
    tw_add(tw, piece_text, PIECE_LEN);
    tw_add_u64(tw, i);
  }
  tw_flush(tw);
  s = tw->stream->data;
  *out_len = tw->stream->len;
  free(tw->buf);
  free(tw->stream);
  free(tw);
  return s;
}

/* ---- driver ------------------------------------------------------------- */

static char *(*build)(uint64_t pieces, size_t *out_len);

static void *strbuild_worker(void *arg)
{
  struct bench_span *span = (struct bench_span *)arg;
  uint64_t r;
  pthread_barrier_wait(&start_line);
  span->start = bench_now();
  for (r = 0; r < cfg.repeat; r++) {
    size_t len;
    char *s = build(cfg.pieces, &len);
    if (len != reference_len || memcmp(s, reference, len) != 0 || s[len] != 0)
      bench_corrupt(TEST_NAME, s, len, "built string differs from the reference");
    free(s);
  }
  span->end = bench_now();
  return NULL;
}

int main(int argc, char **argv)
{
  static const char about[] =
      "Seed 001: each of --threads threads builds --repeat strings of --pieces pieces\n"
      "(CRLF \"Eating apple #\" i) with one of four builders: naive (exact realloc per\n"
      "piece), geometric (string builder, capacity x1.5), blocks (write-only 8 KiB\n"
      "block stream joined at the end), writer (preallocated 8 KiB text writer).\n"
      "Reports seconds of wall time for all threads.";
  const bench_opt opts[] = {
      {"builder", BENCH_OPT_STR, &cfg.builder, 0, 0, "naive|geometric|blocks|writer",
       "how the string is built"},
      {"threads", BENCH_OPT_U64, &cfg.threads, 1, 1024, "T", "threads building at once"},
      {"pieces", BENCH_OPT_U64, &cfg.pieces, 1, 1e8, "N", "pieces per string"},
      {"repeat", BENCH_OPT_U64, &cfg.repeat, 1, 1e9, "R", "strings built per thread"},
  };
  pthread_t *tids;
  struct bench_span *spans;
  uint64_t i;
  size_t at = 0;

  bench_parse(argc, argv, about, opts, sizeof opts / sizeof opts[0]);
  if (strcmp(cfg.builder, "naive") == 0)
    build = build_naive;
  else if (strcmp(cfg.builder, "geometric") == 0)
    build = build_geometric;
  else if (strcmp(cfg.builder, "blocks") == 0)
    build = build_blocks;
  else if (strcmp(cfg.builder, "writer") == 0)
    build = build_writer;
  else
    bench_usage_error(argv[0], "--builder must be naive, geometric, blocks or writer");

  /* The reference, built the plainest way: at most PIECE_LEN + 20 per piece. */
  reference = (char *)xmalloc(cfg.pieces * (PIECE_LEN + 20) + 1);
  for (i = 1; i <= cfg.pieces; i++) {
    memcpy(reference + at, piece_text, PIECE_LEN);
    at += PIECE_LEN;
    at += format_u64(reference + at, i);
  }
  reference[at] = 0;
  reference_len = at;

  tids = (pthread_t *)calloc(cfg.threads, sizeof *tids);
  spans = (struct bench_span *)calloc(cfg.threads, sizeof *spans);
  if (!tids || !spans)
    bench_oom(TEST_NAME, cfg.threads * sizeof *spans);
  pthread_barrier_init(&start_line, NULL, (unsigned)cfg.threads);
  bench_spawn(tids, cfg.threads, strbuild_worker, spans, sizeof *spans);
  bench_join(tids, cfg.threads);

  bench_result(TEST_NAME, "builder=%s threads=%llu pieces=%llu repeat=%llu length=%zu seconds=%.4f",
               cfg.builder, (unsigned long long)cfg.threads, (unsigned long long)cfg.pieces,
               (unsigned long long)cfg.repeat, reference_len,
               bench_span_seconds(spans, cfg.threads, sizeof *spans));
  pthread_barrier_destroy(&start_line);
  free(tids);
  free(spans);
  free(reference);
  return BENCH_EXIT_OK;
}
