/* Process-wide initialisation, run by the first thread that needs a heap.
 * No constructor: a library whose constructor runs before ours may already
 * call malloc. */
#ifndef SPRY_INIT_H
#define SPRY_INIT_H

void spry_init(void);

/* CPUs the process may use (affinity, cgroup quota); set by spry_init. */
extern int spry_cpus;

#endif
