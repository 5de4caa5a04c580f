/* The cautious layer's reports: text built in one buffer under one lock
 * (reports from threads never interleave) and written with write(2) to the
 * log (SPRY_DEBUG_LOG, else stderr). No stdio; what the symboliser
 * allocates goes to the core untracked (dbg_inside). */
#ifndef SPRY_DEBUG_REPORT_H
#define SPRY_DEBUG_REPORT_H

#include "debug.h"

/* Starts a report: takes the report lock. */
void dbg_out_begin(void);
/* Ends it: flushes and unlocks; an error also counts in the statistics and
 * aborts when SPRY_ABORT_ON_ERROR=1. */
void dbg_out_end(bool error);
void dbg_out_str(const char *s);
/* "spry-debug[<pid>]: ", the start of each report's first line */
void dbg_out_head(void);
void dbg_out_dec(unsigned long v);
void dbg_out_hex(uintptr_t v);
/* "block of N bytes at 0x..." */
void dbg_out_block(size_t size, const void *p);
/* Prints stack `id`, or the frames given (id 0), one symbolised line each. */
void dbg_out_stack(const char *title, uint32_t id);
void dbg_out_frames(const char *title, void *const *pc, int n);
/* True when the first frame of stack `id` (the allocator's caller) is a
 * function whose (mangled) name starts with one of the prefixes. Takes the
 * report lock. */
bool dbg_stack_top_is(uint32_t id, const char *prefix_a, const char *prefix_b);
/* The block's allocation (and free, when freed) in words and stacks. */
void dbg_out_history(const dbg_block_t *b);
/* The first bytes of a block as hex and text. */
void dbg_out_dump(const uint8_t *p, size_t n);

/* A damaged block: "ERROR: overrun: ...", `when` says what found it. */
void dbg_report_damage(const dbg_block_t *b, dbg_damage_t d, const char *when);
/* An error in the current call, with the block's history when there is
 * one: "ERROR: <kind>: <call>(<p>): <why> (block of N bytes at ...)". */
void dbg_report_error(const char *kind, const char *call, const void *p, const char *why,
                      const dbg_block_t *b);

void dbg_report_fork_prepare(void);
void dbg_report_fork_parent(void);
void dbg_report_fork_child(void);

/* symbol.c: the frame of return address pc as "name (file:line)", or
 * "name (module+0xoffset)" without line information. */
void dbg_symbol_print(uintptr_t pc);
/* The file name of the module holding pc ("" when none): for the leak
 * report's list of system libraries. */
const char *dbg_symbol_module(uintptr_t pc);
/* The function name at pc, or NULL. */
const char *dbg_symbol_function(uintptr_t pc);
/* Forgets modules (a report after fork or dlopen reloads them as needed). */
void dbg_symbol_new_report(void);

#endif
