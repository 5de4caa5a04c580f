/* early_ctor.c: a shared library whose constructor allocates. before_main
 * links it after libspry.so, so this constructor runs before libspry's own
 * initialisers (if it has any): spry must work before it is "initialised". */
#include <stdlib.h>
#include <string.h>

void *early_blocks[3];

__attribute__((constructor)) static void early_ctor(void)
{
    early_blocks[0] = malloc(24);
    early_blocks[1] = calloc(100, 10);
    early_blocks[2] = malloc(3 << 20);
    if (early_blocks[0])
        strcpy(early_blocks[0], "early constructor");
    if (early_blocks[2])
        memset(early_blocks[2], 0x6B, 3 << 20);
}
