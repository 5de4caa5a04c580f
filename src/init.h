/* Process-wide initialisation: at load time (a constructor) or by the first
 * thread that needs a heap, whichever comes first (a library whose
 * constructor runs before ours may already call malloc). */
#ifndef SPRY_INIT_H
#define SPRY_INIT_H

void spry_init(void);

/* CPUs the process may use (affinity, cgroup quota); set by spry_init. */
extern int spry_cpus;

#endif
