/* Symbols for report lines, from elfutils' libdwfl (the library Debian's
 * own tools use, eu-addr2line and eu-stack among them): the function from
 * the symbol table, file:line from DWARF where the module has it (or its
 * separate debug file), else the module and the offset in it.
 *
 * Called under the report lock only. The process's modules are read from
 * /proc/self/maps once, and again at most once per report when an address
 * falls in none of them (a library loaded since). libdwfl keeps what it
 * has read, so each module's tables are parsed once.
 *
 * libdwfl's lookups (reading DWARF, debuginfod's search for debug files)
 * need more stack than a thread of PTHREAD_STACK_MIN has: a report there (a
 * double free, the leak list at exit from such a thread) overflowed it
 * (SIGSEGV in debuginfod, a review). They run on a stack of their own,
 * 1 MiB mapped at the first report (one report at a time: the lock). */
#define _GNU_SOURCE
#include "report.h"
#include "../os.h"
#include <elfutils/libdwfl.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

#define SYMBOL_STACK ((size_t)1 << 20)
static void *symbol_stack;
static ucontext_t symbol_caller, symbol_callee;
/* the entry points' argument and result, across the switch */
static uintptr_t symbol_pc;
static const char *symbol_result;

/* body() on the symbol stack; where it cannot be had, on the caller's. */
static void on_symbol_stack(void (*body)(void)) {
    if (!symbol_stack) symbol_stack = spry_os_reserve(SYMBOL_STACK, 4096);
    if (!symbol_stack || getcontext(&symbol_callee) != 0) {
        body();
        return;
    }
    symbol_callee.uc_stack.ss_sp = symbol_stack;
    symbol_callee.uc_stack.ss_size = SYMBOL_STACK;
    symbol_callee.uc_link = &symbol_caller;
    makecontext(&symbol_callee, body, 0);
    if (swapcontext(&symbol_caller, &symbol_callee) != 0) body();
}

/* C++ names are demangled when the program has libstdc++ (weak: C programs
 * do not need it). */
extern char *__cxa_demangle(const char *name, char *out, size_t *len, int *status) __attribute__((weak));

static const Dwfl_Callbacks callbacks = {
    .find_elf = dwfl_linux_proc_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
};
static Dwfl *dwfl;
static bool reloaded;                /* modules re-read in this report */
static pid_t modules_pid;
/* line_by_units' last compilation unit, kept within one report: a reload
 * of the modules, or a fork's fresh start, frees what it points to */
static Dwfl_Module *last_module;
static Dwarf_Die last_cu;
/* and the last address no unit held (a program's _start, in every stack):
 * each such frame scanned all the units again */
static Dwfl_Module *missed_module;
static Dwarf_Addr missed_addr;

void dbg_symbol_new_report(void) {
    reloaded = false;
    last_module = missed_module = NULL;
    if (dwfl && modules_pid != getpid()) {     /* a forked child: start afresh */
        dwfl_end(dwfl);
        dwfl = NULL;
    }
}

static bool modules_load(void) {
    if (!dwfl) {
        dwfl = dwfl_begin(&callbacks);
        if (!dwfl) return false;
    }
    modules_pid = getpid();
    reloaded = true;
    last_module = missed_module = NULL;
    dwfl_report_begin(dwfl);
    int r = dwfl_linux_proc_report(dwfl, modules_pid);
    dwfl_report_end(dwfl, NULL, NULL);
    return r == 0;
}

static Dwfl_Module *module_of(uintptr_t a) {
    Dwfl_Module *m = dwfl ? dwfl_addrmodule(dwfl, a) : NULL;
    if (!m && !reloaded && modules_load()) m = dwfl_addrmodule(dwfl, a);
    return m;
}

static void module_body(void) {
    Dwfl_Module *m = module_of(symbol_pc - 1);
    const char *name = m ? dwfl_module_info(m, NULL, NULL, NULL, NULL, NULL, NULL, NULL) : NULL;
    symbol_result = name ? name : "";
}

const char *dbg_symbol_module(uintptr_t pc) {
    symbol_pc = pc;
    on_symbol_stack(module_body);
    return symbol_result;
}

static void function_body(void) {
    Dwfl_Module *m = module_of(symbol_pc - 1);
    symbol_result = m ? dwfl_module_addrname(m, symbol_pc - 1) : NULL;
}

const char *dbg_symbol_function(uintptr_t pc) {
    symbol_pc = pc;
    on_symbol_stack(function_body);
    return symbol_result;
}

/* file:line of address a in module m, by the CU whose ranges hold it.
 * libdwfl finds the CU through .debug_aranges, which clang does not emit
 * unless asked (-gdwarf-aranges) and which libdw before 0.189 does not
 * build from the CUs itself: a clang-built program's reports had no source
 * lines. The last CU found in the report is tried first: a report's
 * frames, and a leak list's stacks, come from few of them. */
static const char *line_by_units(Dwfl_Module *m, Dwarf_Addr a, int *lineno) {
    Dwarf_Addr bias = 0;
    Dwarf *dw = dwfl_module_getdwarf(m, &bias);
    if (!dw) return NULL;
    Dwarf_Addr addr = a - bias;
    if (missed_module == m && missed_addr == addr) return NULL;
    Dwarf_Die cu;
    bool found = last_module == m && dwarf_haspc(&last_cu, addr) == 1;
    if (found) cu = last_cu;
    for (Dwarf_CU *unit = NULL; !found && dwarf_get_units(dw, unit, &unit, NULL, NULL, &cu, NULL) == 0;)
        found = dwarf_haspc(&cu, addr) == 1;
    if (!found) {
        missed_module = m;
        missed_addr = addr;
        return NULL;
    }
    last_module = m;
    last_cu = cu;
    Dwarf_Line *line = dwarf_getsrc_die(&cu, addr);
    const char *file = line ? dwarf_linesrc(line, NULL, NULL) : NULL;
    return file && dwarf_lineno(line, lineno) == 0 ? file : NULL;
}

static void print_body(void) {
    /* a return address is the instruction after the call: look one byte
     * back, into the call, for the right line */
    uintptr_t a = symbol_pc - 1;
    Dwfl_Module *m = module_of(a);
    if (!m) { dbg_out_str("??"); return; }
    const char *name = dwfl_module_addrname(m, a);
    char *demangled = NULL;
    if (name && name[0] == '_' && name[1] == 'Z' && __cxa_demangle) {
        int status = -1;
        demangled = __cxa_demangle(name, NULL, NULL, &status);
        if (status == 0 && demangled) name = demangled;
    }
    dbg_out_str(name ? name : "??");
    free(demangled);                 /* the core's, untracked (dbg_inside) */
    Dwfl_Line *line = dwfl_module_getsrc(m, a);
    int lineno = 0;
    const char *file = line ? dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL)
                            : line_by_units(m, a, &lineno);
    if (file && lineno > 0) {
        dbg_out_str(" (");
        dbg_out_str(file);
        dbg_out_str(":");
        dbg_out_dec((unsigned long)lineno);
        dbg_out_str(")");
        return;
    }
    Dwarf_Addr start = 0;
    const char *mod = dwfl_module_info(m, NULL, &start, NULL, NULL, NULL, NULL, NULL);
    dbg_out_str(" (");
    const char *base = mod ? strrchr(mod, '/') : NULL;
    dbg_out_str(base ? base + 1 : mod ? mod : "?");
    dbg_out_str("+");
    dbg_out_hex(a - start);
    dbg_out_str(")");
}

void dbg_symbol_print(uintptr_t pc) {
    symbol_pc = pc;
    on_symbol_stack(print_body);
}
