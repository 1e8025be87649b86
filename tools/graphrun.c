/* graphrun CLI (placeholder until the foundation lands). */
#include <stdio.h>

#include "graphrun/runtime.h"

int main(void)
{
    printf("graphrun %s\n", gr_version());
    return 0;
}
