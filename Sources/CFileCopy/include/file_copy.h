// The Linux calls that copy a file without reading it into user space, which Glibc's Swift
// module does not export (they need _GNU_SOURCE or kernel headers). Each returns what the
// kernel did, or -1 with errno set, as the system calls do.
#ifndef CANVAS_FILE_COPY_H
#define CANVAS_FILE_COPY_H

#include <stdint.h>

// Makes `out` share all of `in`'s blocks (FICLONE: XFS, Btrfs, bcachefs; EOPNOTSUPP or
// EXDEV elsewhere). `out` ends the same size as `in`.
int canvas_clone_file(int out, int in);

// Copies up to `length` bytes from `in` at `*in_offset` to `out` at `*out_offset` inside the
// kernel (copy_file_range), moving both offsets; the number copied, 0 at the end of `in`.
int64_t canvas_copy_range(int in, int64_t *in_offset, int out, int64_t *out_offset, uint64_t length);

// The file system's magic number (statfs f_type) of the file open on `fd`, or -1.
int64_t canvas_file_system_type(int fd);

#endif
