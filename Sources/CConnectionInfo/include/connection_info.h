// What the kernel and libzmq say about one connection, read with their own headers so that no
// struct layout or frame layout is copied by hand into Swift.
#ifndef CANVAS_CONNECTION_INFO_H
#define CANVAS_CONNECTION_INFO_H

#include <stddef.h>
#include <stdint.h>

// The fields of the kernel's `struct tcp_info` that canvasd uses.
struct canvas_tcp_state {
    // Bytes this end has sent that the peer has acknowledged (tcpi_bytes_acked); a connecting
    // end counts its SYN as one.
    uint64_t bytes_acked;
    // Bytes of data received from the peer (tcpi_bytes_received).
    uint64_t bytes_received;
    // Segments with data received from the peer (tcpi_data_segs_in).
    uint32_t data_segments_received;
};

// Fills `out` from TCP_INFO on `fd`: 0, or -1 with errno set, as getsockopt sets it when `fd`
// is not an open TCP socket, or to ENODATA when the kernel's struct ends before the field.
int canvas_tcp_info(int fd, struct canvas_tcp_state *out);

// Reads the first frame of a libzmq monitor message (ZMQ_EVENT_* and its value: a descriptor,
// an errno or an interval, by event): 0, or -1 when the frame is too short to be one.
int canvas_monitor_event(const void *frame, size_t size, uint16_t *event, uint32_t *value);

#endif
