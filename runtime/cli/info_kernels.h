/* `woolly info --kernels`. */
#ifndef WOOLLY_CLI_INFO_KERNELS_H
#define WOOLLY_CLI_INFO_KERNELS_H

/* Prints the registry (every kernel's op, types, activations, ISA, tile, layout, required features, and
 * whether this CPU runs it and selects it by default); returns the exit status. */
int woolly_info_kernels(void);

#endif
