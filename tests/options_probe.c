/* Prints whether the kernel marked this process AT_SECURE (setuid/setgid
 * exec) and the purge delay spry took from the environment. Used by
 * options_secure.sh. */
#include <spry.h>
#include <stdio.h>
#include <sys/auxv.h>

int main(void) {
    printf("secure=%lu delay=%ld\n", getauxval(AT_SECURE), spry_option_get("SPRY_PURGE_DELAY_MS"));
    return 0;
}
