#include "connection_info.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
// The kernel's own struct: glibc's copy in <netinet/tcp.h> stops before tcpi_bytes_acked.
#include <linux/tcp.h>
#include <zmq.h>

int canvas_tcp_info(int fd, struct canvas_tcp_state *out) {
    struct tcp_info info;
    memset(&info, 0, sizeof info);
    socklen_t length = sizeof info;
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &length) != 0) return -1;
    // An older kernel copies out a shorter struct; a field past its end was never written.
    if (length < offsetof(struct tcp_info, tcpi_data_segs_in) + sizeof info.tcpi_data_segs_in) {
        errno = ENODATA;
        return -1;
    }
    out->bytes_acked = info.tcpi_bytes_acked;
    out->bytes_received = info.tcpi_bytes_received;
    out->data_segments_received = info.tcpi_data_segs_in;
    return 0;
}

// libzmq's version 1 monitor frame: the event as a uint16_t, then the value as a uint32_t,
// copied in with memcpy in this machine's byte order (socket_base_t::monitor_event).
_Static_assert(ZMQ_EVENT_ALL <= UINT16_MAX, "a version 1 monitor event fits in 16 bits");

int canvas_monitor_event(const void *frame, size_t size, uint16_t *event, uint32_t *value) {
    if (frame == NULL || size < sizeof *event + sizeof *value) return -1;
    memcpy(event, frame, sizeof *event);
    memcpy(value, (const unsigned char *)frame + sizeof *event, sizeof *value);
    return 0;
}
