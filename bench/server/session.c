/* session.c - the shared session table (see session.h for the locking). */
#define _GNU_SOURCE
#include "session.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct bucket {
  pthread_mutex_t lock;
  struct session *head;
};

struct session_table {
  size_t nbuckets;
  atomic_size_t count;
  struct bucket *buckets;
};

enum { ID_MAX = 64 };

static uint64_t hash_id(const char *s) {        /* FNV-1a */
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* A client may name its session (benchmark clients pin their sessions this
 * way); the name must look like an id. */
static int id_valid(const char *id) {
  size_t n = 0;
  for (; id[n]; n++) {
    char c = id[n];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
          (c >= 'A' && c <= 'Z') || c == '-' || c == '_'))
      return 0;
    if (n >= ID_MAX) return 0;
  }
  return n > 0;
}

static char *id_new(void) {
  static _Thread_local uint64_t state;
  if (!state) state = (uint64_t)(uintptr_t)&state ^ (uint64_t)time(NULL) ^
                      0x9e3779b97f4a7c15ull;
  char *id = malloc(33);
  if (!id) return NULL;
  for (int half = 0; half < 2; half++) {
    state ^= state << 13;           /* xorshift64 */
    state ^= state >> 7;
    state ^= state << 17;
    snprintf(id + half * 16, 17, "%016llx", (unsigned long long)state);
  }
  return id;
}

struct session_table *session_table_new(size_t buckets) {
  struct session_table *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->buckets = calloc(buckets, sizeof *t->buckets);
  if (!t->buckets) {
    free(t);
    return NULL;
  }
  t->nbuckets = buckets;
  for (size_t i = 0; i < buckets; i++)
    pthread_mutex_init(&t->buckets[i].lock, NULL);
  return t;
}

static void session_free(struct session *s) {
  for (int i = 0; i < SESSION_HISTORY; i++) free(s->history[i]);
  pthread_mutex_destroy(&s->lock);
  free(s->id);
  free(s);
}

void session_table_free(struct session_table *t) {
  if (!t) return;
  for (size_t i = 0; i < t->nbuckets; i++) {
    struct session *s = t->buckets[i].head;
    while (s) {
      struct session *next = s->next;
      session_free(s);
      s = next;
    }
    pthread_mutex_destroy(&t->buckets[i].lock);
  }
  free(t->buckets);
  free(t);
}

struct session *session_acquire(struct session_table *t, const char *id,
                                int *created) {
  char *fresh = NULL;
  *created = 0;
  if (!id || !id_valid(id)) {
    fresh = id_new();
    if (!fresh) return NULL;
    id = fresh;
  }
  struct bucket *b = &t->buckets[hash_id(id) % t->nbuckets];
  pthread_mutex_lock(&b->lock);
  struct session *s = b->head;
  while (s && strcmp(s->id, id)) s = s->next;
  if (!s) {
    s = calloc(1, sizeof *s);
    char *own = fresh ? fresh : strdup(id);
    if (!s || !own) {
      pthread_mutex_unlock(&b->lock);
      free(s);
      free(own);
      return NULL;
    }
    fresh = NULL;
    s->id = own;
    pthread_mutex_init(&s->lock, NULL);
    s->created = time(NULL);
    s->form = 1;
    s->next = b->head;
    b->head = s;
    atomic_fetch_add_explicit(&t->count, 1, memory_order_relaxed);
    *created = 1;
  }
  s->refs++;
  s->last_seen = time(NULL);
  pthread_mutex_unlock(&b->lock);
  free(fresh);
  pthread_mutex_lock(&s->lock);
  return s;
}

void session_release(struct session_table *t, struct session *s) {
  struct bucket *b = &t->buckets[hash_id(s->id) % t->nbuckets];
  pthread_mutex_unlock(&s->lock);
  pthread_mutex_lock(&b->lock);
  s->refs--;
  pthread_mutex_unlock(&b->lock);
}

size_t session_expire(struct session_table *t, time_t now, int ttl) {
  size_t freed = 0;
  for (size_t i = 0; i < t->nbuckets; i++) {
    struct bucket *b = &t->buckets[i];
    pthread_mutex_lock(&b->lock);
    struct session **link = &b->head;
    while (*link) {
      struct session *s = *link;
      if (s->refs == 0 && now - s->last_seen > ttl) {
        *link = s->next;
        session_free(s);
        freed++;
      } else {
        link = &s->next;
      }
    }
    pthread_mutex_unlock(&b->lock);
  }
  atomic_fetch_sub_explicit(&t->count, freed, memory_order_relaxed);
  return freed;
}

size_t session_count(struct session_table *t) {
  return atomic_load_explicit(&t->count, memory_order_relaxed);
}

void session_remember(struct session *s, char *line) {
  unsigned slot = s->history_next++ % SESSION_HISTORY;
  free(s->history[slot]);
  s->history[slot] = line;
}
