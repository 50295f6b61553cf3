/* main.c - placeholder until the CLI lands. */
#include <stdio.h>
int main(void)
{
    puts("commitwatch " CW_VERSION);
    return 0;
}
