/* session.h - the server's shared session table.
 *
 * Like a web framework's session store: a hash table of sessions keyed by
 * the session cookie, shared by every worker thread. A request finds (or
 * creates) its session and holds the session's lock while its page is
 * rendered, so requests of one session are serialized, requests of different
 * sessions run in parallel.
 *
 * Locking: each bucket has a mutex that guards its chain, every session's
 * `refs` and `last_seen`. A session's own mutex guards everything else in
 * it (hits, form, history). The two are never held together (acquire drops
 * the bucket lock before it takes the session lock, release the other way
 * round), so there is no lock order to get wrong. A session is freed only by
 * session_expire, under its bucket lock, when refs == 0: a reference keeps
 * it alive between acquire and release. */
#ifndef SPRY_BENCH_SESSION_H
#define SPRY_BENCH_SESSION_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

enum { SESSION_HISTORY = 8 };   /* last requests remembered per session */

struct session {
  char *id;                     /* immutable after creation */
  pthread_mutex_t lock;
  /* guarded by the bucket lock */
  unsigned refs;
  time_t last_seen;
  struct session *next;
  /* guarded by `lock` */
  uint64_t hits;
  time_t created;
  int form;                     /* which form the session shows, 1 or 2 */
  char *history[SESSION_HISTORY];  /* malloc'd lines, a ring */
  unsigned history_next;
};

struct session_table;

struct session_table *session_table_new(size_t buckets);
/* Frees every session; no request may be running. */
void session_table_free(struct session_table *t);

/* Finds the session named `id` (creating it when unknown; when id is NULL
 * or not a valid id a new id is made), takes a reference and returns it
 * locked. *created tells whether it is new. NULL when out of memory. */
struct session *session_acquire(struct session_table *t, const char *id,
                                 int *created);
/* Unlocks the session and drops the reference. */
void session_release(struct session_table *t, struct session *s);

/* Frees sessions idle for more than ttl seconds; returns how many. */
size_t session_expire(struct session_table *t, time_t now, int ttl);
size_t session_count(struct session_table *t);

/* Appends a line to the session's history ring (session locked). */
void session_remember(struct session *s, char *line_malloced);

#endif
