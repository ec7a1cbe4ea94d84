#define _GNU_SOURCE
#include "file_copy.h"

#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/types.h>
#include <sys/vfs.h>
#include <unistd.h>

int canvas_clone_file(int out, int in) {
    return ioctl(out, FICLONE, in);
}

int64_t canvas_copy_range(int in, int64_t *in_offset, int out, int64_t *out_offset, uint64_t length) {
    loff_t from = (loff_t)*in_offset, to = (loff_t)*out_offset;
    ssize_t copied = copy_file_range(in, &from, out, &to, (size_t)length, 0);
    if (copied >= 0) {
        *in_offset = (int64_t)from;
        *out_offset = (int64_t)to;
    }
    return (int64_t)copied;
}

int64_t canvas_file_system_type(int fd) {
    struct statfs info;
    if (fstatfs(fd, &info) != 0) return -1;
    return (int64_t)info.f_type;
}
