/*
 * file.h - the built-in file store, shared with the test-only fault
 * store that wraps it.
 */
#ifndef LEASERUN_BE_FILE_H
#define LEASERUN_BE_FILE_H

#include "store/store.h"

extern const struct lr_store_ops lr_file_ops;

/* The directory used when the URL names none (file.c says which);
 * 0, or -1 when there is none (no runtime directory and no HOME). */
int lr_file_default_dir(char *buf, size_t len);

#endif
